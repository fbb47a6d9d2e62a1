import { describe, expect, it } from 'vitest';
import type { SessionTelemetry } from '../../src/core/route/route-types.ts';
import { HeadMetrics } from '../../src/node/metrics/head-metrics.ts';
import { MetricsRegistry, escapeLabelValue, formatValue } from '../../src/node/metrics/registry.ts';

describe('MetricsRegistry', () => {
  it('renders counters, gauges and histograms in exposition format 0.0.4', () => {
    const registry = new MetricsRegistry();
    const requests = registry.counter('app_requests_total', 'Requests answered.', ['endpoint', 'status']);
    const live = registry.gauge('app_live', 'Live things.');
    const latency = registry.histogram('app_latency_seconds', 'Latency.', [0.1, 0.5, 1], ['hop']);
    requests.inc({ endpoint: '/v1/models', status: 200 });
    requests.inc({ endpoint: '/v1/models', status: 200 }, 2);
    requests.inc({ status: '404', endpoint: '/x' });
    live.set({}, 3);
    live.inc({}, -1);
    latency.observe({ hop: 0 }, 0.05);
    latency.observe({ hop: 0 }, 0.5); // on a bound: counts in that bucket
    latency.observe({ hop: 0 }, 0.75, 2);
    latency.observe({ hop: 0 }, 7);
    latency.observe({ hop: 1 }, 0.25);

    expect(registry.render()).toBe(
      [
        '# HELP app_requests_total Requests answered.',
        '# TYPE app_requests_total counter',
        'app_requests_total{endpoint="/v1/models",status="200"} 3',
        'app_requests_total{endpoint="/x",status="404"} 1',
        '# HELP app_live Live things.',
        '# TYPE app_live gauge',
        'app_live 2',
        '# HELP app_latency_seconds Latency.',
        '# TYPE app_latency_seconds histogram',
        'app_latency_seconds_bucket{hop="0",le="0.1"} 1',
        'app_latency_seconds_bucket{hop="0",le="0.5"} 2',
        'app_latency_seconds_bucket{hop="0",le="1"} 4',
        'app_latency_seconds_bucket{hop="0",le="+Inf"} 5',
        'app_latency_seconds_sum{hop="0"} 9.05',
        'app_latency_seconds_count{hop="0"} 5',
        'app_latency_seconds_bucket{hop="1",le="0.1"} 0',
        'app_latency_seconds_bucket{hop="1",le="0.5"} 1',
        'app_latency_seconds_bucket{hop="1",le="1"} 1',
        'app_latency_seconds_bucket{hop="1",le="+Inf"} 1',
        'app_latency_seconds_sum{hop="1"} 0.25',
        'app_latency_seconds_count{hop="1"} 1',
        '',
      ].join('\n'),
    );
  });

  it('renders unlabelled metrics from the start and labelled ones once touched', () => {
    const registry = new MetricsRegistry();
    registry.counter('a_total', 'A.');
    registry.counter('b_total', 'B.', ['kind']);
    registry.histogram('c_seconds', 'C.', [1]);
    expect(registry.render()).toBe(
      [
        '# HELP a_total A.',
        '# TYPE a_total counter',
        'a_total 0',
        '# HELP b_total B.',
        '# TYPE b_total counter',
        '# HELP c_seconds C.',
        '# TYPE c_seconds histogram',
        'c_seconds_bucket{le="1"} 0',
        'c_seconds_bucket{le="+Inf"} 0',
        'c_seconds_sum 0',
        'c_seconds_count 0',
        '',
      ].join('\n'),
    );
  });

  it('escapes label values and help text', () => {
    const registry = new MetricsRegistry();
    registry.gauge('g', 'Line one\nback\\slash "quoted"', ['v']).set({ v: 'a\\b "c"\nd' }, 1);
    expect(registry.render()).toBe(
      ['# HELP g Line one\\nback\\\\slash "quoted"', '# TYPE g gauge', 'g{v="a\\\\b \\"c\\"\\nd"} 1', ''].join('\n'),
    );
    expect(escapeLabelValue('x"\\\n')).toBe('x\\"\\\\\\n');
  });

  it('formats special values', () => {
    expect([Infinity, -Infinity, NaN, 0.25, 1e-7, 3].map(formatValue)).toEqual(['+Inf', '-Inf', 'NaN', '0.25', '1e-7', '3']);
  });

  it('refuses wrong label sets, bad names, decreasing counters and bad buckets', () => {
    const registry = new MetricsRegistry();
    const counter = registry.counter('x_total', 'X.', ['kind']);
    expect(() => counter.inc({})).toThrow(/takes labels \{kind\}/);
    expect(() => counter.inc({ kind: 'a', extra: 'b' })).toThrow(/takes labels/);
    expect(() => counter.inc({ kind: 'a' }, -1)).toThrow(/only goes up/);
    expect(() => registry.counter('x_total', 'again')).toThrow(/already registered/);
    expect(() => registry.gauge('bad-name', 'B.')).toThrow(/invalid metric name/);
    expect(() => registry.gauge('ok', 'B.', ['bad-label'])).toThrow(/invalid label name/);
    expect(() => registry.histogram('h', 'H.', [1, 0.5])).toThrow(/strictly increasing/);
    expect(() => registry.histogram('h2', 'H.', [1], ['le'])).toThrow(/reserved/);
  });
});

describe('HeadMetrics', () => {
  const telemetry = (): SessionTelemetry => ({
    sessionId: '1b4e28ba-2fa1-41d2-883f-0016d3cca427',
    startedAt: 10_000,
    promptTokens: 7,
    completionTokens: 5,
    timeToFirstTokenMs: 200, // first token at 10_200
    finishedAt: 10_600, // 4 more tokens in 400 ms: 0.1 s each
    outcome: 'finished',
    hops: [
      { peerId: 'a', range: { start: 0, end: 3 }, frames: 5, tokens: 11, totalMs: 40, lastMs: 5, kvPositions: 11 },
      { peerId: 'head', range: { start: 3, end: 5 }, frames: 4, tokens: 10, totalMs: 2, lastMs: 0.5, kvPositions: 11 },
    ],
    repairs: [{ kind: 'cache_miss', cause: 'cache_miss', hop: 0, range: { start: 0, end: 3 }, peerId: 'a', position: 9, reason: 'evicted' }],
    releases: [],
  });

  /** The value of one sample line, e.g. `meshnet_tokens_total{direction="in"}`. */
  const sample = (text: string, series: string): string | undefined =>
    text.split('\n').find((line) => line.startsWith(`${series} `))?.slice(series.length + 1);

  it('records a closed session: tokens, time to first token, per-token and per-hop latency, repairs', () => {
    const metrics = new HeadMetrics();
    metrics.sessionObserved(telemetry());
    const text = metrics.render();
    expect(sample(text, 'meshnet_tokens_total{direction="in"}')).toBe('7');
    expect(sample(text, 'meshnet_tokens_total{direction="out"}')).toBe('5');
    expect(sample(text, 'meshnet_time_to_first_token_seconds_bucket{le="0.1"}')).toBe('0');
    expect(sample(text, 'meshnet_time_to_first_token_seconds_bucket{le="0.25"}')).toBe('1');
    expect(sample(text, 'meshnet_time_to_first_token_seconds_sum')).toBe('0.2');
    // four decode tokens, 0.1 s each
    expect(sample(text, 'meshnet_token_latency_seconds_bucket{le="0.05"}')).toBe('0');
    expect(sample(text, 'meshnet_token_latency_seconds_bucket{le="0.1"}')).toBe('4');
    expect(sample(text, 'meshnet_token_latency_seconds_count')).toBe('4');
    // hop 0: 5 frames of 8 ms; hop 1: 4 frames of 0.5 ms
    expect(sample(text, 'meshnet_hop_latency_seconds_bucket{hop="0",le="0.005"}')).toBe('0');
    expect(sample(text, 'meshnet_hop_latency_seconds_bucket{hop="0",le="0.01"}')).toBe('5');
    expect(sample(text, 'meshnet_hop_latency_seconds_sum{hop="0"}')).toBe('0.04');
    expect(sample(text, 'meshnet_hop_latency_seconds_bucket{hop="1",le="0.0005"}')).toBe('4');
    expect(sample(text, 'meshnet_hop_latency_seconds_count{hop="1"}')).toBe('4');
    expect(sample(text, 'meshnet_repairs_total{kind="cache_miss"}')).toBe('1');
    expect(sample(text, 'meshnet_repairs_total{kind="replaced"}')).toBe('0');
  });

  it('skips latencies a session does not have (no first token, one token)', () => {
    const metrics = new HeadMetrics();
    metrics.sessionObserved({ ...telemetry(), timeToFirstTokenMs: undefined, completionTokens: 0, hops: [], repairs: [] });
    metrics.sessionObserved({ ...telemetry(), completionTokens: 1, hops: [], repairs: [] });
    const text = metrics.render();
    expect(sample(text, 'meshnet_time_to_first_token_seconds_count')).toBe('1');
    expect(sample(text, 'meshnet_token_latency_seconds_count')).toBe('0');
    expect(text).not.toContain('meshnet_hop_latency_seconds_bucket');
  });

  it('counts requests and sets the gauges', () => {
    const metrics = new HeadMetrics();
    metrics.requestFinished('/v1/chat/completions', 200);
    metrics.requestFinished('/v1/chat/completions', 200);
    metrics.requestFinished('/v1/completions', 429);
    metrics.setLiveSessions(2);
    metrics.setPeers({ node: 2, head: 1 });
    metrics.setPeers({ node: 1, head: 1 });
    const text = metrics.render();
    expect(sample(text, 'meshnet_requests_total{endpoint="/v1/chat/completions",status="200"}')).toBe('2');
    expect(sample(text, 'meshnet_requests_total{endpoint="/v1/completions",status="429"}')).toBe('1');
    expect(sample(text, 'meshnet_live_sessions')).toBe('2');
    expect(sample(text, 'meshnet_peers{runtime="node"}')).toBe('1');
    expect(sample(text, 'meshnet_peers{runtime="browser"}')).toBe('0');
    expect(sample(text, 'meshnet_peers{runtime="head"}')).toBe('1');
    expect(text).toContain('# TYPE meshnet_time_to_first_token_seconds histogram\n');
    expect(text.endsWith('\n')).toBe(true);
  });
});
