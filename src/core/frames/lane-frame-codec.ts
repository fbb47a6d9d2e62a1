/**
 * Lane frames (protocol 3.4): several sessions' chained steps, for one layer range, travelling
 * as one frame along a chain — kind 8 `chain-lanes` (hop → next hop: run each lane, then
 * forward and copy as kind 6 would) and kind 9 `copy-lanes` (hop → head: each lane is one
 * session's copy, as a kind 7 frame would carry it). Unlike a batch frame (kinds 4/5), every
 * lane carries its own request id: each session numbers its chained steps itself. There is no
 * error lane: a hop reports a lane it refused or failed with an `error` control message
 * (id `chain`, that lane's session and request id), as for a lone chain frame.
 *
 * ```
 * byte    0       1       2       3       4       5       6       7
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *    0 |  'M'  |  'S'  |  'H'  |  'N'  | major | minor | kind  | dtype |   kind 8 chain-lanes, 9 copy-lanes
 *    8 |       request id: 0           |  16 zero bytes (no one session) ...
 *   16 |                                                               |
 *   24 |                               |      lane count (u32)         |   1 .. MAX_LANES
 *   32 |  total tokens (u32)           |       hidden size (u32)       |   Σ lane token counts
 *   40 |  start (u16)  |   end (u16)   |     payload length (u32)      |   = 32 × lanes + Σ body lengths
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *   48 | lane 0: session id (16 raw UUID bytes) ...                    |
 *   56 |                                                               |
 *   64 |       request id (u32)        |     start position (u32)      |
 *   72 |       token count (u32)       |       body length (u32)       |   = tokens × hidden × itemSize
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *   80 | lane 1 … (32 bytes each), then the bodies in lane order:      |
 *      |   [tokens, hidden] fp32 / fp16 bits (LE)                      |
 *      +---------------------------------------------------------------+
 * ```
 *
 * `decodeLaneFrame` checks every count and length against the buffer and the caps before
 * reading, refuses a session that appears in two lanes, and throws a `ProtocolError`; values
 * are not checked (see `assertFiniteActivations`). `splitLaneFrame` turns a lane frame into
 * the single frames (kind 6 or 7) its lanes stand for, so the paths after it are a lone
 * frame's.
 */
import {
  FRAME_DTYPE_CODES,
  FRAME_HEADER_BYTES,
  FRAME_ITEM_BYTES,
  FRAME_MAGIC,
  FRAME_OFFSETS as AT,
  MAX_FRAME_HIDDEN_SIZE,
  MAX_FRAME_LAYER,
  MAX_FRAME_TOKENS,
  MAX_U32,
  frameDtypeFromCode,
  LANE_FRAME_KIND_CODES,
} from '../../shared/frame-layout.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { PROTOCOL_VERSION, type LayerRange, type WireDtype } from '../../shared/protocol.ts';
import type { Activations } from '../model/activations.ts';
import { encodeFrame } from './frame-codec.ts';
import { readSessionId, writeSessionId } from './session-id.ts';
import { writeTableFrameHeader } from './table-frame-header.ts';

export { LANE_FRAME_KIND_CODES };
export type LaneFrameKind = keyof typeof LANE_FRAME_KIND_CODES;
export const LANE_BYTES = 32;
/** Most lanes one frame may carry (as many as a batched frame has entries). */
export const MAX_LANES = 64;
export const LANE_OFFSETS = { sessionId: 0, requestId: 16, startPosition: 20, tokenCount: 24, bodyLength: 28 } as const;

export interface Lane {
  readonly sessionId: string;
  readonly requestId: number;
  readonly startPosition: number;
  readonly activations: Activations; // [1, tokens, hidden]
}

export interface LaneFrame {
  readonly kind: LaneFrameKind;
  readonly range: LayerRange;
  readonly dtype: WireDtype;
  readonly hiddenSize: number;
  readonly lanes: readonly Lane[];
}

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function fail(code: 'bad_frame' | 'wrong_payload_size', problem: string): never {
  throw new ProtocolError(code, `lane frame: ${problem}`);
}

function checkInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) fail('bad_frame', `${name} ${value} is not an integer in [${min}, ${max}]`);
}

/** The lane kind of `bytes` when it starts like a lane frame (magic and kind 8 or 9); the rest is for the decoder to check. */
export function laneFrameKind(bytes: Uint8Array): LaneFrameKind | undefined {
  if (bytes.byteLength <= AT.kind || FRAME_MAGIC.some((b, i) => bytes[i] !== b)) return undefined;
  if (bytes[AT.kind] === LANE_FRAME_KIND_CODES['chain-lanes']) return 'chain-lanes';
  if (bytes[AT.kind] === LANE_FRAME_KIND_CODES['copy-lanes']) return 'copy-lanes';
  return undefined;
}

export function encodeLaneFrame(frame: LaneFrame): Uint8Array {
  const { kind, range, dtype, hiddenSize, lanes } = frame;
  if (!Object.hasOwn(LANE_FRAME_KIND_CODES, kind)) fail('bad_frame', `unknown lane frame kind '${kind}'`);
  if (!Object.hasOwn(FRAME_DTYPE_CODES, dtype)) fail('bad_frame', `unknown dtype '${String(dtype)}'`);
  checkInteger('lane count', lanes.length, 1, MAX_LANES);
  checkInteger('hidden size', hiddenSize, 1, MAX_FRAME_HIDDEN_SIZE);
  checkInteger('layer start', range.start, 0, MAX_FRAME_LAYER);
  checkInteger('layer end', range.end, range.start + 1, MAX_FRAME_LAYER);
  if (new Set(lanes.map((l) => l.sessionId)).size !== lanes.length) fail('bad_frame', 'a session appears in two lanes');
  const bodies = lanes.map((l) => {
    checkInteger('lane request id', l.requestId, 0, MAX_U32);
    checkInteger('lane start position', l.startPosition, 0, MAX_U32);
    const a = l.activations;
    checkInteger('lane token count', a.tokens, 1, MAX_FRAME_TOKENS);
    const expectedArray = dtype === 'fp32' ? Float32Array : Uint16Array;
    if (a.dtype !== dtype || !(a.data instanceof expectedArray) || a.hiddenSize !== hiddenSize || a.data.length !== a.tokens * hiddenSize) {
      fail('wrong_payload_size', `lane ${l.sessionId}: activations are not ${a.tokens} × ${hiddenSize} ${dtype}`);
    }
    return new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  });
  const tableBytes = lanes.length * LANE_BYTES;
  const payload = tableBytes + bodies.reduce((n, b) => n + b.byteLength, 0);
  const totalTokens = lanes.reduce((n, l) => n + l.activations.tokens, 0);
  checkInteger('total tokens', totalTokens, 1, MAX_FRAME_TOKENS);
  checkInteger('payload length', payload, 0, MAX_U32);
  if (!HOST_LITTLE_ENDIAN) fail('bad_frame', 'lane frames need a little-endian host');

  const out = new Uint8Array(FRAME_HEADER_BYTES + payload);
  const view = new DataView(out.buffer);
  writeTableFrameHeader(out, view, { kindCode: LANE_FRAME_KIND_CODES[kind], dtype, requestId: 0, count: lanes.length, totalTokens, hiddenSize, range, payload });
  let body = FRAME_HEADER_BYTES + tableBytes;
  lanes.forEach((l, i) => {
    const at = FRAME_HEADER_BYTES + i * LANE_BYTES;
    writeSessionId(l.sessionId, out, at + LANE_OFFSETS.sessionId);
    view.setUint32(at + LANE_OFFSETS.requestId, l.requestId, true);
    view.setUint32(at + LANE_OFFSETS.startPosition, l.startPosition, true);
    view.setUint32(at + LANE_OFFSETS.tokenCount, l.activations.tokens, true);
    view.setUint32(at + LANE_OFFSETS.bodyLength, bodies[i].byteLength, true);
    out.set(bodies[i], body);
    body += bodies[i].byteLength;
  });
  return out;
}

export function decodeLaneFrame(bytes: Uint8Array): LaneFrame {
  if (bytes.byteLength < FRAME_HEADER_BYTES) fail('bad_frame', `${bytes.byteLength} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  if (FRAME_MAGIC.some((b, i) => bytes[AT.magic + i] !== b)) fail('bad_frame', "magic is not 'MSHN'");
  if (bytes[AT.versionMajor] !== PROTOCOL_VERSION.major) {
    throw new ProtocolError('version_mismatch', `lane frame speaks protocol ${bytes[AT.versionMajor]}.${bytes[AT.versionMinor]}, this side ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`);
  }
  const kind = laneFrameKind(bytes);
  if (kind === undefined) fail('bad_frame', `kind code ${bytes[AT.kind]} is not a lane frame`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dtype = frameDtypeFromCode(bytes[AT.dtype]);
  if (dtype === undefined) fail('bad_frame', `unknown dtype code ${bytes[AT.dtype]}`);
  if (view.getUint32(AT.requestId, true) !== 0) fail('bad_frame', 'the header request id of a lane frame must be zero (each lane carries its own)');
  if (bytes.subarray(AT.sessionId, AT.sessionId + 16).some((b) => b !== 0)) fail('bad_frame', 'the header session id of a lane frame must be zero');
  const count = view.getUint32(AT.startPosition, true);
  checkInteger('lane count', count, 1, MAX_LANES);
  const totalTokens = view.getUint32(AT.tokenCount, true);
  checkInteger('total tokens', totalTokens, 1, MAX_FRAME_TOKENS);
  const hiddenSize = view.getUint32(AT.hiddenSize, true);
  checkInteger('hidden size', hiddenSize, 1, MAX_FRAME_HIDDEN_SIZE);
  const range = { start: view.getUint16(AT.layerStart, true), end: view.getUint16(AT.layerEnd, true) };
  if (range.end <= range.start) fail('bad_frame', `layer range [${range.start}, ${range.end}) is empty or reversed`);
  const payload = view.getUint32(AT.payloadLength, true);
  if (payload !== bytes.byteLength - FRAME_HEADER_BYTES) fail('wrong_payload_size', `payload length ${payload} but ${bytes.byteLength - FRAME_HEADER_BYTES} bytes follow the header`);
  const tableEnd = FRAME_HEADER_BYTES + count * LANE_BYTES;
  if (tableEnd > bytes.byteLength) fail('wrong_payload_size', `${count} lanes need ${count * LANE_BYTES} table bytes`);

  const lanes: Lane[] = [];
  const seen = new Set<string>();
  let body = tableEnd;
  let tokenSum = 0;
  for (let i = 0; i < count; i++) {
    const at = FRAME_HEADER_BYTES + i * LANE_BYTES;
    const sessionId = readSessionId(bytes, at + LANE_OFFSETS.sessionId);
    if (seen.has(sessionId)) fail('bad_frame', `session ${sessionId} appears in two lanes`);
    seen.add(sessionId);
    const requestId = view.getUint32(at + LANE_OFFSETS.requestId, true);
    const startPosition = view.getUint32(at + LANE_OFFSETS.startPosition, true);
    const tokens = view.getUint32(at + LANE_OFFSETS.tokenCount, true);
    checkInteger(`lane ${i} token count`, tokens, 1, MAX_FRAME_TOKENS);
    tokenSum += tokens;
    const length = view.getUint32(at + LANE_OFFSETS.bodyLength, true);
    const expected = tokens * hiddenSize * FRAME_ITEM_BYTES[dtype];
    if (length !== expected) fail('wrong_payload_size', `lane ${i} body of ${length} bytes ≠ ${tokens} × ${hiddenSize} × ${FRAME_ITEM_BYTES[dtype]}`);
    if (body + length > bytes.byteLength) fail('wrong_payload_size', `lane ${i} body of ${length} bytes runs past the frame`);
    const copy = new Uint8Array(length);
    copy.set(bytes.subarray(body, body + length));
    const values = tokens * hiddenSize;
    const data = dtype === 'fp32' ? new Float32Array(copy.buffer, 0, values) : new Uint16Array(copy.buffer, 0, values);
    lanes.push({ sessionId, requestId, startPosition, activations: { dtype, data, tokens, hiddenSize } });
    body += length;
  }
  if (tokenSum !== totalTokens) fail('bad_frame', `lanes hold ${tokenSum} tokens, the header says ${totalTokens}`);
  if (body !== bytes.byteLength) fail('wrong_payload_size', `${bytes.byteLength - body} bytes follow the last lane body`);
  return { kind, range, dtype, hiddenSize, lanes };
}

/** The single frames a lane frame's lanes stand for: kind 6 `chain` for chain-lanes, kind 7 `copy` for copy-lanes. */
export function splitLaneFrame(frame: LaneFrame): { readonly lane: Lane; readonly bytes: Uint8Array }[] {
  const kind = frame.kind === 'chain-lanes' ? 'chain' : 'copy';
  return frame.lanes.map((lane) => ({ lane, bytes: encodeFrame({ kind, requestId: lane.requestId, sessionId: lane.sessionId, startPosition: lane.startPosition, range: frame.range, activations: lane.activations }) }));
}

/**
 * The session and request id of each lane whose table entry can be read, even when the frame
 * as a whole cannot be decoded (so the hop can report on the lanes a bad frame carried).
 * At most MAX_LANES; never throws.
 */
export function peekLanes(bytes: Uint8Array): { sessionId: string; requestId: number }[] {
  if (bytes.byteLength < FRAME_HEADER_BYTES) return [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = Math.min(view.getUint32(AT.startPosition, true), MAX_LANES, Math.floor((bytes.byteLength - FRAME_HEADER_BYTES) / LANE_BYTES));
  const out: { sessionId: string; requestId: number }[] = [];
  for (let i = 0; i < count; i++) {
    const at = FRAME_HEADER_BYTES + i * LANE_BYTES;
    try {
      out.push({ sessionId: readSessionId(bytes, at + LANE_OFFSETS.sessionId), requestId: view.getUint32(at + LANE_OFFSETS.requestId, true) });
    } catch {
      // Not a session id: nothing to report on for this lane.
    }
  }
  return out;
}
