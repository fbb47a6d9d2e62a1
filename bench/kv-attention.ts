/**
 * What bounds decode's growth with the context on onnxruntime-node's CPU provider: one
 * attention layer of the SmolLM2 shape (9 query / 3 KV heads, head size 64), one new
 * position over a pooled past (capacity rounded to 256), as the shard graph runs it —
 * GroupQueryAttention, whose CPU kernel builds a present buffer of the whole past every
 * step — against attention from plain ops that reads the pooled past in place
 * (FusedMatMul with transB over the past keys, a length mask, Softmax, MatMul over the
 * past values; the new position's own score joins before the softmax). Both give the same
 * output (checked); the table is median ms per step.
 *
 *   node --import tsx bench/kv-attention.ts [steps=200]
 */
import os from 'node:os';
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '../src/core/model/onnx/onnx-model.ts';
import { median } from './requests.ts';

const STEPS = Number(process.argv[2] ?? 200);
const H = 9;
const KVH = 3;
const D = 64;
const G = H / KVH;
const F = OnnxType.FLOAT;

function gqaGraph(): Uint8Array {
  const g = new GraphBuilder('gqa');
  const q = g.input('q', F, [1, 1, H * D]);
  const k = g.input('k', F, [1, 1, KVH * D]);
  const v = g.input('v', F, [1, 1, KVH * D]);
  const pk = g.input('past_key', F, [1, KVH, 'cap', D]);
  const pv = g.input('past_value', F, [1, KVH, 'cap', D]);
  const seqlens = g.input('seqlens_k', OnnxType.INT32, [1]);
  const total = g.input('total', OnnxType.INT32, []);
  g.op('GroupQueryAttention', [q, k, v, pk, pv, seqlens, total], { num_heads: H, kv_num_heads: KVH, scale: { float: 1 / Math.sqrt(D) } }, { domain: 'com.microsoft', outputs: ['out', 'present_key', 'present_value'] });
  g.output('out', F, [1, 1, H * D]);
  g.output('present_key', F, [1, KVH, 'total', D]);
  g.output('present_value', F, [1, KVH, 'total', D]);
  return serializeModel(g.build());
}

function inPlaceGraph(): Uint8Array {
  const g = new GraphBuilder('in_place');
  const q = g.input('q', F, [1, 1, H * D]);
  const k = g.input('k', F, [1, 1, KVH * D]);
  const v = g.input('v', F, [1, 1, KVH * D]);
  const pk = g.input('past_key', F, [1, KVH, 'cap', D]);
  const pv = g.input('past_value', F, [1, KVH, 'cap', D]);
  const length = g.input('past_length', OnnxType.INT64, [1]);
  const qr = g.op1('Reshape', [q, g.int64([1, KVH, G, D])]); // query head h = kv head h / G
  const kr = g.op1('Reshape', [k, g.int64([1, KVH, 1, D])]);
  const vr = g.op1('Reshape', [v, g.int64([1, KVH, 1, D])]);
  const scale = 1 / Math.sqrt(D);
  const pastScores = g.op1('FusedMatMul', [qr, pk], { transB: 1, alpha: { float: scale } }, { domain: 'com.microsoft' }); // [1, KVH, G, cap]
  const cap = g.op1('Gather', [g.op1('Shape', [pk]), g.int64([2], [])], { axis: 0 });
  const positions = g.op1('Range', [g.int64([0], []), cap, g.int64([1], [])]);
  const valid = g.op1('Less', [positions, length]); // [cap]
  const mask = g.op1('Where', [valid, g.initializer({ name: 'zero', type: F, dims: [], raw: new Uint8Array(Float32Array.of(0).buffer) }), g.initializer({ name: 'ninf', type: F, dims: [], raw: new Uint8Array(Float32Array.of(-Infinity).buffer) })]);
  const own = g.op1('FusedMatMul', [qr, kr], { transB: 1, alpha: { float: scale } }, { domain: 'com.microsoft' }); // [1, KVH, G, 1]
  const scores = g.op1('Concat', [g.op1('Add', [pastScores, mask]), own], { axis: -1 });
  const probs = g.op1('Softmax', [scores], { axis: -1 });
  const [pPast, pOwn] = g.op('Split', [probs, g.op1('Concat', [g.op1('Unsqueeze', [cap, g.int64([0])]), g.int64([1])], { axis: 0 })], { axis: -1 }, { outputs: 2 });
  const out = g.op1('Add', [g.op1('MatMul', [pPast, pv]), g.op1('MatMul', [pOwn, vr])]); // [1, KVH, G, D]
  g.op1('Reshape', [out, g.int64([1, 1, H * D])], {}, { output: 'out' });
  g.output('out', F, [1, 1, H * D]);
  return serializeModel(g.build());
}

const random = (n: number, seed: number) => {
  let s = seed;
  return Float32Array.from({ length: n }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1);
};
const options: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'] };
const gqa = await ort.InferenceSession.create(gqaGraph(), options);
const inPlace = await ort.InferenceSession.create(inPlaceGraph(), options);
const rows: string[] = [];
for (const length of [32, 2048]) {
  const cap = Math.ceil((length + 1) / 256) * 256;
  const t = (data: Float32Array, dims: number[]) => new ort.Tensor('float32', data, dims);
  const common = { q: t(random(H * D, 1), [1, 1, H * D]), k: t(random(KVH * D, 2), [1, 1, KVH * D]), v: t(random(KVH * D, 3), [1, 1, KVH * D]), past_key: t(random(KVH * cap * D, 4), [1, KVH, cap, D]), past_value: t(random(KVH * cap * D, 5), [1, KVH, cap, D]) };
  const gqaFeeds = { ...common, seqlens_k: new ort.Tensor('int32', Int32Array.of(length), [1]), total: new ort.Tensor('int32', Int32Array.of(length + 1), []) };
  const inPlaceFeeds = { ...common, past_length: new ort.Tensor('int64', BigInt64Array.of(BigInt(length)), [1]) };
  const a = (await gqa.run(gqaFeeds, ['out'])).out.data as Float32Array;
  const b = (await inPlace.run(inPlaceFeeds)).out.data as Float32Array;
  const diff = a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
  if (!(diff < 1e-4)) throw new Error(`the two attentions disagree by ${diff} at ${length} positions`);
  const time = async (run: () => Promise<unknown>) => {
    const ms: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      const started = performance.now();
      await run();
      ms.push(performance.now() - started);
    }
    return median(ms);
  };
  const gqaMs = await time(() => gqa.run(gqaFeeds, ['out']));
  const inPlaceMs = await time(() => inPlace.run(inPlaceFeeds));
  rows.push(`| ${length} (capacity ${cap}) | ${gqaMs.toFixed(3)} | ${inPlaceMs.toFixed(3)} | ${diff.toExponential(1)} |`);
}
process.stdout.write(
  [
    `one attention layer, 9/3 heads, head size 64, 1 thread, median of ${STEPS} steps; load ${os.loadavg()[0].toFixed(1)}`,
    '',
    '| past positions | GroupQueryAttention ms | in-place attention ms | max difference |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n'),
);
