/** The top bar: model, connection status, the link to the chat page, and mesh totals. */
import type { MeshState } from '../../../src/shared/dashboard-state.ts';
import { h } from './dom.ts';
import { age, rate } from './format.ts';
import type { StreamStatus } from './event-stream.ts';

export function renderHeader(state: MeshState, status: StreamStatus, now: number): HTMLElement {
  const live = state.peers.filter((p) => p.status !== 'gone').length;
  // Tokens/s across the mesh now: the live sessions' rates (the head's totals carry the
  // same sum, but only as of the last finished session).
  const meshRate = state.sessions.reduce((sum, session) => sum + session.tokensPerSecond, 0);
  // Tokens out: the head counts a session's tokens when it ends; add the live ones' so far.
  return h(
    'div',
    { class: 'topbar' },
    h(
      'div',
      { class: 'title' },
      h('h1', {}, 'meshnet'),
      h('span', { class: 'model mono' }, state.model.id || '—'),
      h('span', { class: 'muted' }, `${state.model.numLayers} layers · ${state.model.dtype}${state.model.weights && state.model.weights !== state.model.dtype ? ` · ${state.model.weights} weights` : ''}${state.headStartedAt > 0 ? ` · head up ${age(state.headStartedAt, now)}` : ''}`),
      h('span', { class: `badge conn conn-${status}`, 'data-testid': 'connection' }, status),
      h('nav', { class: 'nav' }, h('a', { href: '/dashboard', 'aria-current': 'page' }, 'Dashboard'), h('a', { href: '/dashboard/chat', 'data-testid': 'chat-link' }, 'Chat')),
    ),
    h(
      'div',
      { class: 'totals', 'data-testid': 'totals' },
      tile('requests', state.totals.requests.toLocaleString()),
      tile('live sessions', String(state.sessions.length)),
      tile('tokens/s (mesh)', rate(meshRate)),
      tile('tokens out', (state.totals.tokensOut + state.sessions.reduce((sum, session) => sum + session.completionTokens, 0)).toLocaleString()),
      tile('errors', state.totals.errors.toLocaleString(), state.totals.errors > 0 ? 'bad' : undefined),
      tile('peers', String(live)),
    ),
  );
}

function tile(label: string, value: string, tone?: string): HTMLElement {
  return h('div', { class: `tile${tone ? ` ${tone}` : ''}` }, h('span', { class: 'tile-value' }, value), h('span', { class: 'tile-label' }, label));
}
