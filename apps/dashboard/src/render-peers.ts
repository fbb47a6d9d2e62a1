/** The peers table: one row per peer (gone peers stay, dimmed), colored like its hops. */
import type { MeshState, PeerView } from '../../../src/shared/dashboard-state.ts';
import { h } from './dom.ts';
import { age, bytes, layers, peerColor } from './format.ts';

export function renderPeers(state: MeshState, now: number): HTMLElement {
  if (state.peers.length === 0) return h('p', { class: 'empty' }, 'No peers have joined yet.');
  return h(
    'table',
    { class: 'peers' },
    h('thead', {}, h('tr', {}, ...['peer', 'runtime', 'layers', 'KV / budget', 'status', 'heartbeat', 'tokens'].map((name) => h('th', {}, name)))),
    h('tbody', {}, ...state.peers.map((peer) => peerRow(peer, now))),
  );
}

function peerRow(peer: PeerView, now: number): HTMLElement {
  const gone = peer.status === 'gone';
  const share = peer.memoryBudgetBytes > 0 ? Math.min(1, peer.kvBytes / peer.memoryBudgetBytes) : 0;
  return h(
    'tr',
    { 'data-peer-id': peer.id, 'data-status': peer.status, class: gone ? 'gone' : undefined },
    h('td', { class: 'peer-id' }, h('span', { class: 'chip', style: `background:${peerColor(peer.id)}` }), peer.id),
    h('td', {}, `${peer.runtime} · ${peer.device && peer.device !== peer.executionProvider ? `${peer.executionProvider} (${peer.device})` : peer.executionProvider}`),
    h(
      'td',
      { class: 'mono', 'data-testid': 'peer-layers' },
      peer.layers.length > 0 ? peer.layers.map(layers).join(' ') : '—',
      peer.weights ? h('span', { class: 'muted', 'data-testid': 'peer-weights' }, ` ${peer.weights}${peer.weightBytes !== undefined ? ` · ${bytes(peer.weightBytes)}` : ''}`) : undefined,
    ),
    h(
      'td',
      {},
      h(
        'div',
        { class: 'kv', title: `${peer.kvEntries} KV entries` },
        h('span', {}, `${bytes(peer.kvBytes)} / ${peer.memoryBudgetBytes > 0 ? bytes(peer.memoryBudgetBytes) : '—'}`),
        h('span', { class: 'meter' }, h('span', { style: `width:${(share * 100).toFixed(1)}%` })),
      ),
    ),
    h('td', { class: 'status' }, statusBadge(peer, now), peer.rejoins ? h('span', { class: 'badge rejoined', 'data-testid': 'peer-rejoins', title: `joined again ${peer.rejoins} time(s) after its connection was lost` }, `rejoined${peer.rejoins > 1 ? ` ×${peer.rejoins}` : ''}`) : undefined),
    h('td', { class: 'num' }, gone ? '—' : age(peer.lastHeartbeatAt, now)),
    h('td', { class: 'num' }, peer.tokensServed.toLocaleString()),
  );
}

/** The status badge; a quarantined peer says why and when it is tried again. */
function statusBadge(peer: PeerView, now: number): HTMLElement {
  const q = peer.quarantine;
  if (peer.status !== 'quarantined' || !q) return h('span', { class: `badge status-${peer.status}` }, peer.status);
  const left = Math.max(0, Math.ceil((q.until - now) / 1000));
  const title = `${q.reason} (fault ${q.strikes}; tried again in ${left} s)`;
  return h('span', { class: 'badge status-quarantined', title }, `quarantined · ${left} s`);
}
