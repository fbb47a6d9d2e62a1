/**
 * What `--model X` means: `demo` (the built-in demo model), a folder on disk, or a Hugging
 * Face Hub repo id (`org/name`, downloaded into MESHNET_HOME on first use).
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { meshnetHome } from '../meshnet-home.ts';
import { DEMO_MODEL_DIR, DEMO_MODEL_ID } from './demo-model.ts';
import { downloadFromHub, type HubDownloadOptions } from './hub-download.ts';
import { isHubRepoId } from './hub-repo.ts';
import { createProgressReporter } from './progress.ts';

export interface ResolvedModel {
  /** The checkpoint folder, absolute. */
  readonly dir: string;
  /** A short name for the model: `demo`, the folder's basename, or the Hub id. */
  readonly id: string;
}

/** Thrown when a model spec is none of the accepted forms. */
export class ModelSpecError extends Error {
  override readonly name = 'ModelSpecError';
}

/**
 * Resolves `spec`, in this order:
 * 1. `demo` → the shipped demo model, {@link DEMO_MODEL_DIR} (use `./demo` for a folder of
 *    that name);
 * 2. an existing folder → itself, id = its basename (so a local `org/name` folder wins
 *    over the Hub);
 * 3. `org/name` → {@link downloadFromHub}, id = the repo id. Progress goes to stderr
 *    unless `opts.onProgress` is given.
 * Anything else is a {@link ModelSpecError}. Download failures stay HubDownloadErrors.
 */
export async function resolveModel(spec: string, opts: HubDownloadOptions = {}): Promise<ResolvedModel> {
  const home = opts.home ?? meshnetHome();
  if (spec === DEMO_MODEL_ID) return { dir: DEMO_MODEL_DIR, id: DEMO_MODEL_ID };

  const kind = await pathKind(spec);
  if (kind === 'directory') {
    const dir = path.resolve(spec);
    return { dir, id: path.basename(dir) };
  }
  if (kind === 'file') {
    throw new ModelSpecError(`--model '${spec}' is a file; give the checkpoint folder that holds config.json`);
  }
  if (isHubRepoId(spec)) {
    const dir = await downloadFromHub(spec, { ...opts, home, onProgress: opts.onProgress ?? createProgressReporter() });
    return { dir, id: spec };
  }
  throw new ModelSpecError(`--model '${spec}' is not a folder, not '${DEMO_MODEL_ID}', not a Hub id (org/name)`);
}

async function pathKind(spec: string): Promise<'directory' | 'file' | 'missing'> {
  try {
    return (await stat(spec)).isDirectory() ? 'directory' : 'file';
  } catch {
    return 'missing';
  }
}
