/**
 * Where the running meshnet's own files are. The same modules run from two places: the
 * TypeScript sources of a checkout (through tsx or vitest) and the built JavaScript of the
 * package (`dist/`, `npm run build`). `dist/` mirrors `src/` folder for folder, so a path
 * relative to a module (`../../models/…`) means the same file in both.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** True when this code runs from `src/*.ts` (a checkout), false from `dist/*.js` (the package). */
export const FROM_SOURCES = import.meta.url.endsWith('.ts');

/** The package root: the repository, or `node_modules/meshnet` of an installed package. */
export const PACKAGE_ROOT = path.resolve(import.meta.dirname, '../..');

/** `dist/web`: what the build made for browsers (scripts, dashboard pages, onnxruntime-web's files). */
export const WEB_DIR = path.join(PACKAGE_ROOT, 'dist', 'web');

/** meshnet's version, from the package's own package.json (read once, on first use). */
export function packageVersion(): string {
  cachedVersion ??= String((JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown }).version ?? '0.0.0');
  return cachedVersion;
}
let cachedVersion: string | undefined;
