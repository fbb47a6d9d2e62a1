import { describe, expect, it } from 'vitest';
import { assertFiniteActivations, decodeFrame, encodeFrame, type ActivationFrame } from '../../src/core/frames/index.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import {
  FRAME_DTYPE_CODES,
  FRAME_HEADER_BYTES,
  FRAME_KIND_CODES,
  FRAME_OFFSETS,
  type FrameKind,
} from '../../src/shared/frame-layout.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';
import { PROTOCOL_VERSION, type ErrorCode, type WireDtype } from '../../src/shared/protocol.ts';

const SESSION = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';

function activations(dtype: WireDtype, tokens: number, hiddenSize: number): Activations {
  const n = tokens * hiddenSize;
  const data =
    dtype === 'fp32'
      ? Float32Array.from({ length: n }, (_, i) => (i % 7) - 3.25)
      : Uint16Array.from({ length: n }, (_, i) => (i * 2654435761) & 0x7bff); // finite halves
  return { dtype, data, tokens, hiddenSize };
}

function frame(kind: FrameKind = 'prefill', dtype: WireDtype = 'fp32', tokens = 3, hiddenSize = 4): ActivationFrame {
  return { kind, requestId: 42, sessionId: SESSION, startPosition: 7, range: { start: 2, end: 5 }, activations: activations(dtype, tokens, hiddenSize) };
}

function refusal(run: () => unknown): ProtocolError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error('expected a ProtocolError, nothing was thrown');
}

/** A valid encoded frame with one header field overwritten. */
function withField(edit: (view: DataView, bytes: Uint8Array) => void, base = encodeFrame(frame())): Uint8Array {
  const bytes = base.slice();
  edit(new DataView(bytes.buffer), bytes);
  return bytes;
}

describe('encodeFrame / decodeFrame round trip', () => {
  const kinds: FrameKind[] = ['prefill', 'decode', 'result', 'chain', 'copy'];
  const dtypes: WireDtype[] = ['fp32', 'fp16'];
  for (const kind of kinds) {
    for (const dtype of dtypes) {
      it(`${kind} ${dtype}`, () => {
        const tokens = kind === 'decode' ? 1 : 5;
        const original = frame(kind, dtype, tokens, 6);
        const bytes = encodeFrame(original);
        expect(bytes.byteLength).toBe(FRAME_HEADER_BYTES + tokens * 6 * (dtype === 'fp32' ? 4 : 2));
        expect(decodeFrame(bytes)).toEqual(original);
      });
    }
  }

  it('decodes from an unaligned view into a fresh aligned array that does not alias the input', () => {
    const bytes = encodeFrame(frame('result', 'fp32', 2, 3));
    const host = new Uint8Array(bytes.byteLength + 3);
    host.set(bytes, 3);
    const view = host.subarray(3);
    const decoded = decodeFrame(view);
    expect(decoded.activations.data).toBeInstanceOf(Float32Array);
    expect(decoded.activations.data.byteOffset % 4).toBe(0);
    expect(Array.from(decoded.activations.data)).toEqual(Array.from(frame('result', 'fp32', 2, 3).activations.data));
    host.fill(0);
    expect(decoded.activations.data[1]).toBe(-2.25);
  });

  it('encodes from a typed array that is a view at an offset', () => {
    const backing = new Float32Array(20).map((_, i) => i);
    const data = backing.subarray(5, 11);
    const original: ActivationFrame = { ...frame(), activations: { dtype: 'fp32', data, tokens: 2, hiddenSize: 3 } };
    expect(Array.from(decodeFrame(encodeFrame(original)).activations.data)).toEqual([5, 6, 7, 8, 9, 10]);
  });

  it('accepts a newer minor version of the same major', () => {
    const bytes = withField((v) => v.setUint8(FRAME_OFFSETS.versionMinor, 9));
    expect(decodeFrame(bytes).requestId).toBe(42);
  });
});

describe('frame header layout (pinned: a change here is a protocol change)', () => {
  it('header constants', () => {
    expect(FRAME_HEADER_BYTES).toBe(48);
    expect(FRAME_HEADER_BYTES % 8).toBe(0);
    expect(FRAME_KIND_CODES).toEqual({ prefill: 1, decode: 2, result: 3, chain: 6, copy: 7 });
    expect(FRAME_DTYPE_CODES).toEqual({ fp32: 1, fp16: 2 });
    expect(FRAME_OFFSETS).toEqual({
      magic: 0, versionMajor: 4, versionMinor: 5, kind: 6, dtype: 7, requestId: 8, sessionId: 12,
      startPosition: 28, tokenCount: 32, hiddenSize: 36, layerStart: 40, layerEnd: 42, payloadLength: 44,
    });
  });

  it('exact bytes of an fp16 decode frame', () => {
    const bytes = encodeFrame({
      kind: 'decode',
      requestId: 0x04030201,
      sessionId: SESSION,
      startPosition: 0x0a0b0c0d,
      range: { start: 0x0102, end: 0x0304 },
      activations: { dtype: 'fp16', data: Uint16Array.of(0x3c00, 0xc000), tokens: 1, hiddenSize: 2 },
    });
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');
    expect(hex).toBe(
      [
        '4d 53 48 4e', // 'MSHN'
        '03 05', // version 3.5
        '02', // kind decode
        '02', // dtype fp16
        '01 02 03 04', // request id LE
        '1b 4e 28 ba 2f a1 41 d2 88 3f 00 16 d3 cc a4 27', // session id, as written
        '0d 0c 0b 0a', // start position LE
        '01 00 00 00', // token count
        '02 00 00 00', // hidden size
        '02 01', // layer start u16 LE
        '04 03', // layer end u16 LE
        '04 00 00 00', // payload length
        '00 3c 00 c0', // payload: 1.0, -2.0 as fp16 LE
      ].join(' '),
    );
  });

  it('fp32 payload is little-endian float32 at offset 48', () => {
    const bytes = encodeFrame({ ...frame(), activations: { dtype: 'fp32', data: Float32Array.of(1), tokens: 1, hiddenSize: 1 } });
    expect(bytes[FRAME_OFFSETS.dtype]).toBe(1);
    expect(Array.from(bytes.subarray(48))).toEqual([0x00, 0x00, 0x80, 0x3f]);
  });
});

describe('decodeFrame refuses malformed frames', () => {
  const valid = encodeFrame(frame());
  const at = FRAME_OFFSETS;
  const cases: [string, Uint8Array, ErrorCode][] = [
    ['empty buffer', new Uint8Array(0), 'bad_frame'],
    ['shorter than the version prefix', valid.slice(0, 5), 'bad_frame'],
    ['shorter than the header', valid.slice(0, 47), 'bad_frame'],
    ['bad magic', withField((_, b) => (b[3] = 0x58)), 'bad_frame'],
    ['different major version', withField((v) => v.setUint8(at.versionMajor, 4)), 'version_mismatch'],
    ['the previous major version', withField((v) => v.setUint8(at.versionMajor, 2)), 'version_mismatch'],
    ['different major version, short header', withField((v) => v.setUint8(at.versionMajor, 4)).slice(0, 6), 'version_mismatch'],
    ['major version 0', withField((v) => v.setUint8(at.versionMajor, 0)), 'version_mismatch'],
    ['kind 0', withField((v) => v.setUint8(at.kind, 0)), 'unknown_kind'],
    ['kind 4', withField((v) => v.setUint8(at.kind, 4)), 'unknown_kind'],
    ['kind 255', withField((v) => v.setUint8(at.kind, 255)), 'unknown_kind'],
    ['dtype 0', withField((v) => v.setUint8(at.dtype, 0)), 'bad_frame'],
    ['dtype 3', withField((v) => v.setUint8(at.dtype, 3)), 'bad_frame'],
    ['zero tokens', withField((v) => v.setUint32(at.tokenCount, 0, true)), 'bad_frame'],
    ['zero hidden size', withField((v) => v.setUint32(at.hiddenSize, 0, true)), 'bad_frame'],
    ['tokens over the cap', withField((v) => v.setUint32(at.tokenCount, (1 << 20) + 1, true)), 'bad_frame'],
    ['hidden size over the cap', withField((v) => v.setUint32(at.hiddenSize, 65537, true)), 'bad_frame'],
    ['range end = start', withField((v) => v.setUint16(at.layerEnd, 2, true)), 'bad_frame'],
    ['range end < start', withField((v) => v.setUint16(at.layerEnd, 1, true)), 'bad_frame'],
    ['payload length ≠ tokens × hidden × item', withField((v) => v.setUint32(at.payloadLength, 44, true)), 'wrong_payload_size'],
    ['tokens changed, payload not', withField((v) => v.setUint32(at.tokenCount, 2, true)), 'wrong_payload_size'],
    ['dtype changed to fp16, payload not', withField((v) => v.setUint8(at.dtype, 2)), 'wrong_payload_size'],
    ['payload truncated', valid.slice(0, valid.byteLength - 1), 'wrong_payload_size'],
    ['payload missing', valid.slice(0, 48), 'wrong_payload_size'],
    ['trailing bytes', Uint8Array.from([...valid, 0]), 'wrong_payload_size'],
    ['payload length 2^32-1', withField((v) => v.setUint32(at.payloadLength, 0xffffffff, true)), 'wrong_payload_size'],
  ];
  it.each(cases)('%s', (_, bytes, code) => {
    const error = refusal(() => decodeFrame(bytes));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(/^activation frame/);
  });

  it('errors raised after the header is read name the session and request', () => {
    const error = refusal(() => decodeFrame(withField((v) => v.setUint32(at.tokenCount, 0, true))));
    expect(error.sessionId).toBe(SESSION);
    expect(error.requestId).toBe(42);
    expect(error.message).toContain('token count 0');
  });
});

describe('encodeFrame refuses frames the receiver would refuse', () => {
  const base = frame();
  const cases: [string, ActivationFrame, ErrorCode][] = [
    ['uppercase session id', { ...base, sessionId: SESSION.toUpperCase() }, 'bad_frame'],
    ['non-UUID session id', { ...base, sessionId: 'session-1' }, 'bad_frame'],
    ['unknown kind', { ...base, kind: 'error' as FrameKind }, 'unknown_kind'],
    ['fp16 data labelled fp32', { ...base, activations: { ...activations('fp16', 3, 4), dtype: 'fp32' } }, 'bad_frame'],
    ['data length ≠ tokens × hidden', { ...base, activations: { ...base.activations, tokens: 2 } }, 'wrong_payload_size'],
    ['negative request id', { ...base, requestId: -1 }, 'bad_frame'],
    ['request id over u32', { ...base, requestId: 2 ** 32 }, 'bad_frame'],
    ['fractional start position', { ...base, startPosition: 1.5 }, 'bad_frame'],
    ['layer end over u16', { ...base, range: { start: 0, end: 65536 } }, 'bad_frame'],
    ['empty range', { ...base, range: { start: 3, end: 3 } }, 'bad_frame'],
  ];
  it.each(cases)('%s', (_, bad, code) => {
    expect(refusal(() => encodeFrame(bad)).code).toBe(code);
  });
});

describe('assertFiniteActivations', () => {
  const fp32 = (values: number[]): Activations => ({ dtype: 'fp32', data: Float32Array.from(values), tokens: 2, hiddenSize: 2 });
  const fp16 = (values: number[]): Activations => ({ dtype: 'fp16', data: Uint16Array.from(values), tokens: 2, hiddenSize: 2 });

  it('passes finite values, including extremes and subnormals', () => {
    expect(() => assertFiniteActivations(fp32([3.4e38, -3.4e38, 1e-45, -0]))).not.toThrow();
    expect(() => assertFiniteActivations(fp16([0x7bff, 0xfbff, 0x0001, 0x8000]))).not.toThrow();
  });

  it.each([
    ['fp32 NaN', fp32([0, 0, 0, Number.NaN]), 'NaN at token 1, channel 1'],
    ['fp32 +Infinity', fp32([0, Infinity, 0, 0]), '+Infinity at token 0, channel 1'],
    ['fp32 -Infinity', fp32([0, 0, -Infinity, 0]), '-Infinity at token 1, channel 0'],
    ['fp16 NaN', fp16([0, 0, 0x7e00, 0]), 'NaN at token 1, channel 0'],
    ['fp16 signalling NaN', fp16([0xfc01, 0, 0, 0]), 'NaN at token 0, channel 0'],
    ['fp16 +Infinity', fp16([0, 0x7c00, 0, 0]), '+Infinity at token 0, channel 1'],
    ['fp16 -Infinity', fp16([0, 0, 0, 0xfc00]), '-Infinity at token 1, channel 1'],
  ])('%s', (_, a, where) => {
    const error = refusal(() => assertFiniteActivations(a, { sessionId: SESSION, requestId: 9 }));
    expect(error.code).toBe('nan_activations');
    expect(error.message).toContain(where);
    expect(error.requestId).toBe(9);
  });
});

describe('decodeFrame fuzz: only ProtocolError, never anything else', () => {
  // mulberry32: a tiny seeded PRNG so failures reproduce.
  function rng(seed: number): () => number {
    return () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const random = rng(0x5eed);
  const int = (n: number): number => Math.floor(random() * n);

  function decodeOrRefuse(bytes: Uint8Array): ActivationFrame | undefined {
    try {
      return decodeFrame(bytes);
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error;
      return undefined;
    }
  }

  it('2000 random buffers (half with a valid magic and version)', () => {
    for (let i = 0; i < 2000; i++) {
      const bytes = Uint8Array.from({ length: int(160) }, () => int(256));
      if (i % 2 === 0 && bytes.length >= 6) bytes.set([0x4d, 0x53, 0x48, 0x4e, 1, 0]);
      expect(() => decodeOrRefuse(bytes)).not.toThrow();
    }
  });

  it('2000 mutations of a valid frame; whatever decodes re-encodes to the same bytes', () => {
    const kinds: FrameKind[] = ['prefill', 'decode', 'result'];
    let decoded = 0;
    for (let i = 0; i < 2000; i++) {
      const valid = encodeFrame(frame(kinds[i % 3], i % 2 ? 'fp16' : 'fp32', 1 + int(3), 1 + int(4)));
      let bytes = valid.slice();
      for (let flips = 1 + int(3); flips > 0; flips--) bytes[int(FRAME_HEADER_BYTES + 8) % bytes.length] = int(256);
      if (random() < 0.2) bytes = bytes.slice(0, int(bytes.length + 1));
      if (random() < 0.1) bytes = Uint8Array.from([...bytes, ...Array.from({ length: 1 + int(8) }, () => int(256))]);
      const result = decodeOrRefuse(bytes);
      if (result && bytes[FRAME_OFFSETS.versionMinor] === PROTOCOL_VERSION.minor) {
        decoded++;
        expect(encodeFrame(result)).toEqual(bytes);
      }
    }
    expect(decoded).toBeGreaterThan(0); // some mutations only touch values: still valid frames
  });
});

describe('decodeFrame on a Node Buffer from a socket', () => {
  it('copies the payload out of a pooled Buffer (whose slice() is a view, not a copy)', async () => {
    const { Buffer } = await import('node:buffer');
    const { encodeFrame, decodeFrame } = await import('../../src/core/frames/frame-codec.ts');
    const values = Float32Array.from({ length: 12 }, (_, i) => i + 0.5);
    const frame = encodeFrame({
      kind: 'decode',
      requestId: 7,
      sessionId: '1b4e28ba-2fa1-11d2-883f-0016d3cca427',
      startPosition: 3,
      range: { start: 0, end: 2 },
      activations: { dtype: 'fp32', data: values, tokens: 3, hiddenSize: 4 },
    });
    // Like ws: the message sits at an odd offset inside a larger pooled ArrayBuffer.
    const pool = Buffer.alloc(frame.byteLength + 3 + 64, 0xff);
    pool.set(frame, 3);
    const decoded = decodeFrame(pool.subarray(3, 3 + frame.byteLength));
    expect(Array.from(decoded.activations.data)).toEqual(Array.from(values));
  });
});

describe('session ids read from reused buffers', () => {
  it('every decode gives the id that was written, though the same memory carries other frames in between', () => {
    const shared = new Uint8Array(4096); // one socket buffer, reused for every message
    const ids = Array.from({ length: 600 }, () => crypto.randomUUID());
    for (let round = 0; round < 3; round++) {
      for (const [i, sessionId] of ids.entries()) {
        const bytes = encodeFrame({ kind: 'decode', requestId: i, sessionId, startPosition: 1, range: { start: 0, end: 1 }, activations: { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 } });
        const at = (i * 64) % 1024;
        shared.set(bytes, at);
        expect(decodeFrame(shared.subarray(at, at + bytes.byteLength)).sessionId).toBe(sessionId);
      }
    }
  });
});
