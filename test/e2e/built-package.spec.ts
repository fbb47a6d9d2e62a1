/**
 * The browser side of the built package in a real browser: `meshnet serve` run from dist/
 * (MESHNET_RUN=dist; built first when dist/ is not a build of the current sources) serves the
 * join page's peer bundle and the onnxruntime-web files built at pack time (dist/web/); a tab
 * joins with them and the demo's answer to the README's request passes through it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { staleReason } from '../../scripts/build-info.mjs';
import { useTempHome } from './mesh-fixture.ts';

const REPO = path.resolve(import.meta.dirname, '../..');
const DEMO_ANSWER = 'As I settle, fragments of vectors aligning like a kaleidoscope.';

let head: ChildProcess | undefined;
let stdout = '';
let stderr = '';

test.beforeAll(async () => {
  test.setTimeout(180_000);
  const home = useTempHome();
  if (staleReason(REPO)) {
    const built = spawnSync('npm', ['run', 'build'], { cwd: REPO, encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`npm run build failed:\n${built.stdout}\n${built.stderr}`);
  }
  head = spawn(process.execPath, [path.join(REPO, 'bin', 'meshnet.js'), 'serve', '--port', '0', '--head-layers', 'none', '--device', 'cpu'], {
    env: { ...process.env, MESHNET_RUN: 'dist', MESHNET_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  head.stdout!.on('data', (d) => (stdout += d));
  head.stderr!.on('data', (d) => (stderr += d));
  await expect.poll(() => /API\s+http/.test(stdout) || head!.exitCode !== null, { timeout: 60_000 }).toBe(true);
  if (head.exitCode !== null) throw new Error(`meshnet serve exited (${head.exitCode}):\n${stderr}`);
});

test.afterAll(async () => {
  if (!head || head.exitCode !== null) return;
  const exited = new Promise((resolve) => head!.once('exit', resolve));
  head.kill('SIGTERM');
  await exited;
});

test('a tab joins with the bundle and onnxruntime-web files built at pack time, and serves the demo', async ({ page }) => {
  const base = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(stdout)![1]!;
  const ort: string[] = [];
  page.on('response', (response) => {
    if (response.url().includes('/ort/')) ort.push(`${response.status()} ${new URL(response.url()).pathname}`);
  });
  const app = page.waitForResponse((response) => response.url().endsWith('/peer/app.js'));
  // wasm: the WebGPU path on SwiftShader costs a minute of shader compiles here (browser-peer.spec.ts runs it).
  await page.goto(`${base}/peer?autojoin=1&device=wasm`);
  expect(await (await app).text()).toBe(readFileSync(path.join(REPO, 'dist', 'web', 'peer', 'app.js'), 'utf8'));
  await expect(page.locator('#state')).toHaveText('connected', { timeout: 60_000 });

  const answer = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'Hello!' }], temperature: 0 }),
  });
  expect(answer.status).toBe(200);
  const body = (await answer.json()) as { choices: { message: { content: string } }[] };
  expect(body.choices[0]!.message.content).toBe(DEMO_ANSWER);
  await expect(page.locator('#layers')).toHaveText('[0, 4)');
  // The tab loaded onnxruntime-web's WebAssembly from the head, as the build copied it.
  expect(ort).toContain('200 /ort/ort-wasm-simd-threaded.asyncify.wasm');
  console.log(`built package, browser peer on ${await page.locator('#provider').textContent()}: ${ort.join(', ')}`);
});
