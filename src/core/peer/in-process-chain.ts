/**
 * Chained routes in one process (protocol 3.2): peers that are ShardServices in this process,
 * each behind a ChainForwarder, reach each other through in-process outlets and the head
 * through in-process ports. Frames still go through the real codecs and the real forwarder
 * (admission, order, copies, reports), so behaviour matches the socket links; every hand-over
 * is asynchronous, as a socket's would be. Used by tests and by complete-model mode's chains.
 *
 * A peer is reachable only once it joined (`join`); `leave` makes every outlet to it and its
 * port drop what they carry, as a killed process would.
 */
import type { ErrorMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { ChainListener, ChainPort, HopDialer, HopOutlet } from '../runtime/chain-port.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';
import { ChainForwarder } from './chain-forwarder.ts';
import { HEAD_SENDER } from './chain-table.ts';

/** The head's port on one in-process peer: posts go to its forwarder, its copies and reports come back here. */
class InProcessChainPort implements ChainPort, ChainListener {
  private readonly listeners = new Set<ChainListener>();

  constructor(private readonly target: () => ChainForwarder | undefined) {}

  post(frame: Uint8Array): void {
    queueMicrotask(() => void this.target()?.receiveChain(frame, HEAD_SENDER));
  }

  listen(listener: ChainListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  copy(frame: Uint8Array): void {
    for (const l of [...this.listeners]) l.copy(frame);
  }

  report(error: ErrorMessage): void {
    for (const l of [...this.listeners]) l.report(error);
  }
}

export class InProcessChains {
  private readonly forwarders = new Map<string, ChainForwarder>();
  private readonly ports = new Map<string, InProcessChainPort>();

  /** `runs`: how each joining peer runs its chain frames (ChainForwarderOptions.run; default one by one). */
  constructor(private readonly runs?: (service: ShardService) => (bytes: Uint8Array) => Promise<FrameReply>) {}

  /**
   * `service` joins under `peerId`: returns its forwarder (the ShardService the head's link
   * should reach) and the head's port on it.
   */
  join(peerId: string, service: ShardService): { forwarder: ChainForwarder; port: ChainPort } {
    if (this.forwarders.has(peerId)) throw new Error(`peer ${peerId} joined twice`);
    const port = new InProcessChainPort(() => this.forwarders.get(peerId));
    const run = this.runs?.(service);
    const forwarder = new ChainForwarder({ peer: service, peerId, dialer: this.dialerFor(peerId), head: port, ...(run && { run }) });
    this.forwarders.set(peerId, forwarder);
    this.ports.set(peerId, port);
    return { forwarder, port };
  }

  /** `peerId` is gone: frames to it are dropped from now on. */
  leave(peerId: string): void {
    this.forwarders.delete(peerId);
  }

  /**
   * What `from` dials: an outlet to a peer that joined. A URL is not needed in one process
   * (and none is dialled); an unknown peer is refused.
   */
  private dialerFor(from: string): HopDialer {
    return {
      outlet: async (to): Promise<HopOutlet> => {
        if (!this.forwarders.has(to.peerId)) throw new ProtocolError('route_unavailable', `no in-process peer ${to.peerId}`);
        return {
          send: (frame) => {
            const target = this.forwarders.get(to.peerId);
            if (!target) throw new ProtocolError('route_unavailable', `peer ${to.peerId} is gone`);
            queueMicrotask(() => void target.receiveChain(frame, from));
          },
        };
      },
    };
  }
}
