/**
 * Route Session events → the Responses API's stream events, in order, each with its
 * `sequence_number` (0, 1, 2, …). A pure state machine like the chat stream builders:
 *
 *   response.created, response.in_progress              (the in-progress Response, no output)
 *   response.output_item.added                          (the message item, in progress, no content)
 *   response.content_part.added                         (an empty output_text part)
 *   response.output_text.delta × n                      (one per token with text; logprobs when asked)
 *   response.output_text.done, response.content_part.done, response.output_item.done
 *   response.completed | response.incomplete            (the whole Response, usage included)
 *
 * A failure after the stream started ends it with `response.failed` (status `failed`, the
 * error's message); nothing follows a terminal event. SSE framing is `event: <type>` plus
 * `data: <json>`, and no `[DONE]` (api.openai.com sends none on this endpoint).
 */
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { ApiError } from './errors.ts';
import type { ChosenToken } from './responses.ts';
import {
  type OutputMessage,
  type OutputText,
  type ResponseContext,
  type ResponseLogprob,
  type ResponseObject,
  finishStatus,
  messageId,
  outputMessage,
  outputText,
  responseLogprobs,
  responseObject,
  streamLogprobs,
} from './responses-output.ts';

/** One stream event: `type` names it (the SSE `event:` line), the rest is its data. */
export type ResponseStreamEvent = { readonly type: string; readonly sequence_number: number } & Readonly<Record<string, unknown>>;

/** One event as SSE: `event: <type>` and `data: <json>`. */
export function sseEvent(event: ResponseStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

export class ResponsesStreamBuilder {
  private sequence = 0;
  private started = false;
  private ended = false;
  private text = '';
  private readonly logprobs: ResponseLogprob[] = [];
  private readonly itemId: string;

  constructor(
    private readonly ctx: ResponseContext,
    private readonly now: () => number = () => Math.floor(Date.now() / 1000),
  ) {
    this.itemId = messageId(ctx.meta.id);
  }

  /** created, in_progress, the message item and its empty text part. Once only. */
  start(): ResponseStreamEvent[] {
    if (this.started) return [];
    this.started = true;
    const inProgress = responseObject(this.ctx, { status: 'in_progress', output: [] });
    return [
      this.event('response.created', { response: inProgress }),
      this.event('response.in_progress', { response: inProgress }),
      this.event('response.output_item.added', { output_index: 0, item: outputMessage(this.itemId, 'in_progress', []) }),
      this.event('response.content_part.added', { item_id: this.itemId, output_index: 0, content_index: 0, part: outputText('') }),
    ];
  }

  /** The events for one session event (the start events first, if not sent yet). */
  push(event: SessionEvent): ResponseStreamEvent[] {
    if (this.ended) throw new Error('responses stream builder: event after the end');
    const events = this.start();
    if (event.type === 'token') {
      events.push(...this.onToken(event));
      return events;
    }
    this.ended = true;
    if (event.text !== '') events.push(this.delta(event.text, []));
    const finish = finishStatus(event.finishReason);
    const itemStatus = finish.status === 'completed' ? 'completed' : 'incomplete';
    const part = this.part();
    const item = outputMessage(this.itemId, itemStatus, [part]);
    const response = responseObject(this.ctx, { status: finish.status, incompleteDetails: finish.incomplete_details, output: [item], usage: event.usage, completedAt: this.now() });
    events.push(
      this.event('response.output_text.done', { item_id: this.itemId, output_index: 0, content_index: 0, text: this.text, logprobs: streamLogprobs(part.logprobs) }),
      this.event('response.content_part.done', { item_id: this.itemId, output_index: 0, content_index: 0, part }),
      this.event('response.output_item.done', { output_index: 0, item }),
      this.event(finish.status === 'completed' ? 'response.completed' : 'response.incomplete', { response }),
    );
    return events;
  }

  /** `response.failed` carrying what was generated so far; nothing after it. */
  fail(error: ApiError): ResponseStreamEvent[] {
    if (this.ended) return [];
    const events = this.start();
    this.ended = true;
    const output: OutputMessage[] = [outputMessage(this.itemId, 'incomplete', [this.part()])];
    const response: ResponseObject = responseObject(this.ctx, { status: 'failed', output, error });
    events.push(this.event('response.failed', { response }));
    return events;
  }

  private onToken(token: ChosenToken): ResponseStreamEvent[] {
    const logprobs = this.ctx.logprobs ? responseLogprobs([token], this.ctx.tokenText) : [];
    this.logprobs.push(...logprobs);
    if (token.text === '' && logprobs.length === 0) return [];
    return [this.delta(token.text, logprobs)];
  }

  private delta(text: string, logprobs: ResponseLogprob[]): ResponseStreamEvent {
    this.text += text;
    return this.event('response.output_text.delta', { item_id: this.itemId, output_index: 0, content_index: 0, delta: text, logprobs: streamLogprobs(logprobs) });
  }

  private part(): OutputText {
    return outputText(this.text, [...this.logprobs]);
  }

  private event(type: string, fields: Record<string, unknown>): ResponseStreamEvent {
    return { type, sequence_number: this.sequence++, ...fields };
  }
}

/** Every event of a finished event list (tests, replays). */
export function responsesStreamEvents(events: Iterable<SessionEvent>, ctx: ResponseContext, now?: () => number): ResponseStreamEvent[] {
  const builder = new ResponsesStreamBuilder(ctx, now);
  const out = builder.start();
  for (const event of events) out.push(...builder.push(event));
  return out;
}
