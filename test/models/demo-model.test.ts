import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLocalModel } from '../../src/node/local-model.ts';
import { DEMO_MODEL_ID, ensureDemoModel } from '../../src/node/models/demo-model.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { runCli } from '../cli/run-cli.ts';

let root: string;
let dir: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'meshnet-demo-'));
  dir = await ensureDemoModel(path.join(root, 'home-a'));
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('demo model', () => {
  it("is generated under <home>/models/demo-v1 and named 'demo'", () => {
    expect(dir).toBe(path.join(root, 'home-a', 'models', 'demo-v1'));
    expect(DEMO_MODEL_ID).toBe('demo');
  });

  it('is deterministic: two homes get byte-identical files', async () => {
    const other = await ensureDemoModel(path.join(root, 'home-b'));
    const names = (await readdir(dir)).sort();
    expect((await readdir(other)).sort()).toEqual(names);
    expect(names).toEqual(['README.md', 'config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    for (const name of names) {
      expect(Buffer.compare(await readFile(path.join(dir, name)), await readFile(path.join(other, name))), name).toBe(0);
    }
  });

  it('is reused once generated, and concurrent first uses agree', async () => {
    expect(await ensureDemoModel(path.join(root, 'home-a'))).toBe(dir);
    const home = path.join(root, 'home-c');
    const dirs = await Promise.all([ensureDemoModel(home), ensureDemoModel(home), ensureDemoModel(home)]);
    expect(new Set(dirs)).toEqual(new Set([path.join(home, 'models', 'demo-v1')]));
    expect(await readdir(path.join(home, 'models'))).toEqual(['demo-v1']); // no temp folders left
  });

  it('opens with openLocalModel as a small Llama with tied embeddings', async () => {
    const { checkpoint } = await openLocalModel(dir);
    const { config } = checkpoint;
    expect(config).toMatchObject({
      architecture: 'LlamaForCausalLM',
      hiddenSize: 256,
      numLayers: 4,
      numHeads: 8,
      numKvHeads: 4,
      intermediateSize: 688,
      maxPositionEmbeddings: 2048,
      tieWordEmbeddings: true,
    });
    expect(config.vocabSize).toBeGreaterThanOrEqual(512);
    expect(config.vocabSize).toBeLessThanOrEqual(4096);
    const parameters = [...checkpoint.tensors.values()].reduce((sum, t) => sum + t.shape.reduce((a, b) => a * b, 1), 0);
    expect(parameters).toBeGreaterThan(2_000_000);
    expect(parameters).toBeLessThan(10_000_000);
    expect(new Set([...checkpoint.tensors.values()].map((t) => t.dtype))).toEqual(new Set(['F32']));
  });

  it('has a real byte-level BPE tokenizer that round-trips any text', async () => {
    const tokenizer = await loadTokenizer(dir);
    const samples = ['Hello, world!', 'The model is split across machines.', 'café naïve Ünïcödé 日本語', 'emoji 🙂👍🏽🧑‍💻 ok', ' leading  and trailing spaces \n\ttabs\r\n', ''];
    for (const text of samples) {
      const ids = tokenizer.encode(text, { addSpecialTokens: false });
      expect(tokenizer.decode(ids), JSON.stringify(text)).toBe(text);
    }
    // Merges learned from the corpus: common English takes far fewer tokens than bytes.
    const common = 'The model reads the tokens and the layers keep the cache.';
    expect(tokenizer.encode(common, { addSpecialTokens: false }).length).toBeLessThan(common.length / 2.5);
    // Special tokens: bos is added by default, and special-token text maps to its id.
    const bos = tokenizer.bosTokenId!;
    expect(tokenizer.encode('Hi')[0]).toBe(bos);
    expect(tokenizer.encode('<|end|>', { addSpecialTokens: false })).toEqual(tokenizer.eosTokenIds);
    expect(tokenizer.decode([bos, ...tokenizer.encode('Hi', { addSpecialTokens: false })], { skipSpecialTokens: true })).toBe('Hi');
  });

  it('renders its chat template with the chat special tokens', async () => {
    const tokenizer = await loadTokenizer(dir);
    expect(tokenizer.hasChatTemplate).toBe(true);
    const prompt = tokenizer.applyChatTemplate(
      [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi there' },
      ],
      { addGenerationPrompt: true },
    );
    expect(prompt).toBe('<|begin_of_text|><|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\n');
    const ids = tokenizer.encode(prompt, { addSpecialTokens: false });
    const special = tokenizer.specialTokens.ids;
    for (const token of ['<|begin_of_text|>', '<|system|>', '<|end|>', '<|user|>', '<|assistant|>']) {
      expect(ids).toContain(special.get(token));
    }
    expect(tokenizer.decode(ids)).toBe(prompt);
  });

  it('runs with meshnet generate', async () => {
    const home = await mkdtemp(path.join(root, 'cli-home-'));
    const result = await runCli(['generate', '--model', dir, '--prompt', 'Hello', '--max-tokens', '5', '--json', '--seed', '1'], { MESHNET_HOME: home });
    expect(result.code, result.stderr).toBe(0);
    const output = JSON.parse(result.stdout.trim().split('\n').at(-1)!);
    expect(output.prompt_ids.length).toBeGreaterThan(1);
    expect(output.token_ids.length).toBeGreaterThan(0);
    expect(output.token_ids.length).toBeLessThanOrEqual(5);
    expect(typeof output.text).toBe('string');
  });
});
