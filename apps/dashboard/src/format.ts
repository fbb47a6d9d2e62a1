/** Short human formats for the dashboard's numbers (units in the output). */
import type { LayerRange } from '../../../src/shared/protocol.ts';

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

export function ms(n: number | undefined): string {
  if (n === undefined) return '—';
  if (n < 10) return `${n.toFixed(2)} ms`;
  if (n < 1000) return `${n.toFixed(0)} ms`;
  return `${(n / 1000).toFixed(2)} s`;
}

export function rate(tokensPerSecond: number): string {
  return tokensPerSecond >= 100 ? tokensPerSecond.toFixed(0) : tokensPerSecond.toFixed(1);
}

/** How long ago `at` was, relative to `now` (both ms since the epoch). */
export function age(at: number, now: number): string {
  const seconds = Math.max(0, (now - at) / 1000);
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h`;
}

export function clock(at: number): string {
  return new Date(at).toLocaleTimeString([], { hour12: false });
}

/** A half-open layer range as written everywhere in meshnet: `[0, 3)`. */
export function layers(range: LayerRange): string {
  return `[${range.start}, ${range.end})`;
}

const PALETTE = ['#3b82f6', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#06b6d4', '#ec4899', '#84cc16', '#f97316', '#14b8a6'];
const colors = new Map<string, string>();

/**
 * A color per peer id, shared by the route picture, the peers table and the hop bars. Given
 * in order of first sight (so the first peers never collide) and stable for the page's life.
 */
export function peerColor(peerId: string): string {
  let color = colors.get(peerId);
  if (!color) {
    color = PALETTE[colors.size % PALETTE.length]!;
    colors.set(peerId, color);
  }
  return color;
}
