/**
 * Protocol constants shared by the head, Node peers and browser peers: the protocol version,
 * the error codes that cross the wire, and the layer-range and session-id shapes both
 * control messages and activation frames carry. Pure data; imports nothing.
 */

/**
 * The wire protocol version, sent in `hello`/`welcome` and in every activation frame header.
 * Same `major` means compatible: a newer `minor` may add optional control-message fields or
 * new error codes, never change the frame header. A different `major` is refused with
 * `version_mismatch`.
 */
export const PROTOCOL_VERSION = { major: 3, minor: 5 } as const;

/**
 * The first minor version (of major 3) whose peers keep the position rule (3.1): a frame
 * whose start position is below the hop's KV length truncates the KV to that position, then
 * runs; one above it is a cache miss; a batched frame's entries of several positions run one
 * at a time. A head sends speculative steps only to peers that announced at least this.
 */
export const POSITION_RULE_MINOR = 1;

/**
 * The first minor version (of major 3) whose peers run chained routes (3.2): `chain` /
 * `chained` control messages, chain (6) and copy (7) frames, peer-to-peer links. A head
 * chains only through peers that announced at least this; a 3.1 peer refuses a chain frame
 * (`unknown_kind`) and a `chain` message (`unknown_kind`), so it can only ever be sent star frames.
 */
export const CHAIN_MINOR = 2;

/**
 * The first minor version (of major 3) whose peers keep prefix entries as a tree (3.3):
 * `release.keepPrefix.parent` names an entry the kept sequence shares its first positions
 * with, and the peer keeps only the rest. A head names parents only to peers that announced
 * at least this; an older peer drops the field and keeps a whole copy.
 */
export const PREFIX_TREE_MINOR = 3;

/**
 * The first minor version (of major 3) whose peers read lane frames (3.4): kind 8
 * `chain-lanes` and kind 9 `copy-lanes`, several sessions' chained steps as one frame per
 * link (core/frames/lane-frame-codec.ts), and `chain.lanes`. A head sets `lanes` only on the
 * hops of a chained segment whose peers all announced at least this; a 3.3 or older peer refuses both
 * kinds (`unknown_kind`), so it is only ever sent kinds 6 and 7.
 */
export const CHAIN_LANES_MINOR = 4;

/**
 * The first minor version (of major 3) whose peers say in their hello how many head
 * connections they made before (3.5): `hello.rejoin.connections`. The head shows the peer as
 * rejoined even when it never saw it (a restarted head). A 3.4 peer sends no field: a first join.
 */
export const REJOIN_MINOR = 5;

/**
 * The first minor version (of major 3) whose peers honour `forget` (3.5): head → peer, drop
 * the named prefix entries the head's registry no longer holds. A head sends it only to peers
 * that announced at least this; an older peer keeps such entries until its own budget evicts them.
 */
export const PREFIX_FORGET_MINOR = 5;

/*
 * Protocol history (version → what changed):
 * - 1.0: hello/welcome, assign/ready, release/released, error, stats, ping/pong; 48-byte
 *   activation frames. A direct link was dialled at `listenUrl?token=<join token>`.
 * - 2.0: direct links carry no secret: the head dials the host the peer's relay socket came
 *   from (or one `--allow-peer-hosts` names) at the announced port and path, and proves it
 *   holds the join token in a `challenge` → `authenticate` → `authenticated` handshake
 *   (HMAC-SHA256 over both nonces and the peer id), in which the peer proves it too. Error
 *   code `peer_id_taken`: a hello under an id whose holder still answers a ping; the id
 *   `head` is reserved. Major, because a 1.0 head and a 2.0 peer cannot form a direct link.
 * - 2.1: weight formats (#12): `hello.weightFormats` lists the formats a peer can serve;
 *   `assign.weights` says which one (format, block size, accuracy level) and `ready.weights`
 *   echoes what was loaded; a peer refuses an assignment it cannot honour with
 *   `unsupported_weights`. The head assigns a format only to peers that announced it, so a
 *   2.0 peer (which would drop `assign.weights`) only ever gets the float format equal to
 *   the activation dtype, which is what 2.0 served.
 * - 2.2 (issue 14): `unload` (head → peer: drop a layer range no plan uses any more, its
 *   executor and any KV left on it; the weights stop counting against the peer's memory
 *   budget) answered by `unloaded`. A 2.0 or 2.1 peer refuses `unload` as an unknown kind,
 *   and the head then keeps counting that range as loaded.
 * - 3.0 (issue 17): batched activation frames, kinds 4 (batch) and 5 (batch-result): an
 *   entry table (session id, start position, token count, status, body length per entry;
 *   core/frames/batch-frame-codec.ts) after the common header; `release.keepPrefix` keeps a
 *   session's KV as a prefix entry, `fork`/`forked` start a session from one; stats carry
 *   batch and prefix figures. Major, because a 2.x peer cannot run a batched frame, and would
 *   drop `keepPrefix` and free the KV a head then expects to fork from.
 * - 3.1: the position rule (speculative decoding). A frame whose start position is below the
 *   hop's KV length means "drop the positions from there, then run": the rejected drafts of a
 *   speculative step leave the KV exactly so (both KV modes truncate exactly; a runtime that
 *   could not would empty the KV and answer `cache_miss`, and the head rebuilds the hop). A
 *   frame above the KV length is a `cache_miss`, as before. Frames may carry several
 *   positions after position 0 (a speculative step: the last token plus k drafts; a chunk of
 *   a pipelined prefill), also as entries of a batched frame, which keep the rule each and
 *   run one at a time (onnxruntime's GroupQueryAttention takes batch 1 for several positions
 *   with past context: a 3.0 peer failed two such entries batched together). No header
 *   change. A head speculates only through peers that announced 3.1 (`POSITION_RULE_MINOR`);
 *   pipelined prefill needs no rollback and runs through any 3.x.
 * - 3.2 (issue 25): chained routes, activations peer to peer. `chain` (head → peer, on the
 *   head's own link; answered `chained`) names, for one session and one range of the peer,
 *   who may send it chain frames (`from`: the head, or the previous hop's peer id) and where
 *   its output goes next (`to`: the next hop's peer id, range and, for a direct link, the URL
 *   the head knows it by; absent: back to the head). A peer dials only a `to.url` the head
 *   named in a `chain` message, never an address from a frame. Frame kind 6 (`chain`): the
 *   same 48-byte header as a prefill/decode, "run, then forward": the peer runs it, sends the
 *   head a copy (kind 7, `copy`: its output, same request id, its own range) and — unless it is
 *   the segment's last hop — forwards its output as a chain frame for the next range over the
 *   peer-to-peer link. The head pairs copies by request id and range: it records every hop's
 *   input as before (history and repair unchanged); the last hop's copy is the step's answer.
 *   A hop that refuses or fails a chain frame reports an `error` (session and request id) to
 *   the head. Peer-to-peer links are authenticated like the head's: `authenticate.from` names
 *   the dialling peer, and its proof (label `hop`) covers both ids and both nonces. A chain
 *   frame is accepted only from the sender `chain.from` names for its session and range.
 *   Minor, because the header is unchanged and a 3.1 peer refuses both new kinds: a head
 *   chains only through peers that announced 3.2 (`CHAIN_MINOR`).
 * - 3.3 (issue 27, each prefix once): `release.keepPrefix.parent` (`{ prefixId, length }`,
 *   optional; control.ts, beside the codec): the kept sequence's first `parent.length`
 *   positions are those of prefix entry `parent.prefixId`, so the peer keeps only positions
 *   [parent.length, keepPrefix.length) and a `fork` joins the parent's positions (and its
 *   ancestors') with them (core/runtime/prefix-store.ts): N answers to one system prompt hold
 *   the prompt once per hop. Checked at the edge: a parent equal to the entry or sharing no
 *   fewer positions than it is a `protocol_error` (decoder); a parent the peer does not hold
 *   is a `cache_miss`, a shared length beyond the parent's, or a parent that descends from the
 *   entry, a `protocol_error` (the store); a refused keep still frees the session's KV. A peer
 *   evicts an entry with its descendants, leaves first. Minor, because the field is optional:
 *   a head names parents only to peers that announced 3.3 (`PREFIX_TREE_MINOR`); a 3.2 peer
 *   drops it and keeps a whole copy, which forks the same.
 * - 3.4 (issue 25): lane frames, one frame per link for several sessions along a chain. Kind 8
 *   `chain-lanes` (hop → next hop) and kind 9 `copy-lanes` (hop → head): the 48-byte header of a
 *   batch frame (request id 0, session id zero, lane count where a start position would be),
 *   then a table of 32-byte lanes (session id, request id, start position, token count, body
 *   length) and the bodies (core/frames/lane-frame-codec.ts). Each lane is exactly the kind 6 /
 *   kind 7 frame it stands for: admitted by the `chain` entry of its own session and range
 *   (a lane for a session the sender was not named for is refused and reported on its own; the
 *   other lanes run), run in its session's order, reported on its own (`error`, id `chain`,
 *   its session and request id) when it fails, and checked by the head as a lone copy. A frame
 *   that does not decode (counts, lengths, a session in two lanes) is refused as a whole; its
 *   readable lanes that the sender was named for are reported. `chain.lanes: true` (head → peer)
 *   lets a hop send that session's outputs as lanes: chain-lanes to `to`, copy-lanes to the
 *   head — the outputs of one batched run leave as one frame per link. The head sets it only on
 *   a chained segment whose peers all announced 3.4 (`CHAIN_LANES_MINOR`); elsewhere kinds 6/7
 *   flow as in 3.2, and a 3.3 or older peer refuses kinds 8/9 (`unknown_kind`). Minor: header unchanged.
 * - 3.5 (issue 27, peers outliving the head): `hello.rejoin` (`{ connections }`, an integer
 *   1 … 2^31 - 1: head connections this peer process or tab made before this one; absent on a
 *   first join) — the head records it and the dashboard shows the peer rejoined (count) even
 *   on a head that never saw it (`REJOIN_MINOR`). And `forget` (head → peer, answered by
 *   `stats`): `{ prefixIds }`, 1 … 256 distinct prefix ids the head's prefix registry evicted
 *   or forgot; the peer drops each it holds with its descendants (the head forgets those with
 *   it), ignores unknown ids. Sent only to peers that announced 3.5 (`PREFIX_FORGET_MINOR`); a 3.4
 *   peer would refuse the kind (`unknown_kind`), so it is never sent one. Minor: optional field, new kind.
 */

export interface ProtocolVersion {
  readonly major: number;
  readonly minor: number;
}

/** True when a peer speaking `other` can talk to this build (same major version). */
export function isCompatibleVersion(other: ProtocolVersion): boolean {
  return other.major === PROTOCOL_VERSION.major;
}

/**
 * Every error code that crosses the wire, with what it means. The keys are the codes;
 * `ErrorCode` is their union. Errors travel as data (`{ kind: 'error', code, message }`) and
 * are rebuilt into a `ProtocolError` on arrival; the HTTP edge maps codes once.
 */
export const ERROR_CODES = {
  protocol_error: 'a control message is malformed, has a wrong-typed field, or arrived out of order',
  bad_frame: 'an activation frame header is malformed (length, magic, dtype, shape, layer range)',
  unknown_session: 'the session id is not known to the receiver',
  cache_miss: 'the hop no longer holds the KV the step needs; replay its inputs as a prefill',
  wrong_payload_size: 'the activation payload length does not match the header or the buffer',
  version_mismatch: 'the other side speaks a different protocol major version',
  nan_activations: 'activations hold NaN or infinite values',
  unauthorized: 'the join token is missing or wrong',
  not_ready: 'the peer has not finished loading the requested layer range',
  internal: 'an unexpected failure on the other side; the message says what',
  cancelled: 'the request was cancelled before it finished',
  route_unavailable: 'no peer (or head) can serve a layer range the route needs',
  unknown_kind: 'a control message or frame kind the receiver does not know',
  peer_id_taken: 'another connected peer holds this peer id (and still answers a ping); the id head is reserved',
  unsupported_weights: 'the peer cannot serve the weight format it was assigned (or the artifact holds another one)',
} as const satisfies Record<string, string>;

/** A wire error code: one of the keys of `ERROR_CODES`. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Type guard for values read off the wire. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/**
 * Half-open layer range on the wire: layers `start, …, end - 1`; `0 ≤ start < end ≤ 65535`
 * (the frame header stores both as u16). Structurally the same as core's `LayerRange`.
 */
export interface LayerRange {
  readonly start: number;
  readonly end: number; // exclusive
}

/** Largest layer index (and exclusive end) a frame header can carry. */
export const MAX_LAYER_INDEX = 0xffff;

/**
 * Session ids are UUID strings in canonical lowercase form (what `crypto.randomUUID()`
 * returns), e.g. `1b4e28ba-2fa1-41d2-883f-0016d3cca427`. Frames carry the 16 raw bytes, so
 * only this form round-trips exactly; uppercase is refused rather than silently changed.
 */
export const SESSION_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isSessionId(value: unknown): value is string {
  return typeof value === 'string' && SESSION_ID_PATTERN.test(value);
}

/**
 * The HTTP header a peer sends its join token in when it fetches its shard artifact from the
 * head (`GET /artifacts/…`); `?token=` works too.
 */
export const ARTIFACT_TOKEN_HEADER = 'x-meshnet-token';

/** Activation element types on the wire (same names as core's `ActivationDtype`). */
export type WireDtype = 'fp32' | 'fp16';

/** Weight formats on the wire (same names as core's `WeightFormat`). */
export type WireWeightFormat = 'fp32' | 'fp16' | 'q8' | 'q4';
export const WIRE_WEIGHT_FORMATS: readonly WireWeightFormat[] = ['fp32', 'fp16', 'q8', 'q4'];

/**
 * A weight format with its block size (a power of two ≥ 16 for q8/q4, 0 for fp32/fp16) and
 * MatMulNBits accuracy level (0 or 4 for q8/q4, 0 for fp32/fp16). Same shape as core's `WeightSpec`.
 */
export interface WireWeights {
  readonly format: WireWeightFormat;
  readonly blockSize: number;
  readonly accuracyLevel: 0 | 4;
}
