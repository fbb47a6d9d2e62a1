/** The last finished sessions (newest first, at most FINISHED_SESSIONS_CAP) with outcome. */
import type { SessionView } from '../../../src/shared/dashboard-state.ts';
import { h } from './dom.ts';
import { clock, ms, rate } from './format.ts';
import { acceptanceText, repairsText, stateBadge, tokensPerRoundTripText } from './render-sessions.ts';

export function renderFinished(finished: readonly SessionView[]): HTMLElement {
  if (finished.length === 0) return h('p', { class: 'empty' }, 'None yet.');
  return h(
    'table',
    { class: 'finished' },
    h('thead', {}, h('tr', {}, ...['id', 'outcome', 'ended', 'prompt', 'gen.', 'tok/s', 'TTFT', 'hops', 'repairs', 'drafts kept', 'tok/RT'].map((name) => h('th', {}, name)))),
    h('tbody', {}, ...finished.map(finishedRow)),
  );
}

function finishedRow(session: SessionView): HTMLElement {
  const ended = session.rate.length > 0 ? session.rate[session.rate.length - 1]!.t : session.startedAt;
  return h(
    'tr',
    { 'data-session-id': session.id, 'data-state': session.state },
    h('td', { class: 'mono' }, h('span', { class: 'session-id clip', title: session.id }, session.id)),
    h('td', {}, stateBadge(session), session.error ? h('div', { class: 'error-text clip', title: session.error }, session.error) : undefined),
    h('td', { class: 'num' }, clock(ended)),
    h('td', { class: 'num' }, session.promptTokens.toLocaleString()),
    h('td', { class: 'num', 'data-testid': 'completion-tokens' }, session.completionTokens.toLocaleString()),
    h('td', { class: 'num' }, rate(session.tokensPerSecond)),
    h('td', { class: 'num' }, ms(session.timeToFirstTokenMs)),
    h('td', { class: 'num', title: session.hops.map((hop) => hop.peerId).join(' → ') }, session.hops.length),
    h('td', { class: 'num', title: repairsText(session.repairs) }, session.repairs.length),
    h('td', { class: 'num', 'data-testid': 'acceptance' }, acceptanceText(session)),
    h('td', { class: 'num', 'data-testid': 'tokens-per-round-trip', title: 'generated tokens per round trip through the route' }, tokensPerRoundTripText(session)),
  );
}
