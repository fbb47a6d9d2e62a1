/**
 * `POST /v1/responses`: the Responses body translated to the chat request the chat route
 * builds (`parseResponsesRequest`) and run by the same completion runner — core's entry
 * renders it like chat (the tools through the chat template, the grammar of `text.format` and
 * the tool calls) — which answers with `Response` objects and Responses stream events
 * (`responsesFormat`). Errors name the Responses fields the client sent: the prompt's is
 * `input` (context length, a chat template's refusal), the answer format's `text.format`.
 */
import type { RequestDefaults } from '../openai/requests.ts';
import { parseResponsesRequest } from '../openai/responses-request.ts';
import { responsesFormat } from './answer-formats.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { type BodyLimits, readJsonBody } from './respond.ts';

export async function answerResponses(ctx: RunnerContext, defaults: RequestDefaults, body: BodyLimits, request: Request): Promise<Response> {
  const { chat, echo } = parseResponsesRequest(await readJsonBody(request, body), ctx.head.name, defaults);
  return runCompletion(ctx, chat, request.signal, {
    idPrefix: 'resp_',
    errors: { promptParam: 'input', formatParam: 'text.format' },
    format: (answer) => responsesFormat(echo, chat.logprobs, answer),
  });
}
