/**
 * Session ids on the wire: a canonical lowercase UUID string in memory, its 16 raw bytes in
 * a frame header (in the order the hex digits are written).
 */
import { FRAME_SESSION_ID_BYTES } from '../../shared/frame-layout.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { isSessionId } from '../../shared/protocol.ts';

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));
/** Byte indexes after which the canonical form has a hyphen (8-4-4-4-12 hex digits). */
const HYPHEN_AFTER = new Set([3, 5, 7, 9]);

/**
 * Write `sessionId`'s 16 bytes into `out` at `offset`. Throws `ProtocolError('bad_frame')`
 * unless it is a canonical lowercase UUID (the only form that decodes back to itself).
 */
export function writeSessionId(sessionId: string, out: Uint8Array, offset: number): void {
  out.set(sessionIdBytes(sessionId), offset);
}

// Every frame of a session carries the same id: keep the parsed bytes of recent ones.
const parsed = new Map<string, Uint8Array>();
const PARSED_CAP = 256;

function sessionIdBytes(sessionId: string): Uint8Array {
  const cached = parsed.get(sessionId);
  if (cached) return cached;
  if (!isSessionId(sessionId)) {
    throw new ProtocolError('bad_frame', `session id '${String(sessionId).slice(0, 64)}' is not a lowercase UUID`);
  }
  const hex = sessionId.replaceAll('-', '');
  const bytes = new Uint8Array(FRAME_SESSION_ID_BYTES);
  for (let i = 0; i < FRAME_SESSION_ID_BYTES; i++) bytes[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  if (parsed.size >= PARSED_CAP) parsed.delete(parsed.keys().next().value!);
  parsed.set(sessionId, bytes);
  return bytes;
}

// Every frame of a session carries the same 16 bytes: recent strings, found by a hash of them.
const read = new Map<number, { readonly bytes: Uint8Array; readonly id: string }>();
const READ_CAP = 256;

/** Read 16 bytes at `offset` as a canonical lowercase UUID string. Any 16 bytes are valid. */
export function readSessionId(bytes: Uint8Array, offset: number): string {
  let hash = 0x811c9dc5; // FNV-1a over the 16 bytes
  for (let i = 0; i < FRAME_SESSION_ID_BYTES; i++) hash = Math.imul(hash ^ bytes[offset + i], 0x01000193);
  const cached = read.get(hash);
  if (cached && sameBytes(cached.bytes, bytes, offset)) return cached.id;
  let id = '';
  for (let i = 0; i < FRAME_SESSION_ID_BYTES; i++) {
    id += HEX[bytes[offset + i]];
    if (HYPHEN_AFTER.has(i)) id += '-';
  }
  if (read.size >= READ_CAP) read.delete(read.keys().next().value!);
  // A copy, not `slice` (a view on a Node Buffer): socket buffers are reused.
  read.set(hash, { bytes: new Uint8Array(bytes.subarray(offset, offset + FRAME_SESSION_ID_BYTES)), id });
  return id;
}

function sameBytes(cached: Uint8Array, bytes: Uint8Array, offset: number): boolean {
  for (let i = 0; i < FRAME_SESSION_ID_BYTES; i++) if (cached[i] !== bytes[offset + i]) return false;
  return true;
}
