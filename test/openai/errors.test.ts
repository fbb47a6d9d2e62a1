import { describe, expect, it } from 'vitest';
import { ContextLengthError } from '../../src/core/model/generation-limits.ts';
import { TokenizerError } from '../../src/core/model/tokenizer-error.ts';
import { PlanError } from '../../src/core/mesh/plan-error.ts';
import { RouteUnavailableError } from '../../src/core/mesh/plan-error.ts';
import { HopFailedError } from '../../src/core/route/route-errors.ts';
import { SamplingParamError, validateSamplingParams } from '../../src/core/sampling/params.ts';
import {
  ApiError,
  internalError,
  invalidJsonBody,
  invalidRequest,
  mapError,
  methodNotAllowed,
  modelNotFound,
  payloadTooLarge,
  serviceUnavailable,
  toErrorBody,
  tooManyRequests,
  unauthorized,
  unknownPath,
} from '../../src/node/openai/errors.ts';

describe('toErrorBody', () => {
  it('has exactly the OpenAI keys', () => {
    const body = toErrorBody(invalidRequest('bad', 'temperature', 'invalid_type'));
    expect(body).toStrictEqual({ error: { message: 'bad', type: 'invalid_request_error', param: 'temperature', code: 'invalid_type' } });
    expect(Object.keys(body.error)).toEqual(['message', 'type', 'param', 'code']);
  });

  it('never carries the cause', () => {
    const err = internalError(new Error('secret /home/x/y.ts'));
    expect(JSON.stringify(toErrorBody(err))).not.toContain('secret');
  });
});

describe('helpers', () => {
  const cases: [string, ApiError, number, string, string | null, string | null, string][] = [
    ['invalidRequest', invalidRequest('m', 'p'), 400, 'invalid_request_error', 'p', null, 'm'],
    ['invalidJsonBody', invalidJsonBody(), 400, 'invalid_request_error', null, 'invalid_json', 'We could not parse the JSON body'],
    ['unauthorized', unauthorized(), 401, 'invalid_request_error', null, 'invalid_api_key', 'Incorrect API key provided.'],
    ['modelNotFound', modelNotFound('gpt-x'), 404, 'invalid_request_error', 'model', 'model_not_found', "The model 'gpt-x' does not exist or you do not have access to it."],
    ['unknownPath', unknownPath('post', '/v1/foo'), 404, 'invalid_request_error', null, null, 'Invalid URL (POST /v1/foo)'],
    ['methodNotAllowed', methodNotAllowed('get', '/v1/chat/completions'), 405, 'invalid_request_error', null, null, 'Invalid method for URL (GET /v1/chat/completions)'],
    ['payloadTooLarge', payloadTooLarge(1024), 413, 'invalid_request_error', null, 'request_too_large', 'the limit is 1024 bytes'],
    ['tooManyRequests', tooManyRequests('too many sessions: 8 running, limit 8', 2), 429, 'requests', null, 'rate_limit_exceeded', 'too many sessions'],
    ['serviceUnavailable', serviceUnavailable('no peers'), 503, 'server_error', null, 'route_unavailable', 'no peers'],
    ['internalError', internalError(), 500, 'server_error', null, null, 'The server had an error while processing your request.'],
  ];
  it.each(cases)('%s', (_name, err, status, type, param, code, message) => {
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(status);
    expect(err.type).toBe(type);
    expect(err.param).toBe(param);
    expect(err.code).toBe(code);
    expect(err.message).toContain(message);
  });

  it('keeps Retry-After seconds when given', () => {
    expect(tooManyRequests('x', 3).retryAfterSeconds).toBe(3);
    expect(serviceUnavailable('x', 5).retryAfterSeconds).toBe(5);
    expect(tooManyRequests('x').retryAfterSeconds).toBeUndefined();
  });
});

describe('mapError', () => {
  it('passes ApiError through', () => {
    const err = modelNotFound('m');
    expect(mapError(err)).toBe(err);
  });

  it('maps SamplingParamError to 400 naming the OpenAI param', () => {
    let thrown: unknown;
    try {
      validateSamplingParams({ topP: 0 });
    } catch (e) {
      thrown = e;
    }
    const err = mapError(thrown);
    expect(err.status).toBe(400);
    expect(err.type).toBe('invalid_request_error');
    expect(err.param).toBe('top_p');
    expect(err.message).toBe("Invalid 'top_p': must be in (0, 1], got 0.");
    expect(err.cause).toBe(thrown);
    expect(mapError(new SamplingParamError('stopTokenIds[2]', 'bad')).param).toBe('stopTokenIds[2]');
    expect(mapError(new SamplingParamError('stop[1]', 'empty')).param).toBe('stop[1]');
  });

  it('maps route unavailability to 503', () => {
    for (const e of [new RouteUnavailableError('peers hold 3 of 5 layers'), new PlanError('route_unavailable', 'no peers')]) {
      const err = mapError(e);
      expect(err.status).toBe(503);
      expect(err.code).toBe('route_unavailable');
      expect(err.type).toBe('server_error');
      expect(err.message).toContain(e.message);
    }
  });

  it('maps a chat template refusal to 400 messages, a broken tokenizer to 500', () => {
    const refused = mapError(new TokenizerError('tokenizer_config.json', 'chat template failed to render: Conversation roles must alternate'));
    expect(refused.status).toBe(400);
    expect(refused.param).toBe('messages');
    expect(refused.message).toContain('Conversation roles must alternate');
    expect(mapError(new TokenizerError('tokenizer.json', 'missing the "model" object')).status).toBe(500);
  });

  it("on /v1/responses a chat template's refusal names input, and its detail is left as the template wrote it", () => {
    const refused = mapError(new TokenizerError('tokenizer_config.json', 'chat template failed to render: System messages are not supported'), { promptParam: 'input' });
    expect([refused.status, refused.param]).toEqual([400, 'input']);
    expect(refused.message).toBe("The model's chat template refused the input: chat template failed to render: System messages are not supported");
  });

  it('maps anything else to 500 without leaking the message or stack', () => {
    for (const e of [new Error('ENOENT /secret/path'), new HopFailedError(1, 'p', 'nan'), new PlanError('invalid_input', 'x'), 'a string', undefined]) {
      const err = mapError(e);
      expect(err.status).toBe(500);
      expect(err.type).toBe('server_error');
      expect(err.code).toBeNull();
      expect(err.message).toBe('The server had an error while processing your request.');
      expect(err.cause).toBe(e);
    }
  });
});

describe('context_length_exceeded (the session layer refuses, the edge words it as OpenAI does)', () => {
  it('a requested max_tokens that does not fit beside the prompt', () => {
    const err = mapError(new ContextLengthError(2048, 2000, 100), { promptParam: 'messages' });
    expect(err.status).toBe(400);
    expect(err.param).toBe('messages');
    expect(err.code).toBe('context_length_exceeded');
    expect(err.message).toBe(
      "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2000 in the messages, 100 in the completion). Please reduce the length of the messages or completion.",
    );
  });

  it('a prompt that fills the context', () => {
    const err = mapError(new ContextLengthError(2048, 2048));
    expect(err.param).toBe('prompt');
    expect(err.code).toBe('context_length_exceeded');
    expect(err.message).toBe(
      "This model's maximum context length is 2048 tokens. However, your prompt resulted in 2048 tokens. Please reduce the length of the prompt.",
    );
  });
});
