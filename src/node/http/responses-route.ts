/**
 * `POST /v1/responses`: the Responses body translated to the chat request the chat route
 * builds (`parseResponsesRequest`), rendered through the chat template, and run by the same
 * completion runner, which answers with `Response` objects and Responses stream events
 * (`responsesFormat`).
 */
import { ApiError } from '../openai/errors.ts';
import type { RequestDefaults } from '../openai/requests.ts';
import { parseResponsesRequest } from '../openai/responses-request.ts';
import { responsesFormat } from './answer-formats.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { type BodyLimits, readJsonBody } from './respond.ts';

/** The chat request's context-length refusals name `messages`; a Responses client sent `input`. */
function asInputError(error: unknown): unknown {
  if (!(error instanceof ApiError) || error.param !== 'messages') return error;
  return new ApiError(error.status, error.message.replaceAll('messages', 'input'), { type: error.type, param: 'input', code: error.code, cause: error });
}

export async function answerResponses(ctx: RunnerContext, defaults: RequestDefaults, body: BodyLimits, request: Request): Promise<Response> {
  const { chat, echo } = parseResponsesRequest(await readJsonBody(request, body), ctx.head.name, defaults);
  try {
    const prompt = ctx.head.tokenizer.applyChatTemplate(chat.messages, { addGenerationPrompt: true });
    const promptIds = ctx.head.tokenizer.encode(prompt, { addSpecialTokens: false });
    return await runCompletion(ctx, chat, promptIds, request.signal, (tokenText) => responsesFormat(echo, chat.logprobs, tokenText));
  } catch (error) {
    throw asInputError(error);
  }
}
