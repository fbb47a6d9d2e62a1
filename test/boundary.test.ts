/**
 * The dependency boundary: src/core and src/shared run in Node and in browsers alike, so
 * they import no Node built-ins, no onnxruntime runtime package, no server framework and
 * no crossws adapter. Runtimes are injected through seams instead (docs/architecture.md).
 *
 * Folders also depend one way (the direction table below: no cycles between folders), no
 * file reaches itself through its imports (type imports count: a circle is one to a reader
 * too), the OpenAI edge imports no package at all, and the route's pure decisions import only
 * types.
 *
 * Imports are found with the TypeScript parser (not regular expressions), so multi-line
 * imports, re-exports, dynamic `import()`, `require()` and `import('x').T` types all count.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const SCANNED = ['src/core', 'src/shared'];

const NODE_BUILTINS = new Set(builtinModules);

/**
 * Why a module may not be imported from core/shared, or undefined when it may.
 * `typeOnly` is true for `import type` / `export type` and `import('x').T` type positions,
 * which TypeScript erases (with verbatimModuleSyntax, `import { type T }` is NOT erased).
 */
function forbiddenReason(specifier: string, typeOnly: boolean): string | undefined {
  const bare = specifier.split('/')[0]!;
  if (specifier.startsWith('node:') || NODE_BUILTINS.has(specifier) || NODE_BUILTINS.has(bare)) return 'a Node built-in';
  if (specifier === 'onnxruntime-node' || specifier.startsWith('onnxruntime-node/')) return 'the Node onnxruntime';
  if (specifier === 'onnxruntime-web' || specifier.startsWith('onnxruntime-web/')) {
    return typeOnly ? undefined : 'the browser onnxruntime (type imports only)';
  }
  if (specifier === 'onnxruntime-common' || specifier.startsWith('onnxruntime-common/')) {
    return typeOnly ? undefined : 'onnxruntime values (use `import type`; the module is injected)';
  }
  if (specifier.startsWith('crossws/adapters')) return 'a crossws adapter';
  if (specifier === 'h3' || specifier.startsWith('h3/')) return 'the h3 server';
  if (specifier === 'ws' || specifier.startsWith('ws/')) return 'the ws server';
  return undefined;
}

interface Violation {
  readonly file: string;
  readonly line: number;
  readonly specifier: string;
  readonly reason: string;
}

/** Every forbidden import in one source text. */
function findViolations(file: string, source: string): Violation[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Violation[] = [];
  const check = (node: ts.Node, literal: ts.Expression | undefined, typeOnly: boolean) => {
    if (!literal || !ts.isStringLiteralLike(literal)) return;
    const reason = forbiddenReason(literal.text, typeOnly);
    if (reason === undefined) return;
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    found.push({ file, line, specifier: literal.text, reason });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      check(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    } else if (ts.isExportDeclaration(node)) {
      check(node, node.moduleSpecifier, node.isTypeOnly);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      check(node, node.moduleReference.expression, node.isTypeOnly);
    } else if (ts.isImportTypeNode(node)) {
      const argument = node.argument;
      if (ts.isLiteralTypeNode(argument)) check(node, argument.literal as ts.Expression, true);
    } else if (ts.isCallExpression(node)) {
      const isDynamicImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      if (isDynamicImport || isRequire) check(node, node.arguments[0], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function tsFiles(directory: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(directory);
  } catch {
    return []; // the folder does not exist (yet)
  }
  return entries.flatMap((name) => {
    const full = path.join(directory, name);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

/** Every `.ts` file's imports (relative ones resolved to repository paths), with their kind. */
interface ImportEdge {
  readonly file: string; // repository-relative
  readonly line: number;
  readonly specifier: string;
  readonly target?: string; // repository-relative path, for relative specifiers
  readonly typeOnly: boolean;
}

function importsOf(file: string, source: string): ImportEdge[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const edges: ImportEdge[] = [];
  const add = (node: ts.Node, literal: ts.Expression | undefined, typeOnly: boolean) => {
    if (!literal || !ts.isStringLiteralLike(literal)) return;
    const specifier = literal.text;
    const target = specifier.startsWith('.') ? path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)) : undefined;
    edges.push({ file, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1, specifier, target, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node)) add(node, node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal as ts.Expression, true);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], false);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return edges;
}

/** Node-only globals used as values (`process.env`, `Buffer.from`, `require(…)`), with their line. */
function nodeGlobals(file: string, source: string): string[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    const used = ts.isPropertyAccessExpression(node) ? node.expression : ts.isCallExpression(node) ? node.expression : undefined;
    if (used && ts.isIdentifier(used) && ['process', 'Buffer', 'require', '__dirname', '__filename'].includes(used.text)) {
      found.push(`${file}:${sf.getLineAndCharacterOfPosition(used.getStart(sf)).line + 1} uses ${used.text}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/**
 * The folder a file belongs to for the direction rules: a subfolder of src/core or src/node,
 * their root files as `src/core` / `src/node`, and src/shared, src/browser, apps/dashboard whole.
 */
function folderOf(file: string): string {
  // The package's Node entry re-exports the engine and the library API: it sits on top.
  if (file === 'src/node/index.ts') return 'src/node/index.ts';
  const parts = file.split('/');
  if (parts[0] === 'apps') return 'apps/dashboard';
  if (parts[1] === 'shared' || parts[1] === 'browser') return `src/${parts[1]}`;
  return parts.length > 3 ? parts.slice(0, 3).join('/') : parts.slice(0, 2).join('/');
}

const CORE = ['src/core/model', 'src/core/sampling', 'src/core/frames', 'src/core/runtime', 'src/core/peer', 'src/core/speculation', 'src/core/mesh', 'src/core/route', 'src/core'];
const BELOW_NODE = ['src/shared', ...CORE];

/**
 * Which folders each folder may import (docs/architecture.md: shared ← core ← node | browser; the
 * dashboard reads only shared). Inside core: model and sampling are the bottom, frames and
 * runtime build on model, peer on those, speculation (drafters) on model, sampling, frames
 * and runtime; mesh (membership, range loading, planning, the link wrappers: what is not a
 * session) on model, frames, runtime and peer; route (the sessions) on everything. A new
 * folder must be placed here.
 */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  'src/shared': [],
  // Tool-call formats and structured output (model) build grammars for the sampler's engine.
  'src/core/model': ['src/shared', 'src/core/sampling'],
  'src/core/sampling': [],
  'src/core/frames': ['src/shared', 'src/core/model'],
  'src/core/runtime': ['src/shared', 'src/core/model', 'src/core/sampling'],
  'src/core/peer': ['src/shared', 'src/core/model', 'src/core/frames', 'src/core/runtime'],
  'src/core/speculation': ['src/shared', 'src/core/model', 'src/core/sampling', 'src/core/frames', 'src/core/runtime'],
  'src/core/mesh': ['src/shared', 'src/core/model', 'src/core/frames', 'src/core/runtime', 'src/core/peer'],
  'src/core/route': ['src/shared', 'src/core/model', 'src/core/sampling', 'src/core/frames', 'src/core/runtime', 'src/core/peer', 'src/core/speculation', 'src/core/mesh'],
  'src/core': ['src/shared', ...CORE.slice(0, -1)],
  'src/browser': BELOW_NODE,
  'src/node': BELOW_NODE, // files shared by the node folders (model loading, artifact cache, ORT)
  'src/node/net': BELOW_NODE,
  'src/node/metrics': BELOW_NODE,
  // Finding heads on the LAN (mDNS announce and browse).
  'src/node/discovery': BELOW_NODE,
  'src/node/openai': BELOW_NODE,
  // Ollama's API: translation to the OpenAI edge's requests (its parsers and refusals reused).
  'src/node/ollama': [...BELOW_NODE, 'src/node/openai'],
  'src/node/models': [...BELOW_NODE, 'src/node'],
  'src/node/peer': [...BELOW_NODE, 'src/node', 'src/node/net'],
  'src/node/head': [...BELOW_NODE, 'src/node', 'src/node/net', 'src/node/metrics', 'src/node/peer', 'src/node/models'],
  'src/node/http': [...BELOW_NODE, 'src/node', 'src/node/head', 'src/node/metrics', 'src/node/openai', 'src/node/ollama'],
  'src/node/serve': [...BELOW_NODE, 'src/node', 'src/node/net', 'src/node/metrics', 'src/node/openai', 'src/node/models', 'src/node/peer', 'src/node/head', 'src/node/http'],
  'src/node/cli': [...BELOW_NODE, 'src/node', 'src/node/net', 'src/node/discovery', 'src/node/metrics', 'src/node/openai', 'src/node/models', 'src/node/peer', 'src/node/head', 'src/node/http', 'src/node/serve'],
  // startHead / startPeer for programs that embed meshnet: `meshnet serve` and `meshnet peer` as functions.
  'src/node/library': [...BELOW_NODE, 'src/node', 'src/node/peer', 'src/node/serve'],
  'src/node/index.ts': [...BELOW_NODE, 'src/node', 'src/node/library'],
  'apps/dashboard': ['src/shared'],
};

/** Node files that import core only through `src/core/index.ts` (no deep imports). */
const THROUGH_CORE_INDEX = ['src/node/head/head-node.ts'];

/** Mesh and route decisions that are pure functions over plain data: only sibling values, type imports otherwise. */
const PURE_DECISIONS = [
  ...['assign-layers.ts', 'plan-route.ts', 'plan-error.ts', 'hop-latency.ts', 'head-layers.ts', 'held-range.ts'].map((f) => `src/core/mesh/${f}`),
  ...['backoff.ts', 'hop-history.ts'].map((f) => `src/core/route/${f}`),
];

/**
 * The import circles of a file graph: one per group of files that reach each other, each
 * as the trail `a → b → … → a` from its first file (in the graph's order). Tarjan's strongly
 * connected components; a file importing itself is a circle too.
 */
function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const connect = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        connect(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || graph.get(file)!.includes(file)) groups.push(group);
  };
  for (const file of graph.keys()) if (!index.has(file)) connect(file);
  // One trail per group: a shortest way back to the group's first file (breadth-first inside it).
  return groups.map((group) => {
    const members = new Set(group);
    const start = [...graph.keys()].find((file) => members.has(file))!;
    const previous = new Map<string, string>();
    const queue = [start];
    let last: string | undefined;
    while (queue.length > 0 && last === undefined) {
      const file = queue.shift()!;
      for (const next of graph.get(file) ?? []) {
        if (next === start) {
          last = file;
          break;
        }
        if (members.has(next) && !previous.has(next)) {
          previous.set(next, file);
          queue.push(next);
        }
      }
    }
    const trail = [start];
    for (let file = last!; file !== start; file = previous.get(file)!) trail.splice(1, 0, file);
    return [...trail, start].join(' → ');
  });
}

const ALL_FILES = ['src', 'apps/dashboard/src'].flatMap((dir) => tsFiles(path.join(ROOT, dir))).map((f) => path.relative(ROOT, f).split(path.sep).join('/'));
const EDGES = ALL_FILES.flatMap((file) => importsOf(file, readFileSync(path.join(ROOT, file), 'utf8')));

describe('core and shared import no runtime-specific modules', () => {
  it('every file under src/core and src/shared', () => {
    const files = SCANNED.flatMap((dir) => tsFiles(path.join(ROOT, dir)));
    expect(files.length).toBeGreaterThan(10); // the scan found the sources
    const violations = files.flatMap((file) => findViolations(path.relative(ROOT, file), readFileSync(file, 'utf8')));
    const report = violations.map((v) => `${v.file}:${v.line} imports '${v.specifier}': ${v.reason}`);
    expect(report, `forbidden imports:\n${report.join('\n')}`).toEqual([]);
  });

  it('and use no Node-only globals (process, Buffer, require)', () => {
    const files = ALL_FILES.filter((f) => SCANNED.some((dir) => f.startsWith(`${dir}/`)));
    expect(files.flatMap((file) => nodeGlobals(file, readFileSync(path.join(ROOT, file), 'utf8')))).toEqual([]);
  });
});

describe('folders depend one way', () => {
  it('every import between folders follows the direction table', () => {
    expect(EDGES.length).toBeGreaterThan(200);
    const report: string[] = [];
    for (const edge of EDGES) {
      if (!edge.target) continue;
      const from = folderOf(edge.file);
      const to = folderOf(edge.target);
      if (from === to) continue;
      if (!(from in ALLOWED)) report.push(`${edge.file}: folder ${from} is not in the direction table`);
      else if (!ALLOWED[from].includes(to)) report.push(`${edge.file}:${edge.line} imports ${edge.specifier}: ${from} may not depend on ${to}`);
    }
    expect(report, report.join('\n')).toEqual([]);
  });

  it('the direction table has no cycle (so no folder cycle can pass it)', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const cycle: string[] = [];
    const visit = (folder: string, trail: string[]): void => {
      if (state.get(folder) === 'done') return;
      if (state.get(folder) === 'visiting') {
        cycle.push([...trail, folder].join(' → '));
        return;
      }
      state.set(folder, 'visiting');
      for (const next of ALLOWED[folder] ?? []) visit(next, [...trail, folder]);
      state.set(folder, 'done');
    };
    for (const folder of Object.keys(ALLOWED)) visit(folder, []);
    expect(cycle).toEqual([]);
    for (const targets of Object.values(ALLOWED)) for (const target of targets) expect(ALLOWED).toHaveProperty([target]);
  });

  it('no import circle between files (type imports included)', () => {
    const graph = new Map<string, string[]>(ALL_FILES.map((file) => [file, []]));
    for (const edge of EDGES) if (edge.target && graph.has(edge.target)) graph.get(edge.file)!.push(edge.target);
    expect([...graph.values()].flat().length).toBeGreaterThan(200); // the edges resolved to files
    expect(importCircles(graph)).toEqual([]);
  });

  it('the circle finder finds circles and only circles', () => {
    const graph = (edges: Record<string, string[]>) => new Map(Object.entries(edges));
    expect(importCircles(graph({ a: ['b', 'c'], b: ['c'], c: [] }))).toEqual([]); // a diamond is no circle
    expect(importCircles(graph({ a: ['b'], b: ['a'] }))).toEqual(['a → b → a']);
    expect(importCircles(graph({ a: ['a'] }))).toEqual(['a → a']);
    expect(importCircles(graph({ x: ['a'], a: ['b'], b: ['c', 'd'], c: ['a'], d: [] }))).toEqual(['a → b → c → a']);
    expect(importCircles(graph({ a: ['b'], b: ['a'], c: ['d'], d: ['e'], e: ['c'] }))).toEqual(['a → b → a', 'c → d → e → c']);
    expect(importCircles(graph({ a: ['b', 'outside'], b: [] }))).toEqual([]); // edges out of the graph are not followed
  });

  it("the head's engine side takes core through its one door, src/core/index.ts", () => {
    const deep = EDGES.filter((e) => THROUGH_CORE_INDEX.includes(e.file) && e.target?.startsWith('src/core/') && e.target !== 'src/core/index.ts');
    expect(EDGES.some((e) => THROUGH_CORE_INDEX.includes(e.file) && e.target === 'src/core/index.ts')).toBe(true);
    expect(deep.map((e) => `${e.file}:${e.line} imports ${e.specifier}`)).toEqual([]);
  });

  it('src/node/openai is pure translation: relative imports only (no server framework, no Node built-ins)', () => {
    const packages = EDGES.filter((e) => folderOf(e.file) === 'src/node/openai' && !e.target).map((e) => `${e.file}:${e.line} imports ${e.specifier}`);
    expect(packages).toEqual([]);
  });

  it('route planning, back-off, deadlines and history are pure: sibling values, types otherwise', () => {
    expect(PURE_DECISIONS.every((f) => ALL_FILES.includes(f))).toBe(true);
    const report = EDGES.filter((e) => PURE_DECISIONS.includes(e.file) && !e.typeOnly && !(e.target && path.posix.dirname(e.target) === path.posix.dirname(e.file))).map(
      (e) => `${e.file}:${e.line} imports ${e.specifier}`,
    );
    expect(report).toEqual([]);
  });

  it('every folder says what it is for (its README.md)', () => {
    const folders = Object.keys(ALLOWED).filter((folder) => !folder.endsWith('.ts'));
    const missing = folders.filter((folder) => {
      try {
        return !readFileSync(path.join(ROOT, folder, 'README.md'), 'utf8').startsWith(folder === 'apps/dashboard' ? '# apps/dashboard' : `# ${folder}/\n\nWhat this folder is for: `);
      } catch {
        return true;
      }
    });
    expect(missing).toEqual([]);
  });

  it('the folder of a file', () => {
    expect(folderOf('src/core/route/mesh.ts')).toBe('src/core/route');
    expect(folderOf('src/core/index.ts')).toBe('src/core');
    expect(folderOf('src/node/local-model.ts')).toBe('src/node');
    expect(folderOf('src/node/http/respond.ts')).toBe('src/node/http');
    expect(folderOf('src/shared/control.ts')).toBe('src/shared');
    expect(folderOf('apps/dashboard/src/main.ts')).toBe('apps/dashboard');
  });
});

describe('the import scanner', () => {
  const lines = (source: string) => findViolations('x.ts', source).map((v) => `${v.line}:${v.specifier}`);

  it('flags value imports of forbidden modules, with their line', () => {
    const source = [
      "import { readFile } from 'node:fs/promises';",
      "import path from 'path';",
      "import * as os from 'os';",
      "import { randomUUID } from 'crypto';",
      "import 'fs';",
      "import * as ort from 'onnxruntime-node';",
      "import * as web from 'onnxruntime-web/webgpu';",
      "import { Tensor } from 'onnxruntime-common';",
      "import { type InferenceSession } from 'onnxruntime-common';",
      "import { defineHooks } from 'crossws/adapters/node';",
      "import { H3 } from 'h3';",
      "import { WebSocketServer } from 'ws';",
      "export { x } from 'node:os';",
      "const m = await import('onnxruntime-node');",
      "const f = require('fs');",
      'import {',
      '  join,',
      "} from 'node:path';",
    ].join('\n');
    expect(lines(source)).toEqual([
      '1:node:fs/promises',
      '2:path',
      '3:os',
      '4:crypto',
      '5:fs',
      '6:onnxruntime-node',
      '7:onnxruntime-web/webgpu',
      '8:onnxruntime-common',
      '9:onnxruntime-common',
      '10:crossws/adapters/node',
      '11:h3',
      '12:ws',
      '13:node:os',
      '14:onnxruntime-node',
      '15:fs',
      '16:node:path',
    ]);
  });

  it('allows type-only imports of onnxruntime-common and -web, and ordinary modules', () => {
    const source = [
      "import type * as Ort from 'onnxruntime-common';",
      "import type { Tensor } from 'onnxruntime-web';",
      "export type { InferenceSession } from 'onnxruntime-common';",
      "type T = import('onnxruntime-common').Tensor;",
      "import { Template } from '@huggingface/jinja';",
      "import { KvState } from './kv-state.ts';",
      "import { plugin } from 'crossws';",
      "const s = 'import x from \"fs\"';",
      "// import fs from 'fs';",
    ].join('\n');
    expect(lines(source)).toEqual([]);
  });

  it('still refuses type imports of Node built-ins and onnxruntime-node', () => {
    const source = ["import type { Stats } from 'node:fs';", "type S = import('onnxruntime-node').InferenceSession;"].join('\n');
    expect(lines(source)).toEqual(['1:node:fs', '2:onnxruntime-node']);
  });
});
