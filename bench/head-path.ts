/**
 * `node --import tsx bench/head-path.ts <stories260k|smollm2-135m-shaped> <hops>`: the time per
 * decode token of everything the engine does around the compute — a Route Session over
 * in-process hops whose shard executors and head runner are stand-ins of the model's shape
 * that cost (almost) nothing: embedding and LM-head hand-offs, frame encode/decode and checks,
 * links, the peer's KV bookkeeping, sampling over the whole vocabulary. Prints one JSON line:
 * the best and the middle of 15 sessions' median token intervals (after 3 warm-up sessions).
 * Sub-millisecond costs like these are lost in `npm run bench`'s totals on a shared machine;
 * run this one on two commits back to back to see what a hot-path change saved.
 */
import { randomUUID } from 'node:crypto';
import type { Activations } from '../src/core/model/activations.ts';
import { RouteSession } from '../src/core/route/route-session.ts';
import { inProcessRoute } from '../src/core/mesh/static-route.ts';
import type { KvState, KvTensorOps, LayerKv } from '../src/core/runtime/kv-state.ts';
import type { HeadRunner } from '../src/core/runtime/ort-head-runner.ts';
import type { ShardExecutor, ShardStep } from '../src/core/runtime/shard-executor.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';

const SHAPES: Record<string, { hidden: number; vocab: number; layers: number }> = {
  stories260k: { hidden: 64, vocab: 512, layers: 5 },
  'smollm2-135m-shaped': { hidden: 576, vocab: 49152, layers: 30 },
};
const [shapeName = 'smollm2-135m-shaped', hopsArg = '1'] = process.argv.slice(2);
const shape = SHAPES[shapeName];
if (!shape) throw new Error(`unknown shape '${shapeName}': ${Object.keys(SHAPES).join(', ')}`);
const hops = Number(hopsArg);

interface FakeKv {
  readonly positions: number;
}
const kvOps: KvTensorOps<FakeKv> = { bytes: (t) => t.positions * 4 * shape.hidden, capacity: (t) => t.positions, grow: () => undefined, dispose: () => {} };

/** Layers [start, end) that pass the hidden states through (a fresh output array, as onnxruntime gives). */
function standIn(start: number, end: number): ShardExecutor<FakeKv> {
  return {
    range: { start, end },
    loaded: { device: 'stand-in', weights: { format: 'fp32', blockSize: 0, accuracyLevel: 0 }, weightsBytes: 0 },
    kvOps,
    async run(step: ShardStep, kv: KvState<FakeKv>): Promise<Activations> {
      if (kv.length > step.startPosition) kv.truncate(step.startPosition);
      const total = step.startPosition + step.hidden.tokens;
      const present = new Map<number, LayerKv<FakeKv>>();
      for (let l = start; l < end; l++) present.set(l, { key: { positions: total }, value: { positions: total } });
      kv.append(present, total);
      return { ...step.hidden, data: Float32Array.from(step.hidden.data as Float32Array) };
    },
    async dispose() {},
  };
}

const logits = Float32Array.from({ length: shape.vocab }, (_, i) => Math.sin(i * 0.731) * 3);
const head: HeadRunner = {
  device: 'stand-in',
  embed: async (ids) => ({ dtype: 'fp32', data: new Float32Array(ids.length * shape.hidden).fill(0.01), tokens: ids.length, hiddenSize: shape.hidden }),
  logits: async () => Float32Array.from(logits),
  dispose: async () => {},
};

const per = Math.ceil(shape.layers / hops);
const { route } = await inProcessRoute(Array.from({ length: hops }, (_, i) => standIn(i * per, Math.min(shape.layers, (i + 1) * per))) as ShardExecutor[]);
const params = validateSamplingParams({ temperature: 0, maxTokens: 256 });

async function session(): Promise<number> {
  // One token per step: this measures the engine's own work per token, not what drafts save.
  const s = new RouteSession({ head, route, vocabSize: shape.vocab }, { sessionId: randomUUID(), promptIds: [1, 2, 3, 4, 5, 6, 7, 8], params, speculate: 'off' });
  const gaps: number[] = [];
  let last = performance.now();
  for await (const event of s) {
    if (event.type !== 'token') continue;
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }
  await s.closed;
  gaps.shift(); // the first token's time is the prefill
  gaps.sort((a, b) => a - b);
  return gaps[Math.floor(gaps.length / 2)];
}

for (let i = 0; i < 3; i++) await session(); // warm the JIT up
const medians: number[] = [];
for (let i = 0; i < 15; i++) medians.push(await session());
medians.sort((a, b) => a - b);
process.stdout.write(`${JSON.stringify({ shape: shapeName, hops, bestMedianMs: medians[0], middleMedianMs: medians[7] })}\n`);
