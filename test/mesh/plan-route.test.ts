import { describe, expect, it } from 'vitest';
import { PlanError } from '../../src/core/mesh/plan-error.ts';
import {
  coversModel,
  planRoute,
  replacementFor,
  type PeerInfo,
  type PlanModel,
  type PlanOptions,
  type RoutePlan,
} from '../../src/core/mesh/plan-route.ts';

const MB = 1_000_000;
const model: PlanModel = { numLayers: 8, bytesPerLayer: 100 * MB, headBytes: 50 * MB };
const peer = (id: string, layers: number, extra: Partial<PeerInfo> = {}): PeerInfo => ({
  id,
  memoryBudgetBytes: layers * 100 * MB,
  runtime: 'node',
  ...extra,
});
const shape = (plan: RoutePlan): string[] => plan.hops.map((h) => `${h.peerId}[${h.range.start},${h.range.end})`);

function planError(fn: () => unknown): PlanError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(PlanError);
    return error as PlanError;
  }
  throw new Error('expected a PlanError');
}

describe('planRoute', () => {
  it("headLayers 'none': peers only, by id, in proportion to capacity", () => {
    const plan = planRoute(model, [peer('b', 2), peer('a', 6)], { headLayers: 'none', headBudgetBytes: 10_000 * MB });
    expect(shape(plan)).toEqual(['a[0,6)', 'b[6,8)']);
    expect(coversModel(plan, 8)).toBe(true);
  });

  it("headLayers 'auto': the head is a peer with its budget minus headBytes, placed first", () => {
    // head: (350 − 50) MB / 100 MB = 3 layers of capacity; a: 3; b: 6 → 8 × 3/12, 3/12, 6/12 = 2, 2, 4.
    const plan = planRoute(model, [peer('b', 6), peer('a', 3)], { headLayers: 'auto', headBudgetBytes: 350 * MB });
    expect(shape(plan)).toEqual(['head[0,2)', 'a[2,4)', 'b[4,8)']);
  });

  it("headLayers 'auto' alone is complete-model mode", () => {
    expect(shape(planRoute(model, [], { headLayers: 'auto', headBudgetBytes: 10_000 * MB }))).toEqual(['head[0,8)']);
  });

  it('leaves out peers that fit no layer, or are not ready', () => {
    const peers = [peer('a', 8), peer('tiny', 0.99), peer('busy', 8, { ready: false }), peer('broken', Number.NaN)];
    expect(shape(planRoute(model, peers, { headLayers: 'none' }))).toEqual(['a[0,8)']);
    // A head whose budget does not cover headBytes plus one layer is left out too.
    expect(shape(planRoute(model, peers, { headLayers: 'auto', headBudgetBytes: 149 * MB }))).toEqual(['a[0,8)']);
  });

  it('never gives a peer more layers than its budget fits', () => {
    const plan = planRoute({ numLayers: 10, bytesPerLayer: 1 }, [peer('a', 1), peer('b', 1)].map((p, i) => ({ ...p, memoryBudgetBytes: [5, 5][i] })), {
      headLayers: 'none',
    });
    expect(shape(plan)).toEqual(['a[0,5)', 'b[5,10)']);
    const skew = planRoute({ numLayers: 10, bytesPerLayer: 1 }, [{ id: 'a', memoryBudgetBytes: 2, runtime: 'browser' }, { id: 'b', memoryBudgetBytes: 8, runtime: 'node' }], {
      headLayers: 'none',
    });
    expect(shape(skew)).toEqual(['a[0,2)', 'b[2,10)']);
  });

  it('drops the smallest peers when there are more peers than layers', () => {
    const small: PlanModel = { numLayers: 2, bytesPerLayer: 1 };
    const peers: PeerInfo[] = [
      { id: 'c', memoryBudgetBytes: 5, runtime: 'node' },
      { id: 'b', memoryBudgetBytes: 1, runtime: 'node' },
      { id: 'a', memoryBudgetBytes: 5, runtime: 'node' },
    ];
    expect(shape(planRoute(small, peers, { headLayers: 'none' }))).toEqual(['a[0,1)', 'c[1,2)']);
  });

  it('explicit head range: the head holds exactly it, peers share the rest cut around it', () => {
    // 8 layers, head [3,5): peers share 6 virtual layers 3:3 → a [0,3), b [5,8).
    const even = planRoute(model, [peer('a', 4), peer('b', 4)], { headLayers: { start: 3, end: 5 } });
    expect(shape(even)).toEqual(['a[0,3)', 'head[3,5)', 'b[5,8)']);
    // Uneven: a gets 4 of 6 virtual layers → [0,3) before the head and [5,6) after it.
    const straddle = planRoute(model, [peer('a', 8), peer('b', 4)], { headLayers: { start: 3, end: 5 } });
    expect(shape(straddle)).toEqual(['a[0,3)', 'head[3,5)', 'a[5,6)', 'b[6,8)']);
    expect(coversModel(straddle, 8)).toBe(true);
    // At the ends.
    expect(shape(planRoute(model, [peer('a', 8)], { headLayers: { start: 0, end: 2 } }))).toEqual(['head[0,2)', 'a[2,8)']);
    expect(shape(planRoute(model, [peer('a', 8)], { headLayers: { start: 6, end: 8 } }))).toEqual(['a[0,6)', 'head[6,8)']);
    expect(shape(planRoute(model, [], { headLayers: { start: 0, end: 8 } }))).toEqual(['head[0,8)']);
  });

  it('explicit head range is checked against the head budget when one is given', () => {
    const error = planError(() => planRoute(model, [peer('a', 8)], { headLayers: { start: 0, end: 4 }, headBudgetBytes: 300 * MB }));
    expect(error.code).toBe('route_unavailable');
    expect(error.message).toMatch(/^route unavailable: the head's budget fits 2 layers/);
  });

  it('route unavailable: no peers with the head holding none', () => {
    const error = planError(() => planRoute(model, [], { headLayers: 'none' }));
    expect(error.code).toBe('route_unavailable');
    expect(error.message).toMatch(/route unavailable: no ready peer has room for one layer.*head-layers none/);
  });

  it('route unavailable: not enough memory in total', () => {
    const error = planError(() => planRoute(model, [peer('a', 3), peer('b', 4)], { headLayers: 'none' }));
    expect(error.code).toBe('route_unavailable');
    expect(error.reason).toMatch(/not enough memory: 2 peer\(s\) fit 7 of 8 layers/);
    // Whole layers: two half-and-a-bit budgets do not make a layer.
    const halves = planError(() => planRoute({ numLayers: 2, bytesPerLayer: 10 }, [{ id: 'a', memoryBudgetBytes: 15, runtime: 'node' }, { id: 'b', memoryBudgetBytes: 4, runtime: 'node' }], { headLayers: 'none' }));
    expect(halves.code).toBe('route_unavailable');
    // Explicit range: the peers cannot hold the rest.
    expect(planError(() => planRoute(model, [peer('a', 2)], { headLayers: { start: 0, end: 4 } })).reason).toMatch(/besides the head's \[0, 4\)/);
  });

  it.each<[string, PlanModel, PeerInfo[], PlanOptions]>([
    ['a zero layer count', { numLayers: 0, bytesPerLayer: 1 }, [], { headLayers: 'none' }],
    ['a non-positive bytesPerLayer', { numLayers: 2, bytesPerLayer: 0 }, [], { headLayers: 'none' }],
    ['an empty head range', model, [], { headLayers: { start: 2, end: 2 } }],
    ['a head range past the model', model, [], { headLayers: { start: 4, end: 9 } }],
    ["'auto' without a head budget", model, [], { headLayers: 'auto' }],
    ['duplicate peer ids', model, [peer('a', 8), peer('a', 8)], { headLayers: 'none' }],
    ["a listed peer called 'head'", model, [peer('head', 8)], { headLayers: 'none' }],
    ["a listed peer with runtime 'head'", model, [peer('x', 8, { runtime: 'head' })], { headLayers: 'none' }],
  ])('invalid input: %s', (_name, m, peers, options) => {
    expect(planError(() => planRoute(m, peers, options)).code).toBe('invalid_input');
  });

  it('is deterministic whatever the order peers are listed in', () => {
    const peers = [peer('d', 3), peer('a', 3), peer('c', 5), peer('b', 3)];
    const options: PlanOptions = { headLayers: 'auto', headBudgetBytes: 350 * MB };
    const big: PlanModel = { ...model, numLayers: 14 };
    const first = planRoute(big, peers, options);
    expect(planRoute(big, [...peers].reverse(), options)).toEqual(first);
    // Capacities 3, 3, 3, 5, 3 of 17 over 14 layers: shares 2.47 ×4 and 4.12; the two spare
    // layers go to the first two .47 remainders (head, a).
    expect(shape(first)).toEqual(['head[0,3)', 'a[3,6)', 'b[6,8)', 'c[8,12)', 'd[12,14)']);
  });

  it('always covers the model or throws route unavailable (random meshes)', () => {
    let seed = 12345;
    const rand = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    for (let trial = 0; trial < 1000; trial++) {
      const numLayers = 1 + Math.floor(rand() * 40);
      const m: PlanModel = { numLayers, bytesPerLayer: 10, headBytes: Math.floor(rand() * 30) };
      const peers: PeerInfo[] = Array.from({ length: Math.floor(rand() * 8) }, (_, i) => ({
        id: `p${i}`,
        memoryBudgetBytes: Math.floor(rand() * 200),
        runtime: rand() < 0.5 ? 'node' : 'browser',
        ready: rand() < 0.9,
      }));
      const kind = Math.floor(rand() * 3);
      const start = Math.floor(rand() * numLayers);
      const options: PlanOptions =
        kind === 0
          ? { headLayers: 'none' }
          : kind === 1
            ? { headLayers: 'auto', headBudgetBytes: Math.floor(rand() * 200) }
            : { headLayers: { start, end: start + 1 + Math.floor(rand() * (numLayers - start)) } };
      let plan: RoutePlan;
      try {
        plan = planRoute(m, peers, options);
      } catch (error) {
        expect(error).toBeInstanceOf(PlanError);
        expect((error as PlanError).code).toBe('route_unavailable');
        continue;
      }
      expect(coversModel(plan, numLayers)).toBe(true);
      const held = new Map<string, number>();
      for (const hop of plan.hops) held.set(hop.peerId, (held.get(hop.peerId) ?? 0) + hop.range.end - hop.range.start);
      for (const p of peers) {
        const layers = held.get(p.id) ?? 0;
        if (p.ready === false) expect(layers).toBe(0);
        expect(layers * m.bytesPerLayer).toBeLessThanOrEqual(p.memoryBudgetBytes);
      }
      if (options.headLayers === 'none') expect(held.has('head')).toBe(false);
    }
  });
});

describe('coversModel', () => {
  it('rejects gaps, overlaps, disorder and short routes', () => {
    const hop = (start: number, end: number) => ({ peerId: 'a', range: { start, end } });
    expect(coversModel({ hops: [hop(0, 2), hop(2, 4)] }, 4)).toBe(true);
    expect(coversModel({ hops: [hop(0, 2), hop(3, 4)] }, 4)).toBe(false);
    expect(coversModel({ hops: [hop(0, 3), hop(2, 4)] }, 4)).toBe(false);
    expect(coversModel({ hops: [hop(2, 4), hop(0, 2)] }, 4)).toBe(false);
    expect(coversModel({ hops: [hop(0, 2)] }, 4)).toBe(false);
    expect(coversModel({ hops: [] }, 0)).toBe(false);
  });
});

describe('replacementFor', () => {
  const plan: RoutePlan = {
    hops: [
      { peerId: 'a', range: { start: 0, end: 3 } },
      { peerId: 'b', range: { start: 3, end: 5 } },
      { peerId: 'c', range: { start: 5, end: 8 } },
    ],
  };
  const peers = [peer('a', 5), peer('b', 4), peer('c', 6), peer('d', 2)];
  const lost = { start: 3, end: 5 }; // b's range, 2 layers

  it('picks the non-banned peer with the most free memory that fits the range', () => {
    // free: a 2 layers, c 3, d 2 → c.
    expect(replacementFor(lost, peers, new Set(['b']), { model, plan, headLayers: 'none' })).toBe('c');
    expect(replacementFor(lost, peers, new Set(['b', 'c']), { model, plan, headLayers: 'none' })).toBe('a'); // a, d tie at 2 → smaller id
    expect(replacementFor(lost, peers, new Set(['b', 'c', 'a']), { model, plan, headLayers: 'none' })).toBe('d');
  });

  it('skips peers that are not ready or too full', () => {
    const some = [peer('a', 5), peer('b', 4), peer('c', 6, { ready: false }), peer('d', 1)];
    expect(replacementFor(lost, some, new Set(['b']), { model, plan, headLayers: 'none' })).toBe('a');
    expect(replacementFor({ start: 0, end: 8 }, some, new Set(), { model, plan, headLayers: 'none' })).toBeUndefined();
  });

  it('without a plan, free memory is the whole budget', () => {
    expect(replacementFor(lost, peers, new Set(['b']), { model, headLayers: 'none' })).toBe('c');
  });

  it("falls back to the head unless headLayers is 'none' or the head is banned", () => {
    const banned = new Set(['a', 'b', 'c', 'd']);
    expect(replacementFor(lost, peers, banned, { model, plan, headLayers: 'none' })).toBeUndefined();
    expect(replacementFor(lost, peers, banned, { model, plan, headLayers: 'auto', headBudgetBytes: 250 * MB })).toBe('head');
    expect(replacementFor(lost, peers, banned, { model, plan, headLayers: 'auto', headBudgetBytes: 249 * MB })).toBeUndefined();
    expect(replacementFor(lost, peers, new Set([...banned, 'head']), { model, plan, headLayers: 'auto', headBudgetBytes: 10_000 * MB })).toBeUndefined();
    // Explicit head range without a budget: the head's room is not known, it takes the range.
    expect(replacementFor(lost, peers, banned, { model, plan, headLayers: { start: 0, end: 1 } })).toBe('head');
  });

  it('prefers a peer over the head', () => {
    expect(replacementFor(lost, peers, new Set(['b']), { model, plan, headLayers: 'auto', headBudgetBytes: 10_000 * MB })).toBe('c');
  });

  it('refuses a malformed range', () => {
    expect(planError(() => replacementFor({ start: 5, end: 3 }, peers, new Set(), { model, headLayers: 'none' })).code).toBe('invalid_input');
  });
});
