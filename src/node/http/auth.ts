/**
 * `--api-key`: guards /v1/*, /api/* and the dashboard. Accepted as `Authorization: Bearer K`,
 * `?key=K` (browsers), or the `meshnet_key` cookie that a `?key=` visit sets.
 */
import { sameToken } from '../../core/route/peer-admission.ts';

export const KEY_COOKIE = 'meshnet_key';

export function presentedKey(request: Request): string | undefined {
  const auth = request.headers.get('authorization');
  if (auth?.toLowerCase().startsWith('bearer ')) return auth.slice(7).trim();
  const query = new URL(request.url).searchParams.get('key');
  if (query) return query;
  const cookie = request.headers.get('cookie') ?? '';
  for (const part of cookie.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === KEY_COOKIE) return decodeURIComponent(value.join('='));
  }
  return undefined;
}

export function isAuthorized(request: Request, apiKey: string | undefined): boolean {
  if (apiKey === undefined) return true;
  const key = presentedKey(request);
  return key !== undefined && sameToken(key, apiKey);
}

/** Paths the key guards: the API, the dashboard API and the dashboard itself. */
export function isGuardedPath(pathname: string): boolean {
  return pathname.startsWith('/v1/') || pathname === '/v1' || pathname.startsWith('/api/') || pathname.startsWith('/dashboard');
}
