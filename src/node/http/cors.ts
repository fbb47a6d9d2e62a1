/**
 * CORS for browser apps on other origins (`--cors`). Pure: a policy over origin patterns, and
 * the headers of a preflight answer and of an ordinary response. The middleware that applies
 * them is `edge-headers.ts`; what a preflight is, `isPreflight` in `auth.ts` says (one definition
 * for the key check's exemption and for the answer).
 *
 * Rules: cross-origin callers authenticate with a bearer key, never with cookies, so
 * `Access-Control-Allow-Credentials` is never sent (the dashboard's key cookie is
 * `SameSite=Strict` and works from the head's own origin only). A preflight from an allowed
 * origin gets the method it asks for (GET, POST) and the request headers it asks for,
 * reflected (the SDKs send `authorization`, `content-type`, `x-stainless-*`, `openai-*`,
 * `x-request-id`, …) when they are a well-formed header list. Responses expose the headers
 * clients read (`x-request-id`, `retry-after`). A disallowed origin gets no CORS header.
 */

/** One `--cors` entry: `*`, an exact origin, or an origin with `*` as its port (any port). */
export type OriginRule = { readonly kind: 'any' } | { readonly kind: 'exact'; readonly origin: string } | { readonly kind: 'any-port'; readonly scheme: string; readonly host: string };

/** What `--cors` allows when it is not given: the head's own origins and local dev servers. */
export const DEFAULT_CORS = 'http://localhost:*,http://127.0.0.1:*,http://[::1]:*';

export const ALLOWED_METHODS = 'GET, POST, OPTIONS';
/** Response headers a cross-origin page may read (beyond the CORS-safelisted ones). */
export const EXPOSED_HEADERS = 'x-request-id, retry-after';
/** Browsers cache a preflight answer this long (Chromium caps it at 2 hours). */
export const PREFLIGHT_MAX_AGE_SECONDS = 600;
/** Asked-for request headers reflected when the origin is allowed and the list is well formed. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
const MAX_HEADER_LIST = 2048;
/** Used when the asked-for list is missing or malformed: what the OpenAI SDKs send. */
const FALLBACK_HEADERS = 'authorization, content-type, x-request-id, openai-organization, openai-project, openai-beta';

export class CorsOptionError extends Error {
  override readonly name = 'CorsOptionError';
}

/** An `Origin` as browsers send it: `scheme://host[:port]`, lower-case, no path. */
function normalizeOrigin(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) return undefined;
  if (text.endsWith('/')) return undefined;
  return url.origin;
}

/**
 * `--cors ORIGIN[,ORIGIN…]|*|none`. `none` allows only the head's own origins. Throws
 * CorsOptionError naming the first entry that is not an origin.
 */
export function parseCorsOption(value: string): OriginRule[] {
  const entries = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (entries.length === 0) throw new CorsOptionError("--cors needs an origin list, '*' or 'none'");
  if (entries.length === 1 && entries[0] === 'none') return [];
  return entries.map((entry): OriginRule => {
    if (entry === '*') return { kind: 'any' };
    const anyPort = /^(https?):\/\/([^/:]+|\[[0-9a-fA-F:.]+\]):\*$/.exec(entry);
    if (anyPort) {
      const origin = normalizeOrigin(`${anyPort[1]}://${anyPort[2]}`);
      if (origin) return { kind: 'any-port', scheme: anyPort[1], host: new URL(origin).hostname };
    } else if (!entry.includes('*')) {
      const origin = normalizeOrigin(entry);
      if (origin) return { kind: 'exact', origin };
    }
    throw new CorsOptionError(`--cors: '${entry}' is not an origin (expected scheme://host[:port], scheme://host:* for any port, '*' or 'none')`);
  });
}

function matches(rule: OriginRule, origin: string): boolean {
  if (rule.kind === 'any') return true;
  if (rule.kind === 'exact') return rule.origin === origin;
  const url = new URL(origin);
  return url.protocol === `${rule.scheme}:` && url.hostname === rule.host;
}

export class CorsPolicy {
  /** True with `--cors '*'`: `Access-Control-Allow-Origin: *`. */
  readonly anyOrigin: boolean;

  /** `ownOrigins` is read on every check: the head's port is known only once it listens. */
  constructor(
    private readonly rules: readonly OriginRule[],
    private readonly ownOrigins: () => readonly string[] = () => [],
  ) {
    this.anyOrigin = rules.some((r) => r.kind === 'any');
  }

  /** Whether a page from `origin` (the `Origin` header) may read the API's answers. */
  allows(origin: string): boolean {
    if (this.anyOrigin) return true;
    const normalized = normalizeOrigin(origin);
    // Browsers send the serialized origin (lower case, no default port): anything else is not one.
    if (normalized === undefined || normalized !== origin) return false;
    return this.ownOrigins().includes(normalized) || this.rules.some((rule) => matches(rule, normalized));
  }

  /** Headers for a response to a request from `origin` (none when it is not allowed). */
  responseHeaders(origin: string | null): Record<string, string> {
    if (origin === null || !this.allows(origin)) return this.anyOrigin ? {} : { vary: 'Origin' };
    return {
      'access-control-allow-origin': this.anyOrigin ? '*' : origin,
      'access-control-expose-headers': EXPOSED_HEADERS,
      ...(this.anyOrigin ? {} : { vary: 'Origin' }),
    };
  }

  /**
   * The answer to a preflight (see {@link isPreflight}): 204 with the CORS headers for an
   * allowed origin, or undefined when the origin is not allowed.
   */
  preflightHeaders(request: Request): Record<string, string> | undefined {
    const origin = request.headers.get('origin');
    if (origin === null || !this.allows(origin)) return undefined;
    const asked = request.headers.get('access-control-request-headers')?.trim() ?? '';
    const allowHeaders = asked.length > 0 && asked.length <= MAX_HEADER_LIST && HEADER_LIST.test(asked) ? asked.toLowerCase() : FALLBACK_HEADERS;
    return {
      'access-control-allow-origin': this.anyOrigin ? '*' : origin,
      'access-control-allow-methods': ALLOWED_METHODS,
      'access-control-allow-headers': allowHeaders,
      'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
      // Chromium's Private Network Access: a public page calling a head on this machine or LAN.
      ...(request.headers.get('access-control-request-private-network') === 'true' ? { 'access-control-allow-private-network': 'true' } : {}),
      vary: 'Origin, Access-Control-Request-Headers',
    };
  }
}

/**
 * The head's own origins for the policy: `http://HOST:PORT` for the address it listens on, and
 * for a wildcard host (`0.0.0.0`, `::`) every local interface address plus `localhost`.
 */
export function ownOrigins(listenUrl: string, interfaceAddresses: readonly string[]): string[] {
  const url = new URL(listenUrl);
  const wildcard = url.hostname === '0.0.0.0' || url.hostname === '[::]';
  const hosts = wildcard ? ['localhost', ...interfaceAddresses.map((a) => (a.includes(':') ? `[${a}]` : a))] : [url.hostname];
  return hosts.map((host) => normalizeOrigin(`${url.protocol}//${host}:${url.port}`)).filter((o): o is string => o !== undefined);
}
