/**
 * A small Prometheus registry rendering the text exposition format 0.0.4: counters and
 * gauges with labels, histograms with fixed buckets. No dependency.
 *
 * Metrics render in registration order, series in the order they were first touched. A
 * metric without label names has one series that renders from the start (0); a labelled
 * metric renders only the label sets it has seen. Label sets must name exactly the
 * metric's label names: a mismatch is a programming error and throws.
 */

/** `Content-Type` of `render()`'s output. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type Labels = Readonly<Record<string, string | number>>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A number as the format spells it: `+Inf`, `-Inf`, `NaN`, else JavaScript's shortest form. */
export function formatValue(value: number): string {
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** A label value with `\`, `"` and newline escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

const escapeHelp = (help: string) => help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

/** `{a="1",b="2"}` in label-name order, or '' without labels. */
function labelText(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return '';
  return `{${names.map((n, i) => `${n}="${escapeLabelValue(values[i]!)}"`).join(',')}}`;
}

abstract class Metric<S> {
  private readonly series = new Map<string, { values: string[]; state: S }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name '${name}'`);
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__')) throw new Error(`invalid label name '${label}' on ${name}`);
    }
    if (new Set(labelNames).size !== labelNames.length) throw new Error(`duplicate label names on ${name}`);
  }

  protected abstract readonly type: string;
  protected abstract initial(): S;
  protected abstract lines(labels: string, state: S, values: readonly string[]): string[];

  /** Drop the series for `labels` (a peer that left): it no longer renders. */
  remove(labels: Labels): void {
    this.series.delete(JSON.stringify(this.labelNames.map((n) => String(labels[n]))));
  }

  /** The series for `labels`, created on first use. */
  protected state(labels: Labels): S {
    const keys = Object.keys(labels);
    if (keys.length !== this.labelNames.length || !this.labelNames.every((n) => Object.hasOwn(labels, n))) {
      throw new Error(`${this.name} takes labels {${this.labelNames.join(', ')}}, got {${keys.join(', ')}}`);
    }
    const values = this.labelNames.map((n) => String(labels[n]));
    const key = JSON.stringify(values);
    let entry = this.series.get(key);
    if (!entry) {
      entry = { values, state: this.initial() };
      this.series.set(key, entry);
    }
    return entry.state;
  }

  render(): string {
    if (this.labelNames.length === 0) this.state({}); // the one series shows from the start
    const head = [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`];
    const body = [...this.series.values()].flatMap(({ values, state }) =>
      this.lines(labelText(this.labelNames, values), state, values),
    );
    return [...head, ...body].join('\n') + '\n';
  }
}

/** A value that only goes up. */
export class Counter extends Metric<{ value: number }> {
  protected readonly type = 'counter';
  protected initial() {
    return { value: 0 };
  }
  protected lines(labels: string, state: { value: number }) {
    return [`${this.name}${labels} ${formatValue(state.value)}`];
  }
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name}: a counter only goes up (got ${by})`);
    this.state(labels).value += by;
  }
}

/** A value that goes up and down. */
export class Gauge extends Metric<{ value: number }> {
  protected readonly type = 'gauge';
  protected initial() {
    return { value: 0 };
  }
  protected lines(labels: string, state: { value: number }) {
    return [`${this.name}${labels} ${formatValue(state.value)}`];
  }
  set(labels: Labels, value: number): void {
    this.state(labels).value = value;
  }
  inc(labels: Labels = {}, by = 1): void {
    this.state(labels).value += by;
  }
}

interface HistogramState {
  readonly counts: number[]; // per bucket, not cumulative
  sum: number;
  count: number;
}

/** Observations counted into fixed buckets (upper bounds, `le`); rendered cumulative with `+Inf`. */
export class Histogram extends Metric<HistogramState> {
  protected readonly type = 'histogram';
  readonly buckets: readonly number[];

  constructor(name: string, help: string, buckets: readonly number[], labelNames: readonly string[]) {
    const sorted = buckets.filter((b) => b !== Infinity);
    if (sorted.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= sorted[i - 1]!))) {
      throw new Error(`${name}: buckets must be finite and strictly increasing`);
    }
    if (labelNames.includes('le')) throw new Error(`${name}: 'le' is reserved for histogram buckets`);
    super(name, help, labelNames);
    this.buckets = sorted;
  }

  protected initial(): HistogramState {
    return { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
  }

  protected lines(labels: string, state: HistogramState, values: readonly string[]) {
    const names = [...this.labelNames, 'le'];
    let cumulative = 0;
    const bucketLines = [...this.buckets, Infinity].map((le, i) => {
      cumulative += i < state.counts.length ? state.counts[i]! : 0;
      const count = le === Infinity ? state.count : cumulative;
      return `${this.name}_bucket${labelText(names, [...values, formatValue(le)])} ${count}`;
    });
    return [...bucketLines, `${this.name}_sum${labels} ${formatValue(state.sum)}`, `${this.name}_count${labels} ${state.count}`];
  }

  /** Record `value` (`count` times, e.g. a mean over that many events). */
  observe(labels: Labels, value: number, count = 1): void {
    if (Number.isNaN(value) || !(count >= 0)) return;
    const state = this.state(labels);
    const bucket = this.buckets.findIndex((le) => value <= le);
    if (bucket >= 0) state.counts[bucket]! += count;
    state.sum += value * count;
    state.count += count;
  }
}

interface Renderable {
  readonly name: string;
  render(): string;
}

export class MetricsRegistry {
  private readonly metrics = new Map<string, Renderable>();

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.add(new Gauge(name, help, labelNames));
  }

  histogram(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []): Histogram {
    return this.add(new Histogram(name, help, buckets, labelNames));
  }

  /** Every metric in the text exposition format 0.0.4 (serve with PROMETHEUS_CONTENT_TYPE). */
  render(): string {
    return [...this.metrics.values()].map((m) => m.render()).join('');
  }

  private add<M extends Renderable>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new Error(`metric ${metric.name} is already registered`);
    this.metrics.set(metric.name, metric);
    return metric;
  }
}
