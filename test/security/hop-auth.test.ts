/**
 * The peer-to-peer handshake (protocol 3.2, chained routes): a peer dialling the next hop
 * names itself in `authenticate.from` and proves the join token with a `hop` proof that binds
 * its id; the listener accepts it only when told to take links from peers, reports who it is,
 * and answers with a proof bound to that id. A head's proof cannot pass as a peer's, nor one
 * peer's as another's. A recording socket stands in for the WebSocket (seam unit test).
 */
import { describe, expect, it } from 'vitest';
import { DirectLinkGuard, headProof, hopProof, newNonce, peerProof } from '../../src/core/peer/direct-auth.ts';
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

function listener(acceptPeers: boolean) {
  const socket = new RecordingSocket();
  const events: string[] = [];
  const g = new DirectLinkGuard({
    peerId: 'p2',
    joinToken: TOKEN,
    socket,
    acceptPeers,
    onAccepted: (from) => events.push(`accepted ${from ?? 'the head'}`),
    onRefused: (reason) => events.push(`refused: ${reason}`),
  });
  g.open();
  const nonce = (socket.sent[0] as Extract<ControlMessage, { kind: 'challenge' }>).nonce;
  return { g, socket, events, nonce };
}

const authenticate = (from: string | undefined, nonce: string, proof: string) => JSON.stringify({ kind: 'authenticate', id: 'a', peerId: 'p2', ...(from && { from }), nonce, proof });

describe('hop proofs', () => {
  it('bind the dialler: differ from the head proof, from another dialler, and from the answer', async () => {
    const [np, nh] = [newNonce(), newNonce()];
    const proofs = [
      await hopProof(TOKEN, 'p1', 'p2', np, nh),
      await hopProof(TOKEN, 'p3', 'p2', np, nh),
      await headProof(TOKEN, 'p2', np, nh),
      await peerProof(TOKEN, 'p2', np, nh, 'p1'),
      await peerProof(TOKEN, 'p2', np, nh),
      await hopProof('other', 'p1', 'p2', np, nh),
    ];
    expect(new Set(proofs).size).toBe(proofs.length);
  });
});

describe('DirectLinkGuard with peers dialling in', () => {
  it('accepts a peer with the right hop proof, says which one, and answers with a proof bound to it', async () => {
    const { g, socket, events, nonce } = listener(true);
    const mine = newNonce();
    await g.receive(authenticate('p1', mine, await hopProof(TOKEN, 'p1', 'p2', nonce, mine)));
    expect(g.accepted).toBe(true);
    expect(events).toEqual(['accepted p1']);
    expect(socket.sent[1]).toEqual({ kind: 'authenticated', id: 'a', proof: await peerProof(TOKEN, 'p2', nonce, mine, 'p1') });
    g.terminated();
  });

  it('still accepts the head on the same listener', async () => {
    const { g, events, nonce } = listener(true);
    const mine = newNonce();
    await g.receive(authenticate(undefined, mine, await headProof(TOKEN, 'p2', nonce, mine)));
    expect(events).toEqual(['accepted the head']);
    g.terminated();
  });

  it.each([
    ['a head proof under a peer name', async (n: string, m: string) => authenticate('p1', m, await headProof(TOKEN, 'p2', n, m)), /proof does not match/],
    ["another peer's proof", async (n: string, m: string) => authenticate('p1', m, await hopProof(TOKEN, 'p3', 'p2', n, m)), /proof does not match/],
    ['a proof over the wrong token', async (n: string, m: string) => authenticate('p1', m, await hopProof('wrong', 'p1', 'p2', n, m)), /proof does not match/],
    ['a peer calling itself the head', async (n: string, m: string) => authenticate('head', m, await hopProof(TOKEN, 'head', 'p2', n, m)), /cannot dial in as head/],
    ['a peer calling itself by the listener id', async (n: string, m: string) => authenticate('p2', m, await hopProof(TOKEN, 'p2', 'p2', n, m)), /cannot dial in as p2/],
  ])('refuses %s', async (_name, make, reason) => {
    const { g, socket, events, nonce } = listener(true);
    await g.receive(await make(nonce, newNonce()));
    expect(g.accepted).toBe(false);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(reason);
    expect(socket.closed).toEqual([4001, 'unauthorized']);
  });

  it('a listener that takes no peer links refuses a peer even with a right proof', async () => {
    const { g, events, nonce } = listener(false);
    const mine = newNonce();
    await g.receive(authenticate('p1', mine, await hopProof(TOKEN, 'p1', 'p2', nonce, mine)));
    expect(g.accepted).toBe(false);
    expect(events).toEqual(['refused: this listener takes no links from other peers']);
  });
});
