/**
 * Where the head dials a peer that announced a listen URL (protocol 2). The announced
 * scheme, port, path and query are the peer's to choose; the host is not: the head dials the
 * address the peer's relay socket came from, unless the announced host is one the operator
 * allowed (`--allow-peer-hosts`). So a peer holding the join token cannot point the head at
 * another machine. Pure; `URL` is a web standard.
 */

export type DialTarget =
  | { readonly ok: true; readonly url: string; readonly announcedHost: string; readonly dialedHost: string }
  | { readonly ok: false; readonly reason: string };

/** A host as `URL.hostname` spells it (lowercase, IPv6 in brackets), or undefined if it is not one. */
export function normalizeHost(host: string): string | undefined {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const literal = bare.includes(':') ? `[${bare}]` : bare;
  try {
    const url = new URL(`ws://${literal}/`);
    return url.hostname !== '' && url.port === '' && url.pathname === '/' ? url.hostname : undefined;
  } catch {
    return undefined;
  }
}

/** The socket's remote address as a URL host: IPv4-mapped IPv6 as IPv4, IPv6 in brackets. */
export function remoteHost(address: string | undefined): string | undefined {
  if (!address) return undefined;
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return normalizeHost(v4 ? v4[1]! : address);
}

export function directDialTarget(listenUrl: string, remoteAddress: string | undefined, allowHosts: readonly string[] = []): DialTarget {
  let url: URL;
  try {
    url = new URL(listenUrl);
  } catch {
    return { ok: false, reason: 'the announced listen URL does not parse' };
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') return { ok: false, reason: 'the announced listen URL is not ws:// or wss://' };
  const announcedHost = url.hostname;
  const allowed = new Set(allowHosts.map((h) => normalizeHost(h)).filter((h): h is string => h !== undefined));
  let dialedHost = announcedHost;
  if (!allowed.has(announcedHost)) {
    const from = remoteHost(remoteAddress);
    if (from === undefined) return { ok: false, reason: 'the head cannot tell which address the peer connected from' };
    dialedHost = from;
  }
  url.hostname = dialedHost;
  url.username = '';
  url.password = '';
  url.hash = '';
  return { ok: true, url: url.href, announcedHost, dialedHost };
}
