/**
 * Errors a Route Session (or the session table) ends with. Mapped to HTTP statuses once, at the
 * edge. A route that cannot be served at all is the mesh's RouteUnavailableError (mesh/plan-error.ts).
 */

/** A hop answered with something the session cannot use (a bug or corruption on that peer). */
export class HopFailedError extends Error {
  override readonly name = 'HopFailedError';
  constructor(
    readonly hop: number,
    readonly peerId: string,
    message: string,
  ) {
    super(`hop ${hop} (peer ${peerId}): ${message}`);
  }
}

/** A hop did not answer within its deadline (derived from its recent latency, at least the floor). */
export class HopDeadlineError extends Error {
  override readonly name = 'HopDeadlineError';
  constructor(
    readonly hop: number,
    readonly peerId: string,
    readonly deadlineMs: number,
  ) {
    super(`hop ${hop} (peer ${peerId}) did not answer within ${Math.round(deadlineMs)} ms`);
  }
}

/**
 * `--verify`: a hop's well-formed answer disagreed with a replay of the same inputs on another
 * holder of its range (`difference` and `tolerance` relative to the answer's scale; verify-hop.ts).
 */
export class HopMismatchError extends Error {
  override readonly name = 'HopMismatchError';
  constructor(
    readonly hop: number,
    readonly peerId: string,
    readonly witnessId: string,
    readonly difference: number,
    readonly tolerance: number,
  ) {
    super(`hop ${hop} (peer ${peerId}) answered activations that differ from ${witnessId}'s replay by ${difference.toPrecision(2)}, over the tolerance ${tolerance}`);
  }
}

/** Every session slot (`--max-sessions`) is taken. */
export class SessionLimitError extends Error {
  override readonly name = 'SessionLimitError';
  readonly code = 'session_limit';
  constructor(readonly limit: number) {
    super(`the server is running its maximum of ${limit} sessions; retry shortly`);
  }
}

/** `--min-peers` were not there within `--peer-wait`. */
export class PeerWaitError extends Error {
  override readonly name = 'PeerWaitError';
  readonly code = 'route_unavailable';
  constructor(
    readonly wanted: number,
    readonly joined: number,
    readonly waitedMs: number,
  ) {
    super(`waited ${Math.round(waitedMs / 1000)} s for ${wanted} peer(s) to join, ${joined} did; open /peer in a browser or start 'meshnet peer'`);
  }
}

/** The head is shutting down: live sessions are cancelled and new ones refused. */
export class ShuttingDownError extends Error {
  override readonly name = 'ShuttingDownError';
  readonly code = 'shutting_down';
  constructor() {
    super('the server is shutting down');
  }
}

/** The prompt holds no token (an empty string, or a template that rendered nothing). */
export class EmptyPromptError extends Error {
  override readonly name = 'EmptyPromptError';
  constructor() {
    super('the prompt is empty after tokenization');
  }
}

/**
 * The answer's format (`field` 'format': a JSON schema or JSON mode) or its tool calls
 * (`field` 'tools') cannot be served: `invalid_schema` (the grammar engine refused it, `detail`
 * says why), `no_end_token` (the model defines no end-of-sequence token, so a constrained
 * answer could never end) or `unwritable` (this model's vocabulary cannot write its first token).
 */
export class AnswerFormatError extends Error {
  override readonly name = 'AnswerFormatError';
  constructor(
    readonly problem: 'invalid_schema' | 'no_end_token' | 'unwritable',
    readonly field: 'format' | 'tools',
    readonly detail: string,
  ) {
    super(`the answer's ${field === 'tools' ? 'tool calls' : 'format'} cannot be served (${problem}): ${detail}`);
  }
}
