/** Errors a Route Session ends with. Mapped to HTTP statuses once, at the edge. */

/** No peer (and not the head) can serve a layer range the route needs. */
export class RouteUnavailableError extends Error {
  override readonly name = 'RouteUnavailableError';
  readonly code = 'route_unavailable';
  constructor(reason: string) {
    super(`route unavailable: ${reason}`);
  }
}

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
