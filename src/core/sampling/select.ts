/** Partial selection: the n best entries of a long vector without sorting all of it. */

/**
 * Writes into `out` the indices of the `n` largest values, excluding -Infinity (masked) entries,
 * sorted by value descending with ties broken by the lower index first. Returns how many were
 * written: min(n, number of values above -Infinity). `out.length` must be ≥ n.
 *
 * A bounded min-heap (worst kept entry at the root): O(V log n) time, no allocation.
 * Values must not be NaN.
 */
export function selectTopN(values: ArrayLike<number>, n: number, out: Int32Array): number {
  if (out.length < n) throw new RangeError(`selectTopN: out has ${out.length} slots, need ${n}`);
  if (n <= 0) return 0;
  // worse(a, b): a ranks below b.
  const worse = (a: number, b: number): boolean =>
    values[a] < values[b] || (values[a] === values[b] && a > b);

  let size = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === -Infinity) continue;
    if (size < n) {
      // Push and sift up.
      let child = size++;
      out[child] = i;
      while (child > 0) {
        const parent = (child - 1) >> 1;
        if (!worse(out[child], out[parent])) break;
        const tmp = out[child];
        out[child] = out[parent];
        out[parent] = tmp;
        child = parent;
      }
      continue;
    }
    // Indices arrive in increasing order, so an equal value never beats the kept (lower) index.
    if (!(v > values[out[0]])) continue;
    out[0] = i;
    let parent = 0;
    for (;;) {
      const left = 2 * parent + 1;
      if (left >= size) break;
      const right = left + 1;
      const child = right < size && worse(out[right], out[left]) ? right : left;
      if (!worse(out[child], out[parent])) break;
      const tmp = out[child];
      out[child] = out[parent];
      out[parent] = tmp;
      parent = child;
    }
  }
  out.subarray(0, size).sort((a, b) => (values[a] === values[b] ? a - b : values[b] - values[a]));
  return size;
}
