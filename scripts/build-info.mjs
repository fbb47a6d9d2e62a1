// Whether dist/ was built from the files of this checkout as they are now. The build writes
// dist/build-info.json last: the files it was built from (every file under src/, apps/ and
// scripts/, and the package and TypeScript configuration) and when it started reading them.
// dist/ is fresh when the same files exist and none changed since: bin/meshnet.js runs dist/
// then, and the TypeScript sources otherwise, so a checkout never runs a stale build.
// Plain JavaScript, no dependencies: bin/meshnet.js loads it on every start in a checkout
// (about 250 stat calls).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const FOLDERS = ['src', 'apps', 'scripts'];
const FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

export const BUILD_INFO = 'build-info.json';

/** The files a build reads, relative to `root`, sorted. */
export function buildInputs(root) {
  const found = FILES.filter((name) => existsSync(path.join(root, name)));
  for (const folder of FOLDERS) {
    if (!existsSync(path.join(root, folder))) continue;
    for (const entry of readdirSync(path.join(root, folder), { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) found.push(path.relative(root, path.join(entry.parentPath ?? entry.path, entry.name)));
    }
  }
  return found.map((name) => name.split(path.sep).join('/')).sort();
}

/** Why `dist` (a build of `root`) is not fresh, or undefined when it is. */
export function staleReason(root, dist = path.join(root, 'dist')) {
  let info;
  try {
    info = JSON.parse(readFileSync(path.join(dist, BUILD_INFO), 'utf8'));
  } catch {
    return 'not built';
  }
  const inputs = buildInputs(root);
  if (!Array.isArray(info.inputs) || typeof info.startedAt !== 'number') return 'unreadable build info';
  if (inputs.length !== info.inputs.length || inputs.some((name, i) => name !== info.inputs[i])) return 'files were added, moved or removed since the build';
  const changed = inputs.find((name) => statSync(path.join(root, name)).mtimeMs > info.startedAt);
  return changed === undefined ? undefined : `${changed} changed since the build`;
}
