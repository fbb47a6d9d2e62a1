/**
 * Ollama's model listings for the one model a mesh serves: `/api/tags` (installed models),
 * `/api/ps` (loaded models), `/api/show` (details, template, parameters, capabilities) and
 * `/api/version`. Pure: built from a {@link ServedModel} the route reads off the head.
 *
 * - `name` / `model` is the served name with Ollama's `:latest` tag (a client that sends it back
 *   with or without the tag is understood); `digest` is the model's content key.
 * - `details.format` is `safetensors` (Hugging Face folders, not GGUF); `family` the
 *   architecture's short name (`llama`, `qwen2`); `parameter_size` like Ollama's `260K`,
 *   `1.5B`; `quantization_level` the weight format the mesh runs (`F32`, `F16`, `Q8_0`, `Q4_0`).
 * - `model_info` uses Ollama's GGUF-style keys (`general.architecture`,
 *   `<family>.context_length`, `<family>.block_count`, …).
 * - `/api/ps`: `size` is the weights' bytes, `size_vram` 0 (where they live is the peers'
 *   business), `expires_at` far ahead (the model is never unloaded).
 */
import { DEFAULT_TAG } from './ollama-requests.ts';

/** The Ollama API level these routes follow (Ollama's release that has every field used here). */
export const OLLAMA_API_VERSION = '0.12.0';

export interface ServedModel {
  readonly name: string;
  /** e.g. `LlamaForCausalLM`. */
  readonly architecture: string;
  readonly parameterCount: number;
  /** Bytes of the checkpoint's weight files. */
  readonly sizeBytes: number;
  /** The model's content key (hex). */
  readonly digest: string;
  /** `fp32`, `fp16`, `q8`, `q4`. */
  readonly weightFormat: string;
  readonly contextLength: number;
  readonly layers: number;
  readonly hiddenSize: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly vocabSize: number;
  readonly chatTemplate: string;
  /** When the head started serving it (ms since the epoch). */
  readonly servedSince: number;
}

/** `LlamaForCausalLM` → `llama`, `Qwen2ForCausalLM` → `qwen2`. */
export function familyOf(architecture: string): string {
  return architecture.replace(/For(CausalLM|ConditionalGeneration)$/, '').toLowerCase();
}

/** Ollama's `parameter_size`: `231.6K`, `1.5B` (one decimal, trailing `.0` dropped). */
export function parameterSize(count: number): string {
  const units: [number, string][] = [[1e9, 'B'], [1e6, 'M'], [1e3, 'K']];
  for (const [scale, unit] of units) if (count >= scale) return `${Number((count / scale).toFixed(1))}${unit}`;
  return String(count);
}

const QUANTIZATION: Readonly<Record<string, string>> = { fp32: 'F32', fp16: 'F16', q8: 'Q8_0', q4: 'Q4_0' };

export function modelDetails(model: ServedModel): Record<string, unknown> {
  const family = familyOf(model.architecture);
  return { parent_model: '', format: 'safetensors', family, families: [family], parameter_size: parameterSize(model.parameterCount), quantization_level: QUANTIZATION[model.weightFormat] ?? model.weightFormat.toUpperCase() };
}

function entry(model: ServedModel): Record<string, unknown> {
  const tagged = `${model.name}:${DEFAULT_TAG}`;
  return { name: tagged, model: tagged, modified_at: new Date(model.servedSince).toISOString(), size: model.sizeBytes, digest: model.digest, details: modelDetails(model) };
}

export function tagsBody(model: ServedModel): { models: Record<string, unknown>[] } {
  return { models: [entry(model)] };
}

/** A year from `now`: the model stays loaded while the head runs. */
export function psBody(model: ServedModel, now: number): { models: Record<string, unknown>[] } {
  const { modified_at: _modified, ...rest } = entry(model);
  return { models: [{ ...rest, expires_at: new Date(now + 365 * 24 * 3600 * 1000).toISOString(), size_vram: 0, context_length: model.contextLength }] };
}

export function showBody(model: ServedModel): Record<string, unknown> {
  const family = familyOf(model.architecture);
  return {
    license: '',
    modelfile: `# meshnet serves ${model.name} (a Hugging Face checkpoint), not an Ollama Modelfile\nFROM ${model.name}\n`,
    parameters: '',
    template: model.chatTemplate,
    details: modelDetails(model),
    model_info: {
      'general.architecture': family,
      'general.parameter_count': model.parameterCount,
      [`${family}.context_length`]: model.contextLength,
      [`${family}.block_count`]: model.layers,
      [`${family}.embedding_length`]: model.hiddenSize,
      [`${family}.attention.head_count`]: model.heads,
      [`${family}.attention.head_count_kv`]: model.kvHeads,
      [`${family}.vocab_size`]: model.vocabSize,
    },
    capabilities: ['completion', 'tools'],
    modified_at: new Date(model.servedSince).toISOString(),
  };
}
