/**
 * Tells peers which prefix entries the head's registry forgot (protocol 3.5 `forget`), so a
 * peer's prefix store follows the head's instead of keeping entries no `fork` will name
 * again until its own budget pushes them out. The registry reports each forgotten entry with
 * its hops (`PrefixRegistryOptions.onForget`); ids are gathered per peer and sent together
 * once the current turn ends (an eviction forgets an entry and its descendants at once), at
 * most MAX_FORGET_IDS per message. Only peers that announced ≥ 3.5 are sent one; a failed or
 * refused `forget` changes nothing (the peer's budget still bounds what it keeps).
 */
import { MAX_FORGET_IDS, type ControlMessage } from '../../shared/control.ts';
import { PREFIX_FORGET_MINOR, type ProtocolVersion } from '../../shared/protocol.ts';
import type { PrefixHop } from './prefix-registry.ts';

/** A peer as the sender needs it: where to send, and what it announced (absent: this build's, in-process). */
export interface ForgetTarget {
  readonly protocol?: ProtocolVersion;
  readonly link: { control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> };
}

export class PrefixForgetter {
  private readonly queued = new Map<string, Set<string>>();
  private scheduled = false;
  private sent = { messages: 0, ids: 0 };

  /** `peer(id)`: the peer in the mesh now under that id, if any; `timeoutMs` bounds each answer. */
  constructor(
    private readonly peer: (peerId: string) => ForgetTarget | undefined,
    private readonly timeoutMs = 10_000,
  ) {}

  /** Queue `prefixId` for every peer among `hops` (each peer once). */
  forgotten(prefixId: string, hops: readonly PrefixHop[]): void {
    for (const hop of hops) {
      let ids = this.queued.get(hop.peerId);
      if (!ids) this.queued.set(hop.peerId, (ids = new Set()));
      ids.add(prefixId);
    }
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** Messages and ids sent so far. */
  stats(): { readonly messages: number; readonly ids: number } {
    return { ...this.sent };
  }

  private flush(): void {
    this.scheduled = false;
    for (const [peerId, ids] of this.queued) {
      const target = this.peer(peerId);
      if (!target || (target.protocol !== undefined && target.protocol.minor < PREFIX_FORGET_MINOR)) continue; // gone, or a 3.4 peer
      const all = [...ids];
      for (let i = 0; i < all.length; i += MAX_FORGET_IDS) {
        const prefixIds = all.slice(i, i + MAX_FORGET_IDS);
        this.sent.messages++;
        this.sent.ids += prefixIds.length;
        void target.link.control({ kind: 'forget', prefixIds }, AbortSignal.timeout(this.timeoutMs)).catch(() => undefined);
      }
    }
    this.queued.clear();
  }
}
