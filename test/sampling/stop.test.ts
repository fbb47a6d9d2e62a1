import { describe, expect, it } from 'vitest';
import { SamplingParamError, StopChecker, StopStringMatcher } from '../../src/core/sampling/index.ts';

/** Feeds deltas, returns everything emitted (including flush) and whether it stopped. */
function stream(stops: string[], deltas: string[]): { text: string; stopped: boolean; emits: string[] } {
  const matcher = new StopStringMatcher(stops);
  const emits: string[] = [];
  let stopped = false;
  for (const delta of deltas) {
    const out = matcher.push(delta);
    emits.push(out.emit);
    stopped ||= out.stopped;
  }
  emits.push(matcher.flush());
  return { text: emits.join(''), stopped, emits };
}

describe('StopChecker', () => {
  const checker = new StopChecker({ stopTokenIds: [2, 7], maxTokens: 3 });
  it('reports stop ids, then the token budget, stop winning a tie', () => {
    expect(checker.check(5, 1)).toBeUndefined();
    expect(checker.check(7, 2)).toBe('stop');
    expect(checker.check(5, 3)).toBe('length');
    expect(checker.check(2, 3)).toBe('stop');
  });
});

describe('StopStringMatcher', () => {
  it('cuts at a stop string inside one delta', () => {
    expect(stream(['###'], ['hello ### world'])).toMatchObject({ text: 'hello ', stopped: true });
  });

  it('never leaks a stop string split across deltas', () => {
    const r = stream(['</answer>'], ['The answer is 4<', '/ans', 'wer', '> trailing']);
    expect(r.text).toBe('The answer is 4');
    expect(r.stopped).toBe(true);
    for (const e of r.emits) expect(e).not.toMatch(/[<]/);
  });

  it('holds a partial prefix and releases it when it stops matching', () => {
    const matcher = new StopStringMatcher(['STOP']);
    expect(matcher.push('abc ST')).toEqual({ emit: 'abc ', stopped: false });
    expect(matcher.push('O')).toEqual({ emit: '', stopped: false });
    expect(matcher.push('MP')).toEqual({ emit: 'STOMP', stopped: false });
    expect(matcher.push(' S')).toEqual({ emit: ' ', stopped: false });
    expect(matcher.flush()).toBe('S');
    expect(matcher.flush()).toBe('');
  });

  it('re-anchors: a failed partial match can start a new one ("aab" with stop "ab")', () => {
    expect(stream(['ab'], ['a', 'a', 'b', 'c'])).toMatchObject({ text: 'a', stopped: true });
  });

  it('stops at the earliest of several stop strings and ignores later pushes', () => {
    const matcher = new StopStringMatcher(['world', 'lo w']);
    expect(matcher.push('hello world')).toEqual({ emit: 'hel', stopped: true });
    expect(matcher.push('more')).toEqual({ emit: '', stopped: true });
    expect(matcher.stopped).toBe(true);
    expect(matcher.flush()).toBe('');
  });

  it('equals the cut of the whole text for every split point (exhaustive)', () => {
    const text = 'xx<|e<|end|>yy';
    const stops = ['<|end|>', '|e|'];
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j++) {
        const r = stream(stops, [text.slice(0, i), text.slice(i, j), text.slice(j)]);
        expect(r.text).toBe('xx<|e');
        expect(r.stopped).toBe(true);
      }
    }
    // Character by character, with no stop present: everything comes out.
    expect(stream(['<|end|>'], [...'a<|en b']).text).toBe('a<|en b');
  });

  it('passes text through without stop strings and refuses empty ones', () => {
    expect(stream([], ['a', 'b'])).toMatchObject({ text: 'ab', stopped: false, emits: ['a', 'b', ''] });
    expect(() => new StopStringMatcher(['ok', ''])).toThrow(SamplingParamError);
  });
});
