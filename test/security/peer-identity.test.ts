/**
 * Peer identity over real sockets: a second peer with the id of a live one is refused and
 * the live one keeps serving; a holder whose socket stopped answering pings is replaced by
 * the newcomer (a restarted peer takes its id back); two claims at once cannot both win;
 * `head` is reserved; and the `meshnet peer` command exits non-zero with the reason when it
 * is refused, or at once when its join token is empty. The silent holder is a gated test
 * double (a raw socket that answers pings only while told to), not a sleep.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PeerEndpoint } from '../../src/core/peer/peer-endpoint.ts';
import type { FrameReply, ShardService } from '../../src/core/peer/shard-peer.ts';
import { Mesh } from '../../src/core/mesh/mesh.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { parseControlMessage, type ControlMessage } from '../../src/shared/control.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { dialSocket, type DialedSocket } from '../../src/node/net/ws-dial.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor, eventually, serveStories } from '../api/api-harness.ts';
import { runCli } from '../cli/run-cli.ts';
import { RawSocket } from '../transport/transport-harness.ts';

const JOIN_TOKEN = 'identity-test-token';
const PING_TIMEOUT_MS = 300;

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
const peers: RunningPeer[] = [];
const logs: string[] = [];

beforeAll(async () => {
  home = await tempDir('peer-identity');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ headLayers: 'none', joinToken: JOIN_TOKEN, peerPingTimeoutMs: PING_TIMEOUT_MS, log: (line) => logs.push(line) });
});

afterAll(async () => {
  for (const peer of peers) await peer.close();
  await serving?.close();
  await home?.remove();
});

const hello = (peerId: string) =>
  JSON.stringify({ kind: 'hello', id: 'h1', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, peerId, joinToken: JOIN_TOKEN });

const join = async (peerId: string) => {
  const peer = await runPeer({ headUrl: serving.head.peerUrl, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId, threads: 1 });
  peers.push(peer);
  return peer;
};

const tokensServed = async (peer: RunningPeer) => ((await peer.shard.handleControl({ kind: 'stats', id: 's', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 })) as { tokensServed: number }).tokensServed;
const stillOpen = (peer: RunningPeer) => Promise.race([peer.closed.then(() => false), new Promise<boolean>((resolve) => setImmediate(() => resolve(true)))]);
const complete = async () => (await clientFor(serving).completions.create({ model: serving.modelId, prompt: [1], max_tokens: 4, temperature: 0 })).choices[0]!.text;

/**
 * A peer that holds an id over a raw socket and answers only pings — while `answering`;
 * with `holdPongs` its pongs wait for `releasePongs()` (the gate).
 */
class GatedHolder {
  answering = true;
  holdPongs = false;
  pings = 0;
  closedReason: string | undefined;
  private held: (() => void)[] = [];
  private welcome!: (message: ControlMessage) => void;
  readonly answer = new Promise<ControlMessage>((resolve) => (this.welcome = resolve));

  private constructor(private readonly dialed: DialedSocket) {
    dialed.attach({
      receive: (data) => {
        if (typeof data !== 'string') return;
        const message = parseControlMessage(data);
        if (message.kind === 'welcome' || message.kind === 'error') return this.welcome(message);
        if (message.kind !== 'ping') return; // assign, stats…: never answered
        this.pings++;
        if (!this.answering) return;
        const pong = () => dialed.socket.send(JSON.stringify({ kind: 'pong', id: message.id, t: message.t }));
        if (this.holdPongs) this.held.push(pong);
        else pong();
      },
      terminated: (reason) => (this.closedReason = reason),
    });
  }

  static async join(peerId: string): Promise<GatedHolder> {
    const holder = new GatedHolder(await dialSocket(serving.head.peerUrl));
    holder.dialed.socket.send(hello(peerId));
    expect(await holder.answer).toMatchObject({ kind: 'welcome', peerId });
    return holder;
  }

  releasePongs(): void {
    this.holdPongs = false;
    for (const pong of this.held.splice(0)) pong();
  }

  close(): void {
    this.dialed.socket.close(1000, 'test done');
  }
}

/** A raw hello for `peerId`; resolves with the head's answer and whether it closed the socket. */
async function claim(peerId: string): Promise<{ answer: ControlMessage; socket: RawSocket }> {
  const socket = await RawSocket.open(serving.head.peerUrl);
  socket.send(hello(peerId));
  return { answer: await socket.nextControl(), socket };
}

describe('a duplicate peer id', () => {
  it('with a live holder: the newcomer is refused with the reason, the holder keeps its place and keeps serving', async () => {
    const holder = await join('dup');
    const member = serving.head.mesh.peers.find((p) => p.id === 'dup')!;
    await expect(join('dup')).rejects.toThrow(/the head refused this peer \(peer_id_taken\): peer id 'dup' is held by a connected peer that still answers/);
    expect(serving.head.mesh.peers.filter((p) => p.id === 'dup')).toEqual([member]);
    const before = await tokensServed(holder);
    expect(await complete()).toMatch(/^t\d+ t\d+ t\d+ t\d+$/);
    expect(await tokensServed(holder)).toBeGreaterThan(before);
    expect(await stillOpen(holder)).toBe(true);
    const raw = await claim('dup');
    expect(raw.answer).toMatchObject({ kind: 'error', code: 'peer_id_taken' });
    expect(await raw.socket.closedByPeer()).toMatch(/socket closed \(4002/);
    expect(await stillOpen(holder)).toBe(true);
    expect(serving.head.mesh.peers.filter((p) => p.id === 'dup')).toEqual([member]);
  });

  it('with a holder that stopped answering pings: the newcomer takes the id over and serves', async () => {
    const old = await GatedHolder.join('restarted');
    old.answering = false; // its socket is open but nothing answers: a dead process behind a live TCP connection
    const newcomer = await join('restarted');
    expect(old.pings).toBeGreaterThan(0);
    expect(await eventually(() => old.closedReason !== undefined)).toBe(true);
    expect(serving.head.mesh.peers.filter((p) => p.id === 'restarted')).toHaveLength(1);
    expect(logs.some((line) => line.includes('peer restarted: its previous connection did not answer a ping'))).toBe(true);
    // Until the newcomer's range is warm, requests take the plan that was ready before it.
    expect(await eventually(() => serving.head.mesh.routeReady())).toBe(true);
    const before = await tokensServed(newcomer);
    expect(await complete()).toMatch(/^t\d+ t\d+ t\d+ t\d+$/);
    expect(await tokensServed(newcomer)).toBeGreaterThan(before);
  });

  it('two claims at once: while the first waits on the holder\u2019s ping the second is refused; then the first is refused too', async () => {
    const holder = await GatedHolder.join('gated');
    holder.holdPongs = true;
    const first = claim('gated');
    expect(await eventually(() => holder.pings > 0)).toBe(true);
    const second = await claim('gated');
    expect(second.answer).toMatchObject({ kind: 'error', code: 'peer_id_taken', message: "peer id 'gated' is joining from another connection right now" });
    holder.releasePongs();
    expect((await first).answer).toMatchObject({ kind: 'error', code: 'peer_id_taken', message: expect.stringMatching(/still answers/) });
    expect(holder.closedReason).toBeUndefined();
    holder.close();
    expect(await eventually(() => !serving.head.mesh.peers.some((p) => p.id === 'gated'))).toBe(true);
  });

  it("'head' (in any case) is reserved", async () => {
    for (const id of ['head', 'HEAD', 'Head']) {
      const { answer, socket } = await claim(id);
      expect(answer).toMatchObject({ kind: 'error', code: 'peer_id_taken', message: `the peer id '${id}' is reserved for the head itself: start the peer with another --peer-id` });
      expect(await socket.closedByPeer()).toMatch(/socket closed \(4001/);
    }
    expect(serving.head.mesh.peers.map((p) => p.id.toLowerCase())).not.toContain('head');
  });
});

describe('the mesh keeps ids unique (plain objects)', () => {
  const model = { modelKey: 'k', name: 'm', config: { architecture: 'LlamaForCausalLM', numLayers: 2, hiddenSize: 8, numHeads: 1, numKvHeads: 1, headDim: 8, vocabSize: 16 }, artifacts: { dtype: 'fp32' as const, weights: { format: 'fp32' as const, blockSize: 0, accuracyLevel: 0 as const }, url: () => '/a' }, bytesPerLayer: 1 };
  const service: ShardService = { kvEntries: 0, handleFrame: () => new Promise<FrameReply>(() => {}), handleControl: async (m) => ({ kind: 'pong', id: m.id, t: 0 }), dispose: async () => {} };
  const init = (id: string) => ({ id, runtime: 'node' as const, executionProvider: 'cpu', memoryBudgetBytes: 1, link: new InProcessLink(service) });

  it('addPeer refuses an id already there; vacate refuses head, frees an absent id, refuses an answering holder', async () => {
    const mesh = new Mesh(model, { headLayers: 'none' });
    mesh.addPeer(init('a'));
    expect(() => mesh.addPeer(init('a'))).toThrow(ProtocolError);
    await expect(mesh.vacate('head', 50)).rejects.toMatchObject({ code: 'peer_id_taken' });
    expect(await mesh.vacate('nobody', 50)).toBe(false);
    await expect(mesh.vacate('a', 50)).rejects.toMatchObject({ code: 'peer_id_taken' });
    expect(mesh.peers.map((p) => p.id)).toEqual(['a']);
  });

  it('a busy shard does not make its connection look dead: the endpoint answers a ping itself', async () => {
    const sent: string[] = [];
    const endpoint = new PeerEndpoint(service, { send: (d) => sent.push(d as string), close: () => {} });
    void endpoint.receive(new Uint8Array(64)); // a frame the shard never finishes
    await endpoint.receive(JSON.stringify({ kind: 'ping', id: 'p', t: 5 }));
    expect(sent.map((s) => JSON.parse(s))).toEqual([{ kind: 'pong', id: 'p', t: 5 }]);
  });
});

describe('meshnet peer exits non-zero with the reason', () => {
  const peerArgs = (...extra: string[]) => ['peer', '--head', serving.head.peerUrl, '--device', 'cpu', '--threads', '1', '--memory-budget', '256', ...extra];
  const env = { MESHNET_JOIN_TOKEN: JOIN_TOKEN };

  it('an empty --join-token or MESHNET_JOIN_TOKEN, or an unknown --shard-thread: usage error (2) before it starts; refused at hello (duplicate, head, wrong token): 1', async () => {
    const [emptyFlag, emptyEnv, duplicate, reserved, wrong, thread] = await Promise.all([
      runCli(peerArgs('--join-token', '', '--peer-id', 'x1'), env, 30_000),
      runCli(peerArgs('--peer-id', 'x2'), { MESHNET_JOIN_TOKEN: '' }, 30_000),
      runCli(peerArgs('--peer-id', 'dup'), env, 30_000),
      runCli(peerArgs('--peer-id', 'head'), env, 30_000),
      runCli(peerArgs('--peer-id', 'x3', '--join-token', 'wrong'), env, 30_000),
      runCli(peerArgs('--peer-id', 'x4', '--shard-thread', 'gpu'), env, 30_000),
    ]);
    expect([emptyFlag.code, emptyFlag.stderr]).toEqual([2, expect.stringContaining('meshnet peer: --join-token is empty')]);
    expect([emptyEnv.code, emptyEnv.stderr]).toEqual([2, expect.stringContaining('meshnet peer: MESHNET_JOIN_TOKEN is empty')]);
    expect([duplicate.code, duplicate.stderr]).toEqual([1, expect.stringContaining("the head refused this peer (peer_id_taken): peer id 'dup' is held by a connected peer that still answers")]);
    expect([reserved.code, reserved.stderr]).toEqual([1, expect.stringContaining("(peer_id_taken): the peer id 'head' is reserved")]);
    expect([wrong.code, wrong.stderr]).toEqual([1, expect.stringContaining('(unauthorized): the join token is wrong')]);
    expect([thread.code, thread.stderr]).toEqual([2, expect.stringContaining("--shard-thread: 'gpu' is not one of main, worker")]);
    expect(serving.head.mesh.peers.map((p) => p.id).sort()).toEqual(['dup', 'restarted']);
  }, 60_000);
});
