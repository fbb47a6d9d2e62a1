/** `model.safetensors.index.json`: which sharded safetensors file holds each tensor. */
import { CheckpointError } from './checkpoint-error.ts';

/** The conventional index file name of a sharded checkpoint. */
export const WEIGHT_INDEX_FILE = 'model.safetensors.index.json';

/**
 * Validates an index file's parsed JSON: `weight_map` must be an object mapping tensor
 * names to file names; file names must stay inside the folder (no absolute paths, no `..`).
 * @returns tensor name → file name, in index order.
 * @throws CheckpointError naming `file` and the problem.
 */
export function parseWeightIndex(file: string, json: unknown): Map<string, string> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new CheckpointError(file, 'is not a JSON object');
  }
  const weightMap = (json as Record<string, unknown>).weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
    throw new CheckpointError(file, `field 'weight_map' must be an object of tensor name → file name, got ${JSON.stringify(weightMap)}`);
  }
  const map = new Map<string, string>();
  for (const [tensor, target] of Object.entries(weightMap as Record<string, unknown>)) {
    if (typeof target !== 'string' || target.length === 0) {
      throw new CheckpointError(file, `weight_map['${tensor}'] must be a file name, got ${JSON.stringify(target)}`);
    }
    if (target.startsWith('/') || target.includes('\\') || target.split('/').some((part) => part === '..' || part === '')) {
      throw new CheckpointError(file, `weight_map['${tensor}'] names '${target}', which is not a file inside the checkpoint folder`);
    }
    map.set(tensor, target);
  }
  if (map.size === 0) throw new CheckpointError(file, `field 'weight_map' lists no tensors`);
  return map;
}
