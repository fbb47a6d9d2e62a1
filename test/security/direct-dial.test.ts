/**
 * `--link direct` cannot be turned against the head: a peer holding the join token announces
 * listen URLs of its choosing, and trap servers on loopback record everything that arrives.
 * - The head dials only the host the peer connected from (the announced port, path and
 *   query are kept); `--allow-peer-hosts` lets a named host through.
 * - No request carries the join token (URL, query or headers), the handshake message the
 *   head sends carries only a proof bound to fresh nonces, and a listener that cannot prove
 *   the token back is refused.
 * - A real listener (the Node peer's own) completes the handshake and serves a completion.
 * - No error message, log line, `/api/state`, `/health` or `/metrics` contains the token.
 * - The peer's listener refuses every dialer that does not prove the token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headProof, newNonce } from '../../src/core/peer/direct-auth.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { dialDirectPeer } from '../../src/node/net/direct-dial.ts';
import { startServer, type RunningServer } from '../../src/node/net/start-server.ts';
import { directListenerApp, runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { createPeer, useStories } from '../route/route-harness.ts';
import { clientFor, serveStories, storiesText } from '../api/api-harness.ts';
import { RawSocket } from '../transport/transport-harness.ts';
import { startHttpTrap, startTrapPair, startWebSocketTrap, type Trap } from './traps.ts';

const JOIN_TOKEN = 'JOIN-SECRET-7f3a9c0d1e';

const stories = useStories('direct-dial');
let serving: ServingHead; // --link direct, default hosts
let allowing: ServingHead; // --link direct --allow-peer-hosts 127.0.0.2
const logs: string[] = [];
const traps: Trap[] = [];
const answers: ControlMessage[] = []; // every message the head sent a fake peer
const sockets: RawSocket[] = [];

beforeAll(async () => {
  const log = (line: string) => logs.push(line);
  serving = await serveStories({ link: 'direct', headLayers: 'none', joinToken: JOIN_TOKEN, log, linkTimeoutMs: 20_000 });
  allowing = await serveStories({ link: 'direct', headLayers: 'none', joinToken: JOIN_TOKEN, log, allowPeerHosts: ['127.0.0.2'] });
});

afterAll(async () => {
  for (const socket of sockets) socket.close();
  for (const trap of traps) await trap.close();
  await serving?.close();
  await allowing?.close();
});

const hello = (peerId: string, listenUrl: string) =>
  JSON.stringify({ kind: 'hello', id: 'h1', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, peerId, joinToken: JOIN_TOKEN, listenUrl });

/** A fake peer (it holds the token) joins `head` announcing `listenUrl`; resolves with the head's answer. */
async function announce(head: ServingHead, peerId: string, listenUrl: string): Promise<ControlMessage> {
  const socket = await RawSocket.open(head.head.peerUrl);
  sockets.push(socket);
  socket.send(hello(peerId, listenUrl));
  const answer = await socket.nextControl(20_000);
  answers.push(answer);
  return answer;
}

const track = <T extends Trap>(trap: T) => (traps.push(trap), trap);

describe('the head dials only where the peer connected from', () => {
  it('same host: the announced port, path and query are dialled, with no token anywhere in the request', async () => {
    const trap = track(await startHttpTrap('127.0.0.1'));
    const answer = await announce(serving, 'evil-1', `ws://127.0.0.1:${trap.port}/anything?x=1`);
    expect(answer).toMatchObject({ kind: 'error' });
    expect(trap.requests.map((r) => [r.method, r.url, r.upgrade])).toEqual([['GET', '/anything?x=1', true]]);
    expect(JSON.stringify(trap.requests)).not.toContain(JOIN_TOKEN);
    expect(Object.keys(trap.requests[0]!.headers)).not.toContain('authorization');
    expect(serving.head.mesh.peers.map((p) => p.id)).not.toContain('evil-1');
  });

  it('another host: the trap there gets nothing; the head dials that port where the peer connected from', async () => {
    const [local, other] = await startTrapPair('127.0.0.2', '127.0.0.1').then(([o, l]) => [track(l), track(o)] as const);
    const answer = await announce(serving, 'evil-2', `ws://127.0.0.2:${other.port}/elsewhere`);
    expect(answer).toMatchObject({ kind: 'error' });
    expect(other.requests).toEqual([]);
    expect(local.requests.map((r) => r.url)).toEqual(['/elsewhere']);
    expect(logs.some((line) => line.includes('peer evil-2 announced host 127.0.0.2; dialling 127.0.0.1'))).toBe(true);
  });

  it('a host name, user info and a fragment change nothing: the connection address, no credentials', async () => {
    const trap = track(await startHttpTrap('127.0.0.1'));
    await announce(serving, 'evil-3', `ws://intranet.example:${trap.port}/a`);
    await announce(serving, 'evil-4', `ws://admin:${JOIN_TOKEN}@127.0.0.1:${trap.port}/b#frag`);
    expect(trap.requests.map((r) => r.url)).toEqual(['/a', '/b']);
    expect(JSON.stringify(trap.requests)).not.toContain(JOIN_TOKEN);
    for (const request of trap.requests) expect(request.headers.authorization).toBeUndefined();
  });

  it('a peer that puts the token into its own listen URL: the head dials what it announced, but never repeats the token', async () => {
    const own = await startHttpTrap('127.0.0.1'); // not tracked: it receives what the peer itself announced
    try {
      const linesBefore = logs.length;
      const answer = await announce(serving, 'careless', `ws://127.0.0.1:${own.port}/l?token=${JOIN_TOKEN}`);
      expect(own.requests.map((r) => r.url)).toEqual([`/l?token=${JOIN_TOKEN}`]);
      expect(answer).toMatchObject({ kind: 'error', message: expect.stringMatching(/could not connect to ws:\/\/127\.0\.0\.1:\d+\/l[: ]/) });
      expect(logs.length).toBeGreaterThan(linesBefore);
    } finally {
      await own.close();
    }
  });

  it('--allow-peer-hosts 127.0.0.2: that announced host is dialled as announced', async () => {
    const trap = track(await startHttpTrap('127.0.0.2'));
    const answer = await announce(allowing, 'allowed-1', `ws://127.0.0.2:${trap.port}/p?q=2`);
    expect(answer).toMatchObject({ kind: 'error' });
    expect(trap.requests.map((r) => r.url)).toEqual(['/p?q=2']);
    expect(JSON.stringify(trap.requests)).not.toContain(JOIN_TOKEN);
  });
});

describe('the dial is authenticated by a challenge, not by a secret', () => {
  it('a listener that is not a peer gets a proof it cannot use, cannot forge one back, and is refused', async () => {
    const trap = track(await startWebSocketTrap(() => JSON.stringify({ kind: 'authenticated', id: 'auth', proof: '00'.repeat(32) })));
    const answer = await announce(serving, 'evil-5', `ws://127.0.0.1:${trap.port}/listen`);
    expect(answer).toMatchObject({ kind: 'error', code: 'unauthorized' });
    expect((answer as { message: string }).message).toMatch(/is not peer evil-5 of this mesh/);
    expect(trap.messages).toHaveLength(1);
    const sent = JSON.parse(trap.messages[0]!);
    expect(Object.keys(sent).sort()).toEqual(['id', 'kind', 'nonce', 'peerId', 'proof']);
    expect(sent).toMatchObject({ kind: 'authenticate', peerId: 'evil-5', nonce: expect.stringMatching(/^[0-9a-f]{64}$/), proof: expect.stringMatching(/^[0-9a-f]{64}$/) });
    // The proof is bound to the trap's nonce and a fresh head nonce: it is what HMAC gives for them, and only for them.
    expect(sent.proof).toBe(await headProof(JOIN_TOKEN, 'evil-5', '5a'.repeat(32), sent.nonce));
    expect(sent.proof).not.toBe(await headProof(JOIN_TOKEN, 'evil-5', '5a'.repeat(32), newNonce()));
    expect(JSON.stringify(trap.requests) + trap.messages.join('')).not.toContain(JOIN_TOKEN);
  });

  it('a listener that answers the challenge with garbage is refused; one that never challenges times out', async () => {
    const garbage = track(await startWebSocketTrap(() => 'not json'));
    expect(await announce(serving, 'evil-6', `ws://127.0.0.1:${garbage.port}/`)).toMatchObject({ kind: 'error', code: 'protocol_error' });
    expect(garbage.messages).toHaveLength(1);
    const silent = track(await startWebSocketTrap(() => undefined, { challenge: false }));
    await expect(dialDirectPeer(`ws://127.0.0.1:${silent.port}/`, { peerId: 'x', joinToken: JOIN_TOKEN, timeoutMs: 300 })).rejects.toThrow(/no challenge from .* within 300 ms/);
    expect(silent.messages).toEqual([]); // nothing was sent to it, not even a proof
  });

  it('the Node peer\u2019s own listener: the handshake succeeds, frames flow, and the upgrade request carries no token', async () => {
    const shard = createPeer(stories.ctx);
    const app = directListenerApp(shard, 'proxied', JOIN_TOKEN);
    const seen: { url: string; headers: Record<string, string> }[] = [];
    app.use((event, next) => {
      const url = new URL(event.req.url);
      seen.push({ url: url.pathname + url.search, headers: Object.fromEntries(event.req.headers) });
      return next();
    });
    const listener: RunningServer = await startServer(app, { port: 0, host: '127.0.0.1' });
    try {
      const answer = await announce(serving, 'proxied', `ws://127.0.0.1:${listener.port}/peer/ws`);
      expect(answer).toMatchObject({ kind: 'welcome', peerId: 'proxied' });
      expect(seen.map((s) => s.url)).toEqual(['/peer/ws']);
      expect(JSON.stringify(seen)).not.toContain(JOIN_TOKEN);
      const completion = await clientFor(serving).completions.create({ model: serving.modelId, prompt: [1], max_tokens: 8, temperature: 0 });
      expect(completion.choices[0]!.text).toBe(storiesText(STORIES_GOLDEN.slice(0, 8)));
    } finally {
      serving.head.mesh.removePeer('proxied');
      await listener.close();
      await shard.dispose();
    }
  });
});

describe('the peer\u2019s listener refuses every dialer that does not prove the token', () => {
  let peerHead: ServingHead;
  let peer: RunningPeer;
  beforeAll(async () => {
    peerHead = await serveStories({ link: 'relay', headLayers: 'auto', joinToken: JOIN_TOKEN, log: (line) => logs.push(line) });
    peer = await runPeer({ headUrl: peerHead.head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'listener', threads: 1, log: (line) => logs.push(line) });
  });
  afterAll(async () => {
    await peer?.close();
    await peerHead?.close();
  });

  /** A raw connection to the listener: its first message, then what `send` gets back. */
  async function refusedAfter(send: (socket: RawSocket, nonce: string) => Promise<void> | void): Promise<{ error: ControlMessage; closed: string }> {
    const socket = await RawSocket.open(peer.listenUrl!);
    try {
      const challenge = await socket.nextControl();
      expect(challenge).toMatchObject({ kind: 'challenge', nonce: expect.stringMatching(/^[0-9a-f]{64}$/) });
      await send(socket, (challenge as { nonce: string }).nonce);
      const error = await socket.nextControl();
      return { error, closed: await socket.closedByPeer() };
    } finally {
      socket.close();
    }
  }
  const authenticate = async (peerId: string, token: string | undefined, peerNonce: string, headNonce = newNonce()) =>
    JSON.stringify({ kind: 'authenticate', peerId, nonce: headNonce, proof: await headProof(token, peerId, peerNonce, headNonce) });

  it('the right proof is accepted (the control case), and the ping after it is answered', async () => {
    const socket = await RawSocket.openDirect(peer.listenUrl!, { peerId: 'listener', joinToken: JOIN_TOKEN });
    try {
      socket.send(JSON.stringify({ kind: 'ping', id: 'p', t: 3 }));
      expect(await socket.nextControl()).toMatchObject({ kind: 'pong', t: 3 });
    } finally {
      socket.close();
    }
  });

  it.each([
    ['a binary frame first', (s: RawSocket) => s.send(new Uint8Array(64)), /must authenticate before sending frames/],
    ['an assign first', (s: RawSocket) => s.send(JSON.stringify({ kind: 'assign' })), /control message 'assign'/],
    ['a ping first', (s: RawSocket) => s.send(JSON.stringify({ kind: 'ping', id: 'p', t: 1 })), /must be 'authenticate', got 'ping'/],
    ['garbage', (s: RawSocket) => s.send('{{{'), /not valid JSON/],
    ['a proof made with a wrong token', async (s: RawSocket, n: string) => s.send(await authenticate('listener', 'wrong', n)), /proof does not match/],
    ['a proof made without a token', async (s: RawSocket, n: string) => s.send(await authenticate('listener', undefined, n)), /proof does not match/],
    ['a proof for another nonce (a replay)', async (s: RawSocket) => s.send(await authenticate('listener', JOIN_TOKEN, newNonce())), /proof does not match/],
    ['the token itself as the proof', (s: RawSocket) => s.send(JSON.stringify({ kind: 'authenticate', peerId: 'listener', nonce: newNonce(), proof: JOIN_TOKEN })), /field 'proof'/],
    ['a valid proof for another peer id', async (s: RawSocket, n: string) => s.send(await authenticate('someone-else', JOIN_TOKEN, n)), /this is peer listener, not someone-else/],
  ] as [string, (s: RawSocket, nonce: string) => Promise<void> | void, RegExp][])('%s: unauthorized, closed 4001', async (_, send, reason) => {
    const { error, closed } = await refusedAfter(send);
    expect(error).toMatchObject({ kind: 'error', code: 'unauthorized', message: expect.stringMatching(reason) });
    expect(closed).toMatch(/socket closed \(4001/);
  });

  it('a dialer that holds an unauthenticated socket open does not stall the peer’s shutdown', async () => {
    const other = await runPeer({ headUrl: peerHead.head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'closing', threads: 1 });
    const socket = await RawSocket.open(other.listenUrl!);
    expect(await socket.nextControl()).toMatchObject({ kind: 'challenge' });
    await other.close(); // hung forever before: upgraded sockets kept server.close() waiting
    expect(await socket.closedByPeer()).toMatch(/socket closed/);
  }, 10_000);

  it('the listener still serves the head after all that', async () => {
    const socket = await RawSocket.openDirect(peer.listenUrl!, { peerId: 'listener', joinToken: JOIN_TOKEN });
    try {
      socket.send(JSON.stringify({ kind: 'ping', id: 'p2', t: 4 }));
      expect(await socket.nextControl()).toMatchObject({ kind: 'pong', t: 4 });
    } finally {
      socket.close();
    }
  });
});

describe('no secret in any message, log line or snapshot', () => {
  it('errors sent to peers, the head\u2019s and peers\u2019 logs, /api/state, /health and /metrics never contain the join token', async () => {
    expect(answers.length).toBeGreaterThan(5);
    expect(logs.length).toBeGreaterThan(5);
    for (const answer of answers) expect(JSON.stringify(answer)).not.toContain(JOIN_TOKEN);
    for (const line of logs) expect(line).not.toContain(JOIN_TOKEN);
    for (const head of [serving, allowing]) {
      for (const route of ['api/state', 'health', 'metrics']) {
        const body = await (await fetch(`${head.head.url}${route}`)).text();
        expect(body.length).toBeGreaterThan(0);
        expect(body, route).not.toContain(JOIN_TOKEN);
      }
    }
    for (const trap of traps) expect(JSON.stringify(trap.requests) + trap.messages.join('\n')).not.toContain(JOIN_TOKEN);
  });
});
