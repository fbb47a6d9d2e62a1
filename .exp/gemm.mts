import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '/work/wt/issue-17/src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '/work/wt/issue-17/src/core/model/onnx/onnx-model.ts';
const Hq = 9, Hkv = 3, D = 64, L = 30, G = Hq / Hkv;
const T = OnnxType.FLOAT;
// lanes: each lane = one session; q rows = lane index (decode)
function graph(lanes: number) {
  const g = new GraphBuilder('gemm');
  g.input('q', T, ['b', Hq * D]); g.input('k', T, ['b', Hkv * D]); g.input('v', T, ['b', Hkv * D]);
  let x = 'q';
  for (let l = 0; l < L; l++) {
    const laneOuts: string[] = [];
    for (let b = 0; b < lanes; b++) {
      const qRow = g.op1('Slice', [x, g.int64([b]), g.int64([b + 1]), g.int64([0])]); // [1, Hq*D]
      const kRow = g.op1('Slice', ['k', g.int64([b]), g.int64([b + 1]), g.int64([0])]);
      const vRow = g.op1('Slice', ['v', g.int64([b]), g.int64([b + 1]), g.int64([0])]);
      const heads: string[] = [];
      for (let h = 0; h < Hkv; h++) {
        const pk = g.input(`pk.${l}.${b}.${h}`, T, [`p${b}`, D]); const pv = g.input(`pv.${l}.${b}.${h}`, T, [`p${b}`, D]);
        const qh = g.op1('Reshape', [g.op1('Slice', [qRow, g.int64([h * G * D]), g.int64([(h + 1) * G * D]), g.int64([1])]), g.int64([-1, D])]); // [G, D]
        const kn = g.op1('Slice', [kRow, g.int64([h * D]), g.int64([(h + 1) * D]), g.int64([1])]); // [1, D]
        const vn = g.op1('Slice', [vRow, g.int64([h * D]), g.int64([(h + 1) * D]), g.int64([1])]);
        const sp = g.op1('Gemm', [qh, pk], { transB: 1, alpha: { float: 0.125 } });
        const sn = g.op1('Gemm', [qh, kn], { transB: 1, alpha: { float: 0.125 } });
        const p = g.op1('Softmax', [g.op1('Concat', [sp, sn], { axis: 1 })], { axis: -1 });
        const [pp, pn] = g.op('Split', [p, g.op1('Concat', [g.op1('Shape', [pk], { start: 0, end: 1 }), g.int64([1])], { axis: 0 })], { axis: 1 }, { outputs: 2 });
        const o = g.op1('Add', [g.op1('MatMul', [pp, pv]), g.op1('MatMul', [pn, vn])]); // [G, D]
        heads.push(g.op1('Reshape', [o, g.int64([1, G * D])]));
      }
      laneOuts.push(g.op1('Concat', heads, { axis: 1 }));
    }
    x = lanes === 1 ? laneOuts[0] : g.op1('Concat', laneOuts, { axis: 0 });
  }
  g.output(x, T, ['b', Hq * D]);
  return serializeModel(g.build());
}
const rnd = (n: number) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const opts = { intraOpNumThreads: 1, executionProviders: ['cpu'], extra: { session: { intra_op: { allow_spinning: '0' } } } } as any;
const N = 40;
async function time(f: () => Promise<unknown>) { await f(); const t0 = performance.now(); for (let i = 0; i < N; i++) await f(); return ((performance.now() - t0) / N).toFixed(2); }
for (const lanes of [1, 8]) {
  const s = await ort.InferenceSession.create(graph(lanes), opts);
  for (const used of lanes === 1 ? [1] : [1, 8]) for (const past of [32, 2048]) {
    const feeds: Record<string, ort.Tensor> = { q: new ort.Tensor('float32', rnd(used * Hq * D), [used, Hq * D]), k: new ort.Tensor('float32', rnd(used * Hkv * D), [used, Hkv * D]), v: new ort.Tensor('float32', rnd(used * Hkv * D), [used, Hkv * D]) };
    const CAP = 4096;
    for (let l = 0; l < L; l++) for (let b = 0; b < lanes; b++) {
      const buf = rnd(Hkv * CAP * D);
      for (let h = 0; h < Hkv; h++) {
        const len = b < used ? past : 0;
        feeds[`pk.${l}.${b}.${h}`] = new ort.Tensor('float32', buf.subarray(h * CAP * D, h * CAP * D + len * D), [len, D]);
        feeds[`pv.${l}.${b}.${h}`] = new ort.Tensor('float32', buf.subarray(h * CAP * D, h * CAP * D + len * D), [len, D]);
      }
    }
    try { console.log({ lanes, used, past, ms: await time(() => s.run(feeds)) }); } catch (e) { console.log(lanes, used, past, String(e).slice(0, 300)); }
  }
}
