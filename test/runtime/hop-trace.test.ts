import { afterEach, describe, expect, it } from 'vitest';
import { hopMark, setHopTraceSink } from '../../src/core/runtime/hop-trace.ts';
import { BatchingLink } from '../../src/core/mesh/batching-link.ts';
import { encodeFrame } from '../../src/core/frames/frame-codec.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';

afterEach(() => setHopTraceSink(undefined));

describe('hop trace marks', () => {
  it('records nothing without a sink, and each mark in order with one', () => {
    hopMark('before'); // no sink: nothing to see, nothing thrown
    const seen: string[] = [];
    setHopTraceSink((stage) => seen.push(stage));
    hopMark('a');
    hopMark('b', 'logits');
    setHopTraceSink(undefined);
    hopMark('after');
    expect(seen).toEqual(['a', 'b.logits']);
  });

  it('marks a decode step queued and sent on a BatchingLink, and its answer is unchanged', async () => {
    const seen: string[] = [];
    setHopTraceSink((stage) => seen.push(stage));
    const inner = { request: async (bytes: Uint8Array) => bytes, control: async (m: unknown) => m, close: async () => {}, closed: new Promise(() => {}) } as unknown as PeerLink;
    const frame = encodeFrame({ kind: 'decode', requestId: 0, sessionId: '0f8fad5b-d9cb-469f-a165-70867728950e', startPosition: 3, range: { start: 0, end: 2 }, activations: { dtype: 'fp32', tokens: 1, hiddenSize: 2, data: new Float32Array([1, 2]) } as never });
    const answer = await new BatchingLink(inner).request(frame);
    expect(answer).toBe(frame);
    expect(seen).toEqual(['head.lane.queued', 'head.lane.sent']);
  });
});
