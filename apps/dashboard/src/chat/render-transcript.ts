/**
 * The conversation: one bubble per turn (a dropped one greyed, marked "not sent"), the
 * streaming answer with a cursor, and under each answer how it ended.
 */
import { h } from '../dom.ts';
import type { Turn } from './conversation.ts';

export interface AnswerState {
  /** The turn being written, index into the turns. */
  readonly index: number;
  readonly streaming: boolean;
  /** How it ended: 'length', 'stop', 'cancelled' (the stop button) or an error message. */
  readonly ending?: string;
  readonly usage?: { prompt_tokens: number; completion_tokens: number };
  readonly sessionId?: string;
}

const ENDINGS: Record<string, string> = {
  length: 'ended at max tokens',
  stop: 'ended by the model (end of text, a natural end or a stop string)',
  cancelled: 'stopped — the session was cancelled on every hop',
};

export function renderTranscript(turns: readonly Turn[], answers: ReadonlyMap<number, AnswerState>): HTMLElement {
  if (turns.length === 0) return h('p', { class: 'empty' }, 'Say something to the model. Its answer streams in here while the route panel shows it travelling through the mesh.');
  return h(
    'div',
    { class: 'transcript' },
    ...turns.map((turn, index) => {
      const answer = answers.get(index);
      return h(
        'div',
        { class: `bubble ${turn.role}${turn.dropped ? ' dropped' : ''}`, 'data-role': turn.role, 'data-dropped': turn.dropped ? 'true' : 'false', ...(answer?.sessionId ? { 'data-session-id': answer.sessionId } : {}) },
        turn.dropped ? h('span', { class: 'not-sent' }, 'not sent (out of context)') : undefined,
        h('div', { class: 'bubble-text', 'data-testid': turn.role === 'assistant' ? 'answer' : 'question' }, turn.content, answer?.streaming ? h('span', { class: 'cursor' }, '▍') : undefined),
        answer && !answer.streaming ? h('div', { class: 'bubble-meta', 'data-testid': 'ending' }, ending(answer)) : undefined,
      );
    }),
  );
}

function ending(answer: AnswerState): string {
  const how = ENDINGS[answer.ending ?? ''] ?? answer.ending ?? '';
  const usage = answer.usage ? ` · ${answer.usage.prompt_tokens} prompt + ${answer.usage.completion_tokens} answer tokens` : '';
  return `${how}${usage}`;
}
