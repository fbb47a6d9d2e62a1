/**
 * Memory bandwidth, measured the way a decode step uses memory: streaming over buffers far
 * larger than the caches. `node --import tsx bench/bandwidth.ts [MiB]` copies one
 * Float64Array into another (TypedArray.set, i.e. memcpy) several times and prints the
 * best rate as JSON: bytes read + bytes written per second. The runner starts one such
 * process per core at once to load every memory channel, and adds the rates.
 */
export interface BandwidthSample {
  readonly bytesPerSecond: number;
  readonly bufferBytes: number;
}

export function measureCopyBandwidth(bufferBytes: number, repeats = 8): BandwidthSample {
  const n = Math.floor(bufferBytes / 8);
  const src = new Float64Array(n);
  const dst = new Float64Array(n);
  for (let i = 0; i < n; i += 512) src[i] = i; // touch every page
  dst.set(src);
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const started = performance.now();
    dst.set(src);
    best = Math.min(best, performance.now() - started);
  }
  return { bytesPerSecond: (2 * n * 8 * 1000) / best, bufferBytes: n * 8 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mib = Number(process.argv[2] ?? 256);
  process.stdout.write(`${JSON.stringify(measureCopyBandwidth(mib * 2 ** 20))}\n`);
}
