/**
 * Lane frames (protocol 3.4, kinds 8 chain-lanes and 9 copy-lanes): round trip, the single
 * frames the lanes stand for, and every malformed field refused with a typed ProtocolError.
 * A 3.2 peer's single-frame decoder refuses both kinds (`unknown_kind`).
 */
import { describe, expect, it } from 'vitest';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import { decodeLaneFrame, encodeLaneFrame, LANE_BYTES, MAX_LANES, peekLanes, splitLaneFrame, type LaneFrame } from '../../src/core/frames/lane-frame-codec.ts';
import { FRAME_HEADER_BYTES, FRAME_OFFSETS } from '../../src/shared/frame-layout.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';

const A = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const B = '2c5f39cb-3ab2-42e3-994a-1127e4ddb538';
const hidden = (tokens: number, base: number) => ({ dtype: 'fp32' as const, data: Float32Array.from({ length: tokens * 4 }, (_, i) => base + i), tokens, hiddenSize: 4 });
const frame = (kind: LaneFrame['kind'] = 'chain-lanes'): LaneFrame => ({
  kind,
  range: { start: 2, end: 5 },
  dtype: 'fp32',
  hiddenSize: 4,
  lanes: [
    { sessionId: A, requestId: 7, startPosition: 9, activations: hidden(1, 0) },
    { sessionId: B, requestId: 3, startPosition: 4, activations: hidden(3, 100) }, // a speculative step: 3 positions
  ],
});

function refusal(bytes: Uint8Array): ProtocolError {
  try {
    decodeLaneFrame(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error('decoded');
}

describe('lane frames', () => {
  it('round trip: lanes in order, each its own session, request id, start and values; split into the kind 6 / 7 frames they stand for', () => {
    for (const kind of ['chain-lanes', 'copy-lanes'] as const) {
      const bytes = encodeLaneFrame(frame(kind));
      expect(bytes[FRAME_OFFSETS.kind]).toBe(kind === 'chain-lanes' ? 8 : 9);
      expect(bytes.byteLength).toBe(FRAME_HEADER_BYTES + 2 * LANE_BYTES + 4 * 4 * 4);
      const back = decodeLaneFrame(bytes);
      expect(back).toEqual(frame(kind));
      expect(peekLanes(bytes)).toEqual([{ sessionId: A, requestId: 7 }, { sessionId: B, requestId: 3 }]);
      const singles = splitLaneFrame(back).map((s) => decodeFrame(s.bytes));
      expect(singles.map((f) => [f.kind, f.sessionId, f.requestId, f.startPosition, f.range, [...f.activations.data]])).toEqual([
        [kind === 'chain-lanes' ? 'chain' : 'copy', A, 7, 9, { start: 2, end: 5 }, [0, 1, 2, 3]],
        [kind === 'chain-lanes' ? 'chain' : 'copy', B, 3, 4, { start: 2, end: 5 }, Array.from({ length: 12 }, (_, i) => 100 + i)],
      ]);
    }
  });

  it('a 3.3 or older peer refuses both kinds as a single frame (unknown_kind)', () => {
    for (const kind of ['chain-lanes', 'copy-lanes'] as const) expect(() => decodeFrame(encodeLaneFrame(frame(kind)))).toThrow(expect.objectContaining({ code: 'unknown_kind' }));
  });

  it('refuses, typed: a session in two lanes, lane count and token/body length mismatches, trailing or missing bytes, non-zero header ids', () => {
    const patched = (patch: (view: DataView, bytes: Uint8Array) => void) => {
      const bytes = encodeLaneFrame(frame());
      patch(new DataView(bytes.buffer), bytes);
      return bytes;
    };
    const lane1 = FRAME_HEADER_BYTES + LANE_BYTES;
    expect(refusal(patched((_, b) => b.set(b.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + 16), lane1)))).toMatchObject({ code: 'bad_frame', message: expect.stringMatching(/appears in two lanes/) });
    expect(refusal(patched((v) => v.setUint32(FRAME_OFFSETS.startPosition, 3, true)))).toMatchObject({ code: 'wrong_payload_size' });
    expect(refusal(patched((v) => v.setUint32(FRAME_OFFSETS.startPosition, 0, true)))).toMatchObject({ code: 'bad_frame', message: expect.stringMatching(/lane count 0/) });
    expect(refusal(patched((v) => v.setUint32(FRAME_OFFSETS.startPosition, MAX_LANES + 1, true)))).toMatchObject({ code: 'bad_frame' });
    expect(refusal(patched((v) => v.setUint32(FRAME_OFFSETS.tokenCount, 5, true)))).toMatchObject({ code: 'bad_frame', message: expect.stringMatching(/lanes hold 4 tokens, the header says 5/) });
    expect(refusal(patched((v) => v.setUint32(lane1 + 24, 2, true)))).toMatchObject({ code: 'wrong_payload_size', message: expect.stringMatching(/≠ 2 × 4 × 4/) });
    expect(refusal(patched((v) => v.setUint32(lane1 + 28, 4, true)))).toMatchObject({ code: 'wrong_payload_size' });
    expect(refusal(patched((v) => v.setUint32(FRAME_OFFSETS.requestId, 1, true)))).toMatchObject({ code: 'bad_frame', message: expect.stringMatching(/request id/) });
    expect(refusal(patched((_, b) => (b[FRAME_OFFSETS.sessionId] = 1)))).toMatchObject({ code: 'bad_frame' });
    expect(refusal(patched((v) => v.setUint16(FRAME_OFFSETS.layerEnd, 2, true)))).toMatchObject({ code: 'bad_frame' });
    expect(refusal(encodeLaneFrame(frame()).subarray(0, -1))).toMatchObject({ code: 'wrong_payload_size' });
    expect(refusal(encodeLaneFrame(frame()).subarray(0, 40))).toMatchObject({ code: 'bad_frame' });
    const longer = new Uint8Array(encodeLaneFrame(frame()).byteLength + 4);
    longer.set(encodeLaneFrame(frame()));
    expect(refusal(longer)).toMatchObject({ code: 'wrong_payload_size' });
    // The encoder will not write what the decoder refuses.
    expect(() => encodeLaneFrame({ ...frame(), lanes: [frame().lanes[0], frame().lanes[0]] })).toThrow(/two lanes/);
    expect(() => encodeLaneFrame({ ...frame(), lanes: [] })).toThrow(/lane count/);
  });
});
