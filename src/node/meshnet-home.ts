/** Where meshnet keeps built artifacts and downloads: MESHNET_HOME, default ~/.cache/meshnet. */
import os from 'node:os';
import path from 'node:path';

export function meshnetHome(): string {
  return process.env.MESHNET_HOME ? path.resolve(process.env.MESHNET_HOME) : path.join(os.homedir(), '.cache', 'meshnet');
}
