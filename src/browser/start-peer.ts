/**
 * `startPeer` for browsers: the name Node's entry gives its peer, so `import { startPeer }
 * from 'meshnet'` joins a mesh from either runtime (the package's `browser` condition picks
 * this one). The tab dials the head's `/peer/ws` and fetches its shard artifact and
 * onnxruntime-web's files from the head (`/artifacts/…`, `/ort/…`): run it on a page of the
 * head's own origin, as the head's join page (`/peer`) does.
 */
import { runBrowserPeer, type BrowserPeerStatus, type RunningBrowserPeer } from './browser-peer.ts';

export interface StartBrowserPeerOptions {
  /** The head's peer endpoint, `ws(s)://host:port/peer/ws`. */
  readonly head: string;
  readonly joinToken?: string;
  /** `auto` (default: WebGPU when the tab has an adapter, else wasm), `webgpu` or `wasm`. */
  readonly device?: 'auto' | 'webgpu' | 'wasm';
  /** The name the head shows (default `browser-<random>`). */
  readonly peerId?: string;
  /** Memory for weights and KV (default 512). */
  readonly memoryBudgetMb?: number;
  /** Called on every change: connection, provider, layers, tokens served, errors. */
  readonly onStatus?: (status: BrowserPeerStatus) => void;
}

/** Join a head from this tab; resolves once the hello is sent (watch `onStatus` for `connected`). */
export function startPeer(options: StartBrowserPeerOptions): Promise<RunningBrowserPeer> {
  return runBrowserPeer({
    headUrl: options.head,
    joinToken: options.joinToken,
    device: options.device ?? 'auto',
    peerId: options.peerId,
    memoryBudgetBytes: options.memoryBudgetMb === undefined ? undefined : options.memoryBudgetMb * 2 ** 20,
    onStatus: options.onStatus ?? (() => {}),
  });
}
