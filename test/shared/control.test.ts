import { describe, expect, it } from 'vitest';
import { errorFromControlMessage, errorToControlMessage } from '../../src/shared/control-errors.ts';
import {
  MAX_CONTROL_MESSAGE_CHARS,
  MAX_FORGET_IDS,
  parseControlMessage,
  serializeControlMessage,
  type ControlKind,
  type ControlMessage,
} from '../../src/shared/control.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';
import { ERROR_CODES, PROTOCOL_VERSION, isCompatibleVersion, isErrorCode, type ErrorCode } from '../../src/shared/protocol.ts';

const SESSION = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';

/** One full message per kind (every optional field present). */
const samples: Record<ControlKind, ControlMessage> = {
  hello: {
    kind: 'hello',
    id: 'c1',
    protocol: { major: 1, minor: 0 },
    runtime: 'browser',
    executionProvider: 'webgpu',
    memoryBudgetBytes: 2 ** 31,
    joinToken: 'tok-123',
    listenUrl: 'ws://10.0.0.2:7071/peer',
    peerId: 'peer-a.1',
    adapter: { vendor: 'apple', architecture: '', isFallbackAdapter: false },
    rejoin: { connections: 3 },
  },
  welcome: { kind: 'welcome', id: 'c1', peerId: 'peer-a.1', protocol: { major: 1, minor: 0 } },
  assign: {
    kind: 'assign',
    id: 'c2',
    modelKey: 'stories260k@abc123',
    model: 'stories260k',
    range: { start: 2, end: 5 },
    dtype: 'fp16',
    artifactUrl: '/artifacts/stories260k/2-5.onnx',
    config: { architecture: 'LlamaForCausalLM', numLayers: 5, hiddenSize: 64, numHeads: 8, numKvHeads: 4, headDim: 8, vocabSize: 512 },
  },
  ready: { kind: 'ready', id: 'c2', modelKey: 'stories260k@abc123', range: { start: 2, end: 5 }, loadMs: 81.5, device: 'webgpu' },
  release: { kind: 'release', id: 'c3', sessionId: SESSION, keepPrefix: { prefixId: '00000000-0000-4000-8000-000000000001', length: 40, parent: { prefixId: '00000000-0000-4000-8000-000000000002', length: 24 } } },
  released: { kind: 'released', id: 'c3', sessionId: SESSION, freedEntries: 2, keptPrefixes: 2 },
  fork: { kind: 'fork', id: 'c5', sessionId: SESSION, prefixId: '00000000-0000-4000-8000-000000000001', range: { start: 0, end: 3 }, length: 39 },
  forked: { kind: 'forked', id: 'c5', sessionId: SESSION, length: 39 },
  unload: { kind: 'unload', id: 'c6', modelKey: 'stories260k@abc123', range: { start: 0, end: 3 } },
  unloaded: { kind: 'unloaded', id: 'c6', range: { start: 0, end: 3 }, loaded: true, freedEntries: 1 },
  error: { kind: 'error', id: 'c4', code: 'cache_miss', message: 'evicted', sessionId: SESSION, requestId: 4294967295 },
  stats: {
    kind: 'stats',
    kvEntries: 3,
    kvBytes: 1024,
    kvBudgetBytes: 4096,
    tokensServed: 99,
    framesServed: 12,
    decodeFrames: 4,
    decodeBusyMs: 2.5,
    decodeRunMs: 2,
    batchFrames: 1,
    batchedEntries: 3,
    prefixEntries: 1,
    prefixBytes: 512,
    prefixBudgetBytes: 8192,
    prefixHits: 2,
    prefixEvictions: 0,
  },
  ping: { kind: 'ping', id: 'p1', t: 1712345678901.5 },
  pong: { kind: 'pong', id: 'p1', t: 1712345678901.5 },
  challenge: { kind: 'challenge', nonce: 'ab'.repeat(32) },
  authenticate: { kind: 'authenticate', id: 'a1', peerId: 'peer-a.1', from: 'peer-b', nonce: '01'.repeat(32), proof: 'fe'.repeat(32) },
  authenticated: { kind: 'authenticated', id: 'a1', proof: '9c'.repeat(32) },
  chain: { kind: 'chain', id: 'k1', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'head', to: { peerId: 'peer-b', range: { start: 2, end: 5 }, url: 'ws://10.0.0.3:7071/peer' } },
  chained: { kind: 'chained', id: 'k1', sessionId: SESSION, range: { start: 0, end: 2 } },
  forget: { kind: 'forget', prefixIds: ['00000000-0000-4000-8000-000000000001', SESSION] },
};

function refusal(text: string): ProtocolError {
  try {
    parseControlMessage(text);
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error(`expected a ProtocolError for ${text}`);
}

/** JSON of the sample of `kind` with `edit` applied to a deep copy. */
function edited(kind: ControlKind, edit: (m: Record<string, any>) => void): string {
  const copy = structuredClone(samples[kind]) as Record<string, any>;
  edit(copy);
  return JSON.stringify(copy);
}

describe('control messages round trip', () => {
  it.each(Object.values(samples))('$kind', (message) => {
    expect(parseControlMessage(serializeControlMessage(message))).toEqual(message);
  });

  it('minimal messages: optional fields stay absent', () => {
    const hello = { ...samples.hello } as Record<string, unknown>;
    for (const key of ['id', 'joinToken', 'listenUrl', 'adapter', 'rejoin']) delete hello[key]; // a 3.4 peer's hello: no rejoin
    const parsed = parseControlMessage(JSON.stringify(hello));
    expect(parsed).toEqual(hello);
    expect(Object.keys(parsed)).not.toContain('joinToken');
  });

  it('fields this version does not know are dropped, not refused (minor versions add fields)', () => {
    const text = JSON.stringify({ ...samples.ping, future: 1 }).replace('{', '{"__proto__":{"t":1},');
    const parsed = parseControlMessage(text);
    expect(parsed).toEqual(samples.ping);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
  });

  it('an unknown error code still arrives, as internal', () => {
    const parsed = parseControlMessage(JSON.stringify({ kind: 'error', code: 'quota_exceeded', message: 'slow down' }));
    expect(parsed).toEqual({ kind: 'error', code: 'internal', message: '[quota_exceeded] slow down' });
  });
});

describe('parseControlMessage refusals', () => {
  it.each([
    ['not JSON', '{kind:', 'protocol_error'],
    ['an array', '[1]', 'protocol_error'],
    ['null', 'null', 'protocol_error'],
    ['kind missing', '{}', 'protocol_error'],
    ['kind a number', '{"kind":3}', 'protocol_error'],
    ['unknown kind', '{"kind":"teleport"}', 'unknown_kind'],
    ['inherited kind name', '{"kind":"toString"}', 'unknown_kind'],
    ['too long', JSON.stringify({ ...samples.ping, pad: 'x'.repeat(MAX_CONTROL_MESSAGE_CHARS) }), 'protocol_error'],
  ] as [string, string, ErrorCode][])('%s', (_, text, code) => {
    expect(refusal(text).code).toBe(code);
  });

  const fieldCases: [ControlKind, string, (m: Record<string, any>) => void][] = [
    ['hello', 'id', (m) => (m.id = 7)],
    ['hello', 'protocol', (m) => delete m.protocol],
    ['hello', 'protocol.major', (m) => (m.protocol.major = 256)],
    ['hello', 'protocol.minor', (m) => (m.protocol.minor = '0')],
    ['hello', 'runtime', (m) => (m.runtime = 'deno')],
    ['hello', 'executionProvider', (m) => (m.executionProvider = '')],
    ['hello', 'memoryBudgetBytes', (m) => (m.memoryBudgetBytes = -1)],
    ['hello', 'memoryBudgetBytes', (m) => (m.memoryBudgetBytes = 1.5)],
    ['hello', 'joinToken', (m) => (m.joinToken = null)],
    ['hello', 'listenUrl', (m) => (m.listenUrl = 'http://10.0.0.2:7071')],
    ['hello', 'peerId', (m) => delete m.peerId],
    ['hello', 'peerId', (m) => (m.peerId = 'has spaces')],
    ['hello', 'adapter.isFallbackAdapter', (m) => (m.adapter.isFallbackAdapter = 'no')],
    ['hello', 'adapter', (m) => (m.adapter = [])],
    ['welcome', 'peerId', (m) => (m.peerId = 5)],
    ['welcome', 'protocol', (m) => delete m.protocol],
    ['assign', 'modelKey', (m) => delete m.modelKey],
    ['assign', 'model', (m) => (m.model = '')],
    ['assign', 'range', (m) => (m.range = { start: 3, end: 3 })],
    ['assign', 'range', (m) => (m.range.end = 6)], // past config.numLayers
    ['assign', 'range.start', (m) => (m.range.start = -1)],
    ['assign', 'range.end', (m) => (m.range.end = 2.5)],
    ['assign', 'dtype', (m) => (m.dtype = 'bf16')],
    ['assign', 'artifactUrl', (m) => delete m.artifactUrl],
    ['assign', 'config.hiddenSize', (m) => (m.config.hiddenSize = 0)],
    ['assign', 'config', (m) => delete m.config],
    ['ready', 'loadMs', (m) => (m.loadMs = -1)],
    ['ready', 'device', (m) => delete m.device],
    ['ready', 'range', (m) => (m.range = 'all')],
    ['release', 'sessionId', (m) => (m.sessionId = SESSION.toUpperCase())],
    ['release', 'sessionId', (m) => delete m.sessionId],
    ['released', 'freedEntries', (m) => (m.freedEntries = -1)],
    ['released', 'sessionId', (m) => (m.sessionId = 'abc')],
    ['error', 'code', (m) => (m.code = 'Not A Code')],
    ['error', 'code', (m) => delete m.code],
    ['error', 'message', (m) => (m.message = 3)],
    ['error', 'requestId', (m) => (m.requestId = 2 ** 32)],
    ['error', 'sessionId', (m) => (m.sessionId = '')],
    ['stats', 'kvBytes', (m) => delete m.kvBytes],
    ['stats', 'tokensServed', (m) => (m.tokensServed = '99')],
    ['ping', 't', (m) => (m.t = 'now')],
    ['pong', 't', (m) => delete m.t],
    ['challenge', 'nonce', (m) => (m.nonce = 'AB'.repeat(32))], // upper-case hex
    ['challenge', 'nonce', (m) => (m.nonce = 'ab'.repeat(31))], // too short
    ['challenge', 'nonce', (m) => delete m.nonce],
    ['authenticate', 'peerId', (m) => (m.peerId = 'a b')],
    ['authenticate', 'nonce', (m) => (m.nonce = 'zz'.repeat(32))],
    ['authenticate', 'proof', (m) => (m.proof = 'fe'.repeat(33))],
    ['authenticate', 'proof', (m) => delete m.proof],
    ['authenticated', 'proof', (m) => (m.proof = '')],
    ['authenticated', 'proof', (m) => (m.proof = 64)],
    ['release', 'keepPrefix.prefixId', (m) => (m.keepPrefix = { prefixId: 'p', length: 4 })],
    ['release', 'keepPrefix.length', (m) => (m.keepPrefix = { prefixId: SESSION, length: 0 })],
    ['release', 'keepPrefix.parent.prefixId', (m) => (m.keepPrefix = { prefixId: SESSION, length: 4, parent: { prefixId: 'p', length: 2 } })],
    ['release', 'keepPrefix.parent.length', (m) => (m.keepPrefix = { prefixId: SESSION, length: 4, parent: { prefixId: SESSION.replace(/.$/, '0'), length: 0 } })],
    ['release', 'keepPrefix.parent', (m) => (m.keepPrefix = { prefixId: SESSION, length: 4, parent: { prefixId: SESSION.replace(/.$/, '0'), length: 4 } })], // shares no fewer positions than it holds
    ['release', 'keepPrefix.parent', (m) => (m.keepPrefix = { prefixId: SESSION, length: 4, parent: { prefixId: SESSION, length: 2 } })], // itself
    ['release', 'keepPrefix.parent', (m) => (m.keepPrefix = { prefixId: SESSION, length: 4, parent: 'p' })],
    ['released', 'keptPrefixes', (m) => (m.keptPrefixes = -1)],
    ['fork', 'prefixId', (m) => delete m.prefixId],
    ['fork', 'length', (m) => (m.length = 0)],
    ['fork', 'range', (m) => (m.range = { start: 2, end: 1 })],
    ['forked', 'length', (m) => (m.length = 1.5)],
    ['unload', 'modelKey', (m) => (m.modelKey = 'k'.repeat(257))],
    ['unload', 'range', (m) => delete m.range],
    ['unloaded', 'loaded', (m) => (m.loaded = 'yes')],
    ['unloaded', 'freedEntries', (m) => (m.freedEntries = -1)],
    ['stats', 'prefixBytes', (m) => (m.prefixBytes = -1)],
    ['stats', 'batchedEntries', (m) => (m.batchedEntries = '3')],
    ['stats', 'decodeBusyMs', (m) => (m.decodeBusyMs = -0.5)],
    ['hello', 'rejoin.connections', (m) => (m.rejoin = { connections: 0 })],
    ['hello', 'rejoin.connections', (m) => (m.rejoin = { connections: 2 ** 31 })],
    ['hello', 'rejoin.connections', (m) => (m.rejoin = { connections: 1.5 })],
    ['hello', 'rejoin.connections', (m) => (m.rejoin = { connections: '2' })],
    ['hello', 'rejoin.connections', (m) => (m.rejoin = {})],
    ['hello', 'rejoin', (m) => (m.rejoin = 2)],
    ['forget', 'prefixIds', (m) => (m.prefixIds = [])],
    ['forget', 'prefixIds', (m) => delete m.prefixIds],
    ['forget', 'prefixIds', (m) => (m.prefixIds = SESSION)],
    ['forget', 'prefixIds', (m) => (m.prefixIds = Array.from({ length: 257 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`))],
    ['forget', 'prefixIds', (m) => (m.prefixIds = [SESSION, SESSION])],
    ['forget', 'prefixIds[1]', (m) => (m.prefixIds = [SESSION, SESSION.toUpperCase()])],
    ['forget', 'prefixIds[0]', (m) => (m.prefixIds = [42])],
  ];
  it.each(fieldCases)("%s: field '%s'", (kind, field, edit) => {
    const error = refusal(edited(kind, edit));
    expect(error.code).toBe('protocol_error');
    expect(error.message).toContain(`control message '${kind}': field '${field}'`);
  });
});

describe('serializeControlMessage', () => {
  it('refuses at the sender what the receiver would refuse', () => {
    expect(() => serializeControlMessage({ kind: 'ping', t: Number.NaN })).toThrow(ProtocolError);
    expect(() => serializeControlMessage({ ...samples.release, sessionId: 'x' } as ControlMessage)).toThrow(/sessionId/);
  });
});

describe('errors as data', () => {
  it('a ProtocolError keeps its code, session and request across the wire', () => {
    const sent = errorToControlMessage(new ProtocolError('cache_miss', 'holds 3, needs 5', { sessionId: SESSION, requestId: 8 }), { id: 'c9' });
    const arrived = parseControlMessage(serializeControlMessage(sent));
    expect(arrived).toEqual({ kind: 'error', id: 'c9', code: 'cache_miss', message: 'holds 3, needs 5', sessionId: SESSION, requestId: 8 });
    const rebuilt = errorFromControlMessage(arrived as Extract<ControlMessage, { kind: 'error' }>);
    expect(rebuilt).toBeInstanceOf(ProtocolError);
    expect([rebuilt.code, rebuilt.message, rebuilt.sessionId, rebuilt.requestId]).toEqual(['cache_miss', 'holds 3, needs 5', SESSION, 8]);
  });

  it('anything else becomes internal, with context filled in', () => {
    expect(errorToControlMessage(new TypeError('boom'), { requestId: 1 })).toEqual({ kind: 'error', code: 'internal', message: 'boom', requestId: 1 });
    expect(errorToControlMessage('plain').message).toBe('plain');
  });
});

describe('chain messages (protocol 3.2)', () => {
  const chain = (to: unknown) => JSON.stringify({ kind: 'chain', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'head', to });
  it('a chain without `to` ends at the head, and `to.url` may be absent', () => {
    expect(parseControlMessage(JSON.stringify({ kind: 'chain', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'peer-a' }))).not.toHaveProperty('to');
    const next = parseControlMessage(chain({ peerId: 'peer-b', range: { start: 2, end: 5 } }));
    expect(next).toEqual({ kind: 'chain', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'head', to: { peerId: 'peer-b', range: { start: 2, end: 5 } } });
  });
  it.each([
    ['a url that is not ws(s)', { peerId: 'peer-b', range: { start: 2, end: 5 }, url: 'http://10.0.0.3/peer' }, /url/],
    ['a peer id with a space', { peerId: 'peer b', range: { start: 2, end: 5 } }, /peerId/],
    ['an empty range', { peerId: 'peer-b', range: { start: 5, end: 5 } }, /range/],
  ])('refuses %s', (_name, to, field) => {
    const error = refusal(chain(to));
    expect(error.code).toBe('protocol_error');
    expect(error.message).toMatch(field);
  });
});

describe('chain.lanes (protocol 3.4)', () => {
  const chain = (lanes: unknown) => JSON.stringify({ kind: 'chain', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'head', lanes });
  it('lanes: true is kept; absent stays absent', () => {
    expect(parseControlMessage(chain(true))).toMatchObject({ kind: 'chain', lanes: true });
    expect(parseControlMessage(JSON.stringify({ kind: 'chain', sessionId: SESSION, range: { start: 0, end: 2 }, from: 'head' }))).not.toHaveProperty('lanes');
  });
  it.each([['a string', 'yes'], ['a number', 1]])('refuses lanes as %s', (_name, lanes) => {
    expect(refusal(chain(lanes))).toMatchObject({ code: 'protocol_error', message: expect.stringMatching(/lanes/) });
  });
});

describe('forget (protocol 3.5)', () => {
  it('takes up to MAX_FORGET_IDS distinct ids', () => {
    const ids = Array.from({ length: MAX_FORGET_IDS }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    expect(parseControlMessage(JSON.stringify({ kind: 'forget', prefixIds: ids }))).toEqual({ kind: 'forget', prefixIds: ids });
  });
});

describe('protocol constants', () => {
  it('error codes are pinned', () => {
    expect(Object.keys(ERROR_CODES).sort()).toEqual(
      [
        'bad_frame', 'cache_miss', 'cancelled', 'internal', 'nan_activations', 'not_ready', 'protocol_error',
        'route_unavailable', 'unauthorized', 'unknown_kind', 'unknown_session', 'unsupported_weights', 'version_mismatch', 'wrong_payload_size', 'peer_id_taken',
      ].sort(),
    );
    expect(isErrorCode('cache_miss')).toBe(true);
    expect(isErrorCode('toString')).toBe(false);
  });

  it('same major is compatible, any minor', () => {
    expect(PROTOCOL_VERSION).toEqual({ major: 3, minor: 5 });
    expect(isCompatibleVersion({ major: 3, minor: 9 })).toBe(true);
    expect(isCompatibleVersion({ major: 2, minor: 2 })).toBe(false);
    expect(isCompatibleVersion({ major: 2, minor: 1 })).toBe(false);
    expect(isCompatibleVersion({ major: 2, minor: 0 })).toBe(false);
    expect(isCompatibleVersion({ major: 4, minor: 0 })).toBe(false);
  });
});
