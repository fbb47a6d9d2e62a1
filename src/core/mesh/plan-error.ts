/** The typed errors of route planning. Pure: no runtime imports. */

/**
 * - `invalid_input`: the caller passed something malformed (a weight that is not a positive
 *   finite number, a layer range outside the model, duplicate peer ids, …). A bug upstream.
 * - `route_unavailable`: the input is well formed but the mesh cannot serve the model now
 *   (no peers, not enough memory). Retry when peers join; map to 503 at the HTTP edge.
 */
export type PlanErrorCode = 'invalid_input' | 'route_unavailable';

export class PlanError extends Error {
  override readonly name = 'PlanError';
  readonly code: PlanErrorCode;
  /** What is wrong, without the prefix; e.g. 'peers hold 3 of 5 layers'. */
  readonly reason: string;

  constructor(code: PlanErrorCode, reason: string) {
    super(code === 'route_unavailable' ? `route unavailable: ${reason}` : `invalid plan input: ${reason}`);
    this.code = code;
    this.reason = reason;
  }
}

/** No peer (and not the head) can serve a layer range the route needs. */
export class RouteUnavailableError extends Error {
  override readonly name = 'RouteUnavailableError';
  readonly code = 'route_unavailable';
  constructor(reason: string) {
    super(`route unavailable: ${reason}`);
  }
}
