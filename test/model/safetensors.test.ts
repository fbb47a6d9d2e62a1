import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { fromFloat32, toFloat32 } from '../../src/core/model/dtype.ts';
import { parseSafetensorsHeader, writeSafetensors } from '../../src/core/model/safetensors.ts';

/** A raw safetensors file from a header object (or raw header text) and a data region size. */
function rawFile(header: unknown, dataBytes: number, headerLengthOverride?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + dataBytes);
  new DataView(out.buffer).setBigUint64(0, headerLengthOverride ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}

function parse(bytes: Uint8Array, fileSize = bytes.byteLength) {
  return parseSafetensorsHeader('w.safetensors', bytes, fileSize);
}

function refusal(bytes: Uint8Array, fileSize = bytes.byteLength): CheckpointError {
  try {
    parse(bytes, fileSize);
  } catch (error) {
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).file).toBe('w.safetensors');
    expect((error as Error).message.startsWith('w.safetensors: ')).toBe(true);
    return error as CheckpointError;
  }
  throw new Error('expected a CheckpointError');
}

const ok = { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] };

describe('parseSafetensorsHeader', () => {
  it('reads tensors with absolute offsets and skips __metadata__', () => {
    const bytes = rawFile({ __metadata__: { format: 'pt' }, a: ok, b: { dtype: 'BF16', shape: [3], data_offsets: [16, 22] } }, 22);
    const tensors = parse(bytes);
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect([...tensors.keys()]).toEqual(['a', 'b']);
    expect(tensors.get('a')).toEqual({ name: 'a', file: 'w.safetensors', dtype: 'F32', shape: [2, 2], offset: 8 + headerLength, length: 16 });
    expect(tensors.get('b')?.offset).toBe(8 + headerLength + 16);
  });

  it('accepts empty tensors and scalars', () => {
    const tensors = parse(rawFile({ e: { dtype: 'F16', shape: [0, 4], data_offsets: [0, 0] }, s: { dtype: 'F32', shape: [], data_offsets: [0, 4] } }, 4));
    expect(tensors.get('e')?.length).toBe(0);
    expect(tensors.get('s')?.length).toBe(4);
  });

  const cases: [string, () => CheckpointError, RegExp][] = [
    ['file shorter than 8 bytes', () => refusal(new Uint8Array(5)), /shorter than the 8-byte/],
    ['header length larger than file', () => refusal(rawFile({ a: ok }, 16, 10_000n)), /header length 10000 is larger than the file/],
    ['header length near 2^64', () => refusal(rawFile({ a: ok }, 16, 2n ** 64n - 1n)), /is larger than the file/],
    ['header bytes truncated', () => refusal(rawFile({ a: ok }, 16).subarray(0, 12), 200), /header is truncated/],
    ['invalid JSON', () => refusal(rawFile('{"a": ', 0)), /not valid JSON/],
    ['JSON not an object', () => refusal(rawFile('[1, 2]', 0)), /not a JSON object/],
    ['entry not an object', () => refusal(rawFile({ a: 3 }, 0)), /'a': header entry is not an object/],
    ['unknown dtype', () => refusal(rawFile({ a: { ...ok, dtype: 'I64' } }, 16)), /unsupported dtype "I64" \(supported: F32, F16, BF16, I32, U8\)/],
    ['shape not integers', () => refusal(rawFile({ a: { ...ok, shape: [2, -1] } }, 16)), /shape \[2,-1\] is not an array of non-negative integers/],
    ['shape not an array', () => refusal(rawFile({ a: { ...ok, shape: '2x2' } }, 16)), /shape "2x2" is not an array/],
    ['data_offsets malformed', () => refusal(rawFile({ a: { ...ok, data_offsets: [0] } }, 16)), /data_offsets \[0\] is not \[begin, end\]/],
    ['data_offsets end before begin', () => refusal(rawFile({ a: { ...ok, data_offsets: [16, 0] } }, 16)), /end 0 is before begin 16/],
    ['byte length vs shape', () => refusal(rawFile({ a: { ...ok, data_offsets: [0, 12] } }, 16)), /byte length 12 does not match shape \[2, 2\] × F32 \(16 bytes\)/],
    ['offsets beyond file end', () => refusal(rawFile({ a: { ...ok, data_offsets: [8, 24] } }, 16)), /extend beyond the end of the file/],
    [
      'overlapping tensors',
      () => refusal(rawFile({ a: ok, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, 16)),
      /tensors 'a' and 'b' overlap/,
    ],
  ];
  for (const [label, run, message] of cases) {
    it(`refuses: ${label}`, () => expect(run().message).toMatch(message));
  }

  it('gives each refusal its own message', () => {
    const messages = cases.map(([, run]) => run().message);
    expect(new Set(messages).size).toBe(messages.length);
  });

  it('detects overlap hidden behind an empty tensor', () => {
    const header = {
      a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] },
      e: { dtype: 'F32', shape: [0], data_offsets: [4, 4] },
      c: { dtype: 'F32', shape: [1], data_offsets: [8, 12] },
    };
    expect(refusal(rawFile(header, 16)).message).toMatch(/'a' and 'c' overlap/);
  });
});

describe('writeSafetensors', () => {
  it('round-trips through the reader with an 8-byte aligned, space-padded header', () => {
    const a = new Float32Array([1, -2.5, 3, 0.125, 7, 8]);
    const b = new Float32Array([0.5, -1, 65504]);
    const bytes = writeSafetensors(
      [
        { name: 'a', dtype: 'F32', shape: [2, 3], data: fromFloat32(a, 'F32') },
        { name: 'b', dtype: 'F16', shape: [3], data: fromFloat32(b, 'F16') },
        { name: 'c', dtype: 'BF16', shape: [1], data: fromFloat32([2], 'BF16') },
      ],
      { format: 'pt' },
    );
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect(headerLength % 8).toBe(0);
    expect(bytes[8 + headerLength - 1]).toBe(0x20);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    expect(header.__metadata__).toEqual({ format: 'pt' });

    const tensors = parse(bytes);
    const read = (name: string) => {
      const t = tensors.get(name)!;
      return toFloat32(bytes.subarray(t.offset, t.offset + t.length), t.dtype as 'F32');
    };
    expect(tensors.get('a')?.shape).toEqual([2, 3]);
    expect(Array.from(read('a'))).toEqual(Array.from(a));
    expect(Array.from(read('b'))).toEqual([0.5, -1, 65504]);
    expect(Array.from(read('c'))).toEqual([2]);
    expect(tensors.get('c')!.offset + 2).toBe(bytes.byteLength);
  });

  it('refuses data that does not match the shape', () => {
    expect(() => writeSafetensors([{ name: 'a', dtype: 'F32', shape: [2], data: new Uint8Array(4) }])).toThrow(RangeError);
  });
});
