/**
 * The OpenAI edge of the head worker, without HTTP: request parsing, error mapping, response
 * and stream builders. The h3 routes call these and only move bytes.
 */
export * from './errors.ts';
export * from './requests.ts';
export * from './responses.ts';
export * from './stream.ts';
