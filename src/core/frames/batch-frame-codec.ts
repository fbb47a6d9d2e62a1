/**
 * Batched activation frames (protocol 3): the steps of several sessions bound for one layer
 * range of one peer, travelling as one frame and run as one onnxruntime run; the answer
 * carries each entry's result or its own error, so one entry's failure (a cache miss, a
 * released session) leaves the others' results whole. Pure and runtime-independent.
 *
 * ```
 * byte    0       1       2       3       4       5       6       7
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *    0 |  'M'  |  'S'  |  'H'  |  'N'  | major | minor | kind  | dtype |   kind 4 batch, 5 batch result
 *    8 |       request id (u32)        |  16 zero bytes (no one session) ...
 *   16 |                                                               |
 *   24 |                               |     entry count (u32)         |   1 .. MAX_BATCH_ENTRIES
 *   32 |  total tokens (u32)           |       hidden size (u32)       |   Σ entry token counts
 *   40 |  start (u16)  |   end (u16)   |     payload length (u32)      |   = 32 × entries + Σ body lengths
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *   48 | entry 0: session id (16 raw UUID bytes) ...                   |
 *   56 |                                                               |
 *   64 |     start position (u32)      |      token count (u32)        |
 *   72 |status | 0     | 0     | 0     |      body length (u32)        |   status 0 ok, 1 error (results only)
 *      +-------+-------+-------+-------+-------+-------+-------+-------+
 *   80 | entry 1 … (32 bytes each)                                     |
 *      | bodies, in entry order: ok → [tokens, hidden] fp32/fp16 bits   |
 *      |   (token count × hidden × itemSize bytes); error → UTF-8 JSON  |
 *      |   {"code","message"} (≤ 4,096 bytes, token count as asked)     |
 *      +---------------------------------------------------------------+
 * ```
 *
 * Each entry carries its own token count, so a multi-token (speculative) step can share a
 * batch with one-token decode steps; a peer runs entries of equal token count together.
 * Like `decodeFrame`, `decodeBatchFrame` checks every count and length against the buffer
 * and the caps before reading, and refuses with a `ProtocolError`.
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
} from '../../shared/frame-layout.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { isErrorCode, PROTOCOL_VERSION, type ErrorCode, type LayerRange, type WireDtype } from '../../shared/protocol.ts';
import type { Activations } from '../model/activations.ts';
import { readSessionId, writeSessionId } from './session-id.ts';
import { writeTableFrameHeader } from './table-frame-header.ts';

/** Header kind codes of batched frames (after the single-frame kinds 1–3). */
export const BATCH_FRAME_KIND_CODES = { batch: 4, 'batch-result': 5 } as const;
export type BatchFrameKind = keyof typeof BATCH_FRAME_KIND_CODES;
/** Bytes of one entry of the table after the header. */
export const BATCH_ENTRY_BYTES = 32;
/** Most entries one batched frame may carry. */
export const MAX_BATCH_ENTRIES = 64;
/** Longest error body of a result entry. */
export const MAX_BATCH_ERROR_BYTES = 4096;
/** Byte offsets inside one entry. */
export const BATCH_ENTRY_OFFSETS = { sessionId: 0, startPosition: 16, tokenCount: 20, status: 24, bodyLength: 28 } as const;

export type BatchEntry =
  | { readonly sessionId: string; readonly startPosition: number; readonly activations: Activations; readonly error?: undefined }
  | { readonly sessionId: string; readonly startPosition: number; readonly tokens: number; readonly error: { readonly code: ErrorCode; readonly message: string } };

export interface BatchFrame {
  readonly kind: BatchFrameKind;
  readonly requestId: number;
  readonly range: LayerRange;
  readonly dtype: WireDtype;
  readonly hiddenSize: number;
  readonly entries: readonly BatchEntry[];
}

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function fail(code: 'bad_frame' | 'wrong_payload_size', problem: string, requestId?: number): never {
  throw new ProtocolError(code, `batched frame: ${problem}`, requestId === undefined ? {} : { requestId });
}

function checkInteger(name: string, value: number, min: number, max: number, requestId?: number): void {
  if (!Number.isInteger(value) || value < min || value > max) fail('bad_frame', `${name} ${value} is not an integer in [${min}, ${max}]`, requestId);
}

/** True when `bytes` starts like a batched frame (magic and kind 4 or 5); the rest is for the decoder to check. */
export function isBatchFrame(bytes: Uint8Array): boolean {
  if (bytes.byteLength <= AT.kind || FRAME_MAGIC.some((b, i) => bytes[i] !== b)) return false;
  return bytes[AT.kind] === BATCH_FRAME_KIND_CODES.batch || bytes[AT.kind] === BATCH_FRAME_KIND_CODES['batch-result'];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

function entryTokens(e: BatchEntry): number {
  return e.error ? e.tokens : e.activations.tokens;
}

export function encodeBatchFrame(frame: BatchFrame): Uint8Array {
  const { kind, requestId, range, dtype, hiddenSize, entries } = frame;
  if (!Object.hasOwn(BATCH_FRAME_KIND_CODES, kind)) fail('bad_frame', `unknown batched frame kind '${kind}'`);
  if (!Object.hasOwn(FRAME_DTYPE_CODES, dtype)) fail('bad_frame', `unknown dtype '${String(dtype)}'`);
  checkInteger('request id', requestId, 0, MAX_U32);
  checkInteger('entry count', entries.length, 1, MAX_BATCH_ENTRIES);
  checkInteger('hidden size', hiddenSize, 1, MAX_FRAME_HIDDEN_SIZE);
  checkInteger('layer start', range.start, 0, MAX_FRAME_LAYER);
  checkInteger('layer end', range.end, range.start + 1, MAX_FRAME_LAYER);
  const bodies = entries.map((e) => {
    checkInteger('entry start position', e.startPosition, 0, MAX_U32);
    checkInteger('entry token count', entryTokens(e), 1, MAX_FRAME_TOKENS);
    if (e.error) {
      if (kind !== 'batch-result') fail('bad_frame', 'only a batch result carries errors');
      const body = encoder.encode(JSON.stringify({ code: e.error.code, message: e.error.message.slice(0, 1024) }));
      if (body.byteLength > MAX_BATCH_ERROR_BYTES) fail('bad_frame', 'an entry error is too long');
      return body;
    }
    const a = e.activations;
    const expectedArray = a.dtype === 'fp32' ? Float32Array : Uint16Array;
    if (a.dtype !== dtype || !(a.data instanceof expectedArray) || a.hiddenSize !== hiddenSize || a.data.length !== a.tokens * hiddenSize) {
      fail('wrong_payload_size', `entry ${e.sessionId}: activations are not ${a.tokens} × ${hiddenSize} ${dtype}`);
    }
    return new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  });
  const tableBytes = entries.length * BATCH_ENTRY_BYTES;
  const payload = tableBytes + bodies.reduce((n, b) => n + b.byteLength, 0);
  const totalTokens = entries.reduce((n, e) => n + entryTokens(e), 0);
  checkInteger('total tokens', totalTokens, 1, MAX_FRAME_TOKENS);
  checkInteger('payload length', payload, 0, MAX_U32);
  if (!HOST_LITTLE_ENDIAN) fail('bad_frame', 'batched frames need a little-endian host');

  const out = new Uint8Array(FRAME_HEADER_BYTES + payload);
  const view = new DataView(out.buffer);
  writeTableFrameHeader(out, view, { kindCode: BATCH_FRAME_KIND_CODES[kind], dtype, requestId: requestId, count: entries.length, totalTokens, hiddenSize, range, payload });
  let body = FRAME_HEADER_BYTES + tableBytes;
  entries.forEach((e, i) => {
    const at = FRAME_HEADER_BYTES + i * BATCH_ENTRY_BYTES;
    writeSessionId(e.sessionId, out, at + BATCH_ENTRY_OFFSETS.sessionId);
    view.setUint32(at + BATCH_ENTRY_OFFSETS.startPosition, e.startPosition, true);
    view.setUint32(at + BATCH_ENTRY_OFFSETS.tokenCount, entryTokens(e), true);
    view.setUint8(at + BATCH_ENTRY_OFFSETS.status, e.error ? 1 : 0);
    view.setUint32(at + BATCH_ENTRY_OFFSETS.bodyLength, bodies[i].byteLength, true);
    out.set(bodies[i], body);
    body += bodies[i].byteLength;
  });
  return out;
}

export function decodeBatchFrame(bytes: Uint8Array): BatchFrame {
  if (bytes.byteLength < FRAME_HEADER_BYTES) fail('bad_frame', `${bytes.byteLength} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  if (FRAME_MAGIC.some((b, i) => bytes[AT.magic + i] !== b)) fail('bad_frame', "magic is not 'MSHN'");
  if (bytes[AT.versionMajor] !== PROTOCOL_VERSION.major) {
    throw new ProtocolError('version_mismatch', `batched frame speaks protocol ${bytes[AT.versionMajor]}.${bytes[AT.versionMinor]}, this side ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const requestId = view.getUint32(AT.requestId, true);
  const code = bytes[AT.kind];
  const kind = (Object.keys(BATCH_FRAME_KIND_CODES) as BatchFrameKind[]).find((k) => BATCH_FRAME_KIND_CODES[k] === code);
  if (kind === undefined) fail('bad_frame', `kind code ${code} is not a batched frame`, requestId);
  const dtype = frameDtypeFromCode(bytes[AT.dtype]);
  if (dtype === undefined) fail('bad_frame', `unknown dtype code ${bytes[AT.dtype]}`, requestId);
  if (bytes.subarray(AT.sessionId, AT.sessionId + 16).some((b) => b !== 0)) fail('bad_frame', 'the header session id of a batched frame must be zero', requestId);
  const count = view.getUint32(AT.startPosition, true);
  checkInteger('entry count', count, 1, MAX_BATCH_ENTRIES, requestId);
  const totalTokens = view.getUint32(AT.tokenCount, true);
  checkInteger('total tokens', totalTokens, 1, MAX_FRAME_TOKENS, requestId);
  const hiddenSize = view.getUint32(AT.hiddenSize, true);
  checkInteger('hidden size', hiddenSize, 1, MAX_FRAME_HIDDEN_SIZE, requestId);
  const range = { start: view.getUint16(AT.layerStart, true), end: view.getUint16(AT.layerEnd, true) };
  if (range.end <= range.start) fail('bad_frame', `layer range [${range.start}, ${range.end}) is empty or reversed`, requestId);
  const payload = view.getUint32(AT.payloadLength, true);
  if (payload !== bytes.byteLength - FRAME_HEADER_BYTES) fail('wrong_payload_size', `payload length ${payload} but ${bytes.byteLength - FRAME_HEADER_BYTES} bytes follow the header`, requestId);
  const tableEnd = FRAME_HEADER_BYTES + count * BATCH_ENTRY_BYTES;
  if (tableEnd > bytes.byteLength) fail('wrong_payload_size', `${count} entries need ${count * BATCH_ENTRY_BYTES} table bytes`, requestId);

  const entries: BatchEntry[] = [];
  const seen = new Set<string>();
  let body = tableEnd;
  let tokenSum = 0;
  for (let i = 0; i < count; i++) {
    const at = FRAME_HEADER_BYTES + i * BATCH_ENTRY_BYTES;
    const sessionId = readSessionId(bytes, at + BATCH_ENTRY_OFFSETS.sessionId);
    if (seen.has(sessionId)) fail('bad_frame', `session ${sessionId} appears twice`, requestId);
    seen.add(sessionId);
    const startPosition = view.getUint32(at + BATCH_ENTRY_OFFSETS.startPosition, true);
    const tokens = view.getUint32(at + BATCH_ENTRY_OFFSETS.tokenCount, true);
    checkInteger('entry token count', tokens, 1, MAX_FRAME_TOKENS, requestId);
    tokenSum += tokens;
    const status = bytes[at + BATCH_ENTRY_OFFSETS.status];
    if (status > 1 || (status === 1 && kind === 'batch')) fail('bad_frame', `entry status ${status} is not allowed in a ${kind} frame`, requestId);
    if (bytes[at + 25] !== 0 || bytes[at + 26] !== 0 || bytes[at + 27] !== 0) fail('bad_frame', 'entry padding bytes must be zero', requestId);
    const length = view.getUint32(at + BATCH_ENTRY_OFFSETS.bodyLength, true);
    if (body + length > bytes.byteLength) fail('wrong_payload_size', `entry ${i} body of ${length} bytes runs past the frame`, requestId);
    if (status === 1) {
      if (length > MAX_BATCH_ERROR_BYTES) fail('bad_frame', `entry ${i} error body is ${length} bytes`, requestId);
      let parsed: unknown;
      try {
        parsed = JSON.parse(decoder.decode(bytes.subarray(body, body + length)));
      } catch {
        fail('bad_frame', `entry ${i} error body is not JSON`, requestId);
      }
      const e = parsed as { code?: unknown; message?: unknown };
      if (!isErrorCode(e?.code) || typeof e.message !== 'string') fail('bad_frame', `entry ${i} error body has no known code and message`, requestId);
      entries.push({ sessionId, startPosition, tokens, error: { code: e.code, message: e.message } });
    } else {
      const expected = tokens * hiddenSize * FRAME_ITEM_BYTES[dtype];
      if (length !== expected) fail('wrong_payload_size', `entry ${i} body of ${length} bytes ≠ ${tokens} × ${hiddenSize} × ${FRAME_ITEM_BYTES[dtype]}`, requestId);
      const copy = new Uint8Array(length);
      copy.set(bytes.subarray(body, body + length));
      const values = tokens * hiddenSize;
      const data = dtype === 'fp32' ? new Float32Array(copy.buffer, 0, values) : new Uint16Array(copy.buffer, 0, values);
      entries.push({ sessionId, startPosition, activations: { dtype, data, tokens, hiddenSize } });
    }
    body += length;
  }
  if (tokenSum !== totalTokens) fail('bad_frame', `entries hold ${tokenSum} tokens, the header says ${totalTokens}`, requestId);
  if (body !== bytes.byteLength) fail('wrong_payload_size', `${bytes.byteLength - body} bytes follow the last entry body`, requestId);
  return { kind, requestId, range, dtype, hiddenSize, entries };
}
