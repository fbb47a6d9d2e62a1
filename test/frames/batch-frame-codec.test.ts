/**
 * The batched frame codec: its header and entry table pinned as exact bytes, round trips,
 * and the refusals of a malformed batch (every length checked before it is read).
 */
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { describe, expect, it } from 'vitest';
import {
  BATCH_ENTRY_BYTES,
  BATCH_ENTRY_OFFSETS,
  BATCH_FRAME_KIND_CODES,
  decodeBatchFrame,
  encodeBatchFrame,
  isBatchFrame,
  MAX_BATCH_ENTRIES,
  type BatchFrame,
} from '../../src/core/frames/batch-frame-codec.ts';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';

const A = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const B = '00000000-0000-4000-8000-000000000002';

function batch(): BatchFrame {
  return {
    kind: 'batch',
    requestId: 7,
    range: { start: 2, end: 5 },
    dtype: 'fp32',
    hiddenSize: 2,
    entries: [
      { sessionId: A, startPosition: 10, activations: { dtype: 'fp32', data: Float32Array.of(1, 2), tokens: 1, hiddenSize: 2 } },
      { sessionId: B, startPosition: 3, activations: { dtype: 'fp32', data: Float32Array.of(3, 4, 5, 6), tokens: 2, hiddenSize: 2 } },
    ],
  };
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');

function refuses(bytes: Uint8Array, pattern: RegExp, code = 'bad_frame'): void {
  let error: unknown;
  try {
    decodeBatchFrame(bytes);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ProtocolError);
  expect((error as ProtocolError).code).toBe(code);
  expect((error as Error).message).toMatch(pattern);
}

describe('batched frame layout', () => {
  it('pins the kind codes and entry offsets', () => {
    expect(BATCH_FRAME_KIND_CODES).toEqual({ batch: 4, 'batch-result': 5 });
    expect(BATCH_ENTRY_BYTES).toBe(32);
    expect(BATCH_ENTRY_OFFSETS).toEqual({ sessionId: 0, startPosition: 16, tokenCount: 20, status: 24, bodyLength: 28 });
    expect(MAX_BATCH_ENTRIES).toBe(64);
  });

  it('exact bytes of a one-entry fp16 batch', () => {
    const bytes = encodeBatchFrame({
      kind: 'batch',
      requestId: 0x04030201,
      range: { start: 0x0102, end: 0x0304 },
      dtype: 'fp16',
      hiddenSize: 2,
      entries: [{ sessionId: A, startPosition: 0x0a0b0c0d, activations: { dtype: 'fp16', data: Uint16Array.of(0x3c00, 0xc000), tokens: 1, hiddenSize: 2 } }],
    });
    expect(hex(bytes)).toBe(
      [
        '4d 53 48 4e', // 'MSHN'
        '03 05', // version 3.5
        '04', // kind batch
        '02', // dtype fp16
        '01 02 03 04', // request id LE
        '00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00', // no header session id
        '01 00 00 00', // entry count
        '01 00 00 00', // total tokens
        '02 00 00 00', // hidden size
        '02 01', // layer start u16 LE
        '04 03', // layer end u16 LE
        '24 00 00 00', // payload length: 32 table + 4 body
        '1b 4e 28 ba 2f a1 41 d2 88 3f 00 16 d3 cc a4 27', // entry session id
        '0d 0c 0b 0a', // entry start position
        '01 00 00 00', // entry token count
        '00 00 00 00', // status ok, padding
        '04 00 00 00', // body length
        '00 3c 00 c0', // body: 1.0, -2.0 as fp16
      ].join(' '),
    );
    expect(isBatchFrame(bytes)).toBe(true);
    // A single-frame decoder refuses it as a kind it does not know, never misreads it.
    expect(() => decodeFrame(bytes)).toThrow(/unknown frame kind code 4/);
  });

  it('round-trips entries of different token counts, and results with per-entry errors', () => {
    const decoded = decodeBatchFrame(encodeBatchFrame(batch()));
    expect(decoded.entries.map((e) => [e.sessionId, e.startPosition, e.error ? -1 : Array.from(e.activations.data)])).toEqual([
      [A, 10, [1, 2]],
      [B, 3, [3, 4, 5, 6]],
    ]);
    const result = encodeBatchFrame({
      ...batch(),
      kind: 'batch-result',
      entries: [batch().entries[0], { sessionId: B, startPosition: 3, tokens: 2, error: { code: 'cache_miss', message: 'no KV here' } }],
    });
    const back = decodeBatchFrame(result);
    expect(back.kind).toBe('batch-result');
    expect(back.entries[1]).toEqual({ sessionId: B, startPosition: 3, tokens: 2, error: { code: 'cache_miss', message: 'no KV here' } });
  });
});

describe('decodeBatchFrame refuses malformed batches', () => {
  const good = () => encodeBatchFrame(batch());
  const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

  it('short, truncated or padded buffers', () => {
    refuses(good().subarray(0, 20), /shorter than the 48-byte header/);
    refuses(good().subarray(0, good().byteLength - 1), /payload length/, 'wrong_payload_size');
    const padded = new Uint8Array(good().byteLength + 4);
    padded.set(good());
    refuses(padded, /payload length/, 'wrong_payload_size');
  });

  it('an entry count out of range or a table past the buffer', () => {
    const zero = good();
    view(zero).setUint32(28, 0, true);
    refuses(zero, /entry count 0/);
    const many = good();
    view(many).setUint32(28, MAX_BATCH_ENTRIES + 1, true);
    refuses(many, /entry count 65/);
  });

  it('a header session id, a duplicate session, an error entry in a request, bad padding', () => {
    const id = good();
    id[12] = 1;
    refuses(id, /header session id/);
    const dup = good();
    dup.set(dup.subarray(48, 64), 48 + 32);
    refuses(dup, /appears twice/);
    const status = good();
    status[48 + 24] = 1;
    refuses(status, /status 1 is not allowed in a batch frame/);
    const pad = good();
    pad[48 + 25] = 9;
    refuses(pad, /padding/);
  });

  it('body lengths that disagree with the token counts or the header total', () => {
    const body = good();
    view(body).setUint32(48 + 28, 12, true);
    refuses(body, /entry 0 body of 12 bytes/, 'wrong_payload_size');
    const total = good();
    view(total).setUint32(32, 4, true);
    refuses(total, /entries hold 3 tokens, the header says 4/);
    const huge = good();
    view(huge).setUint32(48 + 32 + 28, 0xffffffff, true);
    refuses(huge, /runs past the frame/, 'wrong_payload_size');
  });

  it('an error body that is not JSON or names no known code', () => {
    const result = (message: string, code = 'cache_miss') =>
      encodeBatchFrame({ ...batch(), kind: 'batch-result', entries: [{ sessionId: A, startPosition: 1, tokens: 1, error: { code: code as 'cache_miss', message } }] });
    const bytes = result('xx');
    bytes[bytes.byteLength - 3] = 0xff; // inside the JSON
    refuses(bytes, /not JSON/);
    const unknown = result('x');
    const text = new TextDecoder().decode(unknown.subarray(80));
    unknown.set(new TextEncoder().encode(text.replace('cache_miss', 'cache_mis!')), 80);
    refuses(unknown, /no known code/);
  });

  it('a different protocol major', () => {
    const bytes = good();
    bytes[4] = 2;
    refuses(bytes, new RegExp(`protocol 2\\.${PROTOCOL_VERSION.minor}`), 'version_mismatch');
  });

  it('random mutations either decode and re-encode identically or throw ProtocolError', () => {
    const base = good();
    let x = 1;
    for (let i = 0; i < 2000; i++) {
      const bytes = base.slice();
      for (let j = 0; j < 3; j++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        bytes[x % bytes.byteLength] = x & 0xff;
      }
      try {
        const decoded = decodeBatchFrame(bytes);
        expect(hex(encodeBatchFrame(decoded))).toBe(hex(bytes));
      } catch (error) {
        expect(error).toBeInstanceOf(ProtocolError);
      }
    }
  });
});
