/** The nesting bound of request bodies (respond.ts): brackets inside strings do not count, escapes are skipped. */
import { expect, it } from 'vitest';
import { MAX_JSON_DEPTH, jsonDepth } from '../../src/node/http/respond.ts';
import { shown } from '../../src/node/openai/request-fields.ts';

it('measures the deepest nesting of arrays and objects, outside strings', () => {
  expect(jsonDepth('1')).toBe(0);
  expect(jsonDepth('{"a":[1,{"b":[]}]}')).toBe(4);
  expect(jsonDepth('[[],[[]],[]]')).toBe(3);
  expect(jsonDepth('{"a":"[[[[{{{{"}')).toBe(1);
  expect(jsonDepth('["\\"[[[", "\\\\", [[]]]')).toBe(3);
  const deep = '['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1);
  expect(jsonDepth(deep)).toBe(MAX_JSON_DEPTH + 1);
});

it('quotes client values at most 64 characters long, and never stringifies arrays or objects', () => {
  expect(shown('x'.repeat(100))).toBe(`${'x'.repeat(64)}…`);
  expect(shown(12)).toBe('12');
  const nested = JSON.parse('['.repeat(10_000) + ']'.repeat(10_000)) as unknown;
  expect(() => String(nested)).toThrow(RangeError); // what the old shown(String(value)) did
  expect(shown(nested)).toBe('an array');
  expect(shown({ a: 1 })).toBe('an object');
});
