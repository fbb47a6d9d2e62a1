import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '/work/wt/issue-17/src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '/work/wt/issue-17/src/core/model/onnx/onnx-model.ts';
const Hq = 9, Hkv = 3, D = 64, L = 30;
function graph(fetchPresent: boolean) {
  const g = new GraphBuilder('gqa');
  const T = OnnxType.FLOAT;
  g.input('q', T, ['b', 's', Hq * D]); g.input('k', T, ['b', 's', Hkv * D]); g.input('v', T, ['b', 's', Hkv * D]);
  g.input('seqlens', OnnxType.INT32, ['b']); g.input('total', OnnxType.INT32, []);
  let x = 'q';
  for (let l = 0; l < L; l++) {
    g.input('pk' + l, T, ['b', Hkv, 'p', D]); g.input('pv' + l, T, ['b', Hkv, 'p', D]);
    g.op('GroupQueryAttention', [x, 'k', 'v', 'pk' + l, 'pv' + l, 'seqlens', 'total'], { num_heads: Hq, kv_num_heads: Hkv, scale: { float: 0.125 } }, { domain: 'com.microsoft', outputs: ['out' + l, 'prk' + l, 'prv' + l] });
    x = 'out' + l;
    if (fetchPresent) { g.output('prk' + l, T, ['b', Hkv, 't', D]); g.output('prv' + l, T, ['b', Hkv, 't', D]); }
  }
  g.output(x, T, ['b', 's', Hq * D]);
  return serializeModel(g.build());
}
const rnd = (n: number) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const common = (past: number) => ({ q: new ort.Tensor('float32', rnd(Hq * D), [1, 1, Hq * D]), k: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), v: new ort.Tensor('float32', rnd(Hkv * D), [1, 1, Hkv * D]), seqlens: new ort.Tensor('int32', Int32Array.of(past), [1]), total: new ort.Tensor('int32', Int32Array.of(past + 1), []) });
const opts = { intraOpNumThreads: 1, executionProviders: ['cpu'], extra: { session: { intra_op: { allow_spinning: '0' } } } } as any;
const grow = await ort.InferenceSession.create(graph(true), opts);
const cap = await ort.InferenceSession.create(graph(false), opts);
const N = 40;
async function time(f: () => Promise<unknown>) { await f(); const t0 = performance.now(); for (let i = 0; i < N; i++) await f(); return ((performance.now() - t0) / N).toFixed(2); }
for (const past of [32, 2048]) {
  const gp: Record<string, ort.Tensor> = {};
  for (let l = 0; l < L; l++) { gp['pk' + l] = new ort.Tensor('float32', rnd(Hkv * past * D), [1, Hkv, past, D]); gp['pv' + l] = new ort.Tensor('float32', rnd(Hkv * past * D), [1, Hkv, past, D]); }
  const tg = await time(() => grow.run({ ...common(past), ...gp }));
  const res: Record<string, string> = { growing: tg };
  for (const CAP of [past + 256 - (past % 256), 8192]) {
    const cp: Record<string, ort.Tensor> = {};
    for (let l = 0; l < L; l++) { cp['pk' + l] = new ort.Tensor('float32', rnd(Hkv * CAP * D), [1, Hkv, CAP, D]); cp['pv' + l] = new ort.Tensor('float32', rnd(Hkv * CAP * D), [1, Hkv, CAP, D]); }
    res['capNoFetch' + CAP] = await time(() => cap.run({ ...common(past), ...cp }));
    // shared buffer with preallocated present fetch
    const fetches: Record<string, ort.Tensor | null> = { ['out' + (L - 1)]: null };
    for (let l = 0; l < L; l++) { fetches['prk' + l] = cp['pk' + l]; fetches['prv' + l] = cp['pv' + l]; }
    res['shared' + CAP] = await time(() => grow.run({ ...common(past), ...cp }, fetches as any));
  }
  console.log(past, res);
}
