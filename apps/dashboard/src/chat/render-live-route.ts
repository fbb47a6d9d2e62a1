/**
 * The chat page's route panel, top to bottom: embedding → one card per hop → LM head. While an answer streams,
 * each hop shows its frame count, latency (last and mean per frame) and tokens per second,
 * and lights up while frames pass; a hop rebuilt on another peer says whom it replaced.
 * With no answer yet, the mesh's current route is drawn idle.
 */
import type { MeshState, RepairView, SessionView } from '../../../../src/shared/dashboard-state.ts';
import { h } from '../dom.ts';
import { layers, ms, peerColor, rate } from '../format.ts';
import type { HopLive } from './hop-activity.ts';

export function renderLiveRoute(state: MeshState, session: SessionView | undefined, hops: readonly HopLive[]): HTMLElement {
  const cards =
    session && hops.length > 0
      ? hops.map((hop) => hopCard(hop))
      : state.route.hops.map((hop, index) => idleCard(hop.peerId, index, layers(hop.range)));
  if (cards.length === 0) return h('p', { class: 'empty' }, state.route.reason ? `No route: ${state.route.reason}` : 'No route yet.');
  const arrow = () => h('span', { class: 'route-arrow', 'aria-hidden': 'true' }, '↓');
  const chain: HTMLElement[] = [h('div', { class: 'route-end' }, 'embedding ', h('small', {}, 'on the head'))];
  for (const card of cards) chain.push(arrow(), card);
  chain.push(arrow(), h('div', { class: 'route-end' }, 'LM head and sampling ', h('small', {}, 'on the head')));
  return h('div', {}, h('div', { class: 'live-route', 'data-testid': 'live-route' }, ...chain), session ? repairs(session.repairs) : undefined);
}

function hopCard(hop: HopLive): HTMLElement {
  return h(
    'div',
    { class: `live-hop${hop.lit ? ' lit' : ''}`, 'data-hop': hop.index + 1, 'data-peer-id': hop.peerId, 'data-lit': hop.lit ? 'true' : 'false', style: `--peer:${peerColor(hop.peerId)}` },
    h('div', { class: 'live-hop-title' }, h('span', { class: 'hop-number' }, `hop ${hop.index + 1}`), h('span', { class: 'chip', style: `background:${peerColor(hop.peerId)}` }), h('strong', {}, hop.peerId), h('span', { class: 'muted mono' }, ` layers ${layers(hop.range)}`)),
    h(
      'div',
      { class: 'hop-figures' },
      figure('frames', hop.frames.toLocaleString(), 'hop-frames'),
      figure('last frame', ms(hop.lastMs), 'hop-latency'),
      figure('mean frame', ms(hop.meanMs), 'hop-mean'),
      figure('tokens/s', rate(hop.tokensPerSecond), 'hop-rate', 'positions through this hop per second, over the last second'),
    ),
    hop.replaced !== undefined ? h('div', { class: 'hop-repaired', 'data-testid': 'hop-repaired' }, `rebuilt here after ${hop.replaced} was lost`) : undefined,
  );
}

function figure(label: string, value: string, testId: string, title?: string): HTMLElement {
  return h('div', { class: 'hop-figure', title }, h('span', { class: 'hop-figure-value', 'data-testid': testId }, value), h('span', { class: 'hop-figure-label' }, label));
}

function idleCard(peerId: string, index: number, range: string): HTMLElement {
  return h(
    'div',
    { class: 'live-hop idle', 'data-hop': index + 1, 'data-peer-id': peerId, 'data-lit': 'false', style: `--peer:${peerColor(peerId)}` },
    h('div', { class: 'live-hop-title' }, h('span', { class: 'hop-number' }, `hop ${index + 1}`), h('span', { class: 'chip', style: `background:${peerColor(peerId)}` }), h('strong', {}, peerId), h('span', { class: 'muted mono' }, ` layers ${range}`)),
    h('p', { class: 'muted' }, 'idle: send a message to see frames pass'),
  );
}

function repairs(list: readonly RepairView[]): HTMLElement | undefined {
  if (list.length === 0) return undefined;
  return h(
    'ul',
    { class: 'live-repairs', 'data-testid': 'repairs' },
    ...list.map((r) =>
      h('li', {}, r.kind === 'replaced' ? `Hop ${r.hop + 1}: ${r.lostPeerId ?? 'a peer'} was lost; ${r.peerId} took over its layers and replayed the answer so far.` : `Hop ${r.hop + 1}: ${r.peerId} had lost the KV cache; it was rebuilt from the recorded inputs.`),
    ),
  );
}
