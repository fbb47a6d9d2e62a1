/**
 * A newcomer's first run, exactly as the README says: `npm start -- --port 0`, then the
 * printed curl. On a machine without Vulkan (VK_ICD_FILENAMES=/nonexistent, and once more
 * with Chromium's Vulkan loader on the library path but no driver, where Dawn itself would
 * print "Found no drivers!"), every line of the output is one we expect — npm's own, the
 * banner, and meshnet's: one line per process saying where it runs what and why the other
 * providers were skipped. No line comes from Dawn or onnxruntime's native logs. The curl
 * gets the answer the README quotes.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../engine/harness.ts';

const REPO = path.resolve(import.meta.dirname, '../..');
/** What the printed curl gets from the demo (greedy): quoted in the README. */
const CURL_ANSWER = 'As I settle, fragments of vectors aligning like a kaleidoscope.';

let home: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  home = await tempDir('first-run');
});
afterAll(() => home?.remove());

interface Run {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
}

function npmStart(env: Record<string, string>): Run {
  // Its own process group, so stopping it reaches npm, the head and the local peers alike.
  // A user's shell: none of the npm_* variables of the npm that runs these tests.
  const shell = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  const child = spawn('npm', ['start', '--', '--port', '0'], { cwd: REPO, env: { ...shell, ...env, MESHNET_HOME: path.join(home.dir, 'home') }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const run: Run = { child, stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => (run.stdout += d));
  child.stderr!.on('data', (d) => (run.stderr += d));
  return run;
}

async function until(run: Run, check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (run.child.exitCode !== null) throw new Error(`npm start exited (${run.child.exitCode}) before ${what}\n${run.stdout}\n${run.stderr}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${run.stdout}\n${run.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Ctrl-C: SIGINT to the whole process group, as a terminal sends it. */
async function stop(run: Run): Promise<void> {
  if (run.child.exitCode !== null || run.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => run.child.once('close', () => resolve()));
  process.kill(-run.child.pid!, 'SIGINT');
  const timer = setTimeout(() => process.kill(-run.child.pid!, 'SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Every line `npm start` may print on stderr; `skipped` is the providers' reasons (a pattern). */
function expectedStderr(skipped: string): RegExp[] {
  const peer = '\\[local-[12]\\] meshnet peer: ';
  return [
    /^npm warn Unknown project config "onnxruntime-node-install"\. This will stop working in the next major version of npm\. See `npm help npmrc` for supported config options\.$/,
    new RegExp(`^meshnet: head runs the embedding, LM head and its own layers on cpu \\(${skipped}\\)$`),
    /^meshnet: peer local-[12] joined \(node, auto, relay link\)$/,
    // The head listens on loopback by default, so it is not announced on the LAN (#26).
    /^meshnet: not announced on the LAN: the head listens on 127\.0\.0\.1 only \(serve with --host 0\.0\.0\.0 to be found\)$/,
    new RegExp(`^meshnet: ${peer}joined ws://127\\.0\\.0\\.1:\\d+/peer/ws as local-[12]$`),
    new RegExp(`^meshnet: ${peer}loaded layers \\[\\d, \\d\\) on cpu \\(${skipped}\\) in \\d+ ms$`),
    new RegExp(`^meshnet: ${peer}loaded layers \\[\\d, \\d\\) on cpu in \\d+ ms$`), // a later load (the plan changed)
    /^meshnet: shutting down$/,
    /^meshnet: peer local-[12] left$/,
    // A peer whose head went away before its own Ctrl-C arrived exits 1, saying so.
    new RegExp(`^meshnet: ${peer}(error: )?the head connection ended \\(.+\\); exiting$`),
  ];
}

const STDOUT = [
  /^> meshnet@\d+\.\d+\.\d+ start$/,
  /^> node bin\/meshnet\.js serve --local-peers 2 --port 0$/,
  /^meshnet is serving demo$/,
  /^ {2}API {8}http:\/\/127\.0\.0\.1:\d+\/v1$/,
  /^ {2}dashboard {2}http:\/\/127\.0\.0\.1:\d+\/dashboard$/,
  /^ {2}chat {7}http:\/\/127\.0\.0\.1:\d+\/dashboard\/chat$/,
  /^ {2}peers {6}meshnet peer --head ws:\/\/127\.0\.0\.1:\d+\/peer\/ws --join-token [0-9a-f]{32}$/,
  /^ {2}join page {2}http:\/\/127\.0\.0\.1:\d+\/peer$/,
  /^Try it:$/,
  /^ {2}curl http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions -H "Content-Type: application\/json" \\$/,
  /^ {4}-d '\{ "model": "demo", "messages": \[ \{ "role": "user", "content": "Hello!" \} \], "temperature": 0 \}'$/,
];

const variants: [string, Record<string, string>, string][] = [['no Vulkan at all', { VK_ICD_FILENAMES: '/nonexistent' }, '']];
// Chromium ships a Vulkan loader: with it on the library path, only the driver is missing.
if (existsSync('/usr/lib/chromium/libvulkan.so.1')) variants.push(['a Vulkan loader but no driver', { LD_LIBRARY_PATH: '/usr/lib/chromium', VK_ICD_FILENAMES: '/nonexistent' }, 'driver']);

describe('npm start -- --port 0, the way the README says', () => {
  it.each(variants)('%s: only the lines we expect, then the printed curl gets the quoted answer', async (_, env, kind) => {
    const run = npmStart(env);
    try {
      await until(run, () => /-d '.*'\n/.test(run.stdout) && (run.stderr.match(/loaded layers/g)?.length ?? 0) >= 2, 'the banner and both peers loaded');
      const base = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(run.stdout)![1]!;
      // Loaded is not yet routable: /health turns 200 once each range answered its warm-up frame (#27).
      const healthDeadline = Date.now() + 15_000;
      let health = await fetch(`${base}/health`);
      while (health.status !== 200 && Date.now() < healthDeadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        health = await fetch(`${base}/health`);
      }
      expect(health.status).toBe(200);

      if (kind === '') {
        // The printed curl, pasted into a shell as a user would (skipped only without curl).
        const example = run.stdout.slice(run.stdout.indexOf('  curl ')).split('\n').slice(0, 2).join('\n');
        if (existsSync('/usr/bin/curl')) {
          const { stdout } = await promisify(execFile)('sh', ['-c', `${example.trim()} --silent --fail`]);
          const body = JSON.parse(stdout);
          expect(body.choices[0].message.content).toBe(CURL_ANSWER);
          expect(body.choices[0].finish_reason).toBe('stop'); // the demo's natural end, after 12 tokens
          expect(body.usage.completion_tokens).toBe(36);
        }
        expect(readFileSync(path.join(REPO, 'README.md'), 'utf8')).toContain(CURL_ANSWER);
      }
    } finally {
      await stop(run);
    }
    // Without a loader on the library path, a machine may still have one installed system-wide.
    const noDriver = escape('no Vulkan driver: VK_ICD_FILENAMES=/nonexistent names no driver manifest');
    const noLoader = escape('no Vulkan loader: libvulkan.so.1 not found');
    const skipped = `${escape('cuda skipped: its attention needs --dtype fp16; webgpu skipped: ')}(${kind === '' ? `${noLoader}|${noDriver}` : noDriver})`;
    const expected = expectedStderr(skipped);
    const unexpected = lines(run.stderr).filter((line) => !expected.some((pattern) => pattern.test(line)));
    expect(unexpected, run.stderr).toEqual([]);
    expect(lines(run.stdout).filter((line) => !STDOUT.some((pattern) => pattern.test(line))), run.stdout).toEqual([]);
    // One line per process says where it runs what: the head once, each peer on its first load.
    expect(lines(run.stderr).filter((line) => line.includes('head runs'))).toHaveLength(1);
    for (const peer of ['local-1', 'local-2']) expect(lines(run.stderr).filter((line) => line.includes(`[${peer}]`) && line.includes('skipped'))).toHaveLength(1);
  }, 120_000);
});
