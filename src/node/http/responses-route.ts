/**
 * `POST /v1/responses`: the Responses body translated to the chat request the chat route
 * builds (`parseResponsesRequest`), planned like chat (`planStructuredChat`: the prompt with
 * the tools through the chat template, the grammar of `text.format` and the tool calls), and
 * run by the same completion runner, which answers with `Response` objects and Responses
 * stream events (`responsesFormat`).
 */
import { planStructuredChat } from '../../core/model/structured-output.ts';
import { ApiError } from '../openai/errors.ts';
import type { RequestDefaults } from '../openai/requests.ts';
import { parseResponsesRequest } from '../openai/responses-request.ts';
import { responsesFormat } from './answer-formats.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { type BodyLimits, readJsonBody } from './respond.ts';

/**
 * The chat request's refusals name chat's fields: the context-length ones `messages`, a schema
 * the grammar engine refuses `response_format`. A Responses client sent `input` and `text.format`.
 */
function asResponsesError(error: unknown): unknown {
  if (!(error instanceof ApiError)) return error;
  const rename = (param: string, message: string) => new ApiError(error.status, message, { type: error.type, param, code: error.code, cause: error });
  if (error.param === 'messages') return rename('input', error.message.replaceAll('messages', 'input'));
  if (error.param === 'response_format') return rename('text.format', error.message.replaceAll("'response_format'", "'text.format'"));
  return error;
}

export async function answerResponses(ctx: RunnerContext, defaults: RequestDefaults, body: BodyLimits, request: Request): Promise<Response> {
  const { chat, echo } = parseResponsesRequest(await readJsonBody(request, body), ctx.head.name, defaults);
  try {
    const plan = planStructuredChat(ctx.head.tokenizer, { messages: chat.messages, responseFormat: chat.responseFormat, tools: chat.tools });
    const promptIds = ctx.head.tokenizer.encode(plan.prompt, { addSpecialTokens: false });
    return await runCompletion(ctx, chat, promptIds, request.signal, { plan, format: (answer) => responsesFormat(echo, chat.logprobs, answer) });
  } catch (error) {
    throw asResponsesError(error);
  }
}
