/** The join page's figures: progress, time left, the tokens/s series and its sparkline. */
import { describe, expect, it } from 'vitest';
import { downloadView, RateSeries, sparklineSvg } from '../../src/browser/peer-view.ts';

describe('downloadView', () => {
  it('percent and bytes of the whole shard, time left from the rate so far', () => {
    const view = downloadView({ phase: 'downloading', received: 2 * 2 ** 20, total: 8 * 2 ** 20, startedAt: 0 }, 4000);
    expect(view.percent).toBe(25);
    expect(view.bytes).toBe('2.00 MB / 8.00 MB');
    expect(view.left).toBe('12 s left'); // 0.5 MB/s, 6 MB to go
    expect(downloadView({ phase: 'downloading', received: 0, total: 10, startedAt: 0 }, 10).left).toBe('starting…');
    expect(downloadView({ phase: 'loading', received: 10, total: 10, startedAt: 0 }, 10)).toMatchObject({ percent: 100, phase: 'loading the shard into onnxruntime' });
    expect(downloadView({ phase: 'done', received: 10, total: 10, startedAt: 0, finishedAt: 2500 }, 9000)).toMatchObject({ percent: 100, phase: 'shard loaded', left: 'in 3 s' });
    expect(downloadView(undefined, 0).percent).toBe(0);
  });
});

describe('RateSeries and sparklineSvg', () => {
  it('tokens/s between samples, the last N kept; the chart has a line once there are points', () => {
    const series = new RateSeries(3);
    expect(series.sample(0, 0)).toBe(0);
    expect(series.sample(10, 1000)).toBe(10);
    expect(series.sample(40, 2000)).toBe(30);
    series.sample(40, 3000);
    series.sample(45, 4000);
    expect(series.points.map((p) => p.tokensPerSecond)).toEqual([30, 0, 5]);
    expect(sparklineSvg([])).toContain('waiting for the first tokens');
    const svg = sparklineSvg(series.points);
    expect(svg).toContain('<polyline class="spark-line"');
    expect(svg).toContain('max 30 tok/s');
  });
});
