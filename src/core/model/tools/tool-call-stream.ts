/**
 * A generated answer, token by token, split into content and tool calls: the Route Session's
 * token events in, {@link ToolStreamEvent}s out. Shared by every API that answers with tool
 * calls (chat completions now, the Responses API later).
 *
 * The session streams text with special tokens dropped; a format whose marker is a special
 * token (Mistral's `[TOOL_CALLS]`) gets that marker's text back here, by token id.
 */
import type { SpecialTokens } from '../special-tokens.ts';
import type { ToolCallFormat } from './tool-call-format.ts';
import { ToolCallParser, type ToolStreamEvent } from './tool-call-parser.ts';
import { newToolCallId, type ToolCall } from './tool-types.ts';

export class ToolCallStream {
  private readonly parser: ToolCallParser;
  private readonly markerIds = new Map<number, string>();

  /** `callsOnly`: the answer holds nothing but calls (`tool_choice` required or a named function). */
  constructor(format: ToolCallFormat, specialTokens: SpecialTokens, newId: () => string = () => newToolCallId(format.idLength), callsOnly = false) {
    this.parser = new ToolCallParser(format.syntax, newId, callsOnly);
    for (const marker of format.syntax.markers) {
      const id = specialTokens.ids.get(marker);
      if (id !== undefined) this.markerIds.set(id, marker);
    }
  }

  /** One generated token and the text the session streamed for it. */
  token(tokenId: number, text: string): ToolStreamEvent[] {
    const marker = this.markerIds.get(tokenId);
    return this.parser.push(marker === undefined ? text : marker + text);
  }

  /** The answer ended; `tail` is the text the session released at the end. */
  finish(tail: string): ToolStreamEvent[] {
    return [...this.parser.push(tail), ...this.parser.finish()];
  }

  /**
   * A whole answer at once: its tokens in order (id and streamed text), then `text`, all the
   * text the answer holds (the tokens' texts plus the tail released at the end).
   */
  read(tokens: readonly { readonly tokenId: number; readonly text: string }[], text: string): { readonly content: string; readonly calls: ToolCall[] } {
    let streamed = 0;
    for (const token of tokens) {
      this.token(token.tokenId, token.text);
      streamed += token.text.length;
    }
    this.finish(text.slice(streamed));
    return { content: this.text, calls: this.calls };
  }

  get calls(): ToolCall[] {
    return this.parser.calls;
  }

  /** The content (everything that is not a call). */
  get text(): string {
    return this.parser.text;
  }
}
