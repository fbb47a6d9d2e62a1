/** A ByteSource over a local checkpoint folder, reading weights by offset through a FileHandle. */
import { open, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ByteSource } from '../core/model/byte-source.ts';

/**
 * Opens nothing up front: each `read` opens the file, reads exactly the requested range
 * and closes it, so no handle outlives a call and a file is never read whole.
 * Names that resolve outside `folder` (`..`, absolute paths) are refused.
 */
export function createFileByteSource(folder: string): ByteSource {
  const root = path.resolve(folder);
  const resolve = (file: string): string => {
    const full = path.resolve(root, file);
    if (path.isAbsolute(file) || !full.startsWith(root + path.sep)) {
      throw new Error(`file '${file}' is outside the checkpoint folder ${root}`);
    }
    return full;
  };
  return {
    location: root,
    async size(file) {
      return (await stat(resolve(file))).size;
    },
    async read(file, offset, length) {
      if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
        throw new RangeError(`read ${file}: invalid range offset=${offset} length=${length}`);
      }
      const handle = await open(resolve(file), 'r');
      try {
        const out = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          // read() may return fewer bytes than asked; 0 means end of file.
          const { bytesRead } = await handle.read(out, done, length - done, offset + done);
          if (bytesRead === 0) throw new RangeError(`read ${file}: range [${offset}, ${offset + length}) is past the end of the file`);
          done += bytesRead;
        }
        return out;
      } finally {
        await handle.close();
      }
    },
    async readText(file) {
      return readFile(resolve(file), 'utf8');
    },
    async exists(file) {
      try {
        return (await stat(resolve(file))).isFile();
      } catch {
        return false;
      }
    },
  };
}
