/**
 * Live sessions, one card each: id, model, token counts (never text), tokens/s with its
 * chart, time to first token, per-hop latency bars with the KV each hop holds, repairs,
 * speculative decoding (drafts kept, tokens per round trip) and state. Also the shared pieces the finished table uses (state badge, repairs text).
 */
import type { RepairView, SessionHopView, SessionView } from '../../../src/shared/dashboard-state.ts';
import { h } from './dom.ts';
import { clock, layers, ms, peerColor, rate } from './format.ts';
import { sparkline } from './sparkline.ts';

export function renderLiveSessions(sessions: readonly SessionView[], now: number): HTMLElement {
  if (sessions.length === 0) return h('p', { class: 'empty' }, 'No live sessions. Send a request to /v1/chat/completions or /v1/completions.');
  // Newest first: the one just started is the one being watched.
  return h('div', { class: 'live-list' }, ...[...sessions].reverse().map((session) => sessionCard(session, now)));
}

function sessionCard(session: SessionView, now: number): HTMLElement {
  const color = session.hops.length > 0 ? peerColor(session.hops[0]!.peerId) : '#3b82f6';
  return h(
    'article',
    { class: 'session-card', 'data-session-id': session.id, 'data-state': session.state },
    h(
      'header',
      {},
      h('span', { class: 'session-id mono' }, session.id),
      stateBadge(session),
      h('span', { class: 'muted' }, `${session.model} · started ${clock(session.startedAt)} · running ${((now - session.startedAt) / 1000).toFixed(1)} s`),
    ),
    h(
      'div',
      { class: 'session-body' },
      h(
        'div',
        { class: 'session-stats' },
        stat('prompt tokens', session.promptTokens.toLocaleString(), 'prompt-tokens'),
        stat('generated', session.completionTokens.toLocaleString(), 'completion-tokens'),
        stat('tokens/s', rate(session.tokensPerSecond), 'tokens-per-second'),
        stat('TTFT', ms(session.timeToFirstTokenMs), 'ttft'),
        stat('repairs', String(session.repairs.length), 'repairs'),
        stat('hops', String(session.hops.length), 'hop-count'),
        stat('drafts kept', acceptanceText(session), 'acceptance'),
        stat('tokens / round trip', tokensPerRoundTripText(session), 'tokens-per-round-trip'),
      ),
      h('figure', { class: 'chart' }, sparkline(session.rate, color), h('figcaption', {}, 'tokens/s over time')),
    ),
    hopBars(session.hops),
    session.repairs.length > 0 ? h('p', { class: 'repairs' }, 'Repairs: ', repairsText(session.repairs)) : undefined,
  );
}

function stat(label: string, value: string, testId: string): HTMLElement {
  return h('div', { class: 'stat' }, h('span', { class: 'stat-value', 'data-testid': testId }, value), h('span', { class: 'stat-label' }, label));
}

/** Per-hop latency as horizontal bars (last frame; a tick marks the mean), with KV held. */
function hopBars(hops: readonly SessionHopView[]): HTMLElement {
  const scale = Math.max(0.001, ...hops.map((hop) => Math.max(hop.lastMs, hop.meanMs)));
  return h(
    'div',
    { class: 'hops' },
    h('div', { class: 'hops-head' }, h('span', {}, 'hop · peer · layers'), h('span', {}, 'latency per frame (bar last, tick mean)'), h('span', { class: 'num' }, 'last · mean'), h('span', { class: 'num' }, 'KV held')),
    ...hops.map((hop, index) =>
      h(
        'div',
        { class: 'hop-row', 'data-peer-id': hop.peerId },
        h('span', { class: 'hop-name' }, h('span', { class: 'chip', style: `background:${peerColor(hop.peerId)}` }), `${index + 1}. ${hop.peerId} `, h('span', { class: 'muted mono' }, layers(hop.range))),
        h(
          'span',
          { class: 'bar-track' },
          h('span', { class: 'bar', style: `width:${((hop.lastMs / scale) * 100).toFixed(1)}%;background:${peerColor(hop.peerId)}` }),
          h('span', { class: 'bar-mean', style: `left:calc(${((hop.meanMs / scale) * 100).toFixed(1)}% - 1px)` }),
        ),
        h('span', { class: 'num', 'data-testid': 'hop-latency' }, `${ms(hop.lastMs)} · ${ms(hop.meanMs)}`),
        h('span', { class: 'num', 'data-testid': 'hop-kv' }, `${hop.kvPositions.toLocaleString()} pos`),
      ),
    ),
  );
}

export function stateBadge(session: SessionView): HTMLElement {
  return h('span', { class: `badge state-${session.state}`, 'data-testid': 'outcome', title: session.error }, session.state);
}

/** The share of drafted tokens kept, with the drafting mode: "73% ngram", or "off". */
export function acceptanceText(session: SessionView): string {
  const s = session.speculation;
  if (!s) return '—';
  if (s.mode === 'off') return 'off';
  return s.drafted > 0 ? `${Math.round(s.acceptanceRate * 100)}% ${s.mode}` : `— ${s.mode}`;
}

/** Generated tokens per step through the route: "3.2" (1.0 without speculation). */
export function tokensPerRoundTripText(session: SessionView): string {
  return session.speculation ? session.speculation.tokensPerRoundTrip.toFixed(1) : '—';
}

export function repairsText(repairs: readonly RepairView[]): string {
  return repairs.map((r) => (r.kind === 'replaced' ? `hop ${r.hop + 1}: ${r.lostPeerId ?? '?'} → ${r.peerId}` : `hop ${r.hop + 1}: cache miss on ${r.peerId}`)).join('; ');
}
