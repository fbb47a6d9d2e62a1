/**
 * Route Session events → the Responses API's stream events, in order, each with its
 * `sequence_number` (0, 1, 2, …). A pure state machine like the chat stream builders:
 *
 *   response.created, response.in_progress              (the in-progress Response, no output)
 *   then, per output item, in the order the model writes them:
 *     a message:       response.output_item.added        (in progress, no content)
 *                      response.content_part.added       (an empty output_text part)
 *                      response.output_text.delta × n    (one per token with text; logprobs when asked)
 *                      response.output_text.done, response.content_part.done, response.output_item.done
 *     a function call: response.output_item.added        (in progress, call_id and name, arguments '')
 *                      response.function_call_arguments.delta × n
 *                      response.function_call_arguments.done, response.output_item.done
 *   response.completed | response.incomplete            (the whole Response, usage included)
 *
 * Without tools the answer is one message. With tools (`ResponseContext.tools`) the text is
 * read by the tool-call reader: content opens a message, a call closes the item before it and
 * opens a function_call item. Whitespace before a first call is not a message of its own (as
 * chat's content is null then). An answer with nothing in it is one empty message.
 *
 * A failure after the stream started ends it with `response.failed` (status `failed`, the
 * items so far, the open one incomplete); nothing follows a terminal event. SSE framing is
 * `event: <type>` plus `data: <json>`, and no `[DONE]` (api.openai.com sends none here).
 */
import type { ToolStreamEvent } from '../../core/model/tools/tool-call-parser.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { ApiError } from './errors.ts';
import type { ChosenToken, GenerationResult } from './responses.ts';
import {
  type OutputItem,
  type OutputText,
  type ResponseContext,
  type ResponseLogprob,
  type ResponseObject,
  finishStatus,
  functionCallItem,
  itemId,
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

type ItemStatus = 'completed' | 'incomplete';

/** The item being written. */
type OpenItem =
  | { readonly kind: 'message'; readonly id: string; text: string; readonly logprobs: ResponseLogprob[] }
  | { readonly kind: 'call'; readonly id: string; readonly call: { id: string; name: string; arguments: string } };

export class ResponsesStreamBuilder {
  private sequence = 0;
  private started = false;
  private ended = false;
  private readonly items: OutputItem[] = [];
  private open: OpenItem | undefined;
  /** With tools: whitespace not yet known to be content (it is dropped before a call). */
  private held = '';
  private heldLogprobs: ResponseLogprob[] = [];

  constructor(
    private readonly ctx: ResponseContext,
    private readonly now: () => number = () => Math.floor(Date.now() / 1000),
  ) {}

  /** created and in_progress. Once only. */
  start(): ResponseStreamEvent[] {
    if (this.started) return [];
    this.started = true;
    const inProgress = responseObject(this.ctx, { status: 'in_progress', output: [] });
    return [this.event('response.created', { response: inProgress }), this.event('response.in_progress', { response: inProgress })];
  }

  /** The events for one session event (the start events first, if not sent yet). */
  push(event: SessionEvent): ResponseStreamEvent[] {
    if (this.ended) throw new Error('responses stream builder: event after the end');
    const events = this.start();
    const { tools } = this.ctx;
    if (event.type === 'token') {
      const logprobs = this.ctx.logprobs ? responseLogprobs([event], this.ctx.tokenText) : [];
      if (tools) events.push(...this.apply(tools.token(event.tokenId, event.text), logprobs));
      else if (event.text !== '' || logprobs.length > 0) events.push(...this.content(event.text, logprobs));
      return events;
    }
    if (tools) events.push(...this.apply(tools.finish(event.text), []));
    else if (event.text !== '') events.push(...this.content(event.text, []));
    this.ended = true;
    const finish = finishStatus(event.finishReason);
    const status: ItemStatus = finish.status === 'completed' ? 'completed' : 'incomplete';
    const calls = this.open?.kind === 'call' || this.items.some((item) => item.type === 'function_call');
    if (this.held !== '' && !calls) events.push(...this.openMessage());
    if (this.open === undefined && this.items.length === 0) events.push(...this.openMessage());
    events.push(...this.close(status));
    const response = responseObject(this.ctx, { status: finish.status, incompleteDetails: finish.incomplete_details, output: [...this.items], usage: event.usage, completedAt: this.now() });
    events.push(this.event(finish.status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
    return events;
  }

  /** `response.failed` carrying what was generated so far; nothing after it. */
  fail(error: ApiError): ResponseStreamEvent[] {
    if (this.ended) return [];
    const events = this.start();
    this.ended = true;
    const output = [...this.items, ...(this.open ? [this.item(this.open, 'incomplete')] : [])];
    const response: ResponseObject = responseObject(this.ctx, { status: 'failed', output, error });
    events.push(this.event('response.failed', { response }));
    return events;
  }

  /** The tool-call reader's events; the token's logprobs ride on its first content. */
  private apply(parsed: readonly ToolStreamEvent[], logprobs: ResponseLogprob[]): ResponseStreamEvent[] {
    const events: ResponseStreamEvent[] = [];
    let pending = logprobs;
    for (const event of parsed) {
      if (event.type === 'content') {
        events.push(...this.content(event.text, pending));
        pending = [];
      } else if (event.type === 'call') events.push(...this.openCall({ id: event.id, name: event.name, arguments: '' }));
      else events.push(...this.arguments(event.text));
    }
    return events;
  }

  private content(text: string, logprobs: ResponseLogprob[]): ResponseStreamEvent[] {
    if (this.open?.kind !== 'message' && this.ctx.tools && text.trim() === '') {
      this.held += text;
      this.heldLogprobs.push(...logprobs);
      return [];
    }
    const events = this.open?.kind === 'message' ? [] : this.openMessage();
    const message = this.open as Extract<OpenItem, { kind: 'message' }>;
    message.text += text;
    message.logprobs.push(...logprobs);
    const { id } = message;
    events.push(this.event('response.output_text.delta', { item_id: id, output_index: this.items.length, content_index: 0, delta: text, logprobs: streamLogprobs(logprobs) }));
    return events;
  }

  /** Closes the open item, opens a message and writes what was held into it. */
  private openMessage(): ResponseStreamEvent[] {
    const events = this.close('completed');
    const id = itemId(this.ctx.meta.id, 'msg', this.items.length);
    this.open = { kind: 'message', id, text: '', logprobs: [] };
    const outputIndex = this.items.length;
    events.push(
      this.event('response.output_item.added', { output_index: outputIndex, item: outputMessage(id, 'in_progress', []) }),
      this.event('response.content_part.added', { item_id: id, output_index: outputIndex, content_index: 0, part: outputText('') }),
    );
    if (this.held !== '' || this.heldLogprobs.length > 0) {
      const [text, logprobs] = [this.held, this.heldLogprobs];
      [this.held, this.heldLogprobs] = ['', []];
      events.push(...this.content(text, logprobs));
    }
    return events;
  }

  private openCall(call: ToolCall): ResponseStreamEvent[] {
    const events = this.close('completed');
    [this.held, this.heldLogprobs] = ['', []];
    const id = itemId(this.ctx.meta.id, 'fc', this.items.length);
    this.open = { kind: 'call', id, call: { ...call } };
    events.push(this.event('response.output_item.added', { output_index: this.items.length, item: functionCallItem(id, 'in_progress', call) }));
    return events;
  }

  private arguments(delta: string): ResponseStreamEvent[] {
    if (this.open?.kind !== 'call') return []; // the reader only sends arguments inside a call
    this.open.call.arguments += delta;
    return [this.event('response.function_call_arguments.delta', { item_id: this.open.id, output_index: this.items.length, delta })];
  }

  /** The done events of the open item, which joins the output. */
  private close(status: ItemStatus): ResponseStreamEvent[] {
    const open = this.open;
    if (open === undefined) return [];
    this.open = undefined;
    const outputIndex = this.items.length;
    const item = this.item(open, status);
    this.items.push(item);
    if (item.type === 'function_call') {
      return [
        this.event('response.function_call_arguments.done', { item_id: item.id, name: item.name, output_index: outputIndex, arguments: item.arguments }),
        this.event('response.output_item.done', { output_index: outputIndex, item }),
      ];
    }
    const part = item.content[0];
    return [
      this.event('response.output_text.done', { item_id: item.id, output_index: outputIndex, content_index: 0, text: part.text, logprobs: streamLogprobs(part.logprobs) }),
      this.event('response.content_part.done', { item_id: item.id, output_index: outputIndex, content_index: 0, part }),
      this.event('response.output_item.done', { output_index: outputIndex, item }),
    ];
  }

  private item(open: OpenItem, status: ItemStatus): OutputItem {
    if (open.kind === 'call') return functionCallItem(open.id, status, open.call);
    const part: OutputText = outputText(open.text, [...open.logprobs]);
    return outputMessage(open.id, status, [part]);
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

/**
 * A finished generation as one whole Response object: the stream builder's last object for the
 * same tokens, so a whole response and a streamed one cannot differ.
 */
export function wholeResponse(ctx: ResponseContext, result: GenerationResult, completedAt: number): ResponseObject {
  let streamed = 0;
  const events: SessionEvent[] = result.tokens.map((token: ChosenToken) => {
    streamed += token.text.length;
    return { type: 'token', ...token };
  });
  events.push({ type: 'done', finishReason: result.finishReason, text: result.text.slice(streamed), usage: result.usage });
  const last = responsesStreamEvents(events, ctx, () => completedAt).at(-1)!;
  return last.response as ResponseObject;
}
