/**
 * Loads `@mlc-ai/web-xgrammar` in Node: the {@link XGrammarLoader} seam for this runtime.
 *
 * Why not `import`: the package's `lib/index.js` is a UMD/CommonJS bundle inside a package
 * marked `"type": "module"`, so Node refuses both `import` and `require` of it; and run as
 * Node code, its Emscripten prelude `await import('module')`s, which plain `vm` code cannot.
 * The WebAssembly is inlined as base64, so it needs no file access at all: we evaluate the
 * bundle as a CommonJS function with `process` hidden (Emscripten then takes its browser path)
 * and `console` captured (xgrammar prints `[FATAL] …` before it aborts; that text becomes the
 * client's error message). Each call makes an independent instance.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import vm from 'node:vm';
import type { XGrammarInstance, XGrammarLoader, XGrammarModule } from '../core/sampling/grammar/xgrammar-module.ts';

const require = createRequire(import.meta.url);

let compiled: { fn: (...args: unknown[]) => void; path: string } | undefined;

function bundle() {
  if (compiled) return compiled;
  const path = require.resolve('@mlc-ai/web-xgrammar');
  const source = readFileSync(path, 'utf8');
  const fn = vm.compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname', 'process', 'console'], { filename: path }) as (...args: unknown[]) => void;
  compiled = { fn, path };
  return compiled;
}

/** "[FATAL] /build/path/json_schema_converter.cc:902: Unsupported type \"foo\"" → "Unsupported type \"foo\"". */
function cleanFatal(line: string): string {
  return line
    .replace(/^\[FATAL\]\s*\S+:\d+:\s*/, '')
    .replace(/^Check failed: \(.*?\) is false: /, '')
    .trim();
}

/** A fresh xgrammar instance (its own WebAssembly memory). */
export const loadXGrammar: XGrammarLoader = (): XGrammarInstance => {
  const { fn, path } = bundle();
  let last: string | undefined;
  const record = (...parts: unknown[]) => {
    const text = parts.map(String).join(' ');
    for (const line of text.split('\n')) if (line.startsWith('[FATAL]')) last = cleanFatal(line);
  };
  const quietConsole = { ...console, log: record, warn: record, error: record, info: record, debug: () => {} };
  const module = { exports: {} as Record<string, unknown> };
  fn(module.exports, require, module, path, path.slice(0, path.lastIndexOf('/')), undefined, quietConsole);
  return { module: module.exports as unknown as XGrammarModule, lastError: () => last };
};
