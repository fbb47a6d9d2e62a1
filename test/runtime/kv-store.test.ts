/**
 * KvState and KvStore over a fake tensor type: plain objects with a byte size, whose
 * disposals are recorded, so ownership (who frees what, and how often) is visible.
 */
import { describe, expect, it } from 'vitest';
import { KV_BLOCK_POSITIONS, KvState, poolCapacity, type KvTensorOps, type LayerKv } from '../../src/core/runtime/kv-state.ts';
import { KvStore } from '../../src/core/runtime/kv-store.ts';
import { PrefixStore } from '../../src/core/runtime/prefix-store.ts';

interface FakeTensor {
  readonly id: string;
  readonly positions: number;
}

const BYTES_PER_POSITION = 10;

/** Fake ops: bytes = capacity × 10; growing makes a new tensor (or none, like GPU KV). */
function fakeOps(options: { canGrow?: boolean } = {}) {
  const disposed: string[] = [];
  let made = 0;
  const ops: KvTensorOps<FakeTensor> = {
    bytes: (t) => t.positions * BYTES_PER_POSITION,
    capacity: (t) => t.positions,
    grow: (t, capacity) => (options.canGrow === false ? undefined : { id: `${t?.id ?? 'new'}^${capacity}#${made++}`, positions: capacity }),
    dispose: (t) => void disposed.push(t.id),
  };
  return { ops, disposed };
}

/** Present KV for every layer of [start, end), tagged so each tensor is identifiable. */
function present(start: number, end: number, positions: number, tag: string): Map<number, LayerKv<FakeTensor>> {
  const map = new Map<number, LayerKv<FakeTensor>>();
  for (let l = start; l < end; l++) {
    map.set(l, { key: { id: `${tag}.k${l}`, positions }, value: { id: `${tag}.v${l}`, positions } });
  }
  return map;
}

const range = { start: 2, end: 4 };
/** Bytes of a state over two layers holding `positions` (key + value per layer). */
const stateBytes = (positions: number) => 2 * 2 * positions * BYTES_PER_POSITION;

describe('KvState', () => {
  it('starts empty', () => {
    const { ops } = fakeOps();
    const state = new KvState('s', range, ops);
    expect(state.length).toBe(0);
    expect(state.bytes).toBe(0);
    expect(state.past(2)).toBeUndefined();
    expect(state.isDisposed).toBe(false);
  });

  it('append takes the new tensors and disposes each replaced one exactly once', () => {
    const { ops, disposed } = fakeOps();
    const state = new KvState('s', range, ops);
    state.append(present(2, 4, 3, 'a'), 3);
    expect(disposed).toEqual([]);
    expect(state.length).toBe(3);
    expect(state.bytes).toBe(stateBytes(3));
    expect(state.past(2)?.key.id).toBe('a.k2');

    state.append(present(2, 4, 5, 'b'), 5);
    expect(disposed.sort()).toEqual(['a.k2', 'a.k3', 'a.v2', 'a.v3']);
    expect(state.length).toBe(5);
    expect(state.bytes).toBe(stateBytes(5));
    expect(state.past(3)?.value.id).toBe('b.v3');

    state.dispose();
    expect(disposed.sort()).toEqual(['a.k2', 'a.k3', 'a.v2', 'a.v3', 'b.k2', 'b.k3', 'b.v2', 'b.v3']);
  });

  it('append refuses a missing layer or a shrinking length', () => {
    const { ops } = fakeOps();
    const state = new KvState('s', range, ops);
    expect(() => state.append(present(2, 3, 1, 'a'), 1)).toThrow(/layer 3 is missing/);
    state.clear();
    state.append(present(2, 4, 4, 'b'), 4);
    expect(() => state.append(present(2, 4, 2, 'c'), 2)).toThrow(RangeError);
  });

  it('truncate only lowers the length: no tensor is rebuilt or freed', () => {
    const { ops, disposed } = fakeOps();
    const state = new KvState('s', range, ops);
    state.append(present(2, 4, 6, 'a'), 6);
    const key = state.past(2)?.key;
    state.truncate(4);
    expect(state.length).toBe(4);
    expect(state.bytes).toBe(stateBytes(6));
    expect(state.past(2)?.key).toBe(key);
    expect(disposed).toEqual([]);

    state.truncate(4); // no-op at or above the length
    state.truncate(9);
    expect(state.length).toBe(4);
    expect(() => state.truncate(-1)).toThrow(RangeError);
  });

  it('reserve grows every layer in blocks and keeps the held positions; commit records in-place writes', () => {
    const { ops, disposed } = fakeOps();
    const state = new KvState('s', range, ops);
    expect(state.reserve(3)).toBe(true);
    expect(state.capacity).toBe(KV_BLOCK_POSITIONS);
    expect(state.length).toBe(0);
    expect(state.bytes).toBe(stateBytes(KV_BLOCK_POSITIONS));
    state.commit(3);
    expect(state.length).toBe(3);
    const before = state.past(3)?.value;
    expect(state.reserve(KV_BLOCK_POSITIONS)).toBe(true); // fits: nothing changes
    expect(state.past(3)?.value).toBe(before);
    expect(disposed).toEqual([]);
    expect(state.reserve(KV_BLOCK_POSITIONS + 1)).toBe(true);
    expect(state.capacity).toBe(2 * KV_BLOCK_POSITIONS);
    expect(state.length).toBe(3);
    expect(disposed).toHaveLength(4); // the old buffers, once each
    expect(state.bytes).toBe(stateBytes(2 * KV_BLOCK_POSITIONS));
    expect(() => state.commit(2)).toThrow(RangeError);
    expect(() => state.commit(3 * KV_BLOCK_POSITIONS)).toThrow(RangeError);
    state.dispose();
    expect(disposed).toHaveLength(8);
  });

  it('poolCapacity rounds to blocks with room to grow', () => {
    expect(poolCapacity(1, 0)).toBe(KV_BLOCK_POSITIONS);
    expect(poolCapacity(KV_BLOCK_POSITIONS + 1, KV_BLOCK_POSITIONS)).toBe(2 * KV_BLOCK_POSITIONS);
    expect(poolCapacity(2049, 2048)).toBe(2304);
    expect(poolCapacity(10, 512)).toBe(512);
  });

  it('reserve with ops that cannot grow (GPU KV) changes nothing and says so', () => {
    const { ops, disposed } = fakeOps({ canGrow: false });
    const state = new KvState('s', range, ops);
    state.append(present(2, 4, 6, 'a'), 6);
    expect(state.reserve(7)).toBe(false);
    expect(state.length).toBe(6);
    expect(state.bytes).toBe(stateBytes(6));
    expect(disposed).toEqual([]);
  });

  it('dispose is idempotent and makes the state refuse further use', () => {
    const { ops, disposed } = fakeOps();
    const state = new KvState('s', range, ops);
    state.append(present(2, 4, 2, 'a'), 2);
    state.dispose();
    state.dispose();
    expect(state.isDisposed).toBe(true);
    expect(disposed).toHaveLength(4);
    expect(state.bytes).toBe(0);
    expect(() => state.append(present(2, 4, 3, 'b'), 3)).toThrow(/disposed/);
    expect(() => state.truncate(0)).toThrow(/disposed/);
  });
});

describe('KvStore', () => {
  const r = { start: 0, end: 2 };
  const fill = (store: KvStore<FakeTensor>, session: string, positions: number, tag = session) => {
    const state = store.acquire(session, r);
    state.append(present(0, 2, positions, tag), positions);
    return state;
  };

  it('acquire creates once per session and range; find never creates', () => {
    const { ops } = fakeOps();
    const store = new KvStore(ops, Number.MAX_SAFE_INTEGER);
    expect(store.find('s', r)).toBeUndefined();
    const a = store.acquire('s', r);
    expect(store.acquire('s', r)).toBe(a);
    expect(store.find('s', r)).toBe(a);
    const other = store.acquire('s', { start: 2, end: 4 });
    expect(other).not.toBe(a);
    expect(other.range).toEqual({ start: 2, end: 4 });
    expect(store.stats().entries).toBe(2);
  });

  it('keeps its byte total running through appends, truncations, evictions, releases and discards', () => {
    const { ops } = fakeOps();
    const store = new KvStore(ops, stateBytes(12));
    const held: KvState<FakeTensor>[] = [];
    const sum = () => held.filter((s) => !s.isDisposed).reduce((total, s) => total + s.bytes, 0);
    for (let i = 0; i < 30; i++) {
      const session = `s${i % 5}`;
      const state = store.acquire(session, r);
      if (!held.includes(state)) held.push(state);
      if (i % 7 === 3) state.truncate(Math.floor(state.length / 2));
      else state.append(present(0, 2, state.length + 1 + (i % 3), `${session}-${i}`), state.length + 1 + (i % 3));
      store.enforceBudget(state);
      if (i % 11 === 10) store.release('s1');
      expect(store.bytes).toBe(sum());
      expect(store.stats().bytes).toBe(sum());
    }
    expect(store.stats().evictions).toBeGreaterThan(0);
    store.clear();
    expect(store.bytes).toBe(0);
  });

  it('release disposes every state of that session only', () => {
    const { ops } = fakeOps();
    const store = new KvStore(ops, Number.MAX_SAFE_INTEGER);
    const a = fill(store, 'a', 2);
    const a2 = store.acquire('a', { start: 2, end: 4 });
    const b = fill(store, 'b', 2);
    expect(store.release('a')).toBe(2);
    expect(a.isDisposed && a2.isDisposed).toBe(true);
    expect(b.isDisposed).toBe(false);
    expect(store.find('a', r)).toBeUndefined();
    expect(store.release('a')).toBe(0);
    expect(store.stats()).toMatchObject({ entries: 1, bytes: stateBytes(2), evictions: 0 });
  });

  it('evicts least recently used first, never the kept state, until within budget', () => {
    const { ops } = fakeOps();
    const one = stateBytes(1); // a 1-position state over 2 layers
    const store = new KvStore(ops, 3 * one);
    const a = fill(store, 'a', 1);
    const b = fill(store, 'b', 1);
    const c = fill(store, 'c', 1);
    store.enforceBudget();
    expect(store.stats()).toEqual({ entries: 3, bytes: 3 * one, budgetBytes: 3 * one, evictions: 0 });

    store.find('a', r); // a is now the most recently used: b is the oldest
    const d = fill(store, 'd', 1);
    store.enforceBudget(d);
    expect(b.isDisposed).toBe(true);
    expect([a, c, d].map((s) => s.isDisposed)).toEqual([false, false, false]);
    expect(store.stats()).toMatchObject({ entries: 3, bytes: 3 * one, evictions: 1 });

    // The kept state is skipped even when it is the least recently used one.
    const kept = store.acquire('c', r); // order now: a, d, c
    store.acquire('a', r); // order: d, c, a
    store.acquire('d', r); // order: c, a, d  (c oldest)
    kept.append(present(0, 2, 2, 'c2'), 2); // c grows to 2 positions: total 4 × one
    store.enforceBudget(kept);
    expect(kept.isDisposed).toBe(false);
    expect(a.isDisposed).toBe(true); // next-oldest after the kept one
    expect(d.isDisposed).toBe(false);
    expect(store.stats()).toMatchObject({ entries: 2, bytes: 3 * one, evictions: 2 });
  });

  it('keeps the kept state even when it alone exceeds the budget', () => {
    const { ops } = fakeOps();
    const store = new KvStore(ops, 10);
    const a = fill(store, 'a', 1);
    const big = fill(store, 'big', 5);
    store.enforceBudget(big);
    expect(a.isDisposed).toBe(true);
    expect(big.isDisposed).toBe(false);
    expect(store.stats()).toMatchObject({ entries: 1, bytes: stateBytes(5), evictions: 1 });
  });

  it('setBudget evicts down to the new budget', () => {
    const { ops } = fakeOps();
    const store = new KvStore(ops, Number.MAX_SAFE_INTEGER);
    const a = fill(store, 'a', 1);
    const b = fill(store, 'b', 1);
    store.setBudget(stateBytes(1));
    expect(a.isDisposed).toBe(true);
    expect(b.isDisposed).toBe(false);
    expect(store.stats()).toEqual({ entries: 1, bytes: stateBytes(1), budgetBytes: stateBytes(1), evictions: 1 });
  });

  it('clear disposes every state', () => {
    const { ops, disposed } = fakeOps();
    const store = new KvStore(ops, Number.MAX_SAFE_INTEGER);
    const a = fill(store, 'a', 1);
    const b = fill(store, 'b', 3);
    store.clear();
    expect(a.isDisposed && b.isDisposed).toBe(true);
    expect(disposed).toHaveLength(8);
    expect(store.stats()).toMatchObject({ entries: 0, bytes: 0, evictions: 0 });
    expect(store.find('a', r)).toBeUndefined();
  });
});

describe('PrefixStore.releaseRange (layers unloaded from the peer)', () => {
  it("frees every entry's state on that range, keeps the others, and drops entries left empty", () => {
    const { ops, disposed } = fakeOps();
    const prefixes = new PrefixStore<FakeTensor>(1 << 20);
    const other = { start: 4, end: 6 };
    const state = (id: string, r: { start: number; end: number }) => {
      const s = new KvState(id, r, ops);
      s.append(present(r.start, r.end, 8, `${id}@${r.start}`), 8);
      return s;
    };
    expect(prefixes.keep('a', [state('a', range), state('a', other)], 8)).toBe(2);
    expect(prefixes.keep('b', [state('b', range)], 8)).toBe(1);
    const before = prefixes.bytes;
    expect(prefixes.releaseRange(range)).toBe(2);
    const target = (r: { start: number; end: number }) => new KvState('t', r, ops);
    expect(prefixes.fork('a', range, 8, target(range))).toBeUndefined();
    expect(prefixes.fork('a', other, 8, target(other))).toBe(true);
    expect(prefixes.fork('b', range, 8, target(range))).toBeUndefined();
    expect(prefixes.size).toBe(1);
    expect(prefixes.bytes).toBe(before / 3);
    expect(disposed.filter((id) => id.includes('@2')).length).toBe(8); // k and v of layers 2, 3 for a and b
  });
});

describe('PrefixStore as a tree (protocol 3.3)', () => {
  /** Fake ops that can join (as CPU tensors can): a tail holds exactly its positions. */
  function joinOps() {
    const { ops, disposed } = fakeOps();
    let made = 0;
    const joining: KvTensorOps<FakeTensor> = { ...ops, join: (parts, capacity) => ({ id: `join(${parts.map((p) => p.tensor.id).join('+')})#${made++}`, positions: capacity }) };
    return { ops: joining, disposed };
  }
  const filled = (ops: KvTensorOps<FakeTensor>, positions: number, tag: string) => {
    const s = new KvState(tag, range, ops);
    s.append(present(range.start, range.end, positions, tag), positions);
    return s;
  };

  it('a child holds only its tail; a fork joins the chain; the budget evicts leaves before their parents; a parent replaced shorter, or a range released, takes its descendants', () => {
    const { ops } = joinOps();
    const prefixes = new PrefixStore<FakeTensor>(1 << 20);
    expect(prefixes.keep('r', [filled(ops, 8, 'r')], 8)).toBe(1);
    expect(prefixes.bytes, 'a whole copy cut to its positions').toBe(stateBytes(8));
    expect(prefixes.keep('c', [filled(ops, 10, 'c')], 10, { prefixId: 'r', length: 6 })).toBe(1);
    expect(prefixes.keep('g', [filled(ops, 12, 'g')], 12, { prefixId: 'c', length: 8 })).toBe(1);
    expect(prefixes.bytes, 'root + two tails of 4').toBe(stateBytes(8) + 2 * stateBytes(4));
    const target = new KvState('t', range, ops);
    expect(prefixes.fork('g', range, 12, target)).toBe(true);
    expect(target.length).toBe(12);
    expect(target.past(2)!.key.id, 'joined from r, c and g').toMatch(/^join\(.*r.*\+.*c.*\+.*g.*\)/);
    expect(prefixes.fork('g', range, 13, new KvState('u', range, ops))).toBeUndefined();

    // g was used last, yet its ancestors are more recent: the budget takes g, not r (which would take all).
    prefixes.setBudget(stateBytes(8) + stateBytes(4));
    expect(prefixes.stats()).toMatchObject({ entries: 2, evictions: 1, bytes: stateBytes(8) + stateBytes(4) });
    expect(prefixes.fork('c', range, 10, new KvState('v', range, ops))).toBe(true);

    // r kept again with 5 positions: c needs 6 of them, so it goes.
    prefixes.setBudget(1 << 20);
    expect(prefixes.keep('r', [filled(ops, 5, 'r2')], 5)).toBe(1);
    expect(prefixes.stats()).toMatchObject({ entries: 1, bytes: stateBytes(5) });
    expect(prefixes.fork('c', range, 10, new KvState('w', range, ops))).toBeUndefined();

    // A refused keep (unknown parent, shared length beyond it) disposes the states and keeps nothing.
    const orphan = filled(ops, 9, 'o');
    expect(() => prefixes.keep('o', [orphan], 9, { prefixId: 'nope', length: 3 })).toThrow(/not a prefix entry/);
    expect(orphan.isDisposed).toBe(true);
    expect(() => prefixes.keep('o', [filled(ops, 9, 'o2')], 9, { prefixId: 'r', length: 6 })).toThrow(/must be in \[1, 5\]/);
    expect(prefixes.size).toBe(1);

    expect(prefixes.keep('c2', [filled(ops, 9, 'c2')], 9, { prefixId: 'r', length: 3 })).toBe(1);
    expect(prefixes.releaseRange(range)).toBe(2);
    expect(prefixes.stats()).toMatchObject({ entries: 0, bytes: 0 });
  });

  it('a runtime that cannot join (KV on the GPU) keeps whole copies, parent or not, and forks them as before', () => {
    const { ops } = fakeOps();
    const prefixes = new PrefixStore<FakeTensor>(1 << 20);
    expect(prefixes.keep('r', [filled(ops, 8, 'r')], 8)).toBe(1);
    expect(prefixes.keep('c', [filled(ops, 10, 'c')], 10, { prefixId: 'r', length: 6 })).toBe(1);
    expect(prefixes.bytes).toBe(stateBytes(8) + stateBytes(10));
    expect(prefixes.fork('c', range, 10, new KvState('t', range, ops))).toBe(true);
    prefixes.setBudget(stateBytes(10));
    expect(prefixes.stats(), 'c is whole: r can go alone').toMatchObject({ entries: 1, bytes: stateBytes(10) });
  });
});
