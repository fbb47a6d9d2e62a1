/**
 * A tokenizer could not be loaded, built or used. `file` names the file (or option) at
 * fault — `tokenizer.json`, `tokenizer_config.json`, a chat template — so the message is
 * actionable; runtime loaders replace the bare name with the full path.
 */
export class TokenizerError extends Error {
  override readonly name = 'TokenizerError';

  /**
   * @param file the file or option at fault.
   * @param detail what is wrong, without the file name; `message` is `${file}: ${detail}`.
   */
  constructor(
    readonly file: string,
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${file}: ${detail}`, options);
  }
}
