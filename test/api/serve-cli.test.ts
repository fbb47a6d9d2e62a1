/**
 * `meshnet serve` as a user runs it: on port 0 it prints the real API URL, the dashboard URL
 * and a curl example, and a request through the printed URL is answered (with a local peer).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, runCli } from '../cli/run-cli.ts';
import { tempDir } from '../engine/harness.ts';
import { STORIES_DIR } from './api-harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

let home: { dir: string; remove: () => Promise<void> };

beforeAll(async () => {
  home = await tempDir('api-serve');
});

afterAll(() => home?.remove());

/** Resolves with stdout once `done(stdout)` holds; rejects if the process exits first or after `timeoutMs`. */
function waitForOutput(child: ChildProcess, done: (stdout: string) => boolean, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`no complete banner within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`)), timeoutMs);
    child.stderr!.on('data', (d) => (stderr += d));
    child.stdout!.on('data', (d) => {
      stdout += d;
      if (done(stdout)) {
        clearTimeout(timer);
        resolve(stdout);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`meshnet serve exited with ${code}\nstdout: ${stdout}\nstderr: ${stderr}`));
    });
  });
}

/** SIGTERM (a clean shutdown closes the local peers too), then SIGKILL if it lingers. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

describe('meshnet serve', () => {
  it('--port 0 prints the real API URL, the dashboard URL and a curl example that works', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--model', STORIES_DIR, '--port', '0', '--local-peers', '1', '--device', 'cpu', '--threads', '1'], {
      env: { ...process.env, MESHNET_HOME: path.join(home.dir, 'home') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const stdout = await waitForOutput(child, (out) => /curl[\s\S]*max_tokens[^\n]*\n/.test(out), 90_000);
      const api = /^\s*API\s+(http:\/\/127\.0\.0\.1:(\d+)\/v1)\s*$/m.exec(stdout);
      expect(api, stdout).not.toBeNull();
      const [, apiUrl, port] = api!;
      expect(Number(port)).toBeGreaterThan(0);
      expect(stdout).toMatch(new RegExp(`^\\s*dashboard\\s+http://127\\.0\\.0\\.1:${port}/dashboard\\s*$`, 'm'));
      expect(stdout).toContain(`curl ${apiUrl}/chat/completions`);
      expect(stdout).toContain('"model": "stories260k"');
      expect(stdout).not.toMatch(/:0\//);

      const base = apiUrl.replace(/\/v1$/, '');
      const deadline = Date.now() + 60_000;
      let health: { ready: boolean; peers: { runtime: string }[] } | undefined;
      while (Date.now() < deadline) {
        health = await (await specFetch(`${base}/health`)).json();
        if (health!.ready && health!.peers.some((p) => p.runtime === 'node')) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(health?.ready).toBe(true);

      const client = new OpenAI({ baseURL: apiUrl, apiKey: 'unused', maxRetries: 0, fetch: specFetch });
      const completion = await client.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 4, temperature: 0 });
      expect(completion.choices[0].text).toBe('t461 t461 t401 t401');
      const chat = await client.chat.completions.create({ model: 'stories260k', messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 4 });
      expect(chat.choices[0].message.role).toBe('assistant');
      expect(chat.usage?.completion_tokens).toBe(4);

      // The printed curl example, pasted into a shell as a user would (skipped only without curl).
      if (existsSync('/usr/bin/curl')) {
        const example = stdout.slice(stdout.indexOf('  curl ')).split('\n').slice(0, 2).join('\n');
        const { stdout: answer } = await promisify(execFile)('sh', ['-c', `${example.trim()} --silent --fail`]);
        const body = JSON.parse(answer);
        expect(body.object).toBe('chat.completion');
        // Greedy (the example sets temperature 0); it may meet the end-of-text token before 32.
        expect(body.usage.completion_tokens).toBeGreaterThan(0);
        expect(body.usage.completion_tokens).toBeLessThanOrEqual(32);
        expect(['stop', 'length']).toContain(body.choices[0].finish_reason);
      }
    } finally {
      await stop(child);
    }
  }, 120_000);

  it('--cors refuses an entry that is not an origin, naming it, and --help lists the option', async () => {
    const bad = await runCli(['serve', '--cors', 'http://localhost:5173,example.com'], { MESHNET_HOME: path.join(home.dir, 'home') });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--cors: 'example.com' is not an origin");
    const help = await runCli(['serve', '--help']);
    expect(help.stdout).toContain('--cors ORIGINS');
  });
});
