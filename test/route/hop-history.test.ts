import { describe, expect, it } from 'vitest';
import { HopHistory } from '../../src/core/route/hop-history.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';

const HIDDEN = 3;
/** fp32 block whose values encode position × 10 + channel, so concatenation is checkable. */
function block(start: number, tokens: number): Activations {
  const data = new Float32Array(tokens * HIDDEN); // [1, tokens, hidden]
  for (let t = 0; t < tokens; t++) for (let c = 0; c < HIDDEN; c++) data[t * HIDDEN + c] = (start + t) * 10 + c;
  return { dtype: 'fp32', data, tokens, hiddenSize: HIDDEN };
}
const positions = (a: Activations): number[] => Array.from({ length: a.tokens }, (_, t) => a.data[t * HIDDEN] / 10);

describe('HopHistory', () => {
  it('records a prefill and decode steps, then replays them as one block', () => {
    const history = new HopHistory();
    expect(history.length).toBe(0);
    expect(history.bytes).toBe(0);
    history.record(0, block(0, 4)); // prefill
    history.record(4, block(4, 1)); // decode
    history.record(5, block(5, 1));
    expect(history.length).toBe(6);
    expect(history.bytes).toBe(6 * HIDDEN * 4);
    const replay = history.replay();
    expect(replay.tokens).toBe(6);
    expect(replay.dtype).toBe('fp32');
    expect(replay.hiddenSize).toBe(HIDDEN);
    expect(replay.data).toBeInstanceOf(Float32Array);
    expect(Array.from(replay.data)).toEqual(Array.from(block(0, 6).data));
    expect(history.bytes).toBe(6 * HIDDEN * 4); // concatenation replaced the chunks, not added to them
    expect(history.replay()).toBe(replay); // second replay is free
    history.record(6, block(6, 1)); // and recording continues after a replay
    expect(positions(history.replay())).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('keeps fp16 as fp16', () => {
    const history = new HopHistory();
    history.record(0, { dtype: 'fp16', data: new Uint16Array([1, 2, 3, 4]), tokens: 2, hiddenSize: 2 });
    history.record(2, { dtype: 'fp16', data: new Uint16Array([5, 6]), tokens: 1, hiddenSize: 2 });
    const replay = history.replay();
    expect(replay.dtype).toBe('fp16');
    expect(replay.data).toBeInstanceOf(Uint16Array);
    expect(Array.from(replay.data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(history.bytes).toBe(12);
  });

  it('refuses a block that does not start at the current length', () => {
    const history = new HopHistory();
    expect(() => history.record(1, block(1, 1))).toThrow(RangeError);
    history.record(0, block(0, 2));
    expect(() => history.record(1, block(1, 1))).toThrow(/holds 2 positions; a block cannot start at 1/);
    expect(() => history.record(3, block(3, 1))).toThrow(RangeError);
    expect(history.length).toBe(2);
  });

  it('refuses malformed or mismatched blocks', () => {
    const history = new HopHistory();
    expect(() => history.record(0, { dtype: 'fp32', data: new Float32Array(5), tokens: 2, hiddenSize: 3 })).toThrow(/expected 2 × 3/);
    expect(() => history.record(0, { dtype: 'fp32', data: new Float32Array(0), tokens: 0, hiddenSize: 3 })).toThrow(RangeError);
    expect(() => history.record(0, { dtype: 'fp16', data: new Float32Array(3), tokens: 1, hiddenSize: 3 })).toThrow(/does not match/);
    history.record(0, block(0, 1));
    expect(() => history.record(1, { dtype: 'fp16', data: new Uint16Array(3), tokens: 1, hiddenSize: 3 })).toThrow(/history is fp32 × 3/);
    expect(() => history.record(1, { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 })).toThrow(RangeError);
    expect(history.length).toBe(1);
  });

  it('truncates inside and between chunks, then records from the new length', () => {
    const history = new HopHistory();
    history.record(0, block(0, 4));
    history.record(4, block(4, 1));
    history.record(5, block(5, 1));
    history.truncate(5); // between chunks
    expect(positions(history.replay())).toEqual([0, 1, 2, 3, 4]);
    history.truncate(2); // inside the (now concatenated) chunk
    expect(history.length).toBe(2);
    expect(history.bytes).toBe(2 * HIDDEN * 4);
    expect(() => history.record(5, block(5, 1))).toThrow(RangeError);
    history.record(2, block(2, 2));
    expect(positions(history.replay())).toEqual([0, 1, 2, 3]);
    history.truncate(4); // no-op
    expect(history.length).toBe(4);
    history.truncate(0);
    expect(history.length).toBe(0);
    expect(history.bytes).toBe(0);
    expect(() => history.replay()).toThrow(/nothing recorded/);
  });

  it('truncating does not alter the blocks already handed out', () => {
    const history = new HopHistory();
    history.record(0, block(0, 3));
    history.record(3, block(3, 3));
    const replay = history.replay();
    history.truncate(1);
    expect(replay.tokens).toBe(6);
    expect(positions(replay)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('refuses a truncation outside [0, length]', () => {
    const history = new HopHistory();
    history.record(0, block(0, 2));
    expect(() => history.truncate(3)).toThrow(RangeError);
    expect(() => history.truncate(-1)).toThrow(RangeError);
    expect(() => history.truncate(1.5)).toThrow(RangeError);
  });

  it('steps: the blocks as the peer computed them (truncation cuts them, a rebuild makes them one)', () => {
    const history = new HopHistory();
    history.record(0, block(0, 3));
    history.record(3, block(3, 1));
    history.record(4, block(4, 2));
    const shape = () => history.steps().map((s) => [s.start, s.activations.tokens, positions(s.activations)[0]]);
    expect(shape()).toEqual([[0, 3, 0], [3, 1, 3], [4, 2, 4]]);
    history.replay(); // merging the data keeps the boundaries
    expect(shape()).toEqual([[0, 3, 0], [3, 1, 3], [4, 2, 4]]);
    history.truncate(5);
    expect(shape()).toEqual([[0, 3, 0], [3, 1, 3], [4, 1, 4]]);
    history.rebuilt();
    history.record(5, block(5, 1));
    expect(shape()).toEqual([[0, 5, 0], [5, 1, 5]]);
  });
});
