/**
 * `--api-key`: default-deny. Every route needs the key except an explicit open list; the
 * key is accepted as `Authorization: Bearer K`, `?key=K` (browsers), or the `meshnet_key`
 * cookie that a `?key=` visit to the dashboard sets. The cookie counts only on requests from
 * the head's own origin (see {@link cookieRequestIsSameOrigin}): `SameSite=Strict` still
 * lets a page on another port of the same host (`localhost:3000` → `localhost:8080` is
 * "same-site") send it, and cross-origin callers bring a bearer key anyway.
 *
 * Why the guard reads the route the router matched, not the path: the key check and the
 * router must agree on what a request names. h3 2.0.8 routes on `event.url`, which it builds
 * from the raw request target after the WHATWG URL parser resolved dot segments (`..`,
 * `%2e%2e`, backslashes) and after h3 itself decoded the "needless" percent-escapes of
 * unreserved characters (`%76%31` → `v1`, `%61pi` → `api`; `%2F` and `%25` stay encoded).
 * rou3 then matches that string case-sensitively, ignoring one trailing slash; `//`,
 * `/V1/…` or `/v1/models.` name no route. A guard that parses `event.req.url` again sees
 * `/%76%31/completions` where the router sees `/v1/completions` — that was the bypass. So the
 * guard asks the router's own answer (`event.context.matchedRoute`, set before middleware
 * runs) whether the route is open: there is no second parser to disagree, an encoded path is
 * guarded exactly like its decoded twin, and a path that matches no route (the `/**` 404)
 * is guarded too (401 without the key, the router's 404 with it). h3 marks `matchedRoute`
 * experimental; h3 is pinned, and should it change, every route becomes guarded (the open
 * list's tests fail) rather than open.
 */
import type { H3Event } from 'h3';
import { sameToken } from '../../core/mesh/peer-admission.ts';

export const KEY_COOKIE = 'meshnet_key';

/** The router's catch-all (answers 404); guarded like any other route. */
export const CATCH_ALL_ROUTE = '/**';

/**
 * Route patterns (as registered with h3) that need no API key, for every method. Keep this
 * list short; a test pins it.
 * - `/health`, `/health/live`: probes (load balancers, orchestrators) carry no key.
 * - `/metrics`: Prometheus scrapes; counters only, no request content.
 * - `/peer`, `/peer/app.js`, `/peer/dashboard.css`, `/peer/peer.css`, `/ort/:file`: the browser
 *   join page, its code and stylesheets (public files).
 * - `/peer/ws`: peers join there; it has its own join-token check at `hello`.
 * - `/artifacts/...`: shard artifacts; their own join-token check (`x-meshnet-token`).
 */
export const OPEN_ROUTES: ReadonlySet<string> = new Set([
  '/health',
  '/health/live',
  '/metrics',
  '/peer',
  '/peer/app.js',
  '/peer/dashboard.css',
  '/peer/peer.css',
  '/ort/:file',
  '/peer/ws',
  '/artifacts/:key/:part/:file',
]);

/**
 * A CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`. Browsers
 * never attach credentials to a preflight, so it must pass the key check (the actual request
 * that follows is checked). `edge-headers.ts` answers it (204 or 403) before the key check
 * runs; this is the one exemption hook, kept here too in case the middleware order changes.
 */
export function isPreflight(request: Request): boolean {
  return request.method === 'OPTIONS' && request.headers.has('origin') && request.headers.has('access-control-request-method');
}

/** The route pattern the router matched for `event` (undefined: none). */
export function matchedRoute(event: H3Event): string | undefined {
  return event.context.matchedRoute?.route;
}

/** True when `event` may go on without the key: an open route, or a CORS preflight. */
export function isOpenRequest(event: H3Event): boolean {
  const route = matchedRoute(event);
  return (route !== undefined && OPEN_ROUTES.has(route)) || isPreflight(event.req);
}

/**
 * True when a request that carries the key cookie comes from the head's own origin, or from
 * no page at all. Browsers say where a request comes from in `Sec-Fetch-Site` (`same-origin`;
 * `none` for a typed URL or a bookmark); a browser too old for it still sends `Origin` on
 * cross-origin fetches and form posts, which must then name this host. A non-browser client
 * sends neither (it holds the cookie only if it was given it).
 */
export function cookieRequestIsSameOrigin(request: Request): boolean {
  const site = request.headers.get('sec-fetch-site');
  if (site !== null) return site === 'same-origin' || site === 'none';
  const origin = request.headers.get('origin');
  if (origin === null) return true;
  try {
    return new URL(origin).host === request.headers.get('host');
  } catch {
    return false; // `Origin: null` (sandboxed frames, file: pages) or garbage
  }
}

export function presentedKey(request: Request): string | undefined {
  const auth = request.headers.get('authorization');
  if (auth?.toLowerCase().startsWith('bearer ')) return auth.slice(7).trim();
  const query = new URL(request.url).searchParams.get('key');
  if (query) return query;
  if (!cookieRequestIsSameOrigin(request)) return undefined;
  const cookie = request.headers.get('cookie') ?? '';
  for (const part of cookie.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name !== KEY_COOKIE) continue;
    try {
      return decodeURIComponent(value.join('='));
    } catch {
      return undefined; // a malformed escape is no key (and no 500)
    }
  }
  return undefined;
}

export function isAuthorized(request: Request, apiKey: string | undefined): boolean {
  if (apiKey === undefined) return true;
  const key = presentedKey(request);
  return key !== undefined && key !== '' && sameToken(key, apiKey);
}
