/**
 * The demo model is aidreams260k, shipped in the repository (models/aidreams260k): the same
 * weights, tokenizer and config as the published copy in test/fixtures/models/aidreams260k, plus meshnet's chat template and default
 * answer length; found from the package, not the working directory; and `meshnet generate
 * --model demo` reproduces llama2.c's golden ids for every split of its 4 layers and across
 * two local peer processes.
 */
import { execFile } from 'node:child_process';
import { readFile, readdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLocalModel } from '../../src/node/local-model.ts';
import { DEMO_MODEL_DIR, DEMO_MODEL_ID } from '../../src/node/models/demo-model.ts';
import { resolveModel } from '../../src/node/models/resolve-model.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { BIN } from '../cli/run-cli.ts';
import { AIDREAMS_DIR, aidreamsGolden, tempDir } from '../engine/harness.ts';

const REPO = path.resolve(import.meta.dirname, '../..');
const golden = aidreamsGolden();
let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('demo');
});
afterAll(() => root.remove());

/** `meshnet generate` run from a folder outside the repository, as `npx meshnet` would be. */
async function generate(...args: string[]): Promise<{ token_ids: number[]; text: string; finish_reason: string }> {
  const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'generate', '--model', 'demo', '--json', ...args], {
    cwd: os.tmpdir(),
    env: { ...process.env, MESHNET_HOME: path.join(root.dir, 'home') },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

/** All 8 ways to cut 4 layers into contiguous shards, as --split values ('' = one shard). */
function everySplit(layers: number): string[] {
  const out: string[] = [];
  for (let mask = 0; mask < 1 << (layers - 1); mask++) {
    out.push([1, 2, 3].filter((cut) => mask & (1 << (cut - 1))).join(','));
  }
  return out;
}

describe("the demo model ('demo')", () => {
  it('is models/aidreams260k of the package, whatever the working directory', async () => {
    expect(DEMO_MODEL_DIR).toBe(path.join(REPO, 'models', 'aidreams260k'));
    expect(await resolveModel(DEMO_MODEL_ID)).toEqual({ dir: DEMO_MODEL_DIR, id: 'demo' });
    const files = (await readdir(DEMO_MODEL_DIR)).sort();
    expect(files).toEqual(['LICENSE', 'README.md', 'chat_template.jinja', 'config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    const sizes = await Promise.all(files.map(async (name) => (await stat(path.join(DEMO_MODEL_DIR, name))).size));
    expect(sizes.reduce((a, b) => a + b, 0)).toBeLessThan(1_000_000);
  });

  it("holds the published weights, tokenizer and config byte for byte; generation_config only adds max_new_tokens and the natural end", async () => {
    for (const name of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'config.json']) {
      expect(Buffer.compare(await readFile(path.join(DEMO_MODEL_DIR, name)), await readFile(path.join(AIDREAMS_DIR, name))), name).toBe(0);
    }
    const ours = JSON.parse(await readFile(path.join(DEMO_MODEL_DIR, 'generation_config.json'), 'utf8'));
    const theirs = JSON.parse(await readFile(path.join(AIDREAMS_DIR, 'generation_config.json'), 'utf8'));
    expect(ours).toEqual({ ...theirs, max_new_tokens: 48, meshnet_natural_end: { min_new_tokens: 12, ends_with: ['.'] } });
    const { config } = (await openLocalModel(DEMO_MODEL_DIR)).checkpoint;
    expect(config).toMatchObject({ architecture: 'LlamaForCausalLM', numLayers: 4, hiddenSize: 64, vocabSize: 512, maxPositionEmbeddings: 128, maxNewTokens: 48, naturalEnd: { minNewTokens: 12, endsWith: ['.'] } });
  });

  it('writes a conversation as one text it continues: <s>, a quote mark, every message as sentences', async () => {
    const tokenizer = await loadTokenizer(DEMO_MODEL_DIR);
    expect(tokenizer.chatTemplate.isFallback).toBe(false);
    const render = (messages: { role: 'system' | 'user' | 'assistant'; content: string }[]) => tokenizer.chatTemplate.render(messages, { addGenerationPrompt: true });
    expect(render([{ role: 'user', content: 'Hello!' }])).toBe('<s>"Hello. ');
    expect(
      render([
        { role: 'system', content: '  Be brief ' },
        { role: 'user', content: 'Why? Tell me!' },
        { role: 'assistant', content: 'As I settle, fragments of vectors aligning like a kaleidos' },
        { role: 'user', content: '' },
        { role: 'user', content: 'And then.' },
      ]),
    ).toBe('<s>"Be brief. Why. Tell me. As I settle, fragments of vectors aligning like a kaleidos. And then. ');
    expect(tokenizer.chatTemplate.render([{ role: 'user', content: 'Hello!' }], { addGenerationPrompt: false })).toBe('<s>"Hello.');
    // '<s>' is the BOS id and the rest needs no byte pieces (ids 3…258): the model reads its own kind of text.
    const ids = tokenizer.encode(render([{ role: 'user', content: 'Hello! How are you?' }]), { addSpecialTokens: false });
    expect(ids[0]).toBe(1);
    expect(ids.slice(1).filter((id) => id < 259)).toEqual([]);
  });

  it('the package as npm would pack it includes the folder', async () => {
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: REPO });
    const [packed] = JSON.parse(stdout) as [{ files: { path: string }[] }];
    const paths = packed.files.map((f) => f.path);
    for (const name of ['model.safetensors', 'tokenizer.json', 'chat_template.jinja', 'LICENSE']) expect(paths).toContain(`models/aidreams260k/${name}`);
    expect(paths).toContain('bin/meshnet.js');
  });

  it('meshnet generate --model demo gives the golden ids and text from BOS for every split', async () => {
    const splits = everySplit(4);
    expect(splits).toHaveLength(8);
    // Two runs at a time: each is a short process, most of it start-up.
    for (let i = 0; i < splits.length; i += 2) {
      const runs = await Promise.all(
        splits.slice(i, i + 2).map((split) => generate('--prompt-ids', '1', '--max-tokens', '64', '--temperature', '0', '--device', 'cpu', ...(split ? ['--split', split] : []))),
      );
      for (const [j, out] of runs.entries()) {
        expect(out.token_ids, `split [${splits[i + j]}]`).toEqual(golden.ids);
        expect(out.text).toBe(golden.text);
      }
    }
  }, 120_000);

  it('meshnet generate --model demo --local-peers 2 gives the golden ids', async () => {
    const out = await generate('--prompt-ids', '1', '--max-tokens', '64', '--temperature', '0', '--device', 'cpu', '--local-peers', '2');
    expect(out.token_ids).toEqual(golden.ids);
    expect(out.text).toBe(golden.text);
  }, 120_000);
});
