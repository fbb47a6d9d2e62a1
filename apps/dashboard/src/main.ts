/**
 * The dashboard page: folds `/api/events` into a MeshState with the shared `applyEvent`
 * (a snapshot first on every connection, then one event at a time; never a reload) and
 * redraws each panel at most once per animation frame. A one-second tick keeps ages fresh.
 */
import { applyEvent, emptyState, type MeshEvent, type MeshState } from '../../../src/shared/dashboard-state.ts';
import { h } from './dom.ts';
import { openMeshEvents, type StreamStatus } from './event-stream.ts';
import { renderFinished } from './render-finished.ts';
import { renderHeader } from './render-header.ts';
import { renderPeers } from './render-peers.ts';
import { renderRoute } from './render-route.ts';
import { renderLiveSessions } from './render-sessions.ts';

const panel = (id: string) => {
  const element = document.getElementById(id);
  if (!element) throw new Error(`dashboard: #${id} is missing from index.html`);
  return element;
};

const view = {
  header: panel('header'),
  banner: panel('banner'),
  route: panel('route'),
  peers: panel('peers'),
  live: panel('live'),
  finished: panel('finished'),
  liveCount: panel('live-count'),
  finishedCount: panel('finished-count'),
};

let state: MeshState = emptyState();
let status: StreamStatus = 'connecting';
let attempt = 0;
let pending = false;

function render(): void {
  pending = false;
  const now = Date.now();
  view.header.replaceChildren(renderHeader(state, status, now));
  view.banner.hidden = status !== 'reconnecting';
  view.banner.replaceChildren(h('strong', {}, 'Head unreachable — reconnecting'), ` (attempt ${attempt}). The figures below are as of the last update.`);
  view.route.replaceChildren(renderRoute(state));
  view.peers.replaceChildren(renderPeers(state, now));
  view.live.replaceChildren(renderLiveSessions(state.sessions, now));
  view.finished.replaceChildren(renderFinished(state.finished));
  view.liveCount.textContent = String(state.sessions.length);
  view.finishedCount.textContent = String(state.finished.length);
  document.body.dataset.status = status;
}

function schedule(): void {
  if (pending) return;
  pending = true;
  requestAnimationFrame(render);
}

openMeshEvents({
  url: '/api/events',
  onEvent(event: MeshEvent) {
    state = applyEvent(state, event);
    schedule();
  },
  onStatus(next, retries) {
    status = next;
    attempt = retries;
    schedule();
  },
});
setInterval(schedule, 1000);
schedule();
