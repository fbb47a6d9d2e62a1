/**
 * A tab's part in chained routes (protocol 3.2). A tab cannot accept connections, so a link
 * into a tab always goes through the head (the head never names it dialable); a link out of a
 * tab to a Node peer that listens is direct: the tab dials the URL the head named in `chain`
 * with its native WebSocket and proves the join token with the same `hop` handshake as a Node
 * peer (core/peer/direct-handshake.ts). The hop proof needs WebCrypto, which a page has only in
 * a secure context (https, or http on localhost): elsewhere the dial fails, the tab answers the
 * `chain` with `route_unavailable` and that link goes through the head as well. Concurrent
 * sessions' chained steps run batched (core/mesh/batched-chain-runs.ts), as on a Node peer.
 */
import { batchedChainRuns } from '../core/mesh/batched-chain-runs.ts';
import { peerChains, type PeerChains } from '../core/peer/peer-chains.ts';
import type { DialledLink } from '../core/peer/direct-handshake.ts';
import type { ShardService } from '../core/runtime/shard-service.ts';
import { openBrowserSocket } from './browser-socket.ts';

/** Open a WebSocket from this tab to `url` within `timeoutMs`; refuses at once where WebCrypto is missing. */
export function dialFromTab(url: string, timeoutMs = 10_000): Promise<DialledLink> {
  if (!globalThis.isSecureContext || globalThis.crypto?.subtle === undefined) {
    return Promise.reject(new Error('this page is not a secure context (https or localhost): it cannot prove the join token to another peer'));
  }
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new Error(`could not connect within ${timeoutMs} ms`));
    }, timeoutMs);
    openBrowserSocket(url).then(
      (link) => {
        clearTimeout(timer);
        // Opened after the dial gave up: nobody will use it, so it must not stay open.
        if (late) link.socket.close(1000, 'dial timed out');
        else resolve(link);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

export function tabChains(shard: ShardService, peerId: string, joinToken: string | undefined): PeerChains {
  return peerChains({ shard, peerId, joinToken, dial: (url) => dialFromTab(url), run: batchedChainRuns(shard).run });
}
