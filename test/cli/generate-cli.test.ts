/** `meshnet generate` as a user runs it: JSON output, text prompts, artifact cache, refusals. */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINY_PRESETS, writeTinyCheckpoint } from '../fixtures/checkpoints.ts';
import { STORIES_DIR, STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { runCli } from './run-cli.ts';

let root: { dir: string; remove: () => Promise<void> };
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  root = await tempDir('cli');
  env = { MESHNET_HOME: path.join(root.dir, 'home') };
});
afterAll(() => root.remove());

describe('meshnet generate', () => {
  it('--help lists the subcommands', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/generate/);
  });

  it('prints one JSON line with the golden greedy ids, and caches the artifacts', async () => {
    const args = ['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--max-tokens', '32', '--temperature', '0', '--split', '2,4', '--device', 'cpu', '--json'];
    const first = await runCli(args, env);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0]);
    expect(out.token_ids).toEqual(STORIES_GOLDEN);
    expect(out.text).toBe(STORIES_GOLDEN.map((id) => `t${id}`).join(' '));
    expect(out.finish_reason).toBe('length');
    expect(out.device).toBe('cpu');

    const [modelKey] = await readdir(path.join(root.dir, 'home', 'artifacts'));
    const parts = (await readdir(path.join(root.dir, 'home', 'artifacts', modelKey))).sort();
    expect(parts).toEqual(['embedding-fp32-fp32', 'head-fp32-fp32', 'layers-0-2-fp32-fp32', 'layers-2-4-fp32-fp32', 'layers-4-5-fp32-fp32']);
    expect((await readdir(path.join(root.dir, 'home', 'artifacts', modelKey, 'layers-0-2-fp32-fp32'))).sort()).toEqual(['graph.onnx', 'manifest.json', 'weights.bin']);

    const second = await runCli(args, env);
    expect(JSON.parse(second.stdout).token_ids).toEqual(STORIES_GOLDEN);
  });

  it('tokenizes --prompt with the tokenizer (no BOS for stories260k) and samples with a seed reproducibly', async () => {
    const args = ['generate', '--model', STORIES_DIR, '--prompt', '<s> t461', '--max-tokens', '12', '--temperature', '0.9', '--top-p', '0.9', '--seed', '7', '--json'];
    const a = JSON.parse((await runCli(args, env)).stdout);
    const b = JSON.parse((await runCli(args, env)).stdout);
    expect(a.prompt_ids).toEqual([1, 461]);
    expect(a.token_ids).toEqual(b.token_ids);
    expect(a.token_ids.length).toBeGreaterThan(0);
  });

  it('stops at the model\'s end-of-sequence id, without emitting it', async () => {
    const dir = path.join(root.dir, 'eos');
    await writeTinyCheckpoint(dir, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 21 });
    const args = ['generate', '--model', dir, '--prompt-ids', '1,5', '--max-tokens', '6', '--temperature', '0', '--json'];
    const free = JSON.parse((await runCli(args, env)).stdout);
    expect(free.finish_reason).toBe('length');
    expect(free.token_ids).toHaveLength(6);
    const eos = free.token_ids[3];
    const cut = free.token_ids.indexOf(eos);
    for (const file of ['config.json', 'generation_config.json']) {
      const json = JSON.parse(await readFile(path.join(dir, file), 'utf8'));
      json.eos_token_id = eos;
      await writeFile(path.join(dir, file), JSON.stringify(json));
    }
    const stopped = JSON.parse((await runCli(args, env)).stdout);
    expect(stopped.finish_reason).toBe('stop');
    expect(stopped.token_ids).toEqual(free.token_ids.slice(0, cut));
  });

  it('refuses bad input with clear messages', async () => {
    const nowhere = await runCli(['generate', '--model', path.join(root.dir, 'nope'), '--prompt-ids', '1'], env);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toMatch(/not a folder, not 'demo', not a Hub id/);

    const { mkdir } = await import('node:fs/promises');
    await mkdir(path.join(root.dir, 'empty'), { recursive: true });
    const missing = await runCli(['generate', '--model', path.join(root.dir, 'empty'), '--prompt-ids', '1'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/config\.json: not found/);

    const device = await runCli(['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--device', 'tpu'], env);
    expect(device.code).toBe(2);
    expect(device.stderr).toMatch(/auto, cuda, webgpu, cpu, wasm/);

    const both = await runCli(['generate', '--model', STORIES_DIR], env);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/exactly one of --prompt/);

    const context = await runCli(['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--max-tokens', '600'], env);
    expect(context.code).toBe(2);
    expect(context.stderr).toMatch(/context of 512/);

    const badSplit = await runCli(['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--split', '4,2'], env);
    expect(badSplit.code).toBe(1);
    expect(badSplit.stderr).toMatch(/split points/);

    const badId = await runCli(['generate', '--model', STORIES_DIR, '--prompt-ids', '9999', '--max-tokens', '2'], env);
    expect(badId.code).toBe(1);
    expect(badId.stderr).toMatch(/outside the vocabulary/);
  });

  it('generates past the sliding window (windowed attention, no refusal)', async () => {
    const dir = path.join(root.dir, 'mistral-window');
    await writeTinyCheckpoint(dir, { ...TINY_PRESETS.mistral, dtype: 'F32', seed: 3, slidingWindow: 16 });
    const result = await runCli(['generate', '--model', dir, '--prompt-ids', '1,2,3', '--max-tokens', '20', '--json', '--temperature', '0'], env);
    expect(result.code, result.stderr).toBe(0);
    const tooLong = await runCli(['generate', '--model', dir, '--prompt-ids', '1,2,3', '--max-tokens', '300'], env);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toMatch(/exceed the context of 256/);
  });

  it('refuses an unsupported architecture, naming it and the supported list', async () => {
    const dir = path.join(root.dir, 'gpt2');
    await writeTinyCheckpoint(dir, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 3 });
    const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
    config.architectures = ['GPT2LMHeadModel'];
    await writeFile(path.join(dir, 'config.json'), JSON.stringify(config));
    const result = await runCli(['generate', '--model', dir, '--prompt-ids', '1'], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/GPT2LMHeadModel/);
    expect(result.stderr).toMatch(/LlamaForCausalLM/);
    expect(result.stderr).toMatch(/Qwen3ForCausalLM/);
  });
});
