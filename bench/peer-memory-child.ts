/**
 * Child process of `bench/peer-memory.ts`: what one peer's shard costs in resident memory and
 * CPU time under one set of onnxruntime memory settings. Loads layers [START, END) of the
 * checkpoint in DIR in weight format WEIGHTS on onnxruntime-node's CPU provider (1 thread,
 * spinning off, as a peer runs), with the settings VARIANT names (see VARIANTS), then runs a
 * 512-position prefill and DECODE decode steps, and prints one JSON line (bytes, µs):
 * RSS before the load, after it, after the prefill and after decode; the peak (VmHWM) from the
 * load on; the CPU time (process.cpuUsage, every thread) per decode step and of the prefill.
 *
 *   node --expose-gc --import tsx bench/peer-memory-child.ts DIR START END WEIGHTS VARIANT [DECODE] [PREFILL_CHUNK]
 */
import { readFile, writeFile } from 'node:fs/promises';
import { getShardArtifact } from '../src/node/artifact-cache.ts';
import { openLocalModel } from '../src/node/local-model.ts';
import { nodeLoaderOptions } from '../src/node/ort-node-runtime.ts';
import { KvState } from '../src/core/runtime/kv-state.ts';
import { loadShardExecutor } from '../src/core/runtime/ort-loader.ts';
import { parseWeightSpecName } from '../src/core/model/quant/weight-format.ts';
import { PEER_MEMORY_VARIANTS, withMemoryVariant } from './peer-memory-variants.ts';

const [directory, startText, endText, weightsText, variantName = 'default', decodeText = '32', chunkText = '512'] = process.argv.slice(2);
const weights = weightsText ? parseWeightSpecName(weightsText) : undefined;
const variant = PEER_MEMORY_VARIANTS[variantName];
if (!directory || startText === undefined || endText === undefined || !weights || !variant) {
  console.error(`usage: peer-memory-child.ts DIR START END WEIGHTS VARIANT [DECODE]; variants: ${Object.keys(PEER_MEMORY_VARIANTS).join(', ')}`);
  process.exit(2);
}
const range = { start: Number(startText), end: Number(endText) };
const decodeSteps = Number(decodeText);
/** The 512-position prefill runs as runs of at most this many positions. */
const prefillChunk = Number(chunkText);

async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
const rss = () => process.memoryUsage().rss;
/** RssAnon and RssFile (Linux /proc/self/status), bytes: what the process allocated, and the files it maps. */
async function split(): Promise<Stage> {
  const status = await readFile('/proc/self/status', 'utf8').catch(() => '');
  const bytes = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  const { heapTotal, arrayBuffers } = process.memoryUsage();
  return { anon: bytes('RssAnon'), file: bytes('RssFile'), heapTotal, arrayBuffers };
}
/** RssAnon / RssFile, and V8's own heap and the ArrayBuffers it knows of (the KV pool is among them). */
interface Stage {
  readonly anon: number;
  readonly file: number;
  readonly heapTotal: number;
  readonly arrayBuffers: number;
}
const stages: Record<string, Stage> = {};
/** Resident bytes of every mapping of files named `name` (/proc/self/smaps): weights onnxruntime maps rather than reads. */
async function mappedResident(name: string): Promise<number> {
  const smaps = await readFile('/proc/self/smaps', 'utf8').catch(() => '');
  let total = 0;
  let inside = false;
  for (const line of smaps.split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inside = line.endsWith(name) || (process.env.PEER_MEMORY_MAPPED_TOO !== undefined && line.endsWith(process.env.PEER_MEMORY_MAPPED_TOO));
    else if (inside && line.startsWith('Rss:')) total += Number(/(\d+)/.exec(line)![1]) * 1024;
  }
  return total;
}
/** Anonymous resident bytes per mapping (/proc/self/smaps), keyed by start address and name: what grew between stages. */
async function anonMappings(): Promise<Map<string, { size: number; anon: number; name: string }>> {
  const smaps = await readFile('/proc/self/smaps', 'utf8').catch(() => '');
  const out = new Map<string, { size: number; anon: number; name: string }>();
  let key = '';
  for (const line of smaps.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      key = `${head[1]} ${head[3] || '[anon]'}`;
      out.set(key, { size: parseInt(head[2]!, 16) - parseInt(head[1]!, 16), anon: 0, name: head[3] || '[anon]' });
    } else if (line.startsWith('Anonymous:')) out.get(key)!.anon += Number(/(\d+)/.exec(line)![1]) * 1024;
  }
  return out;
}
const smapsStages: Record<string, Map<string, { size: number; anon: number; name: string }>> = {};
/** With PEER_MEMORY_SMAPS set: on stderr, the mappings whose anonymous bytes changed most between two stages. */
function diffMappings(from: string, to: string): void {
  const a = smapsStages[from]!;
  const b = smapsStages[to]!;
  const rows: { key: string; size: number; delta: number }[] = [];
  for (const [key, m] of b) rows.push({ key, size: m.size, delta: m.anon - (a.get(key)?.anon ?? 0) });
  for (const [key, m] of a) if (!b.has(key)) rows.push({ key: `${key} (gone)`, size: m.size, delta: -m.anon });
  rows.sort((x, y) => Math.abs(y.delta) - Math.abs(x.delta));
  const MiB = 2 ** 20;
  const total = rows.reduce((t, r) => t + r.delta, 0);
  const byKind = new Map<string, number>();
  for (const r of rows) {
    const kind = r.key.includes('[heap]') ? '[heap]' : r.key.includes('[anon]') ? (r.size >= 64 * MiB ? 'anon >=64MiB' : r.size >= 1 * MiB ? 'anon 1-64MiB' : 'anon <1MiB') : 'other';
    byKind.set(kind, (byKind.get(kind) ?? 0) + r.delta);
  }
  console.error(`smaps ${from} -> ${to}: anon ${(total / MiB).toFixed(1)} MiB; ${[...byKind].map(([k, v]) => `${k} ${(v / MiB).toFixed(1)}`).join(', ')}`);
  for (const r of rows.slice(0, 12)) if (Math.abs(r.delta) >= 256 * 1024) console.error(`  ${(r.delta / MiB).toFixed(1).padStart(7)} MiB  size ${(r.size / MiB).toFixed(1).padStart(7)} MiB  ${r.key}`);
}
const snap = async (stage: string) => {
  if (process.env.PEER_MEMORY_SMAPS) smapsStages[stage] = await anonMappings();
};
const cpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

const model = await openLocalModel(directory);
const base = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
const loader = withMemoryVariant(base, variant);
// The in-place graph is a cached part of its own (folder -inplace), its weights packed as the GQA one's.
const gqa = (await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights)).artifact;
const artifact = (await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights, undefined, variant.attention ?? 'gqa')).artifact;
if (JSON.stringify(artifact.manifest.segments) !== JSON.stringify(gqa.manifest.segments)) throw new Error('the in-place graph packs its weights differently from the GQA one');
if ((artifact.manifest.attention ?? 'gqa') !== (variant.attention ?? 'gqa')) throw new Error(`asked for ${variant.attention} attention, the cache built ${artifact.manifest.attention ?? 'gqa'}`);
await settle();
const rssBefore = rss();
stages.before = await split();
await snap('before');
await writeFile('/proc/self/clear_refs', '5').catch(() => undefined);

const loadCpu = cpuMicros();
const executor = await loadShardExecutor(model.checkpoint.config, artifact, model.checkpoint.source, loader);
const loadCpuMicros = cpuMicros() - loadCpu;
await settle();
const rssLoaded = rss();
stages.loaded = await split();
await snap('loaded');
const weightsMappedLoaded = await mappedResident('weights.bin');

const { hiddenSize } = model.checkpoint.config;
const hidden = (tokens: number, seed: number) => ({ dtype: 'fp32' as const, data: new Float32Array(tokens * hiddenSize).map((_, i) => Math.sin(i + seed) * 0.1), tokens, hiddenSize });
const kv = new KvState('memory', range, executor.kvOps);
const prefillTokens = 512;
const prefillCpu = cpuMicros();
let out = await executor.run({ sessionId: 'memory', startPosition: 0, hidden: hidden(Math.min(prefillChunk, prefillTokens), 0) }, kv);
for (let at = prefillChunk; at < prefillTokens; at += prefillChunk) {
  out = await executor.run({ sessionId: 'memory', startPosition: at, hidden: hidden(Math.min(prefillChunk, prefillTokens - at), at) }, kv);
}
const prefillCpuMicros = cpuMicros() - prefillCpu;
if (!out.data.every(Number.isFinite)) throw new Error('the shard produced non-finite activations');
await settle();
const rssPrefilled = rss();
stages.prefilled = await split();
await snap('prefilled');
const decodeCpu = cpuMicros();
const decodeFaults = process.resourceUsage().minorPageFault;
for (let i = 0; i < decodeSteps; i++) {
  out = await executor.run({ sessionId: 'memory', startPosition: prefillTokens + i, hidden: hidden(1, i + 1) }, kv);
}
const decodeCpuMicrosPerStep = (cpuMicros() - decodeCpu) / Math.max(1, decodeSteps);
/** Minor page faults per decode step: memory handed back to the system and taken again costs one per 4 KiB page. */
const decodeFaultsPerStep = (process.resourceUsage().minorPageFault - decodeFaults) / Math.max(1, decodeSteps);
await settle();
const rssDecoded = rss();
stages.decoded = await split();
await snap('decoded');
if (process.env.PEER_MEMORY_SMAPS) {
  diffMappings('before', 'loaded');
  diffMappings('loaded', 'prefilled');
  diffMappings('prefilled', 'decoded');
}
const peakRss = Number(/VmHWM:\s+(\d+) kB/.exec(await readFile('/proc/self/status', 'utf8').catch(() => ''))?.[1] ?? 0) * 1024;

console.log(
  JSON.stringify({
    range,
    weights: weightsText,
    variant: variantName,
    prefillChunk,
    weightsBytes: artifact.manifest.weightsLength,
    kvBytes: kv.bytes,
    rssBefore,
    rssLoaded,
    rssPrefilled,
    rssDecoded,
    peakRss,
    stages,
    weightsMappedLoaded,
    weightsMappedDecoded: await mappedResident('weights.bin'),
    loadCpuMicros,
    prefillCpuMicros,
    decodeCpuMicrosPerStep,
    decodeFaultsPerStep,
    checksum: Array.from(out.data).reduce((a, b) => a + b, 0),
  }),
);
kv.dispose();
await executor.dispose();
