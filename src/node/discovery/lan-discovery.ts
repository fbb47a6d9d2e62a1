/**
 * Finding a head on the LAN: `meshnet serve` announces `_meshnet._tcp` over mDNS / DNS-SD
 * (bonjour-service), `meshnet peer` without `--head` browses for it.
 *
 * The announcement's TXT record holds what a peer needs to choose and dial, never a secret:
 * `model` (the served name), `protocol` (the wire version, `MAJOR.MINOR`), `path` (the peer
 * endpoint, `/peer/ws`) and `version` (meshnet's). The join token is never in it: a peer
 * still needs `--join-token` (or `MESHNET_JOIN_TOKEN`).
 *
 * A head listening on a loopback address is not announced (no other machine could reach it,
 * and loopback interfaces carry no multicast); one on a given address announces on that
 * interface, one on a wildcard address (`0.0.0.0`, `::`) on every interface.
 *
 * What a browse hears is outside input: each answer is validated (port, a TXT of bounded
 * strings, a path of URL-safe characters, an IP address to dial) and one that does not
 * parse is left out. A head whose protocol major differs from ours is listed as
 * incompatible and never joined automatically.
 */
import { isIP } from 'node:net';
import os from 'node:os';
import { Bonjour, type Service } from 'bonjour-service';
import { PROTOCOL_VERSION } from '../../shared/protocol.ts';

/** `_meshnet._tcp`. */
export const SERVICE_TYPE = 'meshnet';
/** How long a browse listens by default. */
export const DEFAULT_BROWSE_MS = 2000;
const MAX_TXT_VALUE = 256;

export interface HeadAnnouncement {
  /** The host the head listens on (`127.0.0.1`, `0.0.0.0`, an interface address). */
  readonly host: string;
  readonly port: number;
  readonly model: string;
  /** meshnet's version. */
  readonly version: string;
  /** The peer endpoint's path (default `/peer/ws`). */
  readonly peerPath?: string;
}

export interface Announcer {
  /** The announced instance name (undefined: nothing announced, see `skipped`). */
  readonly name?: string;
  /** Why nothing was announced. */
  readonly skipped?: string;
  /** Sends the goodbye and closes the mDNS socket. */
  close(): Promise<void>;
}

function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127\./.test(bare);
}

/** Announces a head (see the file's header for which interfaces). */
export function announceHead(head: HeadAnnouncement): Announcer {
  const host = head.host.replace(/^\[|\]$/g, '');
  if (isLoopback(host)) return { skipped: `not announced on the LAN: the head listens on ${head.host} only (serve with --host 0.0.0.0 to be found)`, close: async () => {} };
  const wildcard = host === '0.0.0.0' || host === '::';
  // The options reach multicast-dns: `interface` picks the one to send and join on, `bind` stays the wildcard (a socket bound
  // to a unicast address hears no multicast); bonjour-service types them narrower.
  const bonjour = new Bonjour((wildcard || isIP(host) !== 4 ? {} : { interface: host, bind: '0.0.0.0' }) as ConstructorParameters<typeof Bonjour>[0]);
  const name = `meshnet ${head.model} on ${os.hostname()}:${head.port}`.slice(0, 63);
  bonjour.publish({
    name,
    type: SERVICE_TYPE,
    port: head.port,
    txt: { model: head.model, protocol: `${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`, path: head.peerPath ?? '/peer/ws', version: head.version },
  });
  return {
    name,
    close: () =>
      new Promise<void>((resolve) => {
        bonjour.unpublishAll(() => bonjour.destroy(() => resolve()));
      }),
  };
}

/** A head heard on the LAN. */
export interface FoundHead {
  readonly name: string;
  readonly model: string;
  /** `MAJOR.MINOR`. */
  readonly protocol: string;
  /** Same protocol major as ours: a peer of this build can join it. */
  readonly compatible: boolean;
  readonly version?: string;
  /** The peer endpoint to dial: the address that answered, the announced port and path. */
  readonly url: string;
}

function txtString(txt: unknown, key: string): string | undefined {
  if (typeof txt !== 'object' || txt === null) return undefined;
  const value = (txt as Record<string, unknown>)[key];
  const text = typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : undefined;
  return text !== undefined && text.length > 0 && text.length <= MAX_TXT_VALUE ? text : undefined;
}

/** One mDNS answer → a head, or undefined when it does not hold what a head announces. */
export function parseFoundHead(service: Pick<Service, 'name' | 'port' | 'txt' | 'addresses' | 'referer'>): FoundHead | undefined {
  const model = txtString(service.txt, 'model');
  const protocol = txtString(service.txt, 'protocol');
  const path = txtString(service.txt, 'path') ?? '/peer/ws';
  if (model === undefined || protocol === undefined || !/^\d{1,5}\.\d{1,5}$/.test(protocol)) return undefined;
  if (!/^\/[A-Za-z0-9/_.~-]*$/.test(path)) return undefined;
  if (!Number.isInteger(service.port) || service.port < 1 || service.port > 65535) return undefined;
  // The address that answered reaches us; else the first announced IPv4, then IPv6.
  const candidates = [service.referer?.address, ...(service.addresses ?? []).filter((a) => isIP(a) === 4), ...(service.addresses ?? []).filter((a) => isIP(a) === 6 && !a.startsWith('fe80'))];
  const address = candidates.find((a): a is string => typeof a === 'string' && isIP(a) !== 0);
  if (address === undefined) return undefined;
  const host = isIP(address) === 6 ? `[${address}]` : address;
  const version = txtString(service.txt, 'version');
  return {
    name: String(service.name).slice(0, MAX_TXT_VALUE),
    model,
    protocol,
    compatible: Number(protocol.split('.')[0]) === PROTOCOL_VERSION.major,
    ...(version === undefined ? {} : { version }),
    url: `ws://${host}:${service.port}${path}`,
  };
}

/** Listens for `waitMs` and returns every head that answered (each URL once). */
export async function browseHeads(waitMs = DEFAULT_BROWSE_MS): Promise<FoundHead[]> {
  const bonjour = new Bonjour();
  const found = new Map<string, FoundHead>();
  const browser = bonjour.find({ type: SERVICE_TYPE }, (service) => {
    const head = parseFoundHead(service);
    if (head && !found.has(head.url)) found.set(head.url, head);
  });
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  browser.stop();
  await new Promise<void>((resolve) => bonjour.destroy(() => resolve()));
  return [...found.values()].sort((a, b) => a.url.localeCompare(b.url));
}

/** One line per head, numbered from 1 (the peer's list). */
export function describeHeads(heads: readonly FoundHead[]): string {
  return heads.map((h, i) => `  ${i + 1}. ${h.model} at ${h.url} (${h.name}; protocol ${h.protocol}${h.compatible ? '' : ', incompatible with this peer'})`).join('\n');
}
