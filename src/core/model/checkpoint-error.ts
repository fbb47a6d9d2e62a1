/**
 * The one error type for malformed or missing checkpoint input: config files, safetensors
 * headers, index files, tensor shapes. `file` is the file name relative to the checkpoint
 * folder (e.g. `config.json`, `model-00001-of-00002.safetensors`); the message always
 * starts with that name so it reads well on its own.
 */
export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';

  constructor(
    /** The offending file, relative to the checkpoint folder. */
    readonly file: string,
    /** What is wrong, without the file name (it is prefixed here). */
    problem: string,
  ) {
    super(`${file}: ${problem}`);
  }
}
