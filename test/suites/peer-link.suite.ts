/**
 * The PeerLink conformance suite (src/core/runtime/peer-link.ts states the contract). Every
 * implementation runs it: in-process, direct and relay (test/transport/peer-links.test.ts).
 * A fixture gives the head's link, the ShardPeer serving on the other end, and a way to make
 * that peer vanish from its own side. Layers [0, 2) of stories260k are assigned through the
 * link itself; results are checked against the same ShardPeer called directly.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, type ActivationFrame } from '../../src/core/frames/frame-codec.ts';
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { LinkClosedError, type PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { AssignMessage } from '../../src/shared/control.ts';
import { frameRequestId } from '../../src/shared/frame-layout.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { STORIES_DIR } from '../engine/harness.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';

const FP32 = weightSpec('fp32');

export interface PeerLinkFixture {
  /** The head's end: what a Route Session would be given. */
  readonly link: PeerLink;
  /** The ShardPeer answering on the other end. */
  readonly peer: ShardPeer;
  /** The peer vanishes: its socket (or link) is killed from the peer's side. */
  drop(): Promise<void>;
  cleanup(): Promise<void>;
}

export const SUITE_RANGE = { start: 0, end: 2 } as const;

/** The `assign` a Mesh would send for `range` of stories260k (same fields as Mesh.load). */
export function storiesAssign(model: LocalModel, range: { start: number; end: number } = SUITE_RANGE): AssignMessage {
  const m = meshModel(model, 'stories260k', 'fp32', FP32);
  return { kind: 'assign', modelKey: m.modelKey, model: m.name, range, dtype: m.artifacts.dtype, weights: m.artifacts.weights, artifactUrl: m.artifacts.url(range), config: m.config };
}

/** Deterministic finite activations, distinct per `seed`. */
export function testActivations(hiddenSize: number, tokens: number, seed: number): Activations {
  const data = Float32Array.from({ length: tokens * hiddenSize }, (_, i) => Math.sin(seed * 7.13 + i * 0.37) * 0.5);
  return { dtype: 'fp32', data, tokens, hiddenSize };
}

export function frameFor(fields: { requestId: number; sessionId: string; startPosition: number; activations: Activations; range?: { start: number; end: number } }): Uint8Array {
  return encodeFrame({ kind: fields.startPosition === 0 ? 'prefill' : 'decode', range: SUITE_RANGE, ...fields });
}

/** What the peer computes for the same input when called directly (on a fresh session). */
async function direct(peer: ShardPeer, startPosition: number, steps: Activations[]): Promise<ActivationFrame> {
  const sessionId = randomUUID();
  let position = 0;
  let last: ActivationFrame | undefined;
  for (const activations of steps) {
    const reply = await peer.handleFrame(frameFor({ requestId: 1, sessionId, startPosition: position, activations }));
    if (!('frame' in reply)) throw new Error(`direct call failed: ${reply.error.message}`);
    last = decodeFrame(reply.frame);
    position += activations.tokens;
  }
  expect(position - steps.at(-1)!.tokens).toBe(startPosition);
  return last!;
}

/** Holds the peer's next frame(s) until released: makes a request reliably in flight. */
function holdFrames(peer: ShardPeer) {
  const original = peer.handleFrame.bind(peer);
  let entered!: () => void;
  const arrived = new Promise<void>((resolve) => (entered = resolve));
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  peer.handleFrame = async (bytes) => {
    entered();
    await gate;
    return original(bytes);
  };
  return { arrived, release: () => ((peer.handleFrame = original), release()) };
}

export function peerLinkSuite(name: string, factory: () => Promise<PeerLinkFixture>): void {
  describe(`PeerLink conformance: ${name}`, () => {
    let model: LocalModel;
    let hidden: number;
    let f: PeerLinkFixture;
    let nextRequestId = 1;
    const rid = () => nextRequestId++;

    beforeAll(async () => {
      model = await openLocalModel(STORIES_DIR);
      hidden = model.checkpoint.config.hiddenSize;
    });
    beforeEach(async () => {
      f = await factory();
      const ready = await f.link.control(storiesAssign(model));
      expect(ready).toMatchObject({ kind: 'ready', modelKey: model.key, range: SUITE_RANGE });
    });
    afterEach(async () => {
      await f.cleanup();
    });

    it('a frame round trip returns the result frame with the request id the link stamped and the values the peer computes directly', async () => {
      const sessionId = randomUUID();
      const prompt = testActivations(hidden, 3, 1);
      const step = testActivations(hidden, 1, 2);
      const prefill = frameFor({ requestId: 0, sessionId, startPosition: 0, activations: prompt });
      const first = decodeFrame(await f.link.request(prefill));
      expect(frameRequestId(prefill)).toBeGreaterThan(0); // stamped in place by the link
      expect(first).toMatchObject({ kind: 'result', requestId: frameRequestId(prefill), sessionId, startPosition: 0, range: SUITE_RANGE });
      expect(first.activations.data).toEqual((await direct(f.peer, 0, [prompt])).activations.data);

      const decode = frameFor({ requestId: 0, sessionId, startPosition: 3, activations: step });
      const second = decodeFrame(await f.link.request(decode));
      expect(frameRequestId(decode)).not.toBe(frameRequestId(prefill));
      expect(second).toMatchObject({ kind: 'result', requestId: frameRequestId(decode), sessionId, startPosition: 3 });
      expect(second.activations.tokens).toBe(1);
      expect(second.activations.data).toEqual((await direct(f.peer, 3, [prompt, step])).activations.data);
    });

    it('concurrent requests for two sessions resolve independently, even when their callers reuse a request id', async () => {
      const [a, b] = [randomUUID(), randomUUID()];
      const [inA, inB] = [testActivations(hidden, 2, 3), testActivations(hidden, 4, 4)];
      const frameA = frameFor({ requestId: 7, sessionId: a, startPosition: 0, activations: inA });
      const frameB = frameFor({ requestId: 7, sessionId: b, startPosition: 0, activations: inB });
      const [outA, outB] = (await Promise.all([f.link.request(frameA), f.link.request(frameB)])).map(decodeFrame);
      expect(frameRequestId(frameA)).not.toBe(frameRequestId(frameB));
      expect(outA).toMatchObject({ requestId: frameRequestId(frameA), sessionId: a });
      expect(outB).toMatchObject({ requestId: frameRequestId(frameB), sessionId: b });
      expect(outA.activations.data).toEqual((await direct(f.peer, 0, [inA])).activations.data);
      expect(outB.activations.data).toEqual((await direct(f.peer, 0, [inB])).activations.data);
    });

    it("a peer's refusal rejects with its typed ProtocolError and the link keeps working", async () => {
      const never = randomUUID();
      const frame = frameFor({ requestId: rid(), sessionId: never, startPosition: 5, activations: testActivations(hidden, 1, 5) });
      const refused = f.link.request(frame);
      await expect(refused).rejects.toBeInstanceOf(ProtocolError);
      await expect(refused).rejects.toMatchObject({ code: 'cache_miss', sessionId: never, requestId: frameRequestId(frame) });

      const sessionId = randomUUID();
      const ok = decodeFrame(await f.link.request(frameFor({ requestId: rid(), sessionId, startPosition: 0, activations: testActivations(hidden, 2, 6) })));
      expect(ok.sessionId).toBe(sessionId);
    });

    it('control: assign answers ready, release answers released with the entries freed', async () => {
      const again = await f.link.control(storiesAssign(model));
      expect(again).toMatchObject({ kind: 'ready', range: SUITE_RANGE, device: 'cpu' });
      const sessionId = randomUUID();
      await f.link.request(frameFor({ requestId: rid(), sessionId, startPosition: 0, activations: testActivations(hidden, 2, 7) }));
      const before = f.peer.kvEntries;
      expect(before).toBeGreaterThanOrEqual(1);
      expect(await f.link.control({ kind: 'release', sessionId })).toEqual(expect.objectContaining({ kind: 'released', sessionId, freedEntries: 1 }));
      expect(f.peer.kvEntries).toBe(before - 1);
      expect(await f.link.control({ kind: 'release', sessionId })).toMatchObject({ kind: 'released', freedEntries: 0 });
      expect(await f.link.control({ kind: 'ping', t: 42 })).toMatchObject({ kind: 'pong', t: 42 });
    });

    it('an aborted signal rejects the pending request with its reason; the link keeps working', async () => {
      const held = holdFrames(f.peer);
      const controller = new AbortController();
      const pending = f.link.request(frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 8) }), controller.signal);
      await held.arrived;
      const reason = new Error('the client went away');
      controller.abort(reason);
      await expect(pending).rejects.toBe(reason);
      held.release();
      const already = frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 8) });
      await expect(f.link.request(already, AbortSignal.abort(reason))).rejects.toBe(reason);
      const sessionId = randomUUID();
      expect(decodeFrame(await f.link.request(frameFor({ requestId: rid(), sessionId, startPosition: 0, activations: testActivations(hidden, 1, 9) }))).sessionId).toBe(sessionId);
    });

    it('the peer vanishing rejects in-flight requests with LinkClosedError and resolves closed', async () => {
      const held = holdFrames(f.peer);
      const pending = f.link.request(frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 10) }));
      await held.arrived;
      await f.drop();
      await expect(pending).rejects.toBeInstanceOf(LinkClosedError);
      await f.link.closed;
      await expect(f.link.control({ kind: 'ping', t: 1 })).rejects.toBeInstanceOf(LinkClosedError);
      // The held frame is never released: a vanished peer does not answer.
    });

    it('close() is idempotent; pending and later calls reject with LinkClosedError', async () => {
      const held = holdFrames(f.peer);
      const pending = f.link.request(frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 11) }));
      await held.arrived;
      await f.link.close('test closes');
      await f.link.close('again');
      await f.link.closed;
      await expect(pending).rejects.toBeInstanceOf(LinkClosedError);
      const frame = frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 12) });
      await expect(f.link.request(frame)).rejects.toBeInstanceOf(LinkClosedError);
      await expect(f.link.control({ kind: 'ping', t: 1 })).rejects.toBeInstanceOf(LinkClosedError);
      // The held frame is never released: its answer has nowhere to go.
    });
  });
}
