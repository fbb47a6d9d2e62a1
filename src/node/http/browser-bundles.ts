/**
 * Browser code the head serves (the dashboard, the browser peer page) is TypeScript in this
 * repository; it is bundled with esbuild on first request and kept in memory, so there is no
 * build step after `npm ci`. onnxruntime-web's own files are served from node_modules as they
 * ship (never from a CDN), with the cross-origin isolation headers multi-threaded wasm needs.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import { build } from 'esbuild';

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** Headers that make a page cross-origin isolated (SharedArrayBuffer for wasm threads). */
export const ISOLATION_HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
} as const;

const bundles = new Map<string, Promise<string>>();

/** The bundled JavaScript of `entry` (a path relative to the repository root), built once. */
export function bundle(entry: string): Promise<string> {
  let pending = bundles.get(entry);
  if (!pending) {
    pending = build({
      entryPoints: [path.join(ROOT, entry)],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      sourcemap: 'inline',
      logLevel: 'silent',
    }).then((result) => result.outputFiles[0].text);
    pending.catch(() => bundles.delete(entry));
    bundles.set(entry, pending);
  }
  return pending;
}

export function javascript(code: string, extra: Record<string, string> = {}): Response {
  return new Response(code, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...extra } });
}

// Why a wasm file: onnxruntime-web's `exports` map does not expose './package.json' (resolving it
// throws ERR_PACKAGE_PATH_NOT_EXPORTED); its wasm files are exported and live in dist/.
const ORT_DIST = path.dirname(createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm'));
const ORT_TYPES: Record<string, string> = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm' };

/** A file of onnxruntime-web's dist folder (`ort-wasm-simd-threaded.jsep.wasm`, …), or 404. */
export async function ortFile(name: string): Promise<Response> {
  const ext = path.extname(name);
  if (!/^[\w.-]+$/.test(name) || !ORT_TYPES[ext]) return new Response('not found', { status: 404 });
  try {
    const data = await readFile(path.join(ORT_DIST, name));
    return new Response(new Uint8Array(data), { headers: { 'content-type': ORT_TYPES[ext], 'cache-control': 'public, max-age=3600', ...ISOLATION_HEADERS } });
  } catch {
    return new Response('not found', { status: 404 });
  }
}

/** A static file of the repository (the dashboard's HTML and CSS). */
export async function repoFile(relative: string, contentType: string, extra: Record<string, string> = {}): Promise<Response> {
  const data = await readFile(path.join(ROOT, relative), 'utf8');
  return new Response(data, { headers: { 'content-type': contentType, 'cache-control': 'no-cache', ...extra } });
}
