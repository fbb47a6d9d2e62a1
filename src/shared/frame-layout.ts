/**
 * The binary activation frame layout (protocol major 1): constants only, shared by the codec
 * in `src/core/frames` and anyone who needs to size or sniff a frame. All multi-byte fields
 * are little-endian. The header is 48 bytes, a multiple of 8, so a payload in a buffer that
 * starts 8-aligned is itself 8-aligned (the codec still copies; see `decodeFrame`).
 *
 * ```
 * byte    0       1       2       3       4       5       6       7
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *    0 |  'M'  |  'S'  |  'H'  |  'N'  | major | minor | kind  | dtype |
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *    8 |       request id (u32)        |  session id: 16 raw UUID bytes ...
 *      +-------------------------------+                               +
 *   16 |                                                               |
 *      +                               +-------------------------------+
 *   24 |     ... session id            |     start position (u32)      |
 *      +-------------------------------+-------------------------------+
 *   32 |       token count (u32)       |       hidden size (u32)       |
 *      +---------------+---------------+-------------------------------+
 *   40 | layer start   | layer end     |     payload length (u32)      |
 *      | (u16)         | (u16, excl.)  |  = tokens × hidden × itemSize |
 *      +---------------+---------------+-------------------------------+
 *   48 | payload: [1, tokens, hidden] row-major, fp32 or fp16 bits (LE) ...
 *      +---------------------------------------------------------------+
 * ```
 *
 * - kind: 1 prefill, 2 decode, 3 result; 6 chain (protocol 3.2: run, copy the output to the
 *   head, forward it to the next hop the head named for the session; a start position of 0 is a
 *   prefill), 7 copy (a hop's output, sent to the head: its own range, the chain frame's request
 *   id and start). Kinds 4 and 5 are batched frames (batch-frame-codec.ts); kinds 8
 *   `chain-lanes` and 9 `copy-lanes` (protocol 3.4) carry several sessions' kind 6 / kind 7
 *   frames as lanes of one frame (lane-frame-codec.ts). Errors are not
 *   frames: a hop that fails answers with an `error` control message carrying the frame's
 *   request id.
 * - dtype: 1 fp32 (4 bytes/value), 2 fp16 (2 bytes/value, IEEE half bits).
 * - session id: the UUID's 16 bytes in the order its hex digits are written
 *   (`1b4e28ba-…` → 0x1b 0x4e 0x28 0xba …), decoded to canonical lowercase.
 * - layer start/end: the hop's half-open range `[start, end)`, so a peer holding several
 *   ranges knows which shard a frame is for; a result frame echoes the range that made it.
 * - start position: position of the first token; a result echoes its request's.
 */
import { MAX_LAYER_INDEX, PROTOCOL_VERSION, type WireDtype } from './protocol.ts';

/** The 4 magic bytes, ASCII 'MSHN'. */
export const FRAME_MAGIC = [0x4d, 0x53, 0x48, 0x4e] as const;

/** Byte offset of each header field; the payload starts at `FRAME_HEADER_BYTES`. */
export const FRAME_OFFSETS = {
  magic: 0, // 4 bytes
  versionMajor: 4, // u8
  versionMinor: 5, // u8
  kind: 6, // u8
  dtype: 7, // u8
  requestId: 8, // u32
  sessionId: 12, // 16 bytes
  startPosition: 28, // u32
  tokenCount: 32, // u32
  hiddenSize: 36, // u32
  layerStart: 40, // u16
  layerEnd: 42, // u16
  payloadLength: 44, // u32
} as const;

export const FRAME_SESSION_ID_BYTES = 16;
export const FRAME_HEADER_BYTES = 48;
/** Bytes needed to read magic and version, checked before the rest of the header. */
export const FRAME_PREFIX_BYTES = 6;

/** The version written into every frame header. */
export const FRAME_VERSION = PROTOCOL_VERSION;

/** What a frame asks for or answers. */
export type FrameKind = 'prefill' | 'decode' | 'result' | 'chain' | 'copy';

export const FRAME_KIND_CODES = { prefill: 1, decode: 2, result: 3, chain: 6, copy: 7 } as const satisfies Record<FrameKind, number>;
/** Lane frames (protocol 3.4; core/frames/lane-frame-codec.ts): several sessions' kind 6 / kind 7 frames as one. */
export const LANE_FRAME_KIND_CODES = { 'chain-lanes': 8, 'copy-lanes': 9 } as const;
export const FRAME_DTYPE_CODES = { fp32: 1, fp16: 2 } as const satisfies Record<WireDtype, number>;
/** Bytes per activation value. */
export const FRAME_ITEM_BYTES = { fp32: 4, fp16: 2 } as const satisfies Record<WireDtype, number>;

/** Largest hidden size a frame may carry (a sanity cap against hostile headers). */
export const MAX_FRAME_HIDDEN_SIZE = 65536;
/** Most token positions one frame may carry. */
export const MAX_FRAME_TOKENS = 1 << 20;
/** Largest layer index and exclusive end (u16 fields). */
export const MAX_FRAME_LAYER = MAX_LAYER_INDEX;
/** Largest u32 field value: request id, start position. */
export const MAX_U32 = 0xffffffff;

/** The kind for a header code, or undefined for a code this version does not know. */
export function frameKindFromCode(code: number): FrameKind | undefined {
  return (Object.keys(FRAME_KIND_CODES) as FrameKind[]).find((kind) => FRAME_KIND_CODES[kind] === code);
}

/** The dtype for a header code, or undefined for a code this version does not know. */
export function frameDtypeFromCode(code: number): WireDtype | undefined {
  return (Object.keys(FRAME_DTYPE_CODES) as WireDtype[]).find((dtype) => FRAME_DTYPE_CODES[dtype] === code);
}

/** The request id in a frame's header (u32), or undefined when `bytes` is too short to hold one. */
export function frameRequestId(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < FRAME_OFFSETS.requestId + 4) return undefined;
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(FRAME_OFFSETS.requestId, true);
}

/** Write `requestId` (u32) into a frame's header in place: links stamp the frames they carry. */
export function stampFrameRequestId(bytes: Uint8Array, requestId: number): void {
  new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setUint32(FRAME_OFFSETS.requestId, requestId, true);
}
