/**
 * One streamed chat completion from the page: POST `/v1/chat/completions` with
 * `stream: true` (the same-origin request carries the API key cookie, like the dashboard's),
 * delivering the response id, each text delta and the finish. Aborting `signal` closes the
 * stream, which the head sees as the client going away: it cancels the Route Session.
 */
import { takeEvents } from './sse.ts';

export interface CompletionHandlers {
  /** The response id (`chatcmpl-…`): the dashboard's session id for this answer. */
  onId(id: string): void;
  onDelta(text: string): void;
  onFinish(reason: string): void;
  /** The last chunk's token counts (`stream_options.include_usage`). */
  onUsage(usage: { prompt_tokens: number; completion_tokens: number }): void;
}

/** A refusal with its HTTP status and the OpenAI error body. */
export class CompletionError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const error = (body as { error?: { message?: string } } | undefined)?.error;
    super(error?.message ?? `HTTP ${status}`);
  }
}

interface Chunk {
  id?: string;
  choices?: { delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  error?: { message?: string };
}

export async function streamChatCompletion(body: Record<string, unknown>, signal: AbortSignal, handlers: CompletionHandlers): Promise<void> {
  const response = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    credentials: 'same-origin',
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!response.ok || !response.body) throw new CompletionError(response.status, await response.json().catch(() => undefined));
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let id: string | undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const { data, rest } = takeEvents(buffer + value);
    buffer = rest;
    for (const item of data) {
      if (item === '[DONE]') return;
      const chunk = JSON.parse(item) as Chunk;
      if (chunk.error) throw new CompletionError(500, chunk);
      if (chunk.id && chunk.id !== id) handlers.onId((id = chunk.id));
      const choice = chunk.choices?.[0];
      if (choice?.delta?.content) handlers.onDelta(choice.delta.content);
      if (choice?.finish_reason) handlers.onFinish(choice.finish_reason);
      if (chunk.usage) handlers.onUsage(chunk.usage);
    }
  }
}
