/**
 * The direct-link handshake as pure logic (`core/peer/direct-auth.ts`): proofs depend on
 * every input and on which side makes them; the peer-side guard sends its challenge, accepts
 * only the right proof (and tells its owner before answering), refuses anything else once,
 * and owns its timeout. A recording socket stands in for the WebSocket (seam unit test; the
 * real sockets are in direct-dial.test.ts).
 */
import { describe, expect, it, vi } from 'vitest';
import { DirectLinkGuard, headProof, newNonce, peerProof } from '../../src/core/peer/direct-auth.ts';
import { parseControlMessage, type ControlMessage } from '../../src/shared/control.ts';

const TOKEN = 'unit-token';

class RecordingSocket {
  readonly sent: ControlMessage[] = [];
  closed: [number | undefined, string | undefined] | undefined;
  send(data: string | Uint8Array): void {
    this.sent.push(parseControlMessage(data as string));
  }
  close(code?: number, reason?: string): void {
    this.closed = [code, reason];
  }
}

function guard(timeoutMs = 5_000) {
  const socket = new RecordingSocket();
  const events: string[] = [];
  const g = new DirectLinkGuard({
    peerId: 'p1',
    joinToken: TOKEN,
    socket,
    timeoutMs,
    onAccepted: () => events.push(`accepted after ${socket.sent.length} sent`),
    onRefused: (reason) => events.push(`refused: ${reason}`),
  });
  g.open();
  const challenge = socket.sent[0] as Extract<ControlMessage, { kind: 'challenge' }>;
  return { g, socket, events, nonce: challenge.nonce };
}

describe('proofs', () => {
  it('are 64 hex digits and change with every input and with the side', async () => {
    const [np, nh] = [newNonce(), newNonce()];
    expect(np).toMatch(/^[0-9a-f]{64}$/);
    expect(np).not.toBe(nh);
    const base = await headProof(TOKEN, 'p1', np, nh);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(await headProof(TOKEN, 'p1', np, nh)).toBe(base);
    const variants = [
      await peerProof(TOKEN, 'p1', np, nh),
      await headProof('other', 'p1', np, nh),
      await headProof(undefined, 'p1', np, nh),
      await headProof(TOKEN, 'p2', np, nh),
      await headProof(TOKEN, 'p1', nh, np),
      await headProof(TOKEN, 'p1', np, newNonce()),
    ];
    expect(new Set([base, ...variants]).size).toBe(variants.length + 1);
  });
});

describe('DirectLinkGuard', () => {
  it('challenges on open, accepts the right proof, tells its owner first, then answers with its own proof', async () => {
    const { g, socket, events, nonce } = guard();
    expect(socket.sent[0]).toMatchObject({ kind: 'challenge' });
    const headNonce = newNonce();
    await g.receive(JSON.stringify({ kind: 'authenticate', id: 'a', peerId: 'p1', nonce: headNonce, proof: await headProof(TOKEN, 'p1', nonce, headNonce) }));
    expect(g.accepted).toBe(true);
    expect(events).toEqual(['accepted after 1 sent']);
    expect(socket.sent[1]).toEqual({ kind: 'authenticated', id: 'a', proof: await peerProof(TOKEN, 'p1', nonce, headNonce) });
    expect(socket.closed).toBeUndefined();
    g.terminated();
  });

  it('a message that arrives while the proof is being checked is refused', async () => {
    const { g, socket, events, nonce } = guard();
    const headNonce = newNonce();
    const checking = g.receive(JSON.stringify({ kind: 'authenticate', peerId: 'p1', nonce: headNonce, proof: await headProof(TOKEN, 'p1', nonce, headNonce) }));
    await g.receive(new Uint8Array(8));
    await checking;
    expect(g.accepted).toBe(false);
    expect(events).toEqual(['refused: a message arrived before the handshake finished']);
    expect(socket.closed).toEqual([4001, 'unauthorized']);
  });

  it('refuses once, whatever follows', async () => {
    const { g, socket, events } = guard();
    await g.receive('{"kind":"ping","t":1}');
    await g.receive('{"kind":"ping","t":2}');
    expect(events).toEqual(["refused: the first message must be 'authenticate', got 'ping'"]);
    expect(socket.sent.filter((m) => m.kind === 'error')).toHaveLength(1);
  });

  it('closes a dialer that does not authenticate in time, and its timer ends with the socket', () => {
    vi.useFakeTimers();
    try {
      const { socket, events } = guard(20);
      vi.advanceTimersByTime(19);
      expect(events).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(events).toEqual(['refused: no authenticate within 20 ms']);
      expect(socket.sent[1]).toMatchObject({ kind: 'error', code: 'unauthorized' });
      expect(socket.closed).toEqual([4001, 'unauthorized']);
      const second = guard(20);
      second.g.terminated();
      expect(vi.getTimerCount()).toBe(0);
      vi.advanceTimersByTime(100);
      expect(second.events).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });
});
