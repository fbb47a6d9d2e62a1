/** A small SVG line chart of a session's tokens/s series (`SessionView.rate`). */
import type { RatePoint } from '../../../src/shared/dashboard-state.ts';
import { s } from './dom.ts';
import { rate } from './format.ts';

const WIDTH = 300;
const HEIGHT = 96;
const PAD_TOP = 16;
const PAD_BOTTOM = 6;
const PAD_LEFT = 4;
const PAD_RIGHT = 4;

export function sparkline(points: readonly RatePoint[], color: string): SVGSVGElement {
  const svg = s('svg', { class: 'sparkline', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': 'tokens per second over time' });
  svg.append(s('line', { x1: PAD_LEFT, x2: WIDTH - PAD_RIGHT, y1: HEIGHT - PAD_BOTTOM, y2: HEIGHT - PAD_BOTTOM, class: 'baseline' }));
  if (points.length === 0) {
    svg.append(s('text', { x: WIDTH / 2, y: HEIGHT / 2 + 4, class: 'spark-empty' }, 'waiting for the first tokens'));
    return svg;
  }
  const t0 = points[0]!.t;
  const span = Math.max(1, points[points.length - 1]!.t - t0);
  const max = Math.max(1, ...points.map((p) => p.tokensPerSecond));
  const x = (t: number) => PAD_LEFT + ((WIDTH - PAD_LEFT - PAD_RIGHT) * (t - t0)) / span;
  const y = (v: number) => HEIGHT - PAD_BOTTOM - ((HEIGHT - PAD_TOP - PAD_BOTTOM) * v) / max;
  // One point draws as a flat line across, so a new session still shows its level.
  const coords = points.length === 1 ? [`${x(t0)},${y(points[0]!.tokensPerSecond)}`, `${WIDTH - PAD_RIGHT},${y(points[0]!.tokensPerSecond)}`] : points.map((p) => `${x(p.t).toFixed(1)},${y(p.tokensPerSecond).toFixed(1)}`);
  const first = coords[0]!.split(',')[0];
  const last = coords[coords.length - 1]!.split(',')[0];
  svg.append(
    s('polygon', { points: `${first},${HEIGHT - PAD_BOTTOM} ${coords.join(' ')} ${last},${HEIGHT - PAD_BOTTOM}`, fill: color, class: 'spark-area' }),
    s('polyline', { points: coords.join(' '), stroke: color, class: 'spark-line' }),
    s('text', { x: PAD_LEFT + 2, y: 12, class: 'spark-max' }, `max ${rate(max)} tok/s`),
  );
  return svg;
}
