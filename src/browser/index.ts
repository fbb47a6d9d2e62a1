/** meshnet for browsers: the core engine plus onnxruntime-web. */
export * from '../core/index.ts';
export { BROWSER_DEVICES, browserLoaderOptions } from './ort-web-runtime.ts';
export { runBrowserPeer, type BrowserPeerOptions, type BrowserPeerStatus, type RunningBrowserPeer } from './browser-peer.ts';
export { startPeer, type StartBrowserPeerOptions } from './start-peer.ts';
