/**
 * `meshnet generate --weights …` as a user runs it, on the trained aidreams260k: the same
 * greedy text from one process and from two peer processes the head assigns q4 to, an
 * artifact cache that a second start (or another accuracy level) does not rebuild, greedy
 * with speculation equal to without it, and flag refusals.
 */
import { existsSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../engine/harness.ts';
import { type CliResult, runCli } from './run-cli.ts';

const AIDREAMS = path.resolve(import.meta.dirname, '../fixtures/models/aidreams260k');
const GREEDY = ['generate', '--model', AIDREAMS, '--prompt-ids', '1', '--max-tokens', '24', '--temperature', '0', '--device', 'cpu', '--json'];

let root: { dir: string; remove: () => Promise<void> };
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  root = await tempDir('weights-cli');
  env = { MESHNET_HOME: path.join(root.dir, 'home') };
});
afterAll(() => root.remove());

/** CPU greedy runs by their extra flags, run once per file (the WebGPU leg compares to the q4 exact-level run the first test makes). */
const cpuRuns = new Map<string, Promise<CliResult>>();
function cpuRun(flags: string[]): Promise<CliResult> {
  const key = flags.join(' ');
  if (!cpuRuns.has(key)) cpuRuns.set(key, runCli([...GREEDY, ...flags], env));
  return cpuRuns.get(key)!;
}

async function artifactFolder(part: string): Promise<string> {
  const [key] = await readdir(path.join(root.dir, 'home', 'artifacts'));
  return path.join(root.dir, 'home', 'artifacts', key, part);
}

describe('meshnet generate --weights', () => {
  it('q4: two peer processes give the one-process tokens; a second start and another accuracy level rebuild nothing', async () => {
    const one = await runCli([...GREEDY, '--weights', 'q4'], env);
    expect(one.code, one.stderr).toBe(0);
    const alone = JSON.parse(one.stdout);
    expect(alone.weights).toBe('q4-b32-acc4');
    expect(alone.token_ids).toHaveLength(24);

    const weightsFile = path.join(await artifactFolder('layers-0-4-fp32-q4-b32-acc4'), 'weights.bin');
    const built = await stat(weightsFile);
    const again = await runCli([...GREEDY, '--weights', 'q4'], env);
    expect(JSON.parse(again.stdout).token_ids).toEqual(alone.token_ids);
    const reused = await stat(weightsFile);
    expect(reused.mtimeMs).toBe(built.mtimeMs); // nothing rebuilt
    expect(reused.ino).toBe(built.ino);

    // Level 0 is another graph over the same packed weights: shared, not re-quantized.
    const exact = await cpuRun(['--weights', 'q4', '--accuracy-level', '0']);
    expect(exact.code, exact.stderr).toBe(0);
    expect(JSON.parse(exact.stdout).weights).toBe('q4-b32-acc0');
    expect((await stat(path.join(await artifactFolder('layers-0-4-fp32-q4-b32-acc0'), 'weights.bin'))).ino).toBe(built.ino);

    const peers = await runCli([...GREEDY, '--weights', 'q4', '--local-peers', '2'], env, 180_000);
    expect(peers.code, peers.stderr).toBe(0);
    const distributed = JSON.parse(peers.stdout);
    expect(distributed.hops).toHaveLength(2);
    expect(distributed.weights).toBe('q4-b32-acc4');
    expect(distributed.token_ids).toEqual(alone.token_ids);
  });

  it('q8 at block 64 keeps the fp32 greedy text of this trained model', async () => {
    const fp32 = JSON.parse((await runCli(GREEDY, env)).stdout);
    const q8 = await runCli([...GREEDY, '--weights', 'q8', '--quant-block', '64'], env);
    expect(q8.code, q8.stderr).toBe(0);
    expect(JSON.parse(q8.stdout).weights).toBe('q8-b64-acc4');
    expect(JSON.parse(q8.stdout).token_ids).toEqual(fp32.token_ids);
  });

  const swiftshader = '/usr/lib/chromium/vk_swiftshader_icd.json';
  // Skipped only where Chromium (and so its software Vulkan) is not installed; .ci/run installs it.
  it.skipIf(!existsSync(swiftshader))('q4 and q8 on onnxruntime-node WebGPU over SwiftShader give the CPU provider\'s exact-level tokens', async () => {
    const gpu = { ...env, LD_LIBRARY_PATH: '/usr/lib/chromium', VK_ICD_FILENAMES: swiftshader };
    // 12 of the CPU run's 24 greedy tokens: each WebGPU token costs ~0.2 s on SwiftShader.
    const onGpu = GREEDY.map((a) => (a === 'cpu' ? 'webgpu' : a === '24' ? '12' : a));
    for (const format of ['q4', 'q8']) {
      const flags = ['--weights', format, '--accuracy-level', '0'];
      const cpu = JSON.parse((await cpuRun(flags)).stdout);
      const result = await runCli([...onGpu, ...flags], gpu);
      expect(result.code, result.stderr).toBe(0);
      const out = JSON.parse(result.stdout);
      expect(out.device).toBe('webgpu');
      expect(out.token_ids).toHaveLength(12);
      expect(out.token_ids, format).toEqual(cpu.token_ids.slice(0, 12));
    }
  }, 120_000);

  it('refuses unknown formats, block sizes and levels, and fp32 weights under fp16 activations', async () => {
    for (const [flags, message] of [
      [['--weights', 'q3'], /--weights: 'q3' is not one of fp32, fp16, q8, q4/],
      [['--weights', 'q4', '--quant-block', '48'], /--quant-block: '48' is not one of 32, 64, 128/],
      [['--weights', 'q4', '--accuracy-level', '2'], /--accuracy-level: '2' is not one of 0, 4/],
      [['--weights', 'fp16', '--quant-block', '64'], /apply to q8 and q4/],
      [['--weights', 'fp32', '--dtype', 'fp16'], /fp32 weights need fp32 activations/],
    ] as const) {
      const result = await runCli([...GREEDY, ...flags], env);
      expect(result.code, flags.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });

  it('q4 at the exact level and q8: greedy with speculation gives the tokens without it', async () => {
    // A prompt whose answer repeats phrases, so prompt lookup drafts and some drafts are kept.
    const hello = ['generate', '--model', AIDREAMS, '--prompt', '"Hello. ', '--max-tokens', '64', '--temperature', '0', '--device', 'cpu', '--json'];
    for (const flags of [['--weights', 'q4', '--accuracy-level', '0'], ['--weights', 'q8']]) {
      const [off, on] = await Promise.all([runCli([...hello, ...flags, '--speculate', 'off'], env), runCli([...hello, ...flags, '--speculate', 'ngram'], env)]);
      expect(off.code, off.stderr).toBe(0);
      expect(on.code, on.stderr).toBe(0);
      const plain = JSON.parse(off.stdout);
      const speculative = JSON.parse(on.stdout);
      expect(speculative.token_ids, flags.join(' ')).toEqual(plain.token_ids);
      expect(speculative.speculation.accepted, flags.join(' ')).toBeGreaterThan(0);
      expect(speculative.speculation.steps).toBeLessThan(plain.speculation.steps);
    }
  });
});
