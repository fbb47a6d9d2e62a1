import { randomUUID } from 'node:crypto';
const root = process.argv[2];
const { loadLocalPipeline, openLocalModel } = await import(root + '/src/node/local-model.ts');
const model = await openLocalModel(process.argv[3]);
const ranges = [{ start: 0, end: model.checkpoint.config.numLayers }];
const gpu = await loadLocalPipeline(model, { ranges, device: 'webgpu', dtype: 'fp32', threads: 1 });
const cpu = await loadLocalPipeline(model, { ranges, device: 'cpu', dtype: 'fp32', threads: 1 });
for (const n of [8, 16, 17, 20, 32]) {
  const ids = Array.from({ length: n }, (_, i) => 1 + ((i * 7) % 90));
  const run = async (p: any) => { const s = randomUUID(); let h = await cpu.head.embed(ids); for (const st of p.stages) h = await st.executor.run({ sessionId: s, startPosition: 0, hidden: h }, st.kv.acquire(s, st.executor.range)); return h.data as Float32Array; };
  const a = await run(gpu), b = await run(cpu);
  let m = 0, at = 0; for (let i = 0; i < a.length; i++) { const d = Math.abs(a[i] - b[i]); if (d > m) { m = d; at = Math.floor(i / 32); } }
  console.log(n, m.toExponential(2), 'pos', at);
}
process.exit(0);
