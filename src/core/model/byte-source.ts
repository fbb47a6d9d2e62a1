/**
 * ByteSource: read-only access to the files of one checkpoint folder, by name and byte
 * range. Node reads a local folder (src/node/file-byte-source.ts); a browser peer can
 * implement it with HTTP range requests. File names are relative to the folder and use
 * `/`; implementations refuse names that escape it.
 */
export interface ByteSource {
  /** Human-readable folder or URL, used only in error messages. */
  readonly location: string;
  /** Size of `file` in bytes. Rejects when the file does not exist. */
  size(file: string): Promise<number>;
  /**
   * Exactly `length` bytes of `file` from byte `offset`. The caller owns the returned
   * array. Rejects when the range is not inside the file.
   */
  read(file: string, offset: number, length: number): Promise<Uint8Array>;
  /** The whole file decoded as UTF-8 (for small JSON files, never for weights). */
  readText(file: string): Promise<string>;
  /** Whether `file` exists as a regular file. Never rejects for a missing file. */
  exists(file: string): Promise<boolean>;
}
