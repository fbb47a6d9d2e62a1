/**
 * Bad input over real sockets. A Node peer (runPeer with a direct listener) gets malformed
 * frames and messages on a raw WebSocket: each is refused with its typed error code, and the
 * peer then still serves a normal prefill correctly (and a session it held before keeps its
 * KV). The protocol 3 inputs too: batched frames (a batch result sent to a peer, a range it
 * does not hold, entries refused one by one while the good entry is answered), `fork`,
 * `release` with `keepPrefix`, `forget` (3.5) and `unload` with bad fields or of what the peer lacks. The
 * head's /peer/ws gateway refuses bad hellos (version, join token, first message, garbage)
 * with a clear error, closes the socket, and still admits a valid peer after.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_ENTRY_OFFSETS, decodeBatchFrame, encodeBatchFrame, type BatchEntry } from '../../src/core/frames/batch-frame-codec.ts';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { ControlMessage, ErrorMessage } from '../../src/shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_OFFSETS } from '../../src/shared/frame-layout.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import { createPeer, useStories } from '../route/route-harness.ts';
import { frameFor, storiesAssign, SUITE_RANGE, testActivations } from '../suites/peer-link.suite.ts';
import { JOIN_TOKEN, RawSocket, startStoriesHead } from './transport-harness.ts';

const stories = useStories('bad-input');
let head: RunningHead;
let peer: RunningPeer;
let reference: ShardPeer; // an independent in-process peer: what a correct answer is
let socket: RawSocket; // a raw direct connection to `peer`
let hidden: number;
let nextRequestId = 100;
const rid = () => nextRequestId++;

beforeAll(async () => {
  hidden = stories.ctx.model.checkpoint.config.hiddenSize;
  head = await startStoriesHead(stories.ctx, 'relay');
  peer = await runPeer({ headUrl: head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'bad-input-peer', threads: 1, prefixBudgetBytes: 64 << 20 });
  socket = await RawSocket.openDirect(peer.listenUrl!, { peerId: 'bad-input-peer', joinToken: JOIN_TOKEN });
  socket.send(JSON.stringify(storiesAssign(stories.ctx.model)));
  expect(await socket.nextControl()).toMatchObject({ kind: 'ready', range: SUITE_RANGE });
  reference = createPeer(stories.ctx);
  expect(await reference.handleControl(storiesAssign(stories.ctx.model))).toMatchObject({ kind: 'ready' });
});
afterAll(async () => {
  socket?.close();
  await peer?.close();
  await head?.close();
  await reference?.dispose();
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

  // ── Protocol 3 inputs: batched frames (kinds 4/5), fork, release with keepPrefix, unload ──

  const batchFor = (requestId: number, entries: { sessionId: string; startPosition: number; activations: Activations }[], fields: { kind?: 'batch' | 'batch-result'; range?: { start: number; end: number } } = {}) =>
    encodeBatchFrame({ kind: fields.kind ?? 'batch', requestId, range: fields.range ?? SUITE_RANGE, dtype: 'fp32', hiddenSize: hidden, entries });

  /** Send a batch frame; the answer must be its batch result (entries in order). */
  async function sendBatch(bytes: Uint8Array, requestId: number): Promise<readonly BatchEntry[]> {
    socket.send(bytes);
    const answer = await socket.next();
    if (typeof answer === 'string') throw new Error(`refused: ${answer}`);
    const frame = decodeBatchFrame(answer);
    expect(frame).toMatchObject({ kind: 'batch-result', requestId, range: SUITE_RANGE, hiddenSize: hidden });
    return frame.entries;
  }

  function entryError(entry: BatchEntry, sessionId: string, startPosition: number, tokens: number) {
    expect(entry).toMatchObject({ sessionId, startPosition });
    if (!entry.error) throw new Error(`entry for ${sessionId} was answered, not refused`);
    expect(entry.tokens, 'a refused entry keeps the token count asked').toBe(tokens);
    expect(entry.error.message.length).toBeGreaterThan(10);
    return entry.error;
  }

  function entryResult(entry: BatchEntry, sessionId: string, startPosition: number) {
    expect(entry).toMatchObject({ sessionId, startPosition });
    if (entry.error) throw new Error(`entry for ${sessionId} refused: ${entry.error.code}: ${entry.error.message}`);
    return entry.activations.data;
  }

  async function control(message: Record<string, unknown>): Promise<ControlMessage> {
    socket.send(JSON.stringify(message));
    return socket.nextControl();
  }

  const modelKey = () => storiesAssign(stories.ctx.model).modelKey;

  it('batch frames: a batch result sent to a peer is bad_frame; a batch for layers it does not hold is not_ready', async () => {
    const entriesBefore = peer.shard.kvEntries;
    const requestId = rid();
    const result = await refusal(batchFor(requestId, [{ sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 11) }], { kind: 'batch-result' }));
    expect(result).toMatchObject({ code: 'bad_frame', requestId });
    expect(result.message).toMatch(/batch result/);
    const elsewhere = rid();
    const notLoaded = await refusal(batchFor(elsewhere, [{ sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 12) }], { range: { start: 2, end: 5 } }));
    expect(notLoaded).toMatchObject({ code: 'not_ready', requestId: elsewhere });
    expect(notLoaded.message).toMatch(/layers \[2, 5\) are not loaded/);
    expect(peer.shard.kvEntries, 'a refused batch leaves no KV entry behind').toBe(entriesBefore);
    await servesNormally();
  });

  it('batch entries: a released session, an unknown one, NaN activations, a start above the KV length — each refused on its own, the good entry answered right', async () => {
    const released = randomUUID();
    await sendFrame(released, 0, testActivations(hidden, 2, 13));
    expect(await control({ kind: 'release', id: 'rb1', sessionId: released })).toMatchObject({ kind: 'released', id: 'rb1', sessionId: released, freedEntries: 1 });
    const short = randomUUID(); // holds 2 positions; an entry for it claims to start at 5
    const shortPrompt = testActivations(hidden, 2, 14);
    expect(await sendFrame(short, 0, shortPrompt)).toEqual(await expected(short, 0, shortPrompt));
    const unknown = randomUUID();
    const poisoned = randomUUID();
    const nan = testActivations(hidden, 1, 15);
    nan.data[5] = Number.NaN;
    const good = randomUUID();
    const goodPrompt = testActivations(hidden, 2, 16);
    const entriesBefore = peer.shard.kvEntries;

    const requestId = rid();
    const entries = await sendBatch(
      batchFor(requestId, [
        { sessionId: released, startPosition: 2, activations: testActivations(hidden, 1, 17) },
        { sessionId: unknown, startPosition: 4, activations: testActivations(hidden, 1, 18) },
        { sessionId: poisoned, startPosition: 0, activations: nan },
        { sessionId: short, startPosition: 5, activations: testActivations(hidden, 1, 19) },
        { sessionId: good, startPosition: 0, activations: goodPrompt },
      ]),
      requestId,
    );
    expect(entries).toHaveLength(5);
    const releasedError = entryError(entries[0], released, 2, 1);
    expect(releasedError.code).toBe('unknown_session');
    expect(releasedError.message).toMatch(new RegExp(`session ${released} was released`));
    const unknownError = entryError(entries[1], unknown, 4, 1);
    expect(unknownError.code).toBe('cache_miss');
    expect(unknownError.message).toMatch(new RegExp(`no KV for session ${unknown}`));
    const nanError = entryError(entries[2], poisoned, 0, 1);
    expect(nanError.code).toBe('nan_activations');
    expect(nanError.message).toMatch(/token 0, channel 5/);
    const shortError = entryError(entries[3], short, 5, 1);
    expect(shortError.code).toBe('cache_miss');
    expect(shortError.message).toMatch(/holds 2 positions, step starts at 5/);
    expect(entryResult(entries[4], good, 0)).toEqual(await expected(good, 0, goodPrompt));
    expect(peer.shard.kvEntries, 'only the good entry holds KV: the refused ones left none').toBe(entriesBefore + 1);

    // The refused entry did not damage the short session's KV: it decodes at position 2.
    const step = testActivations(hidden, 1, 20);
    expect(await sendFrame(short, 2, step)).toEqual(await expected(short, 2, step));
    await servesNormally();
  });

  it('batch entries of mixed token counts are each answered right; a lying header total, a lying entry token count, a session twice: refused', async () => {
    const three = randomUUID();
    const one = randomUUID();
    const threePrompt = testActivations(hidden, 3, 21);
    const onePrompt = testActivations(hidden, 1, 22);
    const requestId = rid();
    const mixed = [
      { sessionId: three, startPosition: 0, activations: threePrompt },
      { sessionId: one, startPosition: 0, activations: onePrompt },
    ];
    const entries = await sendBatch(batchFor(requestId, mixed), requestId);
    expect(entryResult(entries[0], three, 0)).toEqual(await expected(three, 0, threePrompt));
    expect(entryResult(entries[1], one, 0)).toEqual(await expected(one, 0, onePrompt));

    const fresh = () => [
      { sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 3, 23) },
      { sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 24) },
    ];
    const total = rid();
    const lyingTotal = await refusal(patched(batchFor(total, fresh()), (view) => view.setUint32(FRAME_OFFSETS.tokenCount, 5, true)));
    expect(lyingTotal).toMatchObject({ code: 'bad_frame', requestId: total });
    expect(lyingTotal.message).toMatch(/entries hold 4 tokens, the header says 5/);
    const entryTokens = rid();
    const tokensAt = FRAME_HEADER_BYTES + BATCH_ENTRY_OFFSETS.tokenCount; // entry 0's token count (the table follows the header)
    const lyingEntry = await refusal(patched(batchFor(entryTokens, fresh()), (view) => view.setUint32(tokensAt, 2, true)));
    expect(lyingEntry).toMatchObject({ code: 'wrong_payload_size', requestId: entryTokens });
    expect(lyingEntry.message).toMatch(/entry 0 body/);
    const twice = rid();
    const sessionId = randomUUID();
    const duplicate = await refusal(batchFor(twice, [
      { sessionId, startPosition: 0, activations: testActivations(hidden, 1, 25) },
      { sessionId, startPosition: 0, activations: testActivations(hidden, 1, 26) },
    ]));
    expect(duplicate).toMatchObject({ code: 'bad_frame', requestId: twice });
    expect(duplicate.message).toMatch(new RegExp(`session ${sessionId} appears twice`));
    await servesNormally();
  });

  it('fork: an unknown prefix id, length 0, a length above the prefix entry, a range the peer does not hold — typed errors; a valid fork still works', async () => {
    const source = randomUUID();
    const prompt = testActivations(hidden, 3, 27);
    await sendFrame(source, 0, prompt);
    const prefixId = randomUUID();
    expect(await control({ kind: 'release', id: 'rf1', sessionId: source, keepPrefix: { prefixId, length: 2 } })).toMatchObject({ kind: 'released', id: 'rf1', sessionId: source, freedEntries: 1, keptPrefixes: 1 });

    const target = randomUUID();
    const fork = (fields: Record<string, unknown>) => ({ kind: 'fork', id: 'f1', sessionId: target, prefixId, range: SUITE_RANGE, length: 2, ...fields });
    const entriesBefore = peer.shard.kvEntries;
    const missing = randomUUID();
    const unknownPrefix = await refusal(JSON.stringify(fork({ prefixId: missing })));
    expect(unknownPrefix).toMatchObject({ code: 'cache_miss', id: 'f1', sessionId: target });
    expect(unknownPrefix.message).toMatch(new RegExp(`no prefix entry ${missing} of 2 positions`));
    const empty = await refusal(JSON.stringify(fork({ length: 0 })));
    expect(empty).toMatchObject({ code: 'protocol_error' });
    expect(empty.message).toMatch(/'fork': field 'length' must be an integer in \[1,/);
    const tooLong = await refusal(JSON.stringify(fork({ length: 3 })));
    expect(tooLong).toMatchObject({ code: 'cache_miss', id: 'f1', sessionId: target });
    expect(tooLong.message).toMatch(new RegExp(`no prefix entry ${prefixId} of 3 positions`));
    const elsewhere = await refusal(JSON.stringify(fork({ range: { start: 2, end: 5 } })));
    expect(elsewhere).toMatchObject({ code: 'not_ready', id: 'f1', sessionId: target });
    expect(elsewhere.message).toMatch(/layers \[2, 5\) are not loaded/);
    expect(peer.shard.kvEntries, 'refused forks leave no KV entry behind').toBe(entriesBefore);

    // The prefix entry survived the refusals: a valid fork gets its first 2 positions, and the
    // forked session decodes as a session whose KV was cut back to 2 positions does.
    expect(await control(fork({}))).toMatchObject({ kind: 'forked', id: 'f1', sessionId: target, length: 2 });
    const twin = randomUUID();
    await expected(twin, 0, prompt);
    const step = testActivations(hidden, 1, 28);
    expect(await sendFrame(target, 2, step)).toEqual(await expected(twin, 2, step));
    await servesNormally();
  });

  it('release with keepPrefix.length above the KV length: released, nothing kept (as PrefixStore.keep documents), the session gone; length 0 is refused', async () => {
    const sessionId = randomUUID();
    await sendFrame(sessionId, 0, testActivations(hidden, 2, 29));
    const prefixId = randomUUID();
    // The peer's own figures (read in process: a wire 'stats' is a full report, not a request).
    const stats = async () => (await peer.shard.handleControl({ kind: 'stats', id: 's1' } as ControlMessage)) as ControlMessage & { kvEntries: number; prefixEntries: number };
    const before = await stats();
    expect(before.prefixEntries, 'the fork case above left its prefix entry').toBeGreaterThan(0);
    const zero = await refusal(JSON.stringify({ kind: 'release', id: 'rk0', sessionId, keepPrefix: { prefixId, length: 0 } }));
    expect(zero).toMatchObject({ code: 'protocol_error' });
    expect(zero.message).toMatch(/'release': field 'keepPrefix.length' must be an integer in \[1,/);
    expect(await control({ kind: 'release', id: 'rk1', sessionId, keepPrefix: { prefixId, length: 5 } })).toEqual({ kind: 'released', id: 'rk1', sessionId, freedEntries: 1, keptPrefixes: 0 });
    const after = await stats();
    expect(after).toMatchObject({ kind: 'stats' });
    expect(after.prefixEntries, 'no prefix entry was kept').toBe(before.prefixEntries);
    expect(after.kvEntries, 'the session KV was freed').toBe(before.kvEntries - 1);
    const forked = await refusal(JSON.stringify({ kind: 'fork', id: 'rk2', sessionId: randomUUID(), prefixId, range: SUITE_RANGE, length: 2 }));
    expect(forked).toMatchObject({ code: 'cache_miss', id: 'rk2' });
    expect(forked.message).toMatch(new RegExp(`no prefix entry ${prefixId}`));
    const requestId = rid();
    expect(await refusal(validFrame(requestId, sessionId, 2))).toMatchObject({ code: 'unknown_session', sessionId, requestId });
    await servesNormally();
  });

  it('release with keepPrefix.parent (3.3): an unknown parent, a shared length beyond it, a parent descending from the entry — typed errors, the KV freed; a valid child holds only its tail and forks as the whole session', async () => {
    const stats = async () => (await peer.shard.handleControl({ kind: 'stats', id: 's2' } as ControlMessage)) as ControlMessage & { kvEntries: number; prefixEntries: number; prefixBytes: number };
    // Six positions: the first two those of the root's prompt, the rest its own.
    const rootPrompt = testActivations(hidden, 4, 51);
    const childPrompt = (): Activations => {
      const data = testActivations(hidden, 6, 52).data as Float32Array;
      data.set(rootPrompt.data.subarray(0, 2 * hidden));
      return { dtype: 'fp32', data, tokens: 6, hiddenSize: hidden };
    };
    const root = randomUUID();
    const rootId = randomUUID();
    const childId = randomUUID();
    await sendFrame(root, 0, rootPrompt);
    const before = await stats();
    expect(await control({ kind: 'release', id: 'rp0', sessionId: root, keepPrefix: { prefixId: rootId, length: 4 } })).toMatchObject({ kind: 'released', keptPrefixes: 1 });
    const rootBytes = (await stats()).prefixBytes - before.prefixBytes;
    expect(rootBytes).toBeGreaterThan(0);
    // Refused by the store: the session is released all the same (a malformed message, below, is refused whole).
    const refusedKeep = async (keepPrefix: Record<string, unknown>, code: string, message: RegExp) => {
      const sessionId = randomUUID();
      await sendFrame(sessionId, 0, childPrompt());
      const held = await stats();
      const error = await refusal(JSON.stringify({ kind: 'release', id: 'rp1', sessionId, keepPrefix }));
      expect(error).toMatchObject({ code });
      expect(error.message).toMatch(message);
      const after = await stats();
      expect(after.kvEntries, 'a refused keep still frees the session').toBe(held.kvEntries - 1);
      expect(after.prefixEntries, 'and keeps nothing').toBe(held.prefixEntries);
      const requestId = rid();
      expect(await refusal(validFrame(requestId, sessionId, 6))).toMatchObject({ code: 'unknown_session', sessionId, requestId });
    };
    const unknown = randomUUID();
    await refusedKeep({ prefixId: childId, length: 6, parent: { prefixId: unknown, length: 2 } }, 'cache_miss', new RegExp(`parent ${unknown} is not a prefix entry`));
    await refusedKeep({ prefixId: childId, length: 6, parent: { prefixId: rootId, length: 5 } }, 'protocol_error', /parent.length 5 must be in \[1, 4\]/);
    const malformed = randomUUID();
    await sendFrame(malformed, 0, childPrompt());
    const all = await refusal(JSON.stringify({ kind: 'release', id: 'rp4', sessionId: malformed, keepPrefix: { prefixId: childId, length: 6, parent: { prefixId: rootId, length: 6 } } }));
    expect(all).toMatchObject({ code: 'protocol_error' });
    expect(all.message).toMatch(/'release': field 'keepPrefix.parent' must be a parent sharing fewer than/);
    const itself = await refusal(JSON.stringify({ kind: 'release', id: 'rp5', sessionId: malformed, keepPrefix: { prefixId: childId, length: 6, parent: { prefixId: childId, length: 2 } } }));
    expect(itself).toMatchObject({ code: 'protocol_error' });
    expect(itself.message).toMatch(/'release': field 'keepPrefix.parent' must be another entry/);
    expect(await control({ kind: 'release', id: 'rp6', sessionId: malformed })).toMatchObject({ kind: 'released', freedEntries: 1 });

    // A valid child: it holds only positions [2, 6), half the root's bytes.
    const child = randomUUID();
    await sendFrame(child, 0, childPrompt());
    const withRoot = await stats();
    expect(await control({ kind: 'release', id: 'rp2', sessionId: child, keepPrefix: { prefixId: childId, length: 6, parent: { prefixId: rootId, length: 2 } } })).toMatchObject({ kind: 'released', keptPrefixes: 1 });
    expect((await stats()).prefixBytes - withRoot.prefixBytes, 'the child holds 4 of its 6 positions').toBe(rootBytes);
    // The root kept under the child's id as its parent: a circle, refused.
    await refusedKeep({ prefixId: rootId, length: 6, parent: { prefixId: childId, length: 2 } }, 'protocol_error', new RegExp(`parent ${childId} is entry ${rootId} itself or one of its descendants`));

    // A fork from the child joins the root's two positions and its own four: it decodes as the whole session does.
    const forked = randomUUID();
    expect(await control({ kind: 'fork', id: 'rp3', sessionId: forked, prefixId: childId, range: SUITE_RANGE, length: 6 })).toMatchObject({ kind: 'forked', sessionId: forked, length: 6 });
    const twin = randomUUID();
    await expected(twin, 0, childPrompt());
    const step = testActivations(hidden, 1, 53);
    expect(await sendFrame(forked, 6, step)).toEqual(await expected(twin, 6, step));
    await servesNormally();
  });

  it('forget (3.5): bad ids, an empty, a repeated, a too-long and a huge list — typed errors, nothing dropped; unknown ids ignored; a named entry goes with its descendants', async () => {
    const prefixEntries = async () => ((await peer.shard.handleControl({ kind: 'stats', id: 'sf' } as ControlMessage)) as ControlMessage & { prefixEntries: number }).prefixEntries;
    const keep = async (prefixId: string, parent?: { prefixId: string; length: number }) => {
      const sessionId = randomUUID();
      await sendFrame(sessionId, 0, testActivations(hidden, 4, 61));
      expect(await control({ kind: 'release', id: 'fk', sessionId, keepPrefix: { prefixId, length: 4, ...(parent && { parent }) } })).toMatchObject({ kind: 'released', keptPrefixes: 1 });
    };
    const [root, child, other] = [randomUUID(), randomUUID(), randomUUID()];
    await keep(root);
    await keep(child, { prefixId: root, length: 2 });
    await keep(other);
    const held = await prefixEntries();
    const ids = (n: number) => Array.from({ length: n }, () => randomUUID());
    for (const [prefixIds, field] of [
      [['not-a-uuid'], "'prefixIds[0]'"],
      [[root.toUpperCase()], "'prefixIds[0]'"],
      [[root, 7], "'prefixIds[1]'"],
      [[], "'prefixIds'"],
      [[root, root], "'prefixIds'"],
      [ids(257), "'prefixIds'"],
      ['root', "'prefixIds'"],
    ] as [unknown, string][]) {
      const error = await refusal(JSON.stringify({ kind: 'forget', id: 'f1', prefixIds }));
      expect(error).toMatchObject({ code: 'protocol_error' });
      expect(error.message).toContain(`control message 'forget': field ${field}`);
    }
    const huge = await refusal(JSON.stringify({ kind: 'forget', id: 'f2', prefixIds: ids(5000) }));
    expect(huge).toMatchObject({ code: 'protocol_error', message: expect.stringMatching(/over the 65536 limit/) });
    expect(await prefixEntries(), 'a refused forget drops nothing').toBe(held);
    expect(await control({ kind: 'forget', id: 'f3', prefixIds: ids(256) })).toMatchObject({ kind: 'stats', id: 'f3', prefixEntries: held });
    // The root named: its child goes with it (it needs the root's positions); the other entry stays and forks.
    expect(await control({ kind: 'forget', id: 'f4', prefixIds: [randomUUID(), root] })).toMatchObject({ kind: 'stats', prefixEntries: held - 2 });
    expect(await control({ kind: 'fork', id: 'f5', sessionId: randomUUID(), prefixId: child, range: SUITE_RANGE, length: 4 })).toMatchObject({ kind: 'error', code: 'cache_miss' });
    expect(await control({ kind: 'fork', id: 'f6', sessionId: randomUUID(), prefixId: other, range: SUITE_RANGE, length: 4 })).toMatchObject({ kind: 'forked', length: 4 });
    await servesNormally();
  });

  it('unload of a range that is not loaded: unloaded, loaded false, nothing freed; the loaded range still serves; a reversed range is refused', async () => {
    const entriesBefore = peer.shard.kvEntries;
    for (const range of [{ start: 2, end: 5 }, { start: 0, end: 1 }, { start: 1, end: 2 }]) {
      expect(await control({ kind: 'unload', id: 'u1', modelKey: modelKey(), range })).toEqual({ kind: 'unloaded', id: 'u1', range, loaded: false, freedEntries: 0 });
    }
    expect(await control({ kind: 'unload', id: 'u2', modelKey: 'not-this-model', range: { start: 3, end: 4 } })).toEqual({ kind: 'unloaded', id: 'u2', range: { start: 3, end: 4 }, loaded: false, freedEntries: 0 });
    const reversed = await refusal(JSON.stringify({ kind: 'unload', id: 'u3', modelKey: modelKey(), range: { start: 3, end: 2 } }));
    expect(reversed).toMatchObject({ code: 'protocol_error' });
    expect(reversed.message).toMatch(/'unload': field 'range' must be a half-open range with end > start/);
    expect(peer.shard.kvEntries, 'no KV was freed by unloading ranges the peer does not hold').toBe(entriesBefore);
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

  it('a bad rejoin count (3.5): protocol_error naming the field, socket closed', async () => {
    for (const rejoin of [{ connections: 0 }, { connections: -3 }, { connections: 2 ** 31 }, { connections: 'many' }, 5]) {
      const error = await refusedByHead(hello({ rejoin }));
      expect(error).toMatchObject({ code: 'protocol_error' });
      expect(error.message).toMatch(/'hello': field 'rejoin(\.connections)?'/);
    }
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
