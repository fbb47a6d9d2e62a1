/**
 * What the head serves to browsers, by the name it has under `dist/web/` (the build writes
 * it there at pack time: scripts/build.mjs reads these tables) and where it comes from in the
 * repository. From the sources, scripts are bundled on first request instead, so an edit
 * shows on reload. No imports: the build script loads this module before anything else.
 */

/** Scripts: `dist/web/<name>` ← the bundle of a TypeScript entry (repository-relative). */
export const BROWSER_SCRIPTS = {
  'peer/app.js': 'src/browser/peer-page.ts',
  'dashboard/app.js': 'apps/dashboard/src/main.ts',
  'dashboard/chat.js': 'apps/dashboard/src/chat/main.ts',
} as const;

export type BrowserScript = keyof typeof BROWSER_SCRIPTS;

/** Static files: `dist/web/<folder>/<file>` ← every `.html` and `.css` file of the repository folder. */
export const STATIC_FOLDERS = { dashboard: 'apps/dashboard' } as const;
export const STATIC_FILE = /\.(html|css)$/;

/** esbuild options for every browser script, at run time and at build time alike. */
export const BUNDLE_OPTIONS = { bundle: true, format: 'esm', platform: 'browser', target: 'es2022' } as const;

/**
 * The onnxruntime-web files a bundle loads at run time (`ort-wasm-simd-threaded.asyncify.wasm`
 * and its loader for `onnxruntime-web/webgpu`): the names written in the bundle. The build
 * copies exactly these beside the scripts, so they always match the JavaScript bundled in.
 */
export function ortFilesNamedIn(bundle: string): string[] {
  return [...new Set(bundle.match(/ort-wasm[\w.-]*\.(?:wasm|mjs)/g) ?? [])].sort();
}
