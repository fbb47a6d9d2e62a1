/**
 * Micro-bench of the MoE expert gate (issue 23, expert-gate.ts): what one untaken If costs in
 * onnxruntime-node's CPU provider. A graph of E Ifs chained on an accumulator [T, H], every
 * flag false, in variants: the then branch reading 0 weights vs a q4 expert (gate_up and down
 * MatMulNBits: 4 or 6 implicit weight inputs); flags as Gather of a scalar from a bool [E]
 * vs a Split of it; no If at all (the flags alone); the expert's weights as the branch's own
 * initializers (if-own-weights: no weight implicit inputs). Prints the median ms per run and µs per If.
 *   node --import tsx bench/moe-if-probe.ts [--experts 64] [--hidden 1024] [--inter 512] [--runs 300]
 */
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '../src/core/model/onnx/onnx-model.ts';

const { values } = parseArgs({ options: { experts: { type: 'string', default: '64' }, hidden: { type: 'string', default: '1024' }, inter: { type: 'string', default: '512' }, runs: { type: 'string', default: '300' }, taken: { type: 'string', default: '0' }, zp: { type: 'boolean', default: false } } });
const [E, H, I, RUNS, TAKEN] = [values.experts, values.hidden, values.inter, values.runs, values.taken].map(Number);

function q4(g: GraphBuilder, name: string, n: number, k: number, zp: boolean): string[] {
  const blocks = k / 32;
  const data = g.initializer({ name: `${name}_q`, type: OnnxType.UINT8, dims: [n, blocks, 16], raw: new Uint8Array(n * blocks * 16).fill(0x88) });
  const scales = g.initializer({ name: `${name}_s`, type: OnnxType.FLOAT, dims: [n * blocks], raw: new Uint8Array(new Float32Array(n * blocks).fill(0.01).buffer) });
  if (!zp) return [data, scales];
  const zeros = g.initializer({ name: `${name}_z`, type: OnnxType.UINT8, dims: [Math.ceil((n * blocks) / 2)], raw: new Uint8Array(Math.ceil((n * blocks) / 2)).fill(0x88) });
  return [data, scales, zeros];
}

type Variant = 'flags-only' | 'if-empty' | 'if-weights' | 'if-weights-split-flags' | 'if-no-acc' | 'inline-taken' | 'if-own-weights';
function build(variant: Variant, zp: boolean): Uint8Array {
  const g = new GraphBuilder('probe');
  const x = g.input('x', OnnxType.FLOAT, [1, H]);
  const used = g.op1('Cast', [g.input('used', OnnxType.UINT8, [E])], { to: 9 }); // bool
  const flags = variant === 'if-weights-split-flags' ? g.op('Split', [used], { axis: 0, num_outputs: E }, { outputs: E }).map((f) => g.op1('Squeeze', [f, g.int64([0])])) : Array.from({ length: E }, (_, e) => g.op1('Gather', [used, g.int64([e], [])], { axis: 0 }));
  let acc = g.op1('Identity', [x]);
  const parts: string[] = [];
  for (let e = 0; e < E; e++) {
    if (variant === 'inline-taken') {
      if (e >= TAKEN) continue;
      const gu = g.op1('MatMulNBits', [x, ...q4(g, `e${e}_gu`, 2 * I, H, zp)], { K: H, N: 2 * I, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft' });
      const [a, b] = g.op('Split', [gu, g.int64([I, I])], { axis: -1 }, { outputs: 2 });
      acc = g.op1('Add', [acc, g.op1('MatMulNBits', [g.op1('Mul', [a, b]), ...q4(g, `e${e}_d`, H, I, zp)], { K: I, N: H, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft' })]);
      continue;
    }
    if (variant === 'flags-only') {
      parts.push(g.op1('Cast', [flags[e]], { to: OnnxType.FLOAT }));
      continue;
    }
    // if-own-weights: the branch is a graph of its own scope holding its expert's weights (no weight implicit inputs).
    const then = variant === 'if-own-weights' ? new GraphBuilder(`e${e}_then`) : g.branch(`e${e}_then`);
    let part: string;
    if (variant === 'if-empty') part = then.op1('Mul', [x, x]);
    else if (variant === 'if-own-weights') {
      const gu = then.op1('MatMulNBits', [x, ...q4(then, `e${e}_gu`, 2 * I, H, zp)], { K: H, N: 2 * I, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft', label: `e${e}_gu` });
      const [a, b] = then.op('Split', [gu], { axis: -1, num_outputs: 2 }, { outputs: 2, label: `e${e}_split` });
      part = then.op1('MatMulNBits', [then.op1('Mul', [a, b], {}, { label: `e${e}_mul` }), ...q4(then, `e${e}_d`, H, I, zp)], { K: I, N: H, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft', label: `e${e}_down` });
    }
    else {
      const gu = then.op1('MatMulNBits', [x, ...q4(g, `e${e}_gu`, 2 * I, H, zp)], { K: H, N: 2 * I, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft' });
      const [a, b] = then.op('Split', [gu, g.int64([I, I])], { axis: -1 }, { outputs: 2 });
      part = then.op1('MatMulNBits', [then.op1('Mul', [a, b]), ...q4(g, `e${e}_d`, H, I, zp)], { K: I, N: H, bits: 4, block_size: 32, accuracy_level: 4 }, { domain: 'com.microsoft' });
    }
    const otherwise = g.branch(`e${e}_else`);
    if (variant === 'if-no-acc') {
      then.output(then.op1('Identity', [part], {}, { output: `e${e}_t` }), OnnxType.FLOAT, [1, H]);
      otherwise.output(otherwise.op1('Identity', [g.float([0], OnnxType.FLOAT, [1, 1])], {}, { output: `e${e}_f` }), OnnxType.FLOAT, [1, 'n']);
      parts.push(g.op1('If', [flags[e]], { then_branch: { graph: then.build() }, else_branch: { graph: otherwise.build() } }));
      continue;
    }
    then.output(then.op1('Add', [acc, part], {}, { output: `e${e}_t`, label: `e${e}_add` }), OnnxType.FLOAT, [1, H]);
    otherwise.output(otherwise.op1('Identity', [acc], {}, { output: `e${e}_f` }), OnnxType.FLOAT, [1, H]);
    acc = g.op1('If', [flags[e]], { then_branch: { graph: then.build() }, else_branch: { graph: otherwise.build() } });
  }
  if (parts.length) acc = g.op1('Add', [acc, g.op1('Sum', parts)]);
  g.output(g.op1('Identity', [acc], {}, { output: 'y' }), OnnxType.FLOAT, [1, H]);
  return serializeModel(g.build());
}

const feeds = { x: new ort.Tensor('float32', new Float32Array(H).fill(0.5), [1, H]), used: new ort.Tensor('uint8', Uint8Array.from({ length: E }, (_, e) => (e < TAKEN ? 1 : 0)), [E]) };
const variants: Variant[] = ['flags-only', 'if-empty', 'if-no-acc', 'if-weights', 'if-weights-split-flags', 'inline-taken', 'if-own-weights'];
const sessions = new Map<Variant, ort.InferenceSession>();
for (const v of variants) sessions.set(v, await ort.InferenceSession.create(build(v, values.zp), { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 }));
const times = new Map<Variant, number[]>(variants.map((v) => [v, []]));
for (let r = 0; r < RUNS; r++) {
  for (const v of variants) {
    const t0 = performance.now();
    await sessions.get(v)!.run(feeds);
    times.get(v)!.push(performance.now() - t0);
  }
}
const median = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1];
const base = median(times.get('flags-only')!);
for (const v of variants) {
  const m = median(times.get(v)!);
  console.log(`${v.padEnd(24)} ${m.toFixed(3)} ms/run  ${(((m - base) * 1000) / E).toFixed(1)} µs per If over flags-only`);
}
