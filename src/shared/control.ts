/**
 * Control messages: JSON text frames between the head and its peers, a tagged union on
 * `kind`. Any message may carry a correlation id `id`; a response copies its request's `id`
 * (hello → welcome, assign → ready, release → released, unload → unloaded, ping → pong, or
 * error). Messages
 * without `id` are unprompted (stats, errors a peer reports on its own).
 *
 * Errors cross the wire as data (`{ kind: 'error', code, message }`) and are rebuilt into a
 * `ProtocolError` on arrival (`errorFromControlMessage` in `control-errors.ts`).
 */
import { FieldReader, isPlainObject } from './control-fields.ts';
import { ProtocolError } from './protocol-error.ts';
import type { AuthenticatedMessage, AuthenticateMessage, ChainedMessage, ChainMessage, ChallengeMessage, Correlated } from './link-messages.ts';
import { MAX_FORGET_IDS, type ForgetMessage } from './prefix-messages.ts';
import { isErrorCode, WIRE_WEIGHT_FORMATS, type ErrorCode, type LayerRange, type ProtocolVersion, type WireDtype, type WireWeightFormat, type WireWeights } from './protocol.ts';

export type { AuthenticatedMessage, AuthenticateMessage, ChainedMessage, ChainMessage, ChallengeMessage } from './link-messages.ts';
export { MAX_FORGET_IDS, type ForgetMessage } from './prefix-messages.ts';

/** Longest control message text accepted, in UTF-16 code units. */
export const MAX_CONTROL_MESSAGE_CHARS = 64 * 1024;
const PEER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Nonces and proofs of the direct-link handshake: 32 bytes as 64 lowercase hex digits. */
const HEX_256 = /^[0-9a-f]{64}$/;
/** A `ws://` or `wss://` URL (a peer's listen URL). */
const WS_URL = /^wss?:\/\/[^\s/?#]+[^\s]*$/;


/** A WebGPU adapter as `GPUAdapterInfo` reports it (browser peers and Node WebGPU). */
export interface AdapterInfo {
  readonly vendor: string;
  readonly architecture: string;
  readonly isFallbackAdapter: boolean;
}

/** The model facts a peer needs to check the artifact it loads. All positive integers. */
export interface ShardConfigSummary {
  readonly architecture: string; // e.g. 'LlamaForCausalLM'
  readonly numLayers: number;
  readonly hiddenSize: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
}

/** Peer → head, first message. A different protocol major is refused with `version_mismatch`. */
export interface HelloMessage extends Correlated {
  readonly kind: 'hello';
  readonly protocol: ProtocolVersion;
  readonly runtime: 'node' | 'browser';
  readonly executionProvider: string; // e.g. 'cuda', 'webgpu', 'wasm', 'cpu'
  readonly memoryBudgetBytes: number;
  readonly joinToken?: string;
  /** `ws://` or `wss://` URL the peer accepts direct links on; absent: relay only. */
  readonly listenUrl?: string;
  readonly peerId: string;
  readonly adapter?: AdapterInfo;
  /** Weight formats this peer's runtime can serve (2.1). Absent (a 2.0 peer): only the float format equal to the activation dtype. */
  readonly weightFormats?: readonly WireWeightFormat[];
  /** 3.5: head connections this peer process or tab made before this one (1 … 2^31 - 1); absent: its first. */
  readonly rejoin?: { readonly connections: number };
}
/** Head → peer: the hello was accepted under `peerId`. */
export interface WelcomeMessage extends Correlated {
  readonly kind: 'welcome';
  readonly peerId: string;
  readonly protocol: ProtocolVersion;
}
/** Head → peer: load layers `range` of `model`; answered by `ready` or `error`. */
export interface AssignMessage extends Correlated {
  readonly kind: 'assign';
  readonly modelKey: string;
  readonly model: string;
  readonly range: LayerRange; // [start, end), end ≤ config.numLayers
  readonly dtype: WireDtype;
  /** The weight format to serve (2.1; absent from a 2.0 head: the float format equal to `dtype`). A peer that cannot serve it refuses with `unsupported_weights`. */
  readonly weights?: WireWeights;
  /** Where to fetch the shard artifact: absolute URL or a path on the head's origin. */
  readonly artifactUrl: string;
  readonly config: ShardConfigSummary;
}
/** Peer → head: `range` of `modelKey` is loaded and runs on `device`. */
export interface ReadyMessage extends Correlated {
  readonly kind: 'ready';
  readonly modelKey: string;
  readonly range: LayerRange;
  readonly loadMs: number;
  readonly device: string;
  /** The weight format loaded (2.1). */
  readonly weights?: WireWeights;
}
/**
 * Head → peer: free every KV entry of `sessionId`; answered by `released`. With `keepPrefix`
 * (protocol 3), the first `keepPrefix.length` positions of each range's KV are kept instead,
 * as prefix entry `keepPrefix.prefixId` (within the peer's prefix budget, least recently
 * used first out), for later sessions to `fork` from.
 */
export interface ReleaseMessage extends Correlated {
  readonly kind: 'release';
  readonly sessionId: string;
  readonly keepPrefix?: {
    readonly prefixId: string;
    readonly length: number;
    /**
     * Protocol 3.3: the kept sequence's first `parent.length` positions are those of entry
     * `parent.prefixId` (which the peer holds): the peer may keep only positions
     * [parent.length, length) and join the parent's on a fork. A parent it does not hold is
     * refused (`cache_miss`), a shared length not below `length` or beyond the parent's
     * (`protocol_error`); the session's KV is freed either way. A head sends no parent to a
     * peer below 3.3 (which would drop the field and keep a whole copy: still correct).
     */
    readonly parent?: { readonly prefixId: string; readonly length: number };
  };
}
export interface ReleasedMessage extends Correlated {
  readonly kind: 'released';
  readonly sessionId: string;
  /** KV entries freed (one per range that held the session); 0 if it held none. */
  readonly freedEntries: number;
  /** Prefix entries kept (protocol 3; absent: none). */
  readonly keptPrefixes?: number;
}
/**
 * Head → peer (protocol 3): start `sessionId`'s KV on `range` from the first `length`
 * positions of prefix entry `prefixId`. The entry itself is never written: the session gets
 * its own copy (copy on write). Answered by `forked`, or by `error` `cache_miss` when the
 * entry is gone (evicted) or shorter than `length`.
 */
export interface ForkMessage extends Correlated {
  readonly kind: 'fork';
  readonly sessionId: string;
  readonly prefixId: string;
  readonly range: LayerRange;
  readonly length: number;
}
export interface ForkedMessage extends Correlated {
  readonly kind: 'forked';
  readonly sessionId: string;
  readonly length: number;
}
/**
 * Head → peer (protocol 2.2): unload layers `range` of `modelKey` — no plan uses them and no
 * session holds them any more. The peer disposes that range's executor and any KV left on it
 * (a frame for the range is `not_ready` from then on) and answers `unloaded`. Unloading a
 * range the peer does not hold is not an error (`freedEntries` 0, `loaded` false).
 */
export interface UnloadMessage extends Correlated {
  readonly kind: 'unload';
  readonly modelKey: string;
  readonly range: LayerRange;
}
export interface UnloadedMessage extends Correlated {
  readonly kind: 'unloaded';
  readonly range: LayerRange;
  /** Whether the range was loaded (false: there was nothing to unload). */
  readonly loaded: boolean;
  /** KV entries of the range that were still held, freed with it. */
  readonly freedEntries: number;
}
/** Either direction: a refused or failed request, or an unprompted failure. */
export interface ErrorMessage extends Correlated {
  readonly kind: 'error';
  readonly code: ErrorCode;
  readonly message: string;
  readonly sessionId?: string;
  /** The activation frame's request id (u32) this error answers. */
  readonly requestId?: number;
}
/** Peer → head, unprompted or in answer to a ping: KV and work counters. */
export interface StatsMessage extends Correlated {
  readonly kind: 'stats';
  readonly kvEntries: number;
  readonly kvBytes: number;
  readonly kvBudgetBytes: number;
  readonly tokensServed: number;
  readonly framesServed: number;
  /** One-position (decode) frames served, and the ms spent on them: whole (frame decode, run, encode) and inside the shard run. */
  readonly decodeFrames?: number;
  readonly decodeBusyMs?: number;
  readonly decodeRunMs?: number;
  /** Batched frames served and the entries they carried (protocol 3). */
  readonly batchFrames?: number;
  readonly batchedEntries?: number;
  /** Prefix entries held (apart from live sessions' KV), their bytes and budget, forks served from them, evictions (protocol 3). */
  readonly prefixEntries?: number;
  readonly prefixBytes?: number;
  readonly prefixBudgetBytes?: number;
  readonly prefixHits?: number;
  readonly prefixEvictions?: number;
}
/** Liveness; `t` is the sender's clock in milliseconds, echoed by `pong`. */
export interface PingMessage extends Correlated {
  readonly kind: 'ping';
  readonly t: number;
}
export interface PongMessage extends Correlated {
  readonly kind: 'pong';
  readonly t: number;
}

export type ControlMessage =
  | HelloMessage
  | WelcomeMessage
  | AssignMessage
  | ReadyMessage
  | ReleaseMessage
  | ReleasedMessage
  | ForkMessage
  | ForkedMessage
  | UnloadMessage
  | UnloadedMessage
  | ErrorMessage
  | StatsMessage
  | PingMessage
  | PongMessage
  | ChallengeMessage
  | AuthenticateMessage
  | AuthenticatedMessage
  | ChainMessage
  | ChainedMessage
  | ForgetMessage;
export type ControlKind = ControlMessage['kind'];

type Reader = (r: FieldReader) => Omit<ControlMessage, 'kind' | 'id'>;

const readers: Record<ControlKind, Reader> = {
  hello: (r) => ({
    protocol: r.version('protocol'),
    runtime: r.oneOf('runtime', ['node', 'browser'] as const),
    executionProvider: r.string('executionProvider', { maxChars: 64 }),
    memoryBudgetBytes: r.integer('memoryBudgetBytes'),
    joinToken: r.optional('joinToken', (f) => r.string(f, { maxChars: 512 })),
    listenUrl: r.optional('listenUrl', (f) => r.string(f, { pattern: WS_URL })),
    peerId: r.string('peerId', { pattern: PEER_ID }),
    adapter: r.optional('adapter', (f) => {
      const a = r.object(f);
      const vendor = a.string('vendor', { allowEmpty: true, maxChars: 256 });
      const architecture = a.string('architecture', { allowEmpty: true, maxChars: 256 });
      return { vendor, architecture, isFallbackAdapter: a.boolean('isFallbackAdapter') };
    }),
    weightFormats: r.optional('weightFormats', (f) => r.list(f, (item) => item.oneOf(WIRE_WEIGHT_FORMATS), 8)),
    rejoin: r.optional('rejoin', (f) => ({ connections: r.object(f).integer('connections', 1, 2 ** 31 - 1) })),
  }),
  welcome: (r) => ({ peerId: r.string('peerId', { pattern: PEER_ID }), protocol: r.version('protocol') }),
  assign: (r) => {
    const c = r.object('config');
    const config: ShardConfigSummary = {
      architecture: c.string('architecture', { maxChars: 128 }),
      numLayers: c.integer('numLayers', 1),
      hiddenSize: c.integer('hiddenSize', 1),
      numHeads: c.integer('numHeads', 1),
      numKvHeads: c.integer('numKvHeads', 1),
      headDim: c.integer('headDim', 1),
      vocabSize: c.integer('vocabSize', 1),
    };
    const range = r.range('range');
    if (range.end > config.numLayers) {
      r.fail('range', `a range within [0, config.numLayers = ${config.numLayers})`, `end ${range.end}`);
    }
    const dtype = r.oneOf('dtype', ['fp32', 'fp16'] as const);
    const modelKey = r.string('modelKey', { maxChars: 256 });
    const weights = r.optional('weights', (f) => r.weights(f));
    return { modelKey, model: r.string('model', { maxChars: 512 }), range, dtype, weights, artifactUrl: r.string('artifactUrl'), config };
  },
  ready: (r) => ({
    modelKey: r.string('modelKey', { maxChars: 256 }),
    range: r.range('range'),
    loadMs: r.number('loadMs'),
    device: r.string('device', { maxChars: 64 }),
    weights: r.optional('weights', (f) => r.weights(f)),
  }),
  release: (r) => ({
    sessionId: r.sessionId('sessionId'),
    keepPrefix: r.optional('keepPrefix', (f) => {
      const k = r.object(f);
      const prefixId = k.sessionId('prefixId');
      const length = k.integer('length', 1);
      // 3.3: the parent entry whose first `parent.length` positions the kept sequence shares (the peer keeps only the rest).
      const parent = k.optional('parent', (g) => {
        const p = k.object(g);
        return { prefixId: p.sessionId('prefixId'), length: p.integer('length', 1) };
      });
      if (parent && parent.length >= length) k.fail('parent', `a parent sharing fewer than keepPrefix.length = ${length} positions`, `length ${parent.length}`);
      if (parent && parent.prefixId === prefixId) k.fail('parent', 'another entry than keepPrefix.prefixId', parent.prefixId);
      return { prefixId, length, ...(parent && { parent }) };
    }),
  }),
  released: (r) => ({ sessionId: r.sessionId('sessionId'), freedEntries: r.integer('freedEntries'), keptPrefixes: r.optional('keptPrefixes', (f) => r.integer(f)) }),
  fork: (r) => ({ sessionId: r.sessionId('sessionId'), prefixId: r.sessionId('prefixId'), range: r.range('range'), length: r.integer('length', 1) }),
  forked: (r) => ({ sessionId: r.sessionId('sessionId'), length: r.integer('length', 1) }),
  unload: (r) => ({ modelKey: r.string('modelKey', { maxChars: 256 }), range: r.range('range') }),
  unloaded: (r) => ({ range: r.range('range'), loaded: r.boolean('loaded'), freedEntries: r.integer('freedEntries') }),
  error: (r) => {
    // A newer minor version may add codes: an unknown one still arrives, as 'internal'.
    const raw = r.string('code', { maxChars: 64, pattern: /^[a-z_]+$/ });
    const message = r.string('message', { allowEmpty: true, maxChars: 4096 });
    return {
      code: isErrorCode(raw) ? raw : 'internal',
      message: isErrorCode(raw) ? message : `[${raw}] ${message}`,
      sessionId: r.optional('sessionId', (f) => r.sessionId(f)),
      requestId: r.optional('requestId', (f) => r.integer(f, 0, 0xffffffff)),
    };
  },
  stats: (r) => ({
    kvEntries: r.integer('kvEntries'),
    kvBytes: r.integer('kvBytes'),
    kvBudgetBytes: r.integer('kvBudgetBytes'),
    tokensServed: r.integer('tokensServed'),
    framesServed: r.integer('framesServed'),
    decodeFrames: r.optional('decodeFrames', (f) => r.integer(f)),
    decodeBusyMs: r.optional('decodeBusyMs', (f) => r.number(f, 0)),
    decodeRunMs: r.optional('decodeRunMs', (f) => r.number(f, 0)),
    batchFrames: r.optional('batchFrames', (f) => r.integer(f)),
    batchedEntries: r.optional('batchedEntries', (f) => r.integer(f)),
    prefixEntries: r.optional('prefixEntries', (f) => r.integer(f)),
    prefixBytes: r.optional('prefixBytes', (f) => r.integer(f)),
    prefixBudgetBytes: r.optional('prefixBudgetBytes', (f) => r.integer(f)),
    prefixHits: r.optional('prefixHits', (f) => r.integer(f)),
    prefixEvictions: r.optional('prefixEvictions', (f) => r.integer(f)),
  }),
  ping: (r) => ({ t: r.number('t', -Number.MAX_VALUE) }),
  pong: (r) => ({ t: r.number('t', -Number.MAX_VALUE) }),
  challenge: (r) => ({ nonce: r.string('nonce', { pattern: HEX_256 }) }),
  authenticate: (r) => ({
    peerId: r.string('peerId', { pattern: PEER_ID }),
    from: r.optional('from', (f) => r.string(f, { pattern: PEER_ID })),
    nonce: r.string('nonce', { pattern: HEX_256 }),
    proof: r.string('proof', { pattern: HEX_256 }),
  }),
  chain: (r) => ({
    sessionId: r.sessionId('sessionId'),
    range: r.range('range'),
    from: r.string('from', { pattern: PEER_ID }),
    to: r.optional('to', (f) => {
      const t = r.object(f);
      const url = t.optional('url', (g) => t.string(g, { pattern: WS_URL }));
      return { peerId: t.string('peerId', { pattern: PEER_ID }), range: t.range('range'), ...(url !== undefined && { url }) };
    }),
    lanes: r.optional('lanes', (f) => r.boolean(f)),
  }),
  chained: (r) => ({ sessionId: r.sessionId('sessionId'), range: r.range('range') }),
  authenticated: (r) => ({ proof: r.string('proof', { pattern: HEX_256 }) }),
  forget: (r) => {
    const prefixIds = r.list('prefixIds', (item) => item.sessionId(), MAX_FORGET_IDS);
    if (prefixIds.length === 0) r.fail('prefixIds', 'at least one prefix id', 'an empty list');
    if (new Set(prefixIds).size !== prefixIds.length) r.fail('prefixIds', 'distinct prefix ids', 'a repeated id');
    return { prefixIds };
  },
};

/**
 * Parse and validate one control message. Known fields are checked strictly (type, range,
 * length); fields this version does not know are dropped, so a newer minor version may add
 * optional ones. Throws `ProtocolError`: 'protocol_error' for bad JSON, an oversized text or
 * a missing/wrong-typed field (the message names it), 'unknown_kind' for an unknown `kind`.
 * The result is a fresh object holding only known fields; optional fields that are absent
 * are absent (never present-but-undefined).
 */
export function parseControlMessage(text: string): ControlMessage {
  if (text.length > MAX_CONTROL_MESSAGE_CHARS) {
    const problem = `control message is ${text.length} characters, over the ${MAX_CONTROL_MESSAGE_CHARS} limit`;
    throw new ProtocolError('protocol_error', problem);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ProtocolError('protocol_error', `control message is not valid JSON: ${(error as Error).message}`);
  }
  if (!isPlainObject(json)) throw new ProtocolError('protocol_error', 'control message must be a JSON object');
  const kind = json.kind;
  if (typeof kind !== 'string') throw new ProtocolError('protocol_error', "control message field 'kind' must be a string");
  if (!Object.hasOwn(readers, kind)) {
    throw new ProtocolError('unknown_kind', `unknown control message kind '${kind.slice(0, 64)}'`);
  }
  const r = new FieldReader(kind, json);
  const id = r.optional('id', (f) => r.string(f, { maxChars: 128 }));
  const fields = readers[kind as ControlKind](r);
  const message: Record<string, unknown> = { kind };
  if (id !== undefined) message.id = id;
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) message[key] = value;
  return message as unknown as ControlMessage;
}

/**
 * JSON text for `message`. Validates by parsing the text back, so a message the other side
 * would refuse (NaN, a bad range, an unknown kind) throws `ProtocolError` here, at the sender.
 */
export function serializeControlMessage(message: ControlMessage): string {
  const text = JSON.stringify(message);
  parseControlMessage(text);
  return text;
}
