import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '/work/wt/issue-17/src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '/work/wt/issue-17/src/core/model/onnx/onnx-model.ts';
const Hq = 9, Hkv = 3, D = 64;
function graph() {
  const g = new GraphBuilder('gqa');
  const T = OnnxType.FLOAT;
  g.input('q', T, ['b', 's', Hq * D]); g.input('k', T, ['b', 's', Hkv * D]); g.input('v', T, ['b', 's', Hkv * D]);
  g.input('pk', T, ['b', Hkv, 'p', D]); g.input('pv', T, ['b', Hkv, 'p', D]);
  g.input('seqlens', OnnxType.INT32, ['b']); g.input('total', OnnxType.INT32, []);
  g.op('GroupQueryAttention', ['q', 'k', 'v', 'pk', 'pv', 'seqlens', 'total'], { num_heads: Hq, kv_num_heads: Hkv, scale: { float: 0.125 } }, { domain: 'com.microsoft', outputs: ['out', 'prk', 'prv'] });
  g.output('out', T, ['b', 's', Hq * D]); g.output('prk', T, ['b', Hkv, 't', D]); g.output('prv', T, ['b', Hkv, 't', D]);
  return serializeModel(g.build());
}
const s = await ort.InferenceSession.create(graph(), { intraOpNumThreads: 1, executionProviders: ['cpu'] });
const rnd = (n: number) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
for (const MAX of [128, 4096]) for (const past of [64, 2000]) {
  if (past >= MAX) continue;
  const kbuf = new Float32Array(Hkv * MAX * D).fill(0.01), vbuf = new Float32Array(Hkv * MAX * D).fill(0.02);
  const pk = new ort.Tensor('float32', kbuf, [1, Hkv, MAX, D]), pv = new ort.Tensor('float32', vbuf, [1, Hkv, MAX, D]);
  const feeds = () => ({ q: new ort.Tensor('float32', rnd(Hq * D), [1, 1, Hq * D]), k: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), v: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), pk, pv, seqlens: new ort.Tensor('int32', Int32Array.of(past), [1]), total: new ort.Tensor('int32', Int32Array.of(past + 1), []) });
  const outs = new ort.Tensor('float32', new Float32Array(Hq * D), [1, 1, Hq * D]);
  let r: any;
  const t0 = performance.now();
  for (let i = 0; i < 200; i++) r = await s.run(feeds(), { out: outs, prk: pk, prv: pv });
  const ms = (performance.now() - t0) / 200;
  // does the returned present alias kbuf?
  const before = kbuf[5]; (r.prk.data as Float32Array)[5] = 42; const alias = kbuf[5] === 42; kbuf[5] = before;
  const wrote = kbuf[past * D] !== 0.01 && Math.abs(kbuf[past * D] - 0.01) > 1e-6;
  const outAlias = r.out.data.buffer === outs.data.buffer || ((r.out.data as Float32Array)[0] = 7, (outs.data as Float32Array)[0] === 7);
  console.log({ MAX, past, ms: ms.toFixed(3), alias, wrote, outAlias, dims: r.prk.dims });
}
// growing form
for (const past of [64, 2000]) {
  const pk = new ort.Tensor('float32', rnd(Hkv * past * D), [1, Hkv, past, D]), pv = new ort.Tensor('float32', rnd(Hkv * past * D), [1, Hkv, past, D]);
  const t0 = performance.now();
  for (let i = 0; i < 200; i++) await s.run({ q: new ort.Tensor('float32', rnd(Hq * D), [1, 1, Hq * D]), k: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), v: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), pk, pv, seqlens: new ort.Tensor('int32', Int32Array.of(past), [1]), total: new ort.Tensor('int32', Int32Array.of(past + 1), []) });
  console.log({ growing: past, ms: ((performance.now() - t0) / 200).toFixed(3) });
}
