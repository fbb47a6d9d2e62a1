/**
 * The join page (`/peer`): a "Join mesh" button, a join-token field (or `?token=`; the head
 * never puts the token in the page), and live status. `?autojoin=1` joins at once;
 * `?device=webgpu|wasm|auto` and `?peer-id=` are for tests and power users.
 */
import { runBrowserPeer, type BrowserPeerStatus } from './browser-peer.ts';

const params = new URLSearchParams(location.search);
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const tokenInput = $<HTMLInputElement>('token');
const joinButton = $<HTMLButtonElement>('join');
tokenInput.value = params.get('token') ?? '';

function show(status: BrowserPeerStatus): void {
  $('state').textContent = status.state;
  $('state').dataset.state = status.state;
  $('provider').textContent = status.executionProvider ?? '—';
  $('layers').textContent = status.layers.join(' ') || '—';
  $('tokens').textContent = String(status.tokensServed);
  $('progress').textContent = status.progress ?? '';
  $('error').textContent = status.lastError ?? '';
  $('adapter').textContent = status.adapter ? `${status.adapter.vendor || 'unknown vendor'} ${status.adapter.architecture}${status.adapter.isFallbackAdapter ? ' (fallback adapter)' : ''}` : 'no WebGPU adapter';
  joinButton.disabled = status.state === 'connecting' || status.state === 'connected';
}

async function join(): Promise<void> {
  joinButton.disabled = true;
  const device = (params.get('device') ?? 'auto') as 'auto' | 'webgpu' | 'wasm';
  const headUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/peer/ws`;
  try {
    const peer = await runBrowserPeer({ headUrl, joinToken: tokenInput.value.trim() || undefined, device, peerId: params.get('peer-id') ?? undefined, onStatus: show });
    (window as unknown as { meshnetPeer: unknown }).meshnetPeer = peer;
  } catch (error) {
    $('state').textContent = 'disconnected';
    $('error').textContent = error instanceof Error ? error.message : String(error);
    joinButton.disabled = false;
  }
}

joinButton.addEventListener('click', () => void join());
if (params.get('autojoin') === '1') void join();
