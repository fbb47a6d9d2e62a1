/**
 * What the join page shows, as pure functions of the peer's status: the shard's progress
 * (percent, bytes, time left from the rate so far), the tokens/s series sampled once a second,
 * and its sparkline as SVG markup with the dashboard's classes (`svg.sparkline`, `.spark-line`,
 * `.spark-area`, `.baseline`).
 */
import type { ShardDownload } from './browser-peer.ts';

export interface DownloadView {
  readonly percent: number;
  readonly phase: string;
  readonly bytes: string;
  readonly left: string;
}

export function megabytes(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 2 : 1)} MB`;
}

function seconds(s: number): string {
  if (s < 1) return '<1 s';
  if (s < 90) return `${Math.round(s)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** The progress bar's state at `now` (`performance.now()` ms). */
export function downloadView(download: ShardDownload | undefined, now: number): DownloadView {
  if (!download) return { percent: 0, phase: 'waiting for the head to assign layers', bytes: '', left: '' };
  const { received, total, startedAt } = download;
  const bytes = `${megabytes(received)} / ${megabytes(total)}`;
  if (download.phase === 'done') return { percent: 100, phase: 'shard loaded', bytes, left: `in ${seconds(((download.finishedAt ?? now) - startedAt) / 1000)}` };
  if (download.phase === 'loading') return { percent: 100, phase: 'loading the shard into onnxruntime', bytes, left: '' };
  const percent = total > 0 ? Math.min(100, (100 * received) / total) : 0;
  const elapsed = (now - startedAt) / 1000;
  const rate = elapsed > 0 ? received / elapsed : 0;
  const left = received > 0 && rate > 0 ? `${seconds((total - received) / rate)} left` : 'starting…';
  return { percent, phase: 'downloading the shard', bytes, left };
}

export interface RatePoint {
  /** ms */
  readonly t: number;
  readonly tokensPerSecond: number;
}

/** Tokens/s from the tokens-served counter, one point per sample, the last `keep` points. */
export class RateSeries {
  private last: { t: number; tokens: number } | undefined;
  readonly points: RatePoint[] = [];

  constructor(private readonly keep = 60) {}

  sample(tokens: number, t: number): number {
    const last = this.last;
    this.last = { t, tokens };
    if (!last || t <= last.t) return 0;
    const rate = ((tokens - last.tokens) * 1000) / (t - last.t);
    this.points.push({ t, tokensPerSecond: rate });
    if (this.points.length > this.keep) this.points.shift();
    return rate;
  }
}

const W = 900;
const H = 120;
const PAD = 6;
const TOP = 18;

/** The series as an SVG line chart (the dashboard's sparkline look). */
export function sparklineSvg(points: readonly RatePoint[], color = '#3b82f6'): string {
  const open = `<svg class="sparkline" viewBox="0 0 ${W} ${H}" role="img" aria-label="tokens per second over time"><line class="baseline" x1="${PAD}" x2="${W - PAD}" y1="${H - PAD}" y2="${H - PAD}"/>`;
  if (points.length === 0) return `${open}<text class="spark-empty" x="${W / 2}" y="${H / 2 + 4}">waiting for the first tokens</text></svg>`;
  const t0 = points[0]!.t;
  const span = Math.max(1, points[points.length - 1]!.t - t0);
  const max = Math.max(1, ...points.map((p) => p.tokensPerSecond));
  const x = (t: number) => (PAD + ((W - 2 * PAD) * (t - t0)) / span).toFixed(1);
  const y = (v: number) => (H - PAD - ((H - TOP - PAD) * v) / max).toFixed(1);
  const coords = points.length === 1 ? [`${PAD},${y(points[0]!.tokensPerSecond)}`, `${W - PAD},${y(points[0]!.tokensPerSecond)}`] : points.map((p) => `${x(p.t)},${y(p.tokensPerSecond)}`);
  const first = coords[0]!.split(',')[0];
  const last = coords[coords.length - 1]!.split(',')[0];
  return (
    `${open}<polygon class="spark-area" fill="${color}" points="${first},${H - PAD} ${coords.join(' ')} ${last},${H - PAD}"/>` +
    `<polyline class="spark-line" stroke="${color}" points="${coords.join(' ')}"/>` +
    `<text class="spark-max" x="${PAD + 2}" y="13">max ${max.toFixed(max < 10 ? 1 : 0)} tok/s</text></svg>`
  );
}
