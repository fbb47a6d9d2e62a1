/**
 * The join page (`/peer`, apps/dashboard/peer.html): a "Join mesh" button, a join-token field
 * (or `?token=`; the head never puts the token in the page), the shard's progress bar while it
 * downloads and loads (bytes, time left), and once joined what the tab does: layers, tokens
 * served, a tokens/s sparkline, execution provider and GPU adapter (peer-view.ts draws them).
 * `?autojoin=1` joins at once; `?device=webgpu|wasm|auto` and `?peer-id=` are for tests and
 * power users.
 */
import { runBrowserPeer, type BrowserPeerStatus } from './browser-peer.ts';
import { downloadView, RateSeries, sparklineSvg } from './peer-view.ts';

const params = new URLSearchParams(location.search);
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const tokenInput = $<HTMLInputElement>('token');
const joinButton = $<HTMLButtonElement>('join');
tokenInput.value = params.get('token') ?? '';

let latest: BrowserPeerStatus | undefined;
const series = new RateSeries();

function showDownload(status: BrowserPeerStatus | undefined): void {
  const view = downloadView(status?.download, performance.now());
  const bar = $('download-bar');
  bar.setAttribute('aria-valuenow', view.percent.toFixed(0));
  bar.dataset.phase = status?.download?.phase ?? 'idle';
  $('download-fill').style.width = `${view.percent.toFixed(1)}%`;
  $('download-phase').textContent = view.phase;
  $('download-bytes').textContent = view.bytes;
  $('download-left').textContent = view.left;
}

function show(status: BrowserPeerStatus): void {
  latest = status;
  $('state').textContent = status.state;
  $('state').dataset.state = status.state;
  $('provider').textContent = status.executionProvider ?? '—';
  $('layers').textContent = status.layers.join(' ') || '—';
  $('tokens').textContent = String(status.tokensServed);
  $('error').textContent = status.lastError ?? '';
  $('adapter').textContent = status.adapter ? `${status.adapter.vendor || 'unknown vendor'} ${status.adapter.architecture}${status.adapter.isFallbackAdapter ? ' (fallback adapter)' : ''}` : 'no WebGPU adapter';
  joinButton.disabled = status.state === 'connecting' || status.state === 'connected' || status.state === 'reconnecting';
  showDownload(status);
}

// Once a second: the time left moves on, and the tokens/s series gets its point.
setInterval(() => {
  if (latest?.download?.phase === 'downloading') showDownload(latest);
  if (latest?.state !== 'connected') return;
  const rate = series.sample(latest.tokensServed, performance.now());
  $('rate').textContent = rate.toFixed(rate < 10 ? 1 : 0);
  $('sparkline').innerHTML = sparklineSvg(series.points);
}, 1000);
$('sparkline').innerHTML = sparklineSvg([]);

async function join(): Promise<void> {
  joinButton.disabled = true;
  const device = (params.get('device') ?? 'auto') as 'auto' | 'webgpu' | 'wasm';
  const headUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/peer/ws`;
  try {
    const peer = await runBrowserPeer({ headUrl, joinToken: tokenInput.value.trim() || undefined, device, peerId: params.get('peer-id') ?? undefined, onStatus: show });
    (window as unknown as { meshnetPeer: unknown }).meshnetPeer = peer;
  } catch (error) {
    $('state').textContent = 'disconnected';
    $('state').dataset.state = 'disconnected';
    $('error').textContent = error instanceof Error ? error.message : String(error);
    joinButton.disabled = false;
  }
}

joinButton.addEventListener('click', () => void join());
if (params.get('autojoin') === '1') void join();
