/**
 * Opening a Hugging Face checkpoint folder through a ByteSource: config, safetensors
 * headers (single file or sharded with an index), and a check that every tensor the
 * architecture needs is present with the right shape. Tensor data is read on demand,
 * one tensor's byte range at a time, so memory follows what the caller asks for.
 */
import type { ByteSource } from './byte-source.ts';
import { requiredTensors } from './architectures.ts';
import { checkPrequantizedLinear, prequantizedBase } from './quant/prequantized-plan.ts';
import { CheckpointError } from './checkpoint-error.ts';
import { parseModelConfig } from './config.ts';
import { toFloat32 } from './dtype.ts';
import { parseSafetensorsHeader, SAFETENSORS_PREFIX_BYTES, safetensorsHeaderLength } from './safetensors.ts';
import type { ModelConfig, TensorLocation } from './types.ts';
import { parseWeightIndex, WEIGHT_INDEX_FILE } from './weight-index.ts';

export const CONFIG_FILE = 'config.json';
export const GENERATION_CONFIG_FILE = 'generation_config.json';
export const SINGLE_WEIGHTS_FILE = 'model.safetensors';

/** One safetensors file of the checkpoint. */
export interface CheckpointFile {
  readonly name: string;
  readonly size: number; // bytes
  /** Absolute offset where the data region starts (8 + header length). */
  readonly dataOffset: number;
  readonly tensorCount: number;
}

/** An opened, validated checkpoint. Holds no tensor data; reads go to the ByteSource. */
export interface Checkpoint {
  readonly source: ByteSource;
  readonly config: ModelConfig;
  /** Every tensor by name, with its file and absolute byte range. */
  readonly tensors: Map<string, TensorLocation>;
  readonly files: readonly CheckpointFile[];
  /** `model.safetensors` or `model.safetensors.index.json`: the file that lists the weights. */
  readonly weightsFile: string;
  /** The raw little-endian bytes of one tensor (only that range is read). */
  readTensorBytes(name: string): Promise<Uint8Array>;
  /** One float tensor decoded to float32, row-major in its safetensors shape (I32 tensors are refused). */
  readTensor(name: string): Promise<Float32Array>;
}

/**
 * Opens the checkpoint in `source`.
 * @throws CheckpointError when config.json or the weights are missing or malformed, or a
 *   tensor the architecture needs is missing or has the wrong shape.
 */
export async function openCheckpoint(source: ByteSource): Promise<Checkpoint> {
  if (!(await source.exists(CONFIG_FILE))) {
    throw new CheckpointError(CONFIG_FILE, `not found in ${source.location}`);
  }
  const generation = (await source.exists(GENERATION_CONFIG_FILE)) ? await readJson(source, GENERATION_CONFIG_FILE) : undefined;
  const config = parseModelConfig(CONFIG_FILE, await readJson(source, CONFIG_FILE), generation);

  const { weightsFile, tensors, files } = await readWeights(source);
  for (const required of requiredTensors(config)) {
    // A pre-quantized (AWQ/GPTQ) linear stores qweight/qzeros/scales instead of `.weight`;
    // the same predicate as the weight planner's, so whatever it packs was checked here.
    const prequantized = required.shape.length === 2 ? prequantizedBase(config, tensors, required.name) : undefined;
    if (prequantized !== undefined) {
      checkPrequantizedLinear(config, tensors, prequantized, required.shape, weightsFile);
      continue;
    }
    const base = required.name.endsWith('.weight') && required.shape.length === 2 ? required.name.slice(0, -'.weight'.length) : undefined;
    const location = tensors.get(required.name);
    if (location === undefined) {
      const alternative = config.quantization && base !== undefined ? `, nor its ${config.quantization.method} tensors '${base}.qweight', '.qzeros', '.scales'` : '';
      throw new CheckpointError(weightsFile, `tensor '${required.name}' (shape [${required.shape.join(', ')}]) is missing${alternative}`);
    }
    if (!sameShape(location.shape, required.shape)) {
      throw new CheckpointError(
        location.file,
        `tensor '${required.name}' has shape [${location.shape.join(', ')}], expected [${required.shape.join(', ')}] for ${config.architecture}`,
      );
    }
    const expected = required.dtype ?? 'float'; // U8: MXFP4 blocks and scales
    if (expected === 'float' ? location.dtype === 'I32' || location.dtype === 'U8' : location.dtype !== expected) {
      throw new CheckpointError(location.file, `tensor '${required.name}' is ${location.dtype}, expected ${expected === 'float' ? 'a float tensor (F32, F16 or BF16)' : expected}`);
    }
  }

  const locate = (name: string): TensorLocation => {
    const location = tensors.get(name);
    if (location === undefined) throw new CheckpointError(weightsFile, `tensor '${name}' is not in this checkpoint`);
    return location;
  };
  const readTensorBytes = async (name: string): Promise<Uint8Array> => {
    const location = locate(name);
    const bytes = await source.read(location.file, location.offset, location.length);
    if (bytes.byteLength !== location.length) {
      throw new CheckpointError(location.file, `tensor '${name}': read ${bytes.byteLength} bytes, expected ${location.length}`);
    }
    return bytes;
  };
  return {
    source,
    config,
    tensors,
    files,
    weightsFile,
    readTensorBytes,
    readTensor: async (name) => {
      const { dtype, file } = locate(name);
      if (dtype === 'I32' || dtype === 'U8') throw new CheckpointError(file, `tensor '${name}' is ${dtype}, not a float tensor`);
      return toFloat32(await readTensorBytes(name), dtype);
    },
  };
}

async function readJson(source: ByteSource, file: string): Promise<unknown> {
  const text = await source.readText(file);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CheckpointError(file, `is not valid JSON (${(error as Error).message})`);
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Reads the headers of `model.safetensors`, or of every file the index names. */
async function readWeights(source: ByteSource): Promise<{ weightsFile: string; tensors: Map<string, TensorLocation>; files: CheckpointFile[] }> {
  if (await source.exists(WEIGHT_INDEX_FILE)) {
    const weightMap = parseWeightIndex(WEIGHT_INDEX_FILE, await readJson(source, WEIGHT_INDEX_FILE));
    const files: CheckpointFile[] = [];
    const headers = new Map<string, Map<string, TensorLocation>>();
    for (const file of new Set(weightMap.values())) {
      if (!(await source.exists(file))) {
        throw new CheckpointError(WEIGHT_INDEX_FILE, `names '${file}', which is not in ${source.location}`);
      }
      const { info, tensors } = await readHeader(source, file);
      files.push(info);
      headers.set(file, tensors);
    }
    const tensors = new Map<string, TensorLocation>();
    for (const [name, file] of weightMap) {
      const location = headers.get(file)?.get(name);
      if (location === undefined) {
        throw new CheckpointError(WEIGHT_INDEX_FILE, `lists tensor '${name}' in '${file}', but that file does not contain it`);
      }
      tensors.set(name, location);
    }
    return { weightsFile: WEIGHT_INDEX_FILE, tensors, files };
  }
  if (await source.exists(SINGLE_WEIGHTS_FILE)) {
    const { info, tensors } = await readHeader(source, SINGLE_WEIGHTS_FILE);
    return { weightsFile: SINGLE_WEIGHTS_FILE, tensors, files: [info] };
  }
  throw new CheckpointError(SINGLE_WEIGHTS_FILE, `not found in ${source.location} (nor ${WEIGHT_INDEX_FILE})`);
}

async function readHeader(source: ByteSource, file: string): Promise<{ info: CheckpointFile; tensors: Map<string, TensorLocation> }> {
  const size = await source.size(file);
  const prefix = size >= SAFETENSORS_PREFIX_BYTES ? await source.read(file, 0, SAFETENSORS_PREFIX_BYTES) : new Uint8Array(0);
  const headerLength = safetensorsHeaderLength(file, prefix, size);
  const headerBytes = await source.read(file, 0, SAFETENSORS_PREFIX_BYTES + headerLength);
  const tensors = parseSafetensorsHeader(file, headerBytes, size);
  return { info: { name: file, size, dataOffset: SAFETENSORS_PREFIX_BYTES + headerLength, tensorCount: tensors.size }, tensors };
}
