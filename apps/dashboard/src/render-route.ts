/**
 * The route picture: the layer axis [0, numLayers) with one colored segment per hop, in
 * order, labeled with the peer id and its half-open range, between the head's embedding
 * (left) and LM head (right). When there is no route, the reason is shown instead.
 *
 * Between two hops, how activations flow (protocol 3.2) as the newest session over this
 * route last stepped: `direct` (the hop forwards to the next one itself: a solid link) or
 * `via head` (through the head, as in a star route: a dashed link). No session yet: no marks.
 */
import type { MeshState, SessionView } from '../../../src/shared/dashboard-state.ts';
import { h, s } from './dom.ts';
import { layers, peerColor } from './format.ts';

const WIDTH = 640;
const HEIGHT = 152;
const NODE_HALF = 36;
const LEFT = 100; // room for the "embed" node
const RIGHT = WIDTH - 100; // and the "LM head" node
const BAR_Y = 34;
const BAR_H = 44;

export function renderRoute(state: MeshState): Element {
  const { numLayers } = state.model;
  const hops = state.route.hops;
  if (hops.length === 0 || numLayers <= 0) {
    return h('p', { class: 'empty route-empty' }, state.route.reason ? `No route: ${state.route.reason}` : 'No route yet.');
  }
  const x = (layer: number) => LEFT + ((RIGHT - LEFT) * layer) / numLayers;
  const parts: Element[] = [];
  // Layer ticks under the chain.
  for (let layer = 0; layer <= numLayers; layer++) {
    const showLabel = numLayers <= 40 || layer % Math.ceil(numLayers / 20) === 0 || layer === numLayers;
    parts.push(s('line', { x1: x(layer), x2: x(layer), y1: BAR_Y + BAR_H + 6, y2: BAR_Y + BAR_H + 12, class: 'tick' }));
    if (showLabel) parts.push(s('text', { x: x(layer), y: BAR_Y + BAR_H + 25, class: 'tick-label' }, layer));
  }
  parts.push(s('text', { x: (LEFT + RIGHT) / 2, y: HEIGHT - 2, class: 'axis-label' }, `layers of ${state.model.id}`));
  // The embedding and the LM head run on the head.
  parts.push(node(4 + NODE_HALF, 'embed'), node(WIDTH - 4 - NODE_HALF, 'LM head'));
  parts.push(arrow(4 + 2 * NODE_HALF, x(hops[0]!.range.start) + 2));
  hops.forEach((hop, index) => {
    const x0 = x(hop.range.start) + 2;
    const x1 = x(hop.range.end) - 2;
    const color = peerColor(hop.peerId);
    parts.push(
      s(
        'g',
        { class: 'hop', 'data-peer-id': hop.peerId },
        s('rect', { x: x0, y: BAR_Y, width: Math.max(4, x1 - x0), height: BAR_H, rx: 6, fill: color }),
        s('text', { x: (x0 + x1) / 2, y: BAR_Y + 19, class: 'hop-peer' }, hop.peerId),
        s('text', { x: (x0 + x1) / 2, y: BAR_Y + 36, class: 'hop-range' }, layers(hop.range)),
        s('text', { x: (x0 + x1) / 2, y: BAR_Y - 8, class: 'hop-index' }, `hop ${index + 1}`),
      ),
    );
  });
  parts.push(arrow(x(hops[hops.length - 1]!.range.end) - 2, WIDTH - 4 - 2 * NODE_HALF));
  const links = routeLinks(state);
  links?.forEach((link, i) => {
    const at = x(hops[i]!.range.end);
    parts.push(
      s(
        'g',
        { class: `chain-link ${link}`, 'data-link': link, 'data-from': hops[i]!.peerId, 'data-to': hops[i + 1]!.peerId },
        s('line', { x1: at, x2: at, y1: BAR_Y - 2, y2: BAR_Y + BAR_H + 2 }),
        s('text', { x: at, y: BAR_Y + BAR_H + 42 }, link === 'direct' ? 'direct' : 'via head'),
      ),
    );
  });
  const flow = hops.map((hop) => `${hop.peerId} ${layers(hop.range)}`).reduce((text, hop, i) => `${text} ${links ? (links[i - 1] === 'direct' ? '→' : '⇢ head ⇢') : '→'} ${hop}`);
  return s('svg', { class: 'route', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `route: ${flow}` }, ...parts);
}

/** The links of the newest session over exactly this route (live first, then finished), if it has stepped. */
function routeLinks(state: MeshState): readonly ('direct' | 'head')[] | undefined {
  const ids = state.route.hops.map((hop) => hop.peerId).join('\n');
  const over = (session: SessionView) => session.links !== undefined && session.links.length === state.route.hops.length - 1 && session.hops.map((hop) => hop.peerId).join('\n') === ids;
  return [...state.sessions].reverse().find(over)?.links ?? state.finished.find(over)?.links;
}

function node(cx: number, label: string): Element {
  return s('g', { class: 'route-node' }, s('rect', { x: cx - NODE_HALF, y: BAR_Y + 8, width: 2 * NODE_HALF, height: BAR_H - 16, rx: 14 }), s('text', { x: cx, y: BAR_Y + BAR_H / 2 + 4 }, label));
}

function arrow(from: number, to: number): Element {
  const y = BAR_Y + BAR_H / 2;
  return s('line', { x1: from, x2: to, y1: y, y2: y, class: 'route-link' });
}
