/**
 * Browser code the head serves: the dashboard, the chat page and the browser peer's join
 * page, and onnxruntime-web's own files (never from a CDN), with the cross-origin isolation
 * headers multi-threaded wasm needs. The package serves what the build made at pack time
 * (`dist/web/`, see browser-assets.ts); a checkout running its TypeScript sources bundles
 * each script with esbuild on first request instead (kept in memory), so there is no build
 * step while developing and an edit shows on the next start.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import { FROM_SOURCES, PACKAGE_ROOT, WEB_DIR } from '../package-files.ts';
import { BROWSER_SCRIPTS, BUNDLE_OPTIONS, STATIC_FOLDERS, type BrowserScript } from './browser-assets.ts';

/** Headers that make a page cross-origin isolated (SharedArrayBuffer for wasm threads). */
export const ISOLATION_HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
} as const;

const scripts = new Map<BrowserScript, Promise<string>>();

/** The JavaScript of one browser script (`peer/app.js`, …), read or bundled once. */
export function browserScript(name: BrowserScript): Promise<string> {
  let pending = scripts.get(name);
  if (!pending) {
    pending = FROM_SOURCES ? bundleSources(BROWSER_SCRIPTS[name]) : readFile(path.join(WEB_DIR, name), 'utf8');
    pending.catch(() => scripts.delete(name));
    scripts.set(name, pending);
  }
  return pending;
}

async function bundleSources(entry: string): Promise<string> {
  // esbuild is a development dependency: only a checkout running its sources bundles at run time.
  const { build } = await import('esbuild');
  const result = await build({ ...BUNDLE_OPTIONS, entryPoints: [path.join(PACKAGE_ROOT, entry)], write: false, sourcemap: 'inline', logLevel: 'silent' });
  return result.outputFiles[0]!.text;
}

export function javascript(code: string, extra: Record<string, string> = {}): Response {
  return new Response(code, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...extra } });
}

// From the sources: onnxruntime-web's dist folder as installed. Why a wasm file: its `exports`
// map does not expose './package.json' (resolving it throws ERR_PACKAGE_PATH_NOT_EXPORTED);
// its wasm files are exported and live in dist/. The package: the files the build copied.
const ORT_DIR = FROM_SOURCES ? path.dirname(createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm')) : path.join(WEB_DIR, 'ort');
const ORT_TYPES: Record<string, string> = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm' };

/** A file of onnxruntime-web's (`ort-wasm-simd-threaded.asyncify.wasm`, …), or 404. */
export async function ortFile(name: string): Promise<Response> {
  const ext = path.extname(name);
  if (!/^[\w.-]+$/.test(name) || !ORT_TYPES[ext]) return new Response('not found', { status: 404 });
  try {
    const data = await readFile(path.join(ORT_DIR, name));
    return new Response(new Uint8Array(data), { headers: { 'content-type': ORT_TYPES[ext], 'cache-control': 'public, max-age=3600', ...ISOLATION_HEADERS } });
  } catch {
    return new Response('not found', { status: 404 });
  }
}

/** A static page or stylesheet of a browser app (`dashboard`, `index.html`). */
export async function staticFile(folder: keyof typeof STATIC_FOLDERS, name: string, contentType: string): Promise<Response> {
  const file = FROM_SOURCES ? path.join(PACKAGE_ROOT, STATIC_FOLDERS[folder], name) : path.join(WEB_DIR, folder, name);
  const data = await readFile(file, 'utf8');
  return new Response(data, { headers: { 'content-type': contentType, 'cache-control': 'no-cache' } });
}
