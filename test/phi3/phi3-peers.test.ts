/**
 * Phi-3 over real peers: a random Phi3ForCausalLM checkpoint (fused qkv_proj / gate_up_proj,
 * sliding window 4) served by a real head that holds no layers, its layers on two Node peer
 * processes over WebSockets on loopback. A greedy completion from a prompt longer than the
 * window gives the pure-TypeScript reference's greedy tokens, and its logprobs (chosen and
 * top 5) equal the reference's log-softmax within 1e-4.
 */
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { clientFor, serveStories } from '../api/api-harness.ts';
import { argmax, fixtureModelFromFiles, referenceWeights, tempDir } from '../engine/harness.ts';
import { buildPhi3CheckpointFiles } from '../fixtures/phi3-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';

const WINDOW = 4;
const PROMPT = [1, 17, 42, 99, 5, 73, 21, 88, 64]; // 9 positions, more than twice the window
const MAX_TOKENS = 8;

let root: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;
/** The reference's greedy ids after PROMPT (up to EOS) and each step's log-softmax. */
const expected: { ids: number[]; logprobs: Float64Array[] } = { ids: [], logprobs: [] };

/** The tiny tokenizer's id for a token's text (test/fixtures/tiny-tokenizer.ts). */
function idOf(text: string): number {
  const special = ['<unk>', '<s>', '</s>'].indexOf(text.trim());
  if (special >= 0) return special;
  const match = /^t(\d+)$/.exec(text.trim());
  if (!match) throw new Error(`not a token of the tiny vocabulary: ${JSON.stringify(text)}`);
  return Number(match[1]);
}

function logSoftmax(logits: ArrayLike<number>): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const log = max + Math.log(sum);
  return Float64Array.from(logits, (x) => x - log);
}

beforeAll(async () => {
  root = await tempDir('phi3-peers');
  process.env.MESHNET_HOME = path.join(root.dir, 'home');
  const model = await fixtureModelFromFiles(root.dir, 'phi3', buildPhi3CheckpointFiles({ dtype: 'F32', tied: false, seed: 201, slidingWindow: WINDOW }));
  const { config } = model.checkpoint;
  expect(config.fusedProjections).toBe(true);
  expect(PROMPT.length).toBeGreaterThan(WINDOW);
  const weights = await referenceWeights(model.checkpoint);
  const all = { start: 0, end: config.numLayers };
  const kv = new ReferenceKvCache();
  let ids = PROMPT;
  while (expected.ids.length < MAX_TOKENS) {
    const logits = referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
    const next = argmax(logits);
    expected.logprobs.push(logSoftmax(logits));
    if (next === 2) break;
    expected.ids.push(next);
    ids = [next];
  }
  if (expected.ids.length < 4 || expected.ids.some((id) => id < 3)) throw new Error(`reference greedy ${expected.ids}: pick another seed`);

  serving = await serveStories({ model: path.join(root.dir, 'phi3'), headLayers: 'none', localPeers: 2, link: 'relay' });
  await serving.head.waitForPeers(2, 30_000);
  client = clientFor(serving);
}, 30_000);

afterAll(async () => {
  await serving?.close();
  await root?.remove();
});

it('greedy past the window over two Node peers equals the reference, logprobs within 1e-4', async () => {
  const completion = await client.completions.create({ model: serving.modelId, prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0, logprobs: 5 });
  const choice = completion.choices[0];
  const logprobs = choice.logprobs!;
  const ids = logprobs.tokens!.map(idOf);
  expect(ids).toEqual(expected.ids);
  expect(choice.finish_reason).toBe(expected.ids.length === MAX_TOKENS ? 'length' : 'stop');
  ids.forEach((id, step) => {
    const reference = expected.logprobs[step];
    expect(Math.abs(logprobs.token_logprobs![step] - reference[id]), `step ${step} chosen`).toBeLessThan(1e-4);
    const top = Object.entries(logprobs.top_logprobs![step]);
    expect(top).toHaveLength(5);
    for (const [text, value] of top) expect(Math.abs(value - reference[idOf(text)]), `step ${step} ${text}`).toBeLessThan(1e-4);
  });
  // Every layer ran on the two peer processes, none in the head.
  const hops = serving.store.state.finished.at(-1)!.hops;
  expect(hops.map((hop) => hop.peerId).sort()).toEqual(['local-1', 'local-2']);
}, 15_000);
