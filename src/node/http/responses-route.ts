/**
 * `POST /v1/responses`: the Responses body translated to the chat request the chat route
 * builds (`parseResponsesRequest`), planned like chat (`planStructuredChat`: the prompt with
 * the tools through the chat template, the grammar of `text.format` and the tool calls), and
 * run by the same completion runner, which answers with `Response` objects and Responses
 * stream events (`responsesFormat`).
 */
import { planStructuredChat } from '../../core/model/structured-output.ts';
import { ApiError, mapError } from '../openai/errors.ts';
import type { RequestDefaults } from '../openai/requests.ts';
import { parseResponsesRequest } from '../openai/responses-request.ts';
import { responsesFormat } from './answer-formats.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { type BodyLimits, readJsonBody } from './respond.ts';

/**
 * Errors name the Responses fields the client sent: the prompt's is `input` (mapped with that
 * context: context length, a chat template's refusal), and a schema the grammar engine refuses
 * — chat's `response_format` — is `text.format`.
 */
function asResponsesError(error: unknown): ApiError {
  const api = mapError(error, { promptParam: 'input' });
  if (api.param !== 'response_format') return api;
  return new ApiError(api.status, api.message.replaceAll("'response_format'", "'text.format'"), { type: api.type, param: 'text.format', code: api.code, cause: api });
}

export async function answerResponses(ctx: RunnerContext, defaults: RequestDefaults, body: BodyLimits, request: Request): Promise<Response> {
  const { chat, echo } = parseResponsesRequest(await readJsonBody(request, body), ctx.head.name, defaults);
  try {
    const plan = planStructuredChat(ctx.head.tokenizer, { messages: chat.messages, responseFormat: chat.responseFormat, tools: chat.tools });
    const promptIds = ctx.head.tokenizer.encode(plan.prompt, { addSpecialTokens: false });
    return await runCompletion(ctx, chat, promptIds, request.signal, { plan, promptParam: 'input', format: (answer) => responsesFormat(echo, chat.logprobs, answer) });
  } catch (error) {
    throw asResponsesError(error);
  }
}
