/**
 * meshnet as its users install it: this checkout packed with `npm pack`, the tarball installed
 * into an empty temporary folder (no repository around it), then
 * - `npx meshnet serve` there serves the demo, `npx meshnet peer --head …` joins it, and the
 *   README's request gets the README's answer through that peer;
 * - the README's library example, run there, imports `startHead` and `startPeer` from
 *   'meshnet' and runs a head and a peer in one process, with the same answer;
 * - its declarations type a consumer of both entries, and refuse a wrong call;
 * - its browser entry bundles for a browser with nothing of Node in it.
 * The tarball holds built JavaScript only: no TypeScript sources, no tests, no tsx.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ortFilesNamedIn } from '../../src/node/http/browser-assets.ts';
import { cleanEnv, installTarball, packTarball, REPO, run, type Installed, type Tarball } from './package-harness.ts';

/** What the README's request gets from the demo (greedy): quoted in the README. */
const DEMO_ANSWER = 'As I settle, fragments of vectors aligning like a kaleidoscope.';
const HELLO = { model: 'demo', messages: [{ role: 'user', content: 'Hello!' }], temperature: 0 };
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

let work: string;
let tarball: Tarball;
let installed: Installed;
let home: string;
beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'meshnet-pack-'));
  home = path.join(work, 'home');
  tarball = await packTarball(work);
  installed = await installTarball(tarball.file);
  process.stderr.write(`packed ${(tarball.size / 2 ** 20).toFixed(1)} MiB (${(tarball.unpackedSize / 2 ** 20).toFixed(1)} MiB unpacked, ${tarball.files.length} files); installed in ${(installed.installMs / 1000).toFixed(1)} s\n`);
}, 300_000);
afterAll(async () => {
  await installed?.remove();
  if (work) await rm(work, { recursive: true, force: true });
});

interface Started {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
}

/** `npx meshnet …` in the installed folder, in a process group of its own (npx, then meshnet). */
function npx(args: string[]): Started {
  const child = spawn('npx', ['--no-install', 'meshnet', ...args], { cwd: installed.dir, env: cleanEnv({ MESHNET_HOME: home }), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const started: Started = { child, stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => (started.stdout += d));
  child.stderr!.on('data', (d) => (started.stderr += d));
  return started;
}

async function until<T>(what: string, check: () => T | undefined | Promise<T | undefined>, processes: Started[], timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    const dead = processes.find((p) => p.child.exitCode !== null);
    const output = processes.map((p) => `${p.stdout}\n${p.stderr}`).join('\n---\n');
    if (dead) throw new Error(`exited (${dead.child.exitCode}) before ${what}:\n${output}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Ctrl-C, as a terminal sends it: SIGINT to the whole group; resolves once every process in it is gone. */
async function stop(started: Started): Promise<void> {
  const pid = started.child.pid!;
  if (!groupAlive(pid)) return;
  process.kill(-pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (groupAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  if (groupAlive(pid)) {
    process.kill(-pid, 'SIGKILL');
    throw new Error(`did not stop within 15 s of Ctrl-C:\n${started.stderr}`);
  }
}

const installedFile = (...parts: string[]) => path.join(installed.dir, 'node_modules', 'meshnet', ...parts);

describe('the packed package', () => {
  it('holds the built files, the demo model and its metadata, and none of the sources or tests', () => {
    const paths = tarball.files.map((f) => f.path);
    const allowed = /^(package\.json|README\.md|CHANGELOG\.md|LICENSE|bin\/meshnet\.js|dist\/.+\.(js|mjs|d\.ts)|dist\/web\/.+|models\/aidreams260k\/.+)$/;
    expect(paths.filter((p) => !allowed.test(p))).toEqual([]);
    for (const file of ['LICENSE', 'CHANGELOG.md', 'README.md', 'dist/node/index.js', 'dist/node/index.d.ts', 'dist/browser/index.js', 'dist/browser/index.d.ts', 'dist/core/index.js', 'dist/node/cli/main.js', 'dist/node/peer/shard-worker-main.js', 'dist/node/provider-probe-child.mjs', 'dist/web/peer/app.js', 'dist/web/dashboard/app.js', 'dist/web/dashboard/index.html', 'models/aidreams260k/model.safetensors']) {
      expect(paths, file).toContain(file);
    }
    // Only the sources load tsx: its worker bootstrap stays out of the package.
    expect(paths).not.toContain('dist/node/peer/shard-worker.mjs');
    // Declarations name the built files: no `.ts` import is left in them.
    const leftovers = paths.filter((p) => p.endsWith('.d.ts') && /from\s+['"]\.{1,2}\/[^'"]+\.ts['"]/.test(readFileSync(installedFile(p), 'utf8')));
    expect(leftovers).toEqual([]);
    // The onnxruntime-web files the browser peer's bundle loads are in it, as onnxruntime-web ships them.
    const wanted = ortFilesNamedIn(readFileSync(installedFile('dist/web/peer/app.js'), 'utf8'));
    expect(wanted).toContain('ort-wasm-simd-threaded.asyncify.wasm');
    const ortDist = path.dirname(createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm'));
    for (const name of wanted) expect(readFileSync(installedFile('dist/web/ort', name)).equals(readFileSync(path.join(ortDist, name))), name).toBe(true);
    // A ceiling that catches a folder packed by mistake (today: about 8 MiB, mostly that wasm).
    expect(tarball.size).toBeLessThan(12 * 2 ** 20);
  });

  it('points bin and every export at files it holds, and names what a registry expects', () => {
    const manifest = JSON.parse(readFileSync(installedFile('package.json'), 'utf8'));
    expect(manifest.private).toBeUndefined();
    for (const field of ['description', 'keywords', 'repository', 'license', 'engines']) expect(manifest[field], field).toBeTruthy();
    const targets: string[] = [manifest.bin.meshnet];
    const walk = (value: unknown): void => {
      if (typeof value === 'string') targets.push(value);
      else if (value && typeof value === 'object') Object.values(value).forEach(walk);
    };
    walk(manifest.exports);
    for (const target of targets) expect(existsSync(installedFile(target)), target).toBe(true);
    expect(manifest.exports['.']).toMatchObject({ browser: expect.anything(), node: expect.anything(), default: expect.anything() });
    // Run-time dependencies only: the build tools are not installed with it.
    for (const tool of ['tsx', 'esbuild', 'typescript', 'vitest']) expect(existsSync(path.join(installed.dir, 'node_modules', tool)), tool).toBe(false);
  });

  it('`npx meshnet serve` serves the demo and `npx meshnet peer --head …` joins it: the README answer, through the peer', async () => {
    expect(readFileSync(path.join(REPO, 'README.md'), 'utf8')).toContain(DEMO_ANSWER);
    const serve = npx(['serve', '--port', '0', '--head-layers', 'none', '--device', 'cpu']);
    let peer: Started | undefined;
    try {
      const banner = await until('the banner', () => /peers\s+meshnet peer --head (\S+) --join-token (\S+)/.exec(serve.stdout) ?? undefined, [serve]);
      const [, peerUrl, token] = banner;
      const base = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(serve.stdout)![1]!;
      peer = npx(['peer', '--head', peerUrl!, '--join-token', token!, '--peer-id', 'installed-peer', '--memory-budget', '256', '--device', 'cpu']);
      const health = await until(
        'a route through the peer',
        async () => {
          const answer = await fetch(`${base}/health`).catch(() => undefined);
          const body = answer?.status === 200 ? ((await answer.json()) as { route: { hops: { peerId: string }[] } }) : undefined;
          return body?.route.hops.some((hop) => hop.peerId === 'installed-peer') ? body : undefined;
        },
        [serve, peer],
      );
      expect(health.route.hops.map((hop) => hop.peerId)).toEqual(['installed-peer']);
      const completion = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(HELLO) });
      expect(completion.status).toBe(200);
      const body = (await completion.json()) as { choices: { message: { content: string } }[] };
      expect(body.choices[0]!.message.content).toBe(DEMO_ANSWER);

      // The browser side comes from the build: the bundle and onnxruntime-web's files as packed.
      const app = await fetch(`${base}/peer/app.js`);
      expect(app.status).toBe(200);
      expect(await app.text()).toBe(readFileSync(installedFile('dist/web/peer/app.js'), 'utf8'));
      const wasm = await fetch(`${base}/ort/ort-wasm-simd-threaded.asyncify.wasm`);
      expect(wasm.status).toBe(200);
      expect((await wasm.arrayBuffer()).byteLength).toBe(readFileSync(installedFile('dist/web/ort/ort-wasm-simd-threaded.asyncify.wasm')).byteLength);
      const dashboard = await fetch(`${base}/dashboard`);
      expect(dashboard.status).toBe(200);
      expect(await dashboard.text()).toContain('app.js');
      expect((await fetch(`${base}/dashboard/chat.js`)).status).toBe(200);
    } finally {
      if (peer) await stop(peer);
      await stop(serve);
    }
    expect(serve.stderr).toContain('meshnet: shutting down');
  }, 180_000);

  it("the README's library example runs there: `import { startHead, startPeer } from 'meshnet'`, a head and a peer in one process", async () => {
    // The example as the README shows it; it asks the head through the `openai` client, which
    // the user installs beside meshnet (linked here from this checkout's node_modules).
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const example = /### As a library[\s\S]*?```js\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toContain("from 'meshnet'");
    expect(example).toContain("headLayers: 'none'"); // so the answer can only come through the peer
    await writeFile(path.join(installed.dir, 'example.mjs'), example!);
    await symlink(path.join(REPO, 'node_modules', 'openai'), path.join(installed.dir, 'node_modules', 'openai'), 'dir');
    const result = await run(process.execPath, ['example.mjs'], { cwd: installed.dir, env: cleanEnv({ MESHNET_HOME: home }), timeoutMs: 120_000 });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim().split('\n').at(-1)).toBe(DEMO_ANSWER);
    expect(result.stderr).toMatch(/peer node-\S+ joined \(node, auto, relay link\)/);
    const resolved = await run(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('meshnet'))"], { cwd: installed.dir });
    expect(resolved.stdout.trim()).toBe(`file://${installedFile('dist', 'node', 'index.js')}`);
  }, 150_000);

  it('types a consumer of its Node and browser entries, and refuses a wrong call', async () => {
    const dir = path.join(installed.dir, 'typed');
    await mkdir(dir, { recursive: true });
    // The calls type-check, and the wrong one is an error (were the types `any`, the unused
    // expect-error directive would fail the compile). The browser entry by its own name: the
    // `browser` condition of 'meshnet' is checked by the bundle below.
    await writeFile(
      path.join(dir, 'consumer.mts'),
      `import { startHead, startPeer, type MeshnetHead, type MeshnetPeer } from 'meshnet';
import { startPeer as startTab, runBrowserPeer, type BrowserPeerStatus } from 'meshnet/browser';
const head: MeshnetHead = await startHead({ port: 0, localPeers: 0 });
const peer: MeshnetPeer = await startPeer({ head: head.peerUrl, joinToken: head.joinToken });
const url: string = head.apiUrl;
// @ts-expect-error: a port is a number
await startHead({ port: 'eighty' });
const tab = await startTab({ head: head.peerUrl, device: 'wasm', onStatus: (status: BrowserPeerStatus) => console.log(status.state) });
tab.close();
export { peer, url, runBrowserPeer };
`,
    );
    const args = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2023,dom', '--types', 'node', '--skipLibCheck', path.join(dir, 'consumer.mts')];
    const typed = await run(process.execPath, [TSC, ...args], { cwd: installed.dir });
    expect(typed.code, typed.stdout).toBe(0);
  }, 120_000);

  it('its browser entry bundles for a browser, with nothing of Node in it', async () => {
    const entry = path.join(installed.dir, 'browser-app.js');
    await writeFile(entry, `import { startPeer } from 'meshnet';\nimport * as browser from 'meshnet/browser';\nwindow.join = () => startPeer({ head: 'ws://127.0.0.1:8080/peer/ws' });\nwindow.meshnet = browser;\n`);
    const result = await build({ entryPoints: [entry], bundle: true, write: false, platform: 'browser', format: 'esm', metafile: true, logLevel: 'silent', absWorkingDir: installed.dir });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((file) => file.startsWith('node_modules/meshnet/dist/browser/'))).toBe(true);
    expect(inputs.filter((file) => file.includes('onnxruntime-node') || file.startsWith('node_modules/meshnet/dist/node/'))).toEqual([]);
    expect(inputs.some((file) => file.includes('onnxruntime-web'))).toBe(true);
  }, 60_000);
});
