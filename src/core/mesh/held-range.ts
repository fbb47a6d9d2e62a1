/**
 * HeldRange: one layer range on one peer — what the mesh loads, leases, times and unloads.
 * Everything the mesh keeps per peer and range is a `HeldRangeMap`, the one place the key is
 * spelled. Pure.
 */
import type { LayerRange } from '../model/types.ts';

export interface HeldRange {
  readonly peerId: string;
  readonly range: LayerRange; // [start, end)
}

export function sameRange(a: LayerRange, b: LayerRange): boolean {
  return a.start === b.start && a.end === b.end;
}

/** `[start, end)`, as messages name a range. */
export function rangeText(range: LayerRange): string {
  return `[${range.start}, ${range.end})`;
}

const keyOf = (held: HeldRange) => `${held.peerId}@${held.range.start}:${held.range.end}`;

/** A map keyed by peer and range (insertion order kept). */
export class HeldRangeMap<V> {
  private readonly map = new Map<string, { readonly held: HeldRange; value: V }>();

  get size(): number {
    return this.map.size;
  }

  get(held: HeldRange): V | undefined {
    return this.map.get(keyOf(held))?.value;
  }

  has(held: HeldRange): boolean {
    return this.map.has(keyOf(held));
  }

  set(held: HeldRange, value: V): this {
    this.map.set(keyOf(held), { held: { peerId: held.peerId, range: held.range }, value });
    return this;
  }

  delete(held: HeldRange): boolean {
    return this.map.delete(keyOf(held));
  }

  /** Drop every entry of peers for which `keep` is false. */
  retainPeers(keep: (peerId: string) => boolean): void {
    for (const [key, { held }] of this.map) if (!keep(held.peerId)) this.map.delete(key);
  }

  *keys(): IterableIterator<HeldRange> {
    for (const { held } of this.map.values()) yield held;
  }
}
