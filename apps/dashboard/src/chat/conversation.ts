/**
 * The chat page's conversation, as plain data: the turns shown, which of them are still
 * sent, and how to make room when the model's context cannot hold them all. Pure (no DOM,
 * no fetch): the page and the tests share it.
 */
export interface Turn {
  readonly role: 'user' | 'assistant';
  content: string;
  /** Left out of what is sent, to fit the context (shown greyed, kept on screen). */
  dropped?: boolean;
}

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

/** What the next request sends: every turn not dropped, in order. */
export function messagesToSend(turns: readonly Turn[]): ChatMessage[] {
  return turns.filter((turn) => !turn.dropped).map((turn) => ({ role: turn.role, content: turn.content }));
}

/**
 * Drop the oldest turn still sent — a user message with the answer that followed it —
 * keeping at least the last user message. Returns how many messages it dropped (0: nothing
 * left to drop).
 */
export function dropOldestTurn(turns: readonly Turn[]): number {
  const sent = turns.filter((turn) => !turn.dropped);
  const lastUser = sent.map((turn) => turn.role).lastIndexOf('user');
  if (lastUser <= 0) return 0;
  let dropped = 0;
  for (const turn of sent.slice(0, lastUser)) {
    if (dropped > 0 && turn.role === 'user') break;
    turn.dropped = true;
    dropped++;
  }
  return dropped;
}

/** The notice the page shows after dropping `count` messages to fit `contextLength` tokens. */
export function droppedNotice(count: number, contextLength: number | undefined): string {
  const context = contextLength === undefined ? "the model's context" : `the model's context of ${contextLength} tokens`;
  return `Dropped the ${count === 1 ? 'oldest message' : `${count} oldest messages`} to fit ${context}; the model no longer sees ${count === 1 ? 'it' : 'them'}.`;
}

/** A 400 whose code says the prompt plus max_tokens did not fit (OpenAI's `context_length_exceeded`). */
export function isContextLengthError(status: number, body: unknown): boolean {
  const code = (body as { error?: { code?: unknown } } | undefined)?.error?.code;
  return status === 400 && code === 'context_length_exceeded';
}
