/**
 * Bad input over real sockets. A Node peer (runPeer with a direct listener) gets malformed
 * frames and messages on a raw WebSocket: each is refused with its typed error code, and the
 * peer then still serves a normal prefill correctly (and a session it held before keeps its
 * KV). The head's /peer/ws gateway refuses bad hellos (version, join token, first message,
 * garbage) with a clear error, closes the socket, and still admits a valid peer after.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { ControlMessage, ErrorMessage } from '../../src/shared/control.ts';
import { FRAME_OFFSETS } from '../../src/shared/frame-layout.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import { tempDir } from '../engine/harness.ts';
import { createPeer, openStories, type StoriesContext } from '../route/route-harness.ts';
import { frameFor, storiesAssign, SUITE_RANGE, testActivations } from '../suites/peer-link.suite.ts';
import { JOIN_TOKEN, RawSocket, startStoriesHead } from './transport-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let ctx: StoriesContext;
let head: RunningHead;
let peer: RunningPeer;
let reference: ShardPeer; // an independent in-process peer: what a correct answer is
let socket: RawSocket; // a raw direct connection to `peer`
let hidden: number;
let nextRequestId = 100;
const rid = () => nextRequestId++;

beforeAll(async () => {
  root = await tempDir('bad-input');
  process.env.MESHNET_HOME = root.dir;
  ctx = await openStories();
  hidden = ctx.model.checkpoint.config.hiddenSize;
  head = await startStoriesHead(ctx, 'relay');
  peer = await runPeer({ headUrl: head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'bad-input-peer', threads: 1 });
  socket = await RawSocket.openDirect(peer.listenUrl!, { peerId: 'bad-input-peer', joinToken: JOIN_TOKEN });
  socket.send(JSON.stringify(storiesAssign(ctx.model)));
  expect(await socket.nextControl()).toMatchObject({ kind: 'ready', range: SUITE_RANGE });
  reference = createPeer(ctx);
  expect(await reference.handleControl(storiesAssign(ctx.model))).toMatchObject({ kind: 'ready' });
});
afterAll(async () => {
  socket?.close();
  await peer?.close();
  await head?.close();
  await reference?.dispose();
  await ctx?.head.dispose();
  await root?.remove();
});

/** What the reference peer answers for the same steps of the same session. */
async function expected(sessionId: string, startPosition: number, activations: Activations): Promise<Float32Array> {
  const reply = await reference.handleFrame(frameFor({ requestId: 1, sessionId, startPosition, activations }));
  if (!('frame' in reply)) throw new Error(reply.error.message);
  return decodeFrame(reply.frame).activations.data as Float32Array;
}

async function sendFrame(sessionId: string, startPosition: number, activations: Activations) {
  const requestId = rid();
  socket.send(frameFor({ requestId, sessionId, startPosition, activations }));
  const answer = await socket.next();
  if (typeof answer === 'string') throw new Error(`refused: ${answer}`);
  const frame = decodeFrame(answer);
  expect(frame).toMatchObject({ kind: 'result', requestId, sessionId, startPosition });
  return frame.activations.data;
}

/** After bad input: the peer still serves a prefill for a new session, with the right values. */
async function servesNormally(): Promise<void> {
  const sessionId = randomUUID();
  const prompt = testActivations(hidden, 2, nextRequestId);
  expect(await sendFrame(sessionId, 0, prompt)).toEqual(await expected(sessionId, 0, prompt));
}

async function refusal(data: string | Uint8Array): Promise<ErrorMessage> {
  socket.send(data);
  const answer = await socket.nextControl();
  expect(answer.kind).toBe('error');
  const error = answer as ErrorMessage;
  expect(error.message.length).toBeGreaterThan(10);
  return error;
}

const validFrame = (requestId: number, sessionId = randomUUID(), startPosition = 0, activations = testActivations(hidden, 1, 3)) =>
  frameFor({ requestId, sessionId, startPosition, activations });

function patched(frame: Uint8Array, patch: (view: DataView, bytes: Uint8Array) => void): Uint8Array {
  const copy = frame.slice();
  patch(new DataView(copy.buffer), copy);
  return copy;
}

describe('a peer refuses bad input with typed errors and keeps serving', () => {
  const held = randomUUID();
  const heldPrompt = () => testActivations(hidden, 3, 42);

  it('holds a session through everything below', async () => {
    expect(await sendFrame(held, 0, heldPrompt())).toEqual(await expected(held, 0, heldPrompt()));
  });

  it('a buffer shorter than the header: bad_frame', async () => {
    expect(await refusal(new Uint8Array(10))).toMatchObject({ code: 'bad_frame' });
    await servesNormally();
  });

  it('a header with a bad magic: bad_frame, answered with the request id', async () => {
    const requestId = rid();
    const error = await refusal(patched(validFrame(requestId), (_, bytes) => (bytes[0] = 0x58)));
    expect(error).toMatchObject({ code: 'bad_frame', requestId });
    expect(error.message).toMatch(/magic/);
    await servesNormally();
  });

  it('a result frame sent to a peer, and a frame for layers it does not hold', async () => {
    const requestId = rid();
    expect(await refusal(patched(validFrame(requestId), (_, bytes) => (bytes[FRAME_OFFSETS.kind] = 3)))).toMatchObject({ code: 'bad_frame', requestId });
    expect(await refusal(frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 1), range: { start: 2, end: 5 } }))).toMatchObject({ code: 'not_ready' });
    expect(await refusal(patched(validFrame(rid()), (_, bytes) => (bytes[FRAME_OFFSETS.kind] = 9)))).toMatchObject({ code: 'unknown_kind' });
    await servesNormally();
  });

  it('control messages: an unknown kind, bad JSON, a wrong-typed field', async () => {
    expect(await refusal(JSON.stringify({ kind: 'teleport', id: 'q1' }))).toMatchObject({ code: 'unknown_kind' });
    expect(await refusal('{not json')).toMatchObject({ code: 'protocol_error' });
    const error = await refusal(JSON.stringify({ kind: 'release', id: 'q2', sessionId: 'NOT-A-UUID' }));
    expect(error).toMatchObject({ code: 'protocol_error' });
    expect(error.message).toMatch(/sessionId/);
    await servesNormally();
  });

  it('a session the peer does not hold: a decode past position 0 is a cache_miss', async () => {
    const sessionId = randomUUID();
    const requestId = rid();
    expect(await refusal(validFrame(requestId, sessionId, 4))).toMatchObject({ code: 'cache_miss', sessionId, requestId });
    await servesNormally();
  });

  it('a released session: unknown_session', async () => {
    const sessionId = randomUUID();
    await sendFrame(sessionId, 0, testActivations(hidden, 2, 5));
    socket.send(JSON.stringify({ kind: 'release', id: 'r1', sessionId }));
    expect(await socket.nextControl()).toMatchObject({ kind: 'released', id: 'r1', sessionId, freedEntries: 1 });
    const requestId = rid();
    expect(await refusal(validFrame(requestId, sessionId, 2))).toMatchObject({ code: 'unknown_session', sessionId, requestId });
    await servesNormally();
  });

  it('wrong-sized payloads: truncated bytes, a length field that disagrees, a hidden size the shard does not have', async () => {
    const truncated = validFrame(rid());
    expect(await refusal(truncated.subarray(0, truncated.byteLength - 4))).toMatchObject({ code: 'wrong_payload_size' });
    const lying = patched(validFrame(rid()), (view) => view.setUint32(FRAME_OFFSETS.payloadLength, 8, true));
    expect(await refusal(lying)).toMatchObject({ code: 'wrong_payload_size' });
    const narrow = frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden / 2, 1, 6) });
    const entriesBefore = peer.shard.kvEntries;
    const error = await refusal(narrow);
    expect(peer.shard.kvEntries, 'a refused prefill leaves no KV entry behind').toBe(entriesBefore);
    expect(error).toMatchObject({ code: 'wrong_payload_size' });
    expect(error.message).toMatch(/hidden size/);
    const extra = new Uint8Array(truncated.byteLength + 4);
    extra.set(truncated);
    expect(await refusal(extra)).toMatchObject({ code: 'wrong_payload_size' });
    await servesNormally();
  });

  it('a frame of another protocol major version: version_mismatch', async () => {
    const error = await refusal(patched(validFrame(rid()), (_, bytes) => (bytes[FRAME_OFFSETS.versionMajor] = PROTOCOL_VERSION.major + 1)));
    expect(error).toMatchObject({ code: 'version_mismatch' });
    expect(error.message).toMatch(new RegExp(`protocol ${PROTOCOL_VERSION.major + 1}\\.${PROTOCOL_VERSION.minor}`));
    await servesNormally();
  });

  it('NaN and infinite activations: nan_activations, naming where', async () => {
    const activations = testActivations(hidden, 2, 7);
    activations.data[hidden + 3] = Number.NaN;
    const requestId = rid();
    const error = await refusal(frameFor({ requestId, sessionId: randomUUID(), startPosition: 0, activations }));
    expect(error).toMatchObject({ code: 'nan_activations', requestId });
    expect(error.message).toMatch(/token 1, channel 3/);
    const infinite = testActivations(hidden, 1, 8);
    infinite.data[0] = Number.POSITIVE_INFINITY;
    expect(await refusal(frameFor({ requestId: rid(), sessionId: randomUUID(), startPosition: 0, activations: infinite }))).toMatchObject({ code: 'nan_activations' });
    await servesNormally();
  });

  it('the session held from the start still decodes correctly', async () => {
    const step = testActivations(hidden, 1, 43);
    expect(await sendFrame(held, 3, step)).toEqual(await expected(held, 3, step));
    expect(socket.closedReason).toBeUndefined();
  });

  it('the direct listener refuses a dialer that cannot prove the join token (test/security has the rest)', async () => {
    await expect(RawSocket.openDirect(peer.listenUrl!, { peerId: 'bad-input-peer', joinToken: 'wrong', timeoutMs: 5000 })).rejects.toThrow(/refused the direct link: direct link refused: the proof does not match/);
    await expect(RawSocket.openDirect(peer.listenUrl!, { peerId: 'bad-input-peer', joinToken: undefined, timeoutMs: 5000 })).rejects.toThrow(/proof does not match/);
  });
});

describe('the head gateway refuses bad hellos and keeps serving', () => {
  const hello = (fields: Record<string, unknown> = {}) =>
    JSON.stringify({ kind: 'hello', id: 'h1', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, peerId: 'intruder', joinToken: JOIN_TOKEN, ...fields });

  async function refusedByHead(first: string | Uint8Array): Promise<ControlMessage & { code: string; message: string }> {
    const raw = await RawSocket.open(head.peerUrl);
    try {
      raw.send(first);
      const answer = await raw.nextControl();
      expect(answer.kind).toBe('error');
      expect(await raw.closedByPeer()).toMatch(/socket closed \(400[12]/);
      return answer as ErrorMessage;
    } finally {
      raw.close();
    }
  }

  it('another protocol major version: version_mismatch, socket closed', async () => {
    const error = await refusedByHead(hello({ protocol: { major: PROTOCOL_VERSION.major + 1, minor: 0 } }));
    expect(error).toMatchObject({ code: 'version_mismatch', id: 'h1' });
    expect(error.message).toMatch(/not compatible/);
  });

  it('a wrong join token: unauthorized, with a clear reason', async () => {
    const error = await refusedByHead(hello({ joinToken: 'not-the-token' }));
    expect(error).toMatchObject({ code: 'unauthorized' });
    expect(error.message).toBe('the join token is wrong');
  });

  it('a missing join token: unauthorized, telling how to pass one', async () => {
    const error = await refusedByHead(hello({ joinToken: undefined }));
    expect(error).toMatchObject({ code: 'unauthorized' });
    expect(error.message).toMatch(/needs a join token.*--join-token/);
  });

  it('a first message that is not hello, an unknown kind, binary data, garbage text', async () => {
    const notHello = await refusedByHead(JSON.stringify({ kind: 'ping', id: 'p', t: 1 }));
    expect(notHello).toMatchObject({ code: 'protocol_error' });
    expect(notHello.message).toMatch(/first message must be 'hello', got 'ping'/);
    expect(await refusedByHead(JSON.stringify({ kind: 'gimme' }))).toMatchObject({ code: 'unknown_kind' });
    expect(await refusedByHead(new Uint8Array([1, 2, 3]))).toMatchObject({ code: 'protocol_error', message: expect.stringMatching(/text hello/) });
    expect(await refusedByHead('\u0000garbage{{{')).toMatchObject({ code: 'protocol_error', message: expect.stringMatching(/not valid JSON/) });
  });

  it('after all that a valid peer joins, and the peer that was there still answers', async () => {
    expect(head.mesh.peers.map((p) => p.id)).toEqual(['bad-input-peer']);
    const late = await runPeer({ headUrl: head.peerUrl, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'late-peer', threads: 1 });
    try {
      await head.waitForPeers(2, 5000);
      for (const member of head.mesh.peers) expect(await member.link.control({ kind: 'ping', t: 7 })).toMatchObject({ kind: 'pong', t: 7 });
    } finally {
      await late.close();
    }
  });
});
