import { randomUUID } from 'node:crypto';
import { loadLocalPipeline, openLocalModel } from '/work/wt/issue-17/src/node/local-model.ts';
process.env.MESHNET_HOME = '/work/wt/home-17';
const model = await openLocalModel('/work/wt/issue-17/bench/.cache/smollm2-135m-shaped');
const p = await loadLocalPipeline(model, { ranges: [{ start: 0, end: 15 }], device: 'cpu', dtype: 'fp32', threads: 1 });
const st = p.stages[0];
const ex = st.executor as any;
const B = 8;
const ids = Array.from({ length: B }, () => randomUUID());
for (const id of ids) { const h = await p.head.embed(Array.from({ length: 32 }, (_, i) => 5 + i)); await ex.run({ sessionId: id, startPosition: 0, hidden: h }, st.kv.acquire(id, ex.range)); }
let pos = 32;
const one = await p.head.embed([7]);
const time = async (n: number, f: () => Promise<unknown>) => { const t0 = performance.now(); for (let i = 0; i < n; i++) await f(); return ((performance.now() - t0) / n).toFixed(1); };
for (let round = 0; round < 2; round++) {
  const t1 = await time(8, async () => { await ex.run({ sessionId: ids[0], startPosition: pos, hidden: one }, st.kv.find(ids[0], ex.range)); });
  const t8 = await time(8, async () => { await ex.runBatch(ids.map((id) => ({ sessionId: id, startPosition: pos, hidden: one })), ids.map((id) => st.kv.find(id, ex.range))); pos++; });
  const tl = await time(8, async () => { await p.head.logits(one); });
  const te = await time(8, async () => { await p.head.embed([7]); });
  console.log({ round, 'run B=1 ms': t1, 'runBatch B=8 ms': t8, 'head logits ms': tl, 'embed ms': te });
}
process.exit(0);
