/**
 * Activation frame codec: `encodeFrame` / `decodeFrame`, pure and runtime-independent.
 * The layout (constants, field notes) lives in `src/shared/frame-layout.ts`; in short,
 * little-endian, a 48-byte header then the payload:
 *
 * ```
 * byte    0       1       2       3       4       5       6       7
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *    0 |  'M'  |  'S'  |  'H'  |  'N'  | major | minor | kind  | dtype |
 *    8 |       request id (u32)        |  session id (16 raw UUID bytes)
 *   16 |                     ... session id ...                        |
 *   24 |     ... session id            |     start position (u32)      |
 *   32 |       token count (u32)       |       hidden size (u32)       |
 *   40 |  start (u16)  |   end (u16)   |     payload length (u32)      |
 *   48 | payload: [1, tokens, hidden] fp32 or fp16 bits ...            |
 *      +---------------------------------------------------------------+
 * ```
 *
 * decodeFrame never trusts the sender: it checks every length and field against the buffer
 * and the caps before reading values, and refuses with a `ProtocolError` naming the problem.
 */
import {
  FRAME_DTYPE_CODES,
  FRAME_HEADER_BYTES,
  FRAME_ITEM_BYTES,
  FRAME_KIND_CODES,
  FRAME_MAGIC,
  FRAME_OFFSETS as AT,
  FRAME_PREFIX_BYTES,
  MAX_FRAME_HIDDEN_SIZE,
  MAX_FRAME_LAYER,
  MAX_FRAME_TOKENS,
  MAX_U32,
  frameDtypeFromCode,
  frameKindFromCode,
  type FrameKind,
} from '../../shared/frame-layout.ts';
import { ProtocolError, type ProtocolErrorContext } from '../../shared/protocol-error.ts';
import { PROTOCOL_VERSION, type LayerRange, type WireDtype } from '../../shared/protocol.ts';
import type { Activations } from '../model/activations.ts';
import { readSessionId, writeSessionId } from './session-id.ts';

/** One hop request (prefill, decode) or its answer (result), as the engine sees it. */
export interface ActivationFrame {
  readonly kind: FrameKind;
  /** Pairs a result (or an `error` control message) with its request. u32. */
  readonly requestId: number;
  /** Canonical lowercase UUID. */
  readonly sessionId: string;
  /** Position of the first token in `activations`. u32. */
  readonly startPosition: number;
  /** The hop's layer range [start, end); a result echoes its request's. */
  readonly range: LayerRange;
  readonly activations: Activations; // [1, tokens, hiddenSize]
}

// Typed arrays use the host's byte order and the wire is little-endian: on a big-endian
// host (none that run meshnet today) the payload is converted value by value instead.
const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

type FrameErrorCode = 'bad_frame' | 'wrong_payload_size' | 'unknown_kind';

function fail(code: FrameErrorCode, problem: string, context?: ProtocolErrorContext): never {
  throw new ProtocolError(code, `activation frame: ${problem}`, context);
}

function checkInteger(name: string, value: number, min: number, max: number, context?: ProtocolErrorContext): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    fail('bad_frame', `${name} ${value} is not an integer in [${min}, ${max}]`, context);
  }
}

/** The checks encode and decode share, so an encoded frame always decodes. */
function checkShape(tokens: number, hiddenSize: number, range: LayerRange, context?: ProtocolErrorContext): void {
  checkInteger('token count', tokens, 1, MAX_FRAME_TOKENS, context);
  checkInteger('hidden size', hiddenSize, 1, MAX_FRAME_HIDDEN_SIZE, context);
  checkInteger('layer start', range.start, 0, MAX_FRAME_LAYER, context);
  checkInteger('layer end', range.end, 0, MAX_FRAME_LAYER, context);
  if (range.end <= range.start) {
    fail('bad_frame', `layer range [${range.start}, ${range.end}) is empty or reversed`, context);
  }
}

/**
 * Encode `frame` into a fresh buffer (header + payload, payload 8-byte aligned at offset 48).
 * Throws `ProtocolError` for a frame the receiver would refuse: unknown kind or dtype, data
 * whose array type or length does not match dtype × tokens × hiddenSize, values out of their
 * field's range, or a session id that is not a lowercase UUID.
 */
export function encodeFrame(frame: ActivationFrame): Uint8Array {
  const { kind, requestId, sessionId, startPosition, range, activations: a } = frame;
  const context = { sessionId, requestId };
  if (!Object.hasOwn(FRAME_KIND_CODES, kind)) fail('unknown_kind', `unknown frame kind '${kind}'`, context);
  if (!Object.hasOwn(FRAME_DTYPE_CODES, a.dtype)) fail('bad_frame', `unknown dtype '${String(a.dtype)}'`, context);
  const expectedArray = a.dtype === 'fp32' ? Float32Array : Uint16Array;
  if (!(a.data instanceof expectedArray)) fail('bad_frame', `${a.dtype} data must be a ${expectedArray.name}`, context);
  checkInteger('request id', requestId, 0, MAX_U32, context);
  checkInteger('start position', startPosition, 0, MAX_U32, context);
  checkShape(a.tokens, a.hiddenSize, range, context);
  if (a.data.length !== a.tokens * a.hiddenSize) {
    fail('wrong_payload_size', `data holds ${a.data.length} values, expected ${a.tokens} × ${a.hiddenSize}`, context);
  }

  const out = new Uint8Array(FRAME_HEADER_BYTES + a.data.byteLength);
  const view = new DataView(out.buffer);
  out.set(FRAME_MAGIC, AT.magic);
  view.setUint8(AT.versionMajor, PROTOCOL_VERSION.major);
  view.setUint8(AT.versionMinor, PROTOCOL_VERSION.minor);
  view.setUint8(AT.kind, FRAME_KIND_CODES[kind]);
  view.setUint8(AT.dtype, FRAME_DTYPE_CODES[a.dtype]);
  view.setUint32(AT.requestId, requestId, true);
  writeSessionId(sessionId, out, AT.sessionId);
  view.setUint32(AT.startPosition, startPosition, true);
  view.setUint32(AT.tokenCount, a.tokens, true);
  view.setUint32(AT.hiddenSize, a.hiddenSize, true);
  view.setUint16(AT.layerStart, range.start, true);
  view.setUint16(AT.layerEnd, range.end, true);
  view.setUint32(AT.payloadLength, a.data.byteLength, true);
  if (HOST_LITTLE_ENDIAN) {
    out.set(new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength), FRAME_HEADER_BYTES);
  } else {
    for (let i = 0; i < a.data.length; i++) {
      const at = FRAME_HEADER_BYTES + i * FRAME_ITEM_BYTES[a.dtype];
      if (a.data instanceof Float32Array) view.setFloat32(at, a.data[i], true);
      else view.setUint16(at, a.data[i], true);
    }
  }
  return out;
}

/**
 * Decode and validate one frame. Checks, in order: the 6-byte prefix (magic, then protocol
 * major → 'version_mismatch'; any minor of the same major is accepted), the full header
 * length, kind ('unknown_kind'), dtype, token count (1..2^20), hidden size (1..65536), layer
 * range (end > start), then payload length against tokens × hidden × itemSize and against the
 * bytes actually present ('wrong_payload_size'). Everything else is 'bad_frame'. Errors
 * raised after the header is read carry its session and request id.
 *
 * The payload is copied into a fresh, aligned typed array: `bytes` may sit at any offset of
 * a socket buffer, and the result must not alias memory the caller will reuse.
 * Values are not checked; see `assertFiniteActivations`.
 */
export function decodeFrame(bytes: Uint8Array): ActivationFrame {
  if (bytes.byteLength < FRAME_PREFIX_BYTES) {
    fail('bad_frame', `${bytes.byteLength} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  }
  if (FRAME_MAGIC.some((byte, i) => bytes[AT.magic + i] !== byte)) fail('bad_frame', "magic is not 'MSHN'");
  const major = bytes[AT.versionMajor];
  const minor = bytes[AT.versionMinor];
  if (major !== PROTOCOL_VERSION.major) {
    const ours = `${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`;
    const problem = `activation frame speaks protocol ${major}.${minor}, this side ${ours}`;
    throw new ProtocolError('version_mismatch', problem);
  }
  if (bytes.byteLength < FRAME_HEADER_BYTES) {
    fail('bad_frame', `${bytes.byteLength} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  }

  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const requestId = view.getUint32(AT.requestId, true);
  const sessionId = readSessionId(bytes, AT.sessionId);
  const context = { sessionId, requestId };
  const kind = frameKindFromCode(bytes[AT.kind]);
  if (kind === undefined) fail('unknown_kind', `unknown frame kind code ${bytes[AT.kind]}`, context);
  const dtype: WireDtype | undefined = frameDtypeFromCode(bytes[AT.dtype]);
  if (dtype === undefined) fail('bad_frame', `unknown dtype code ${bytes[AT.dtype]}`, context);
  const startPosition = view.getUint32(AT.startPosition, true);
  const tokens = view.getUint32(AT.tokenCount, true);
  const hiddenSize = view.getUint32(AT.hiddenSize, true);
  const range = { start: view.getUint16(AT.layerStart, true), end: view.getUint16(AT.layerEnd, true) };
  checkShape(tokens, hiddenSize, range, context);

  const payloadLength = view.getUint32(AT.payloadLength, true);
  const expected = tokens * hiddenSize * FRAME_ITEM_BYTES[dtype]; // ≤ 2^38: exact in a double
  if (payloadLength !== expected) {
    const product = `${tokens} × ${hiddenSize} × ${FRAME_ITEM_BYTES[dtype]}`;
    fail('wrong_payload_size', `payload length ${payloadLength} ≠ tokens × hidden × itemSize = ${product}`, context);
  }
  const present = bytes.byteLength - FRAME_HEADER_BYTES;
  if (payloadLength !== present) {
    fail('wrong_payload_size', `payload length ${payloadLength} but ${present} bytes follow the header`, context);
  }

  const count = tokens * hiddenSize;
  let data: Float32Array | Uint16Array;
  if (HOST_LITTLE_ENDIAN) {
    // A fresh ArrayBuffer at offset 0 (aligned). Not `bytes.slice()`: on a Node Buffer that is a view.
    const copy = new Uint8Array(bytes.byteLength - FRAME_HEADER_BYTES);
    copy.set(bytes.subarray(FRAME_HEADER_BYTES));
    data = dtype === 'fp32' ? new Float32Array(copy.buffer, 0, count) : new Uint16Array(copy.buffer, 0, count);
  } else if (dtype === 'fp32') {
    data = Float32Array.from({ length: count }, (_, i) => view.getFloat32(FRAME_HEADER_BYTES + 4 * i, true));
  } else {
    data = Uint16Array.from({ length: count }, (_, i) => view.getUint16(FRAME_HEADER_BYTES + 2 * i, true));
  }
  const activations: Activations = { dtype, data, tokens, hiddenSize };
  return { kind, requestId, sessionId, startPosition, range, activations };
}
