/**
 * `/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/v1/responses` on h3. Each handler
 * parses the body and hands the request to the completion runner (core's entry does the rest).
 */
import type { H3, H3Event } from 'h3';
import { imageRefusal } from '../../core/model/architectures.ts';
import { parseChatRequest, parseCompletionRequest } from '../openai/requests.ts';
import { modelNotFound } from '../openai/errors.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { answerResponses } from './responses-route.ts';
import { type BodyLimits, errorResponse, jsonResponse, readJsonBody } from './respond.ts';

export interface OpenAIRoutesOptions extends RunnerContext {
  /** The body's size and arrival-time bounds (413, 408). */
  readonly body: BodyLimits;
  readonly startedAt: number;
  readonly onResponse: (endpoint: string, status: number) => void;
}

export function mountOpenAIRoutes(app: H3, options: OpenAIRoutesOptions): void {
  const { head } = options;
  const { vocabSize, architecture } = head.model.checkpoint.config;
  const refusal = imageRefusal(architecture);
  const defaults = { vocabSize, ...(refusal === undefined ? {} : { imageRefusal: refusal }) };
  // `max_model_len`: the context in tokens, as vLLM reports it (the chat page fits turns to it).
  const modelCard = { id: head.name, object: 'model', created: Math.floor(options.startedAt / 1000), owned_by: 'meshnet', max_model_len: head.limits.contextLength };
  const counted = (endpoint: string, handler: (request: Request, event: H3Event) => Promise<Response>) => async (event: H3Event) => {
    let response: Response;
    try {
      response = await handler(event.req, event);
    } catch (error) {
      response = errorResponse(error);
    }
    options.onResponse(endpoint, response.status);
    return response;
  };

  app.get(
    '/v1/models',
    counted('/v1/models', async () =>
      jsonResponse({ object: 'list', data: [modelCard] }),
    ),
  );
  app.get(
    '/v1/models/:id',
    counted('/v1/models', async (_request, event) => {
      // The router's param (the same normalized path the key check saw), then its escapes.
      const raw = String(event.context.params?.id ?? '');
      let id: string;
      try {
        id = decodeURIComponent(raw);
      } catch {
        id = raw;
      }
      if (id !== head.name) return errorResponse(modelNotFound(id));
      return jsonResponse(modelCard);
    }),
  );

  app.post(
    '/v1/chat/completions',
    counted('/v1/chat/completions', async (request) => {
      const parsed = parseChatRequest(await readJsonBody(request, options.body), head.name, defaults);
      return runCompletion(options, parsed, request.signal);
    }),
  );

  app.post(
    '/v1/completions',
    counted('/v1/completions', async (request) => {
      const parsed = parseCompletionRequest(await readJsonBody(request, options.body), head.name, defaults);
      return runCompletion(options, parsed, request.signal);
    }),
  );

  app.post(
    '/v1/responses',
    counted('/v1/responses', (request) => answerResponses(options, defaults, options.body, request)),
  );
}
