/**
 * What a shard graph is made of once onnxruntime has optimized it, and where a decode step's
 * time goes, per operator type (issue #24: "fewer nodes per layer").
 *
 *   node --import tsx bench/shard-profile.ts DIR [WEIGHTS] [LAYERS] [DECODE] [PREFILL] [gqa|in-place]
 *
 * DIR is a checkpoint (e.g. bench/.cache/smollm2-135m-shaped), WEIGHTS a canonical weight
 * name (default q4-b32-acc4), LAYERS the profiled shard's layer count (default 15, a peer's
 * half of SmolLM2-135M), DECODE the profiled decode steps after a PREFILL-position prefill
 * (default 32); `in-place` profiles the graph whose layers attend from plain ops (AttentionKind).
 * Prints, as JSON: the nodes of our graph and of onnxruntime's optimized graph
 * (`optimizedModelFilePath`) for 1 and for 3 layers, and from them the nodes per layer and
 * the nodes every shard has once; then the decode steps' kernel time per operator type from
 * onnxruntime's profiler (`enableProfiling`), as shares of the summed kernel time.
 * CPU provider, 1 thread, spinning off (a peer's settings). Set MESHNET_HOME.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type * as Ort from 'onnxruntime-common';
import { parseWeightSpecName } from '../src/core/model/quant/weight-format.ts';
import { KvState } from '../src/core/runtime/kv-state.ts';
import { loadShardExecutor } from '../src/core/runtime/ort-loader.ts';
import type { OrtModule } from '../src/core/runtime/ort-session.ts';
import { buildShardArtifact } from '../src/core/model/shard-artifact.ts';
import { getShardArtifact } from '../src/node/artifact-cache.ts';
import { openLocalModel } from '../src/node/local-model.ts';
import { nodeLoaderOptions } from '../src/node/ort-node-runtime.ts';
import { countOps } from './onnx-ops.ts';

const [directory, weightsText = 'q4-b32-acc4', layersText = '15', decodeText = '32', prefillText = '32', attentionText = 'in-place'] = process.argv.slice(2);
const prefill = Number(prefillText);
const attention = attentionText === 'in-place' ? 'in-place' : 'gqa';
const weights = parseWeightSpecName(weightsText);
if (!directory || !weights) {
  console.error('usage: shard-profile.ts DIR [WEIGHTS] [LAYERS] [DECODE]');
  process.exit(2);
}
const model = await openLocalModel(directory);
const base = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
const scratch = await mkdtemp(path.join(tmpdir(), 'meshnet-profile-'));

/** The loader with extra session options, and the sessions it created. */
function loaderWith(options: Record<string, unknown>, session: Record<string, string> = {}) {
  const created: Ort.InferenceSession[] = [];
  const ort: OrtModule = {
    Tensor: base.ort.Tensor,
    InferenceSession: {
      create: async (graph, o = {}) => {
        const extra = (o.extra ?? {}) as Record<string, unknown>;
        const s = await base.ort.InferenceSession.create(graph, { ...o, ...options, extra: { ...extra, session: { ...(extra.session as object), ...session } } });
        created.push(s);
        return s;
      },
    },
  };
  return { loader: { ...base, ort }, created };
}

const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]));
const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

async function graphCounts(layers: number) {
  const range = { start: 0, end: layers };
  const { artifact } = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights!);
  const file = path.join(scratch, `optimized-${layers}.onnx`);
  const { loader, created } = loaderWith({ optimizedModelFilePath: file }, { optimized_model_external_initializers_file_name: `optimized-${layers}.bin`, optimized_model_external_initializers_min_size_in_bytes: '1024' });
  const executor = await loadShardExecutor(model.checkpoint.config, artifact, model.checkpoint.source, loader);
  await executor.dispose();
  void created;
  return { ours: countOps(artifact.graph), optimized: countOps(new Uint8Array(await readFile(file))) };
}

const one = await graphCounts(1);
const three = await graphCounts(3);
const perLayer = (a: Map<string, number>, b: Map<string, number>) => {
  const out = new Map<string, number>();
  for (const [op, n] of b) if (n - (a.get(op) ?? 0) !== 0) out.set(op, (n - (a.get(op) ?? 0)) / 2);
  return out;
};
const oursPerLayer = perLayer(one.ours, three.ours);
const optimizedPerLayer = perLayer(one.optimized, three.optimized);

// The profile: a peer-sized shard, a PREFILL-position prefill, then DECODE steps.
const layers = Number(layersText);
const range = { start: 0, end: layers };
const artifact =
  attention === 'in-place'
    ? buildShardArtifact(model.checkpoint.config, model.checkpoint.tensors, model.key, { kind: 'layers', range }, 'fp32', weights, 'in-place')
    : (await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights)).artifact;
const { loader, created } = loaderWith({ enableProfiling: true, profileFilePrefix: path.join(scratch, 'profile') });
const { weights: _cached, ...inMemory } = loader;
const executor = await loadShardExecutor(model.checkpoint.config, artifact, model.checkpoint.source, attention === 'in-place' ? inMemory : loader);
const { hiddenSize } = model.checkpoint.config;
const hidden = (tokens: number, seed: number) => ({ dtype: 'fp32' as const, data: new Float32Array(tokens * hiddenSize).map((_, i) => Math.sin(i + seed) * 0.1), tokens, hiddenSize });
const kv = new KvState('profile', range, executor.kvOps);
await executor.run({ sessionId: 'profile', startPosition: 0, hidden: hidden(prefill, 0) }, kv);
const decodeSteps = Number(decodeText);
for (let i = 0; i < decodeSteps; i++) await executor.run({ sessionId: 'profile', startPosition: prefill + i, hidden: hidden(1, i) }, kv);
(created[0] as unknown as { endProfiling(): void }).endProfiling();
kv.dispose();
await executor.dispose();

interface ProfileEvent {
  readonly cat: string;
  readonly name: string;
  readonly ts: number;
  readonly dur: number;
  readonly args?: { op_name?: string; input_type_shape?: unknown };
}
const profileFile = (await readdir(scratch)).find((f) => f.startsWith('profile') && f.endsWith('.json'));
if (!profileFile) throw new Error('onnxruntime wrote no profile');
const events = JSON.parse(await readFile(path.join(scratch, profileFile), 'utf8')) as ProfileEvent[];
const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
const decodeRuns = runs.slice(Math.ceil(prefill / 128)); // the first runs are the prefill (runs of ≤ 128)
const inDecode = (e: ProfileEvent) => decodeRuns.some((r) => e.ts >= r.ts && e.ts <= r.ts + r.dur);
const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time') && inDecode(e));
const byOp = new Map<string, number>();
for (const e of kernels) byOp.set(e.args?.op_name ?? '?', (byOp.get(e.args?.op_name ?? '?') ?? 0) + e.dur);
const kernelMicros = total(byOp);
const byNode = new Map<string, { us: number; shapes: string }>();
for (const e of kernels) {
  const node = byNode.get(e.name) ?? { us: 0, shapes: JSON.stringify(e.args?.input_type_shape ?? []) };
  node.us += e.dur;
  byNode.set(e.name, node);
}
const topNodes = [...byNode].sort((a, b) => b[1].us - a[1].us).slice(0, 8).map(([name, n]) => `${name.replace('_kernel_time', '')} ${(n.us / Math.max(1, decodeRuns.length)).toFixed(0)} µs/step ${n.shapes}`);
const runMicros = decodeRuns.reduce((a, r) => a + r.dur, 0);
console.log(
  JSON.stringify(
    {
      model: path.basename(directory),
      weights: weightsText,
      attention,
      prefill,
      nodes: {
        ours: { oneLayer: total(one.ours), threeLayers: total(three.ours), perLayer: total(oursPerLayer), perLayerByOp: sorted(oursPerLayer) },
        optimized: { oneLayer: total(one.optimized), threeLayers: total(three.optimized), perLayer: total(optimizedPerLayer), perLayerByOp: sorted(optimizedPerLayer) },
      },
      profile: {
        layers,
        decodeSteps: decodeRuns.length,
        kernelsPerStep: kernels.length / Math.max(1, decodeRuns.length),
        msPerStep: runMicros / 1000 / Math.max(1, decodeRuns.length),
        kernelMsPerStep: kernelMicros / 1000 / Math.max(1, decodeRuns.length),
        shareByOp: Object.fromEntries([...byOp].sort((a, b) => b[1] - a[1]).map(([op, us]) => [op, Number((us / kernelMicros).toFixed(4))])),
        topNodes,
      },
    },
    null,
    1,
  ),
);
await rm(scratch, { recursive: true, force: true });
