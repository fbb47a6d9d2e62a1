/** The chat page's pure parts: fitting the conversation, reading the SSE stream, hop activity. */
import { describe, expect, it } from 'vitest';
import { dropOldestTurn, droppedNotice, isContextLengthError, messagesToSend, type Turn } from '../../apps/dashboard/src/chat/conversation.ts';
import { HopActivity, LIT_MS } from '../../apps/dashboard/src/chat/hop-activity.ts';
import { takeEvents } from '../../apps/dashboard/src/chat/sse.ts';
import type { SessionView } from '../../src/shared/dashboard-state.ts';

describe('conversation', () => {
  const conversation = (): Turn[] => [
    { role: 'user', content: 'a' },
    { role: 'assistant', content: 'A' },
    { role: 'user', content: 'b' },
    { role: 'assistant', content: 'B' },
    { role: 'user', content: 'c' },
  ];

  it('drops the oldest turn (a question and its answer) until only the last question is left', () => {
    const turns = conversation();
    expect(dropOldestTurn(turns)).toBe(2);
    expect(messagesToSend(turns).map((m) => m.content)).toEqual(['b', 'B', 'c']);
    expect(dropOldestTurn(turns)).toBe(2);
    expect(messagesToSend(turns)).toEqual([{ role: 'user', content: 'c' }]);
    expect(dropOldestTurn(turns)).toBe(0);
    expect(turns.map((t) => t.dropped ?? false)).toEqual([true, true, true, true, false]);
  });

  it('says what it dropped, and knows the refusal that asks for it', () => {
    expect(droppedNotice(2, 128)).toBe("Dropped the 2 oldest messages to fit the model's context of 128 tokens; the model no longer sees them.");
    expect(droppedNotice(1, undefined)).toBe("Dropped the oldest message to fit the model's context; the model no longer sees it.");
    expect(isContextLengthError(400, { error: { code: 'context_length_exceeded' } })).toBe(true);
    expect(isContextLengthError(400, { error: { code: 'invalid_value' } })).toBe(false);
    expect(isContextLengthError(503, { error: { code: 'context_length_exceeded' } })).toBe(false);
  });
});

describe('takeEvents', () => {
  it('splits complete events off a growing buffer, across chunk boundaries', () => {
    const first = takeEvents('data: {"a":1}\n\ndata: {"b"');
    expect(first).toEqual({ data: ['{"a":1}'], rest: 'data: {"b"' });
    const second = takeEvents(`${first.rest}:2}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n`);
    expect(second).toEqual({ data: ['{"b":2}', '[DONE]'], rest: '' });
  });
});

describe('HopActivity', () => {
  const session = (id: string, frames: number[], tokens: number[], extra: Partial<SessionView> = {}): SessionView => ({
    id,
    model: 'demo',
    promptTokens: 7,
    completionTokens: frames[0]!,
    startedAt: 0,
    tokensPerSecond: 0,
    rate: [],
    hops: frames.map((f, i) => ({ peerId: `p${i}`, range: { start: i, end: i + 1 }, frames: f, tokens: tokens[i]!, lastMs: 1, meanMs: 1, kvPositions: tokens[i]! })),
    repairs: [],
    state: 'running',
    ...extra,
  });

  it('lights a hop while its frames grow, and measures tokens per second through it', () => {
    const activity = new HopActivity();
    activity.update(session('s', [1, 1], [7, 7]), 0);
    activity.update(session('s', [11, 10], [17, 16]), 500);
    let hops = activity.view(session('s', [11, 10], [17, 16]), 500);
    expect(hops.map((h) => [h.frames, h.lit, h.tokensPerSecond])).toEqual([
      [11, true, 20],
      [10, true, 18],
    ]);
    // Frames stop (a held hop): it goes dark once LIT_MS pass without growth.
    activity.update(session('s', [11, 10], [17, 16]), 600);
    hops = activity.view(session('s', [11, 10], [17, 16]), 500 + LIT_MS + 1);
    expect(hops.map((h) => h.lit)).toEqual([false, false]);
    // A finished session is never lit; a repaired hop names the peer it replaced.
    const repaired = session('s', [12, 11], [18, 17], { state: 'finished', repairs: [{ kind: 'replaced', hop: 1, peerId: 'p0', lostPeerId: 'p1' }] });
    activity.update(repaired, 700);
    hops = activity.view(repaired, 700);
    expect(hops.map((h) => [h.lit, h.replaced])).toEqual([
      [false, undefined],
      [false, 'p1'],
    ]);
  });

  it('starts over for another session', () => {
    const activity = new HopActivity();
    activity.update(session('a', [5], [9]), 0);
    expect(activity.view(session('b', [1], [7]), 0)[0]).toMatchObject({ lit: false, tokensPerSecond: 0 });
  });
});
