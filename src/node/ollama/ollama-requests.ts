/**
 * Ollama `/api/chat` and `/api/generate` bodies → the same internal requests the OpenAI routes
 * build (`ChatRequest`, `CompletionRequest`), so core's one entry runs them: the chat template,
 * the grammar of `format` and of `tools`, admission, the Route Session.
 *
 * - `/api/chat`: `messages` (ollama-messages.ts; none only "loads" the model, `done_reason: "load"`), `tools` (OpenAI's function tools, the same
 *   parser), `format`, `options` (ollama-options.ts), `stream` (Ollama's default: true),
 *   `logprobs` / `top_logprobs`, `keep_alive` (checked, ignored: the model stays loaded),
 *   `think` (refused when asked: this model does not think); `tool_choice` as chat completions
 *   takes it, a meshnet extension (Ollama's own default is `auto`).
 * - `/api/generate`: `prompt` with `system` as one user turn through the chat template, or with
 *   `raw: true` the prompt as the model's text (no template; then `format` is refused). An
 *   empty prompt only "loads" the model: the answer is `done_reason: "load"`. `suffix`,
 *   `template`, `context` and `images` are refused (no infill, no per-request templates, no
 *   token context: send the conversation to `/api/chat`).
 * - `format`: `"json"` (any JSON object) or a JSON Schema object, as `response_format` would be.
 *
 * `model` must name the served model, with or without Ollama's `:latest` tag. Errors are
 * ApiErrors (the route writes them in Ollama's shape, `{ "error": "…" }`).
 */
import type { ResponseFormat } from '../../core/model/structured-output.ts';
import { ApiError } from '../openai/errors.ts';
import { BodyFields, describeType, invalidValue, isRecord, missingParam, numberValue, shown, stringValue, typeError, unsupported } from '../openai/request-fields.ts';
import { parseTools, schemaValue } from '../openai/request-output.ts';
import { type ChatRequest, type CompletionRequest, MAX_CHAT_TOP_LOGPROBS } from '../openai/requests.ts';
import { parseOllamaMessages } from './ollama-messages.ts';
import { parseOllamaOptions } from './ollama-options.ts';

/** The tag Ollama adds to a name given without one. */
export const DEFAULT_TAG = 'latest';

/** A parsed `/api/chat` or `/api/generate` request. */
export interface OllamaRequest {
  readonly endpoint: 'chat' | 'generate';
  /** The model name as the client sent it (echoed in every answer). */
  readonly model: string;
  /** What core runs; undefined for a "load" (generate with an empty prompt, chat without messages). */
  readonly run?: ChatRequest | CompletionRequest;
  readonly stream: boolean;
}

/** True when `name` names the served model (`served`, `served:latest`). */
export function namesServedModel(name: string, served: string): boolean {
  return name === served || name === `${served}:${DEFAULT_TAG}`;
}

/** `model`: required, the served model. 404 otherwise, in Ollama's words. */
export function requireModel(fields: BodyFields, served: string): string {
  const value = fields.get('model') ?? fields.get('name');
  if (value === undefined) throw missingParam('model');
  const name = stringValue('model', value);
  if (!namesServedModel(name, served)) throw new ApiError(404, `model '${shown(name)}' not found`, { type: 'invalid_request_error', param: 'model', code: 'model_not_found' });
  return name;
}

/** The body as fields: a JSON object. */
export function ollamaFields(body: unknown): BodyFields {
  if (!isRecord(body)) throw new ApiError(400, `invalid request body: expected a JSON object, but got ${describeType(body)}`, { type: 'invalid_request_error' });
  return new BodyFields(body);
}

/** `imageRefusal`: why images are refused when the checkpoint has a vision model meshnet does not run (`imageRefusal` in architectures.ts). */
export function parseOllamaChat(body: unknown, served: string, imageRefusal?: string): OllamaRequest {
  const fields = ollamaFields(body);
  const model = requireModel(fields, served);
  const raw = fields.get('messages');
  // No messages: Ollama's "load the model" call, as an empty generate prompt.
  if (raw === undefined || (Array.isArray(raw) && raw.length === 0)) return { endpoint: 'chat', model, stream: common(fields, served).stream };
  const messages = parseOllamaMessages(raw, imageRefusal);
  // `tool_choice` is a meshnet extension here (Ollama has none: its models choose, `auto`).
  const tools = parseTools(new BodyFields({ tools: fields.get('tools'), tool_choice: fields.get('tool_choice') }));
  const responseFormat = parseFormat(fields.get('format'));
  const run: ChatRequest = {
    kind: 'chat',
    messages,
    ...(responseFormat ? { responseFormat } : {}),
    ...(tools ? { tools } : {}),
    ...common(fields, served),
  };
  return { endpoint: 'chat', model, run, stream: run.stream };
}

export function parseOllamaGenerate(body: unknown, served: string, imageRefusal?: string): OllamaRequest {
  const fields = ollamaFields(body);
  const model = requireModel(fields, served);
  for (const name of ['suffix', 'template'] as const) {
    if ((fields.string(name) ?? '') !== '') throw unsupported(name, name === 'suffix' ? 'is not supported: this server does not fill in the middle.' : 'is not supported: the model\'s own chat template is used (or send raw: true).');
  }
  const context = fields.get('context');
  if (context !== undefined && !(Array.isArray(context) && context.length === 0)) throw unsupported('context', 'is not supported: send the conversation to /api/chat instead.');
  const images = fields.get('images');
  if (images !== undefined && !(Array.isArray(images) && images.length === 0)) throw unsupported('images', `is not supported: ${imageRefusal ?? 'this model reads text only'}.`);
  const prompt = fields.string('prompt') ?? '';
  const system = fields.string('system');
  const raw = fields.boolean('raw') ?? false;
  const format = parseFormat(fields.get('format'));
  const shared = common(fields, served);
  if (prompt === '') return { endpoint: 'generate', model, stream: shared.stream };
  let run: ChatRequest | CompletionRequest;
  if (raw) {
    if (format) throw unsupported('format', 'is not supported with raw: true (a constrained answer goes through the chat template).');
    if (system !== undefined) throw unsupported('system', 'is not supported with raw: true (the prompt is the whole text).');
    run = { kind: 'completion', prompt, ...shared };
  } else {
    const messages = [...(system === undefined || system === '' ? [] : [{ role: 'system' as const, content: system }]), { role: 'user' as const, content: prompt }];
    run = { kind: 'chat', messages, ...(format ? { responseFormat: format } : {}), ...shared };
  }
  return { endpoint: 'generate', model, run, stream: shared.stream };
}

/** `format`: `"json"`, a JSON Schema object, or empty (free text). */
export function parseFormat(value: unknown): ResponseFormat | undefined {
  if (value === undefined || value === '') return undefined;
  if (value === 'json') return { type: 'json_object' };
  if (typeof value === 'string') throw invalidValue('format', `'${shown(value)}' is not supported: send "json" or a JSON Schema object.`);
  const schema = schemaValue('format', value);
  if (schema === undefined || typeof schema === 'boolean') throw typeError('format', 'the string "json" or a JSON Schema object', value);
  return { type: 'json_schema', name: 'format', schema };
}

/** Fields both endpoints share: options, stream, logprobs, keep_alive, think. */
function common(fields: BodyFields, served: string): Omit<ChatRequest, 'kind' | 'messages' | 'responseFormat' | 'tools'> {
  const think = fields.get('think');
  if (think !== undefined && think !== false) {
    if (typeof think !== 'boolean' && !['high', 'medium', 'low'].includes(String(think))) throw invalidValue('think', 'expected a boolean or one of "high", "medium", "low".');
    throw new ApiError(400, `'${served}' does not support thinking`, { type: 'invalid_request_error', param: 'think' });
  }
  const keepAlive = fields.get('keep_alive');
  if (keepAlive !== undefined && typeof keepAlive !== 'string') numberValue('keep_alive', keepAlive);
  const { sampling, maxTokens, stopStrings } = parseOllamaOptions(fields.get('options'));
  const logprobs = fields.boolean('logprobs') ?? false;
  const topLogprobs = fields.integer('top_logprobs', { min: 0, max: MAX_CHAT_TOP_LOGPROBS }) ?? 0;
  if (topLogprobs > 0 && !logprobs) throw invalidValue('top_logprobs', 'logprobs must be true when top_logprobs is set.');
  return {
    model: served,
    sampling: { ...sampling, ...(maxTokens === undefined ? {} : { maxTokens }), ...(logprobs ? { logprobs, topLogprobs } : {}) },
    stopStrings,
    stream: fields.boolean('stream') ?? true,
    includeUsage: false,
    logprobs,
    topLogprobs,
  };
}
