/**
 * The generic tool format, for chat templates that know nothing of tools (Phi-3, the plain
 * fallback, most base models): the tools, earlier calls and their results are written into
 * ordinary system / assistant / user turns, in Hermes' syntax (which the grammar then
 * enforces), so any template can render them.
 *
 * - Tools: one system turn (merged into the conversation's first system turn if it has one):
 *
 *       You may call functions to help with the user's request. The functions are listed as
 *       JSON within <tools></tools>:
 *       <tools>
 *       {"type": "function", "function": {"name": …, "description": …, "parameters": …}}
 *       </tools>
 *       To call functions, answer with one <tool_call></tool_call> block per call:
 *       <tool_call>
 *       {"name": <function-name>, "arguments": <arguments-object>}
 *       </tool_call>
 *
 * - An assistant turn with calls: its text, then each call as a `<tool_call>` block.
 * - Tool results: one user turn per run of consecutive results, each as
 *   `<tool_response>\n{content}\n</tool_response>`.
 */
import type { ChatMessage } from '../chat-template.ts';
import type { ToolFunction } from './tool-types.ts';

export const GENERIC_TOOLS_PREAMBLE =
  "You may call functions to help with the user's request. The functions are listed as JSON within <tools></tools>:";

export const GENERIC_TOOLS_INSTRUCTIONS =
  'To call functions, answer with one <tool_call></tool_call> block per call:\n<tool_call>\n{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call>';

function toolsBlock(tools: readonly ToolFunction[]): string {
  const lines = tools.map((tool) =>
    JSON.stringify({
      type: 'function',
      function: { name: tool.name, ...(tool.description === undefined ? {} : { description: tool.description }), parameters: tool.parameters ?? { type: 'object', properties: {} } },
    }),
  );
  return `${GENERIC_TOOLS_PREAMBLE}\n<tools>\n${lines.join('\n')}\n</tools>\n${GENERIC_TOOLS_INSTRUCTIONS}`;
}

function callBlock(name: string, args: string): string {
  return `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": ${args.trim() === '' ? '{}' : args}}\n</tool_call>`;
}

/** Rewrites `messages` (and `tools`, when given) into turns any template renders. */
export function genericToolMessages(messages: readonly ChatMessage[], tools: readonly ToolFunction[] | undefined): ChatMessage[] {
  const out: ChatMessage[] = [];
  messages.forEach((message, i) => {
    if (message.role === 'tool') {
      const block = `<tool_response>\n${message.content}\n</tool_response>`;
      const last = out[out.length - 1];
      if (messages[i - 1]?.role === 'tool' && last !== undefined) {
        out[out.length - 1] = { role: 'user', content: `${last.content}\n${block}` };
      } else {
        out.push({ role: 'user', content: block });
      }
    } else if (message.role === 'assistant' && message.toolCalls && message.toolCalls.length > 0) {
      const parts = message.content === '' ? [] : [message.content];
      for (const call of message.toolCalls) parts.push(callBlock(call.name, call.arguments));
      out.push({ role: 'assistant', content: parts.join('\n') });
    } else {
      out.push({ role: message.role, content: message.content });
    }
  });
  if (tools && tools.length > 0) {
    const block = toolsBlock(tools);
    if (out[0]?.role === 'system') out[0] = { role: 'system', content: `${out[0].content}\n\n${block}` };
    else out.unshift({ role: 'system', content: block });
  }
  return out;
}
