/**
 * Streams a model's answer apart into text and tool calls, in the layout the tool grammar
 * enforces ({@link ToolCallSyntax}). Text before, between and after calls is content; each
 * call yields its start (index, id, name) as soon as the name is complete, then its arguments
 * as they are generated. Whitespace or the separator between calls is not content.
 *
 * The arguments' end is found by scanning the JSON (strings, escapes, nesting), so a `}` or
 * `</tool_call>` inside an argument string never ends a call. Text that does not follow the
 * syntax (impossible under the grammar) is passed through as content.
 *
 * An answer cut short (`max_tokens`) inside a call ends as that call with the arguments written
 * so far; cut before the call's name is complete, it ends as no call. The call syntax written
 * until then is never content: at the end, held text that started a call is dropped — text
 * that began with the trigger, or with `callsOnly` (`tool_choice` required or a named
 * function: the answer holds nothing but calls) any held prefix of a call's opening.
 */
import type { ToolCallSyntax } from './tool-call-format.ts';
import type { ToolCall } from './tool-types.ts';

export type ToolStreamEvent =
  | { readonly type: 'content'; readonly text: string }
  | { readonly type: 'call'; readonly index: number; readonly id: string; readonly name: string }
  | { readonly type: 'arguments'; readonly index: number; readonly text: string };

type Mode = 'text' | 'name' | 'nameClose' | 'arguments' | 'callClose' | 'between';

interface OpenCall {
  id: string;
  name: string;
  arguments: string;
}

/** Length of the longest suffix of `text` that is a proper prefix of `marker`. */
function partialSuffix(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) if (text.endsWith(marker.slice(0, n))) return n;
  return 0;
}

export class ToolCallParser {
  private mode: Mode = 'text';
  private buffer = '';
  private readonly done: OpenCall[] = [];
  private readonly start: string;
  /** Text after a call, held until it proves to be content (not a separator). */
  private afterCall: string | undefined;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private content = '';

  constructor(
    private readonly syntax: ToolCallSyntax,
    private readonly newId: () => string,
    private readonly callsOnly = false,
  ) {
    this.start = syntax.listOpen + syntax.callOpen;
  }

  /** Every call so far (the last one may be incomplete until the answer ends). */
  get calls(): ToolCall[] {
    return this.done.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
  }

  /** All content so far. */
  get text(): string {
    return this.content;
  }

  /** Feeds the next text delta. */
  push(delta: string): ToolStreamEvent[] {
    this.buffer += delta;
    const events: ToolStreamEvent[] = [];
    while (this.step(events));
    return events;
  }

  /** The answer ended: releases text held back (it can no longer start a call). */
  finish(): ToolStreamEvent[] {
    const events: ToolStreamEvent[] = [];
    if (this.mode === 'text' && !this.startedCall(this.buffer)) this.emitContent(this.buffer, events);
    this.buffer = ''; // 'between' holds a prefix of the separator or of the list's end: inside the list
    this.mode = 'text';
    if (this.afterCall !== undefined && this.afterCall.trim() !== '' && this.afterCall !== this.syntax.separator) {
      this.flushContent(this.afterCall, events);
    }
    this.afterCall = undefined;
    return events;
  }

  /** Whether `held`, text kept back at the end because it could open a call, did open one. */
  private startedCall(held: string): boolean {
    if (held === '' || !this.start.startsWith(held)) return false;
    return this.callsOnly || held.startsWith(this.syntax.trigger);
  }

  /** One transition; false when more input is needed. */
  private step(events: ToolStreamEvent[]): boolean {
    const { syntax } = this;
    switch (this.mode) {
      case 'text': {
        const at = this.buffer.indexOf(this.start);
        if (at >= 0) {
          this.emitContent(this.buffer.slice(0, at), events);
          this.afterCall = undefined; // whatever was held between two calls is dropped
          this.buffer = this.buffer.slice(at + this.start.length);
          this.mode = 'name';
          return true;
        }
        const keep = partialSuffix(this.buffer, this.start);
        this.emitContent(this.buffer.slice(0, this.buffer.length - keep), events);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        return false;
      }
      case 'name': {
        const end = this.buffer.indexOf('"');
        if (end < 0) return false;
        const call: OpenCall = { id: this.newId(), name: this.buffer.slice(0, end), arguments: '' };
        this.done.push(call);
        events.push({ type: 'call', index: this.done.length - 1, id: call.id, name: call.name });
        this.buffer = this.buffer.slice(end);
        this.mode = 'nameClose';
        return true;
      }
      case 'nameClose':
        return this.literal(syntax.nameClose, 'arguments', events);
      case 'arguments':
        return this.scanArguments(events);
      case 'callClose': {
        const next: Mode = syntax.listOpen === '' ? 'text' : 'between';
        const matched = this.literal(syntax.callClose, next, events);
        if (matched && next === 'text') this.afterCall = '';
        return matched;
      }
      case 'between': {
        const again = syntax.separator + syntax.callOpen;
        if (this.buffer.startsWith(again)) {
          this.buffer = this.buffer.slice(again.length);
          this.mode = 'name';
          return true;
        }
        if (this.buffer.startsWith(syntax.listClose)) {
          this.buffer = this.buffer.slice(syntax.listClose.length);
          this.mode = 'text';
          this.afterCall = '';
          return true;
        }
        if (again.startsWith(this.buffer) || syntax.listClose.startsWith(this.buffer)) return false;
        this.mode = 'text'; // off the syntax: the rest is text
        return true;
      }
    }
  }

  /** Expects `text` next, then goes to `next`; off the syntax, falls back to text. */
  private literal(text: string, next: Mode, events: ToolStreamEvent[]): boolean {
    if (this.buffer.startsWith(text)) {
      this.buffer = this.buffer.slice(text.length);
      this.mode = next;
      if (next === 'arguments') {
        this.depth = 0;
        this.inString = false;
        this.escaped = false;
      }
      return true;
    }
    if (text.startsWith(this.buffer)) return false;
    this.mode = 'text';
    this.emitContent(this.buffer, events);
    this.buffer = '';
    return false;
  }

  /** Consumes argument JSON up to the end of its top-level value. */
  private scanArguments(events: ToolStreamEvent[]): boolean {
    let i = 0;
    let complete = false;
    for (; i < this.buffer.length && !complete; i++) {
      const c = this.buffer[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === '\\') this.escaped = true;
        else if (c === '"') this.inString = false;
      } else if (c === '"') this.inString = true;
      else if (c === '{' || c === '[') this.depth++;
      else if (c === '}' || c === ']') complete = --this.depth === 0;
    }
    const piece = this.buffer.slice(0, i);
    this.buffer = this.buffer.slice(i);
    if (piece !== '') {
      const index = this.done.length - 1;
      this.done[index].arguments += piece;
      events.push({ type: 'arguments', index, text: piece });
    }
    if (complete) this.mode = 'callClose';
    return complete;
  }

  private emitContent(text: string, events: ToolStreamEvent[]): void {
    if (text === '') return;
    if (this.afterCall === undefined) return this.flushContent(text, events);
    this.afterCall += text;
    const sep = this.syntax.separator;
    if (this.afterCall.trim() !== '' && !sep.startsWith(this.afterCall)) {
      const held = this.afterCall;
      this.afterCall = undefined;
      this.flushContent(held, events);
    }
  }

  private flushContent(text: string, events: ToolStreamEvent[]): void {
    this.content += text;
    events.push({ type: 'content', text });
  }
}
