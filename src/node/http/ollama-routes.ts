/**
 * Ollama's API beside OpenAI's, for the apps and plugins that speak only it: `/api/tags`,
 * `/api/ps`, `/api/version` (GET), `/api/show`, `/api/chat`, `/api/generate` (POST). Chat and
 * generate are parsed into the OpenAI routes' requests (`src/node/ollama/`) and run by the same
 * completion runner — core's one entry — with Ollama's answer objects and NDJSON streams.
 * Errors are Ollama's shape, `{ "error": "…" }`, with the status the OpenAI routes would give;
 * the API key and CORS rules are the head's own (the middleware in serve-head.ts).
 */
import { imageRefusal } from '../../core/model/architectures.ts';
import type { H3 } from 'h3';
import { ApiError, mapError } from '../openai/errors.ts';
import { OllamaAnswer } from '../ollama/ollama-answers.ts';
import { OLLAMA_API_VERSION, psBody, type ServedModel, showBody, tagsBody } from '../ollama/ollama-models.ts';
import { type OllamaRequest, ollamaFields, parseOllamaChat, parseOllamaGenerate, requireModel } from '../ollama/ollama-requests.ts';
import type { HeadContext } from '../head/head-node.ts';
import { runCompletion, type RunnerContext } from './completion-runner.ts';
import { type BodyLimits, jsonResponse, readJsonBody } from './respond.ts';

/** The route patterns of Ollama's API (their refusals, a 401 included, are in Ollama's shape). */
export const OLLAMA_ROUTES: ReadonlySet<string> = new Set(['/api/version', '/api/tags', '/api/ps', '/api/show', '/api/chat', '/api/generate']);

export const NDJSON_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };

export interface OllamaRoutesOptions extends RunnerContext {
  readonly body: BodyLimits;
  readonly startedAt: number;
  /** meshnet's own version (`/api/version` says it beside the API level). */
  readonly version: string;
  readonly onResponse: (endpoint: string, status: number) => void;
}

/** Any thrown value as an Ollama error response. */
export function ollamaErrorResponse(error: unknown): Response {
  const api = error instanceof ApiError ? error : mapError(error);
  const headers: Record<string, string> = api.retryAfterSeconds !== undefined ? { 'retry-after': String(api.retryAfterSeconds) } : {};
  if (api.closesConnection) headers.connection = 'close';
  return jsonResponse({ error: api.message }, api.status, headers);
}

/** What `/api/tags`, `/api/ps` and `/api/show` say about the head's model. */
export function servedModel(head: HeadContext, startedAt: number): ServedModel {
  const { checkpoint } = head.model;
  const { config } = checkpoint;
  let parameterCount = 0;
  for (const tensor of checkpoint.tensors.values()) parameterCount += tensor.shape.reduce((a, b) => a * b, 1);
  return {
    name: head.name,
    architecture: config.architecture,
    parameterCount,
    sizeBytes: checkpoint.files.reduce((sum, file) => sum + file.size, 0),
    digest: head.model.key,
    weightFormat: head.weights.format,
    contextLength: head.limits.contextLength,
    layers: config.numLayers,
    hiddenSize: config.hiddenSize,
    heads: config.numHeads,
    kvHeads: config.numKvHeads,
    vocabSize: config.vocabSize,
    chatTemplate: head.tokenizer.chatTemplate.text,
    servedSince: startedAt,
  };
}

export function mountOllamaRoutes(app: H3, options: OllamaRoutesOptions): void {
  const { head } = options;
  const model = servedModel(head, options.startedAt);
  const refusal = imageRefusal(head.model.checkpoint.config.architecture);
  const counted = (endpoint: string, handler: (request: Request) => Promise<Response>) => async (event: { req: Request }) => {
    let response: Response;
    try {
      response = await handler(event.req);
    } catch (error) {
      response = ollamaErrorResponse(error);
    }
    options.onResponse(endpoint, response.status);
    return response;
  };

  app.get('/api/version', counted('/api/version', async () => jsonResponse({ version: OLLAMA_API_VERSION, meshnet: options.version })));
  app.get('/api/tags', counted('/api/tags', async () => jsonResponse(tagsBody(model))));
  app.get('/api/ps', counted('/api/ps', async () => jsonResponse(psBody(model, Date.now()))));
  app.post(
    '/api/show',
    counted('/api/show', async (request) => {
      requireModel(ollamaFields(await readJsonBody(request, options.body)), head.name);
      return jsonResponse(showBody(model));
    }),
  );
  app.post('/api/chat', counted('/api/chat', async (request) => answer(options, parseOllamaChat(await readJsonBody(request, options.body), head.name, refusal), request.signal)));
  app.post('/api/generate', counted('/api/generate', async (request) => answer(options, parseOllamaGenerate(await readJsonBody(request, options.body), head.name, refusal), request.signal)));
}

async function answer(ctx: RunnerContext, request: OllamaRequest, signal: AbortSignal): Promise<Response> {
  const { run } = request;
  if (run === undefined) {
    // An empty prompt or no messages: Ollama's "load the model" call (the model is always loaded).
    const answer = request.endpoint === 'generate' ? { response: '' } : { message: { role: 'assistant', content: '' } };
    const loaded = { model: request.model, created_at: new Date().toISOString(), ...answer, done: true, done_reason: 'load' };
    return request.stream ? new Response(`${JSON.stringify(loaded)}\n`, { headers: NDJSON_HEADERS }) : jsonResponse(loaded);
  }
  return runCompletion(ctx, run, signal, {
    streamHeaders: NDJSON_HEADERS,
    errorResponse: ollamaErrorResponse,
    format: ({ tokenText, toolCalls, telemetry }) => {
      const answer = new OllamaAnswer({ endpoint: request.endpoint, model: request.model, logprobs: run.logprobs, topLogprobs: run.topLogprobs, tokenText, toolCalls, telemetry });
      return {
        whole: (_meta, result) => answer.whole(result),
        stream: () => {
          const lines = answer.stream();
          return { start: () => '', push: (event) => lines.push(event), end: () => '', fail: (error) => lines.fail(error.message) };
        },
      };
    },
  });
}
