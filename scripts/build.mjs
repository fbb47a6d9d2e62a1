// `npm run build` (and `prepare`, which `npm ci`, `npm install` and `npm pack` run): the
// package's built files in dist/.
// - dist/{shared,core,node,browser}/: tsc's JavaScript and declarations of src/, folder for
//   folder (relative imports rewritten from .ts to .js, in the declarations too), plus src/'s
//   plain .mjs files — except the ones that load tsx, which only the sources need.
// - dist/web/: the browser scripts bundled with esbuild, the dashboard's pages and styles, and
//   the onnxruntime-web files those bundles load (src/node/http/browser-assets.ts lists them).
// - dist/build-info.json (last): the files it was built from, for bin/meshnet.js's freshness check.
// Everything is built in a temporary folder and renamed into place, so a running meshnet never
// sees half a build. Needs the development dependencies (typescript, esbuild).
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { BUILD_INFO, buildInputs } from './build-info.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');
const DIST = path.join(ROOT, 'dist');
const require = createRequire(import.meta.url);

const startedAt = Date.now();
const inputs = buildInputs(ROOT);
const out = path.join(ROOT, `dist.tmp-${process.pid}`);
rmSync(out, { recursive: true, force: true });
try {
  compile(out);
  copyPlainModules(out);
  await buildWeb(path.join(out, 'web'));
  writeFileSync(path.join(out, BUILD_INFO), `${JSON.stringify({ startedAt, inputs }, null, 1)}\n`);
  const old = path.join(ROOT, `dist.old-${process.pid}`);
  rmSync(old, { recursive: true, force: true });
  try {
    renameSync(DIST, old);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  renameSync(out, DIST);
  rmSync(old, { recursive: true, force: true });
  console.log(`meshnet: built dist/ in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
} catch (error) {
  rmSync(out, { recursive: true, force: true });
  console.error(`meshnet: build failed: ${error.message}`);
  process.exitCode = 1;
}

function compile(outDir) {
  const tsc = require.resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', outDir], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`tsc exited with ${result.status ?? result.signal}`);
  // tsc rewrites `.ts` imports in the JavaScript but not in declarations (microsoft/TypeScript#61037).
  for (const file of files(outDir)) {
    if (!file.endsWith('.d.ts')) continue;
    const text = readFileSync(file, 'utf8');
    const fixed = text.replace(/((?:from|import)\s*\(?\s*)(['"])(\.\.?\/[^'"]*?)\.ts\2/g, '$1$2$3.js$2');
    if (fixed !== text) writeFileSync(file, fixed);
  }
}

function copyPlainModules(outDir) {
  const src = path.join(ROOT, 'src');
  for (const file of files(src)) {
    if (!file.endsWith('.mjs') || /from\s+['"]tsx\b/.test(readFileSync(file, 'utf8'))) continue;
    const target = path.join(outDir, path.relative(src, file));
    mkdirSync(path.dirname(target), { recursive: true });
    cpSync(file, target);
  }
}

async function buildWeb(web) {
  const assets = await import(pathToFileURL(path.join(out, 'node', 'http', 'browser-assets.js')).href);
  const ortNames = new Set();
  for (const [name, entry] of Object.entries(assets.BROWSER_SCRIPTS)) {
    const result = await build({ ...assets.BUNDLE_OPTIONS, entryPoints: [path.join(ROOT, entry)], outfile: path.join(web, name), logLevel: 'warning', write: false });
    const code = result.outputFiles[0].text;
    mkdirSync(path.dirname(path.join(web, name)), { recursive: true });
    writeFileSync(path.join(web, name), code);
    for (const ort of assets.ortFilesNamedIn(code)) ortNames.add(ort);
  }
  for (const [folder, from] of Object.entries(assets.STATIC_FOLDERS)) {
    mkdirSync(path.join(web, folder), { recursive: true });
    for (const name of readdirSync(path.join(ROOT, from))) {
      if (assets.STATIC_FILE.test(name)) cpSync(path.join(ROOT, from, name), path.join(web, folder, name));
    }
  }
  // The wasm files are exported by onnxruntime-web and live in its dist/ (browser-bundles.ts says why).
  const ortDist = path.dirname(require.resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm'));
  mkdirSync(path.join(web, 'ort'), { recursive: true });
  for (const name of ortNames) cpSync(path.join(ortDist, name), path.join(web, 'ort', name));
  if (ortNames.size === 0) throw new Error('no onnxruntime-web file is named in the browser bundles: has its file naming changed?');
}

function files(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name));
}
