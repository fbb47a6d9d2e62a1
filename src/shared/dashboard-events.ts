/**
 * `parseMeshEvent`: the browser's check of what arrives over `/api/events` before it reaches
 * `applyEvent`. Loose on purpose: it checks what the reducer and a renderer rely on (ids,
 * arrays, numbers, known states) and lets extra fields through, so a newer head with more
 * fields still works; anything else gives undefined (skip the event), never a throw.
 */
import type { MeshEvent, MeshEventKind } from './dashboard-state.ts';

export const MESH_EVENT_KINDS: readonly MeshEventKind[] = [
  'snapshot',
  'peer.joined',
  'peer.updated',
  'peer.left',
  'peer.removed',
  'route.changed',
  'session.started',
  'session.updated',
  'session.finished',
  'totals',
];

type Check = (value: unknown) => boolean;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isNumber: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const isString: Check = (v) => typeof v === 'string';
const oneOf =
  (...values: string[]): Check =>
  (v) => typeof v === 'string' && values.includes(v);
const arrayOf =
  (item: Check): Check =>
  (v) => Array.isArray(v) && v.every(item);
/** An object whose listed fields pass their checks (a `?` suffix: absent or passing). */
const shape =
  (fields: Record<string, Check>): Check =>
  (v) =>
    isObject(v) &&
    Object.entries(fields).every(([name, check]) => {
      const optional = name.endsWith('?');
      const value = v[optional ? name.slice(0, -1) : name];
      return (optional && value === undefined) || check(value);
    });

const range = shape({ start: isNumber, end: isNumber });
const peer = shape({
  id: isString,
  runtime: oneOf('node', 'browser', 'head'),
  executionProvider: isString,
  layers: arrayOf(range),
  'weights?': isString,
  'weightBytes?': isNumber,
  memoryBudgetBytes: isNumber,
  kvBytes: isNumber,
  kvEntries: isNumber,
  'prefixBytes?': isNumber,
  'prefixEntries?': isNumber,
  'prefixBudgetBytes?': isNumber,
  status: oneOf('joining', 'ready', 'quarantined', 'gone'),
  'quarantine?': shape({ since: isNumber, until: isNumber, reason: isString, strikes: isNumber }),
  lastHeartbeatAt: isNumber,
  'goneAt?': isNumber,
  tokensServed: isNumber,
  'rejoins?': isNumber,
});
const route = shape({ hops: arrayOf(shape({ peerId: isString, range })), 'reason?': isString });
const session = shape({
  id: isString,
  model: isString,
  promptTokens: isNumber,
  completionTokens: isNumber,
  startedAt: isNumber,
  'timeToFirstTokenMs?': isNumber,
  tokensPerSecond: isNumber,
  rate: arrayOf(shape({ t: isNumber, tokensPerSecond: isNumber })),
  hops: arrayOf(shape({ peerId: isString, range, frames: isNumber, tokens: isNumber, lastMs: isNumber, meanMs: isNumber, kvPositions: isNumber })),
  repairs: arrayOf(shape({ kind: oneOf('cache_miss', 'replaced'), hop: isNumber, peerId: isString, 'lostPeerId?': isString })),
  'links?': arrayOf(oneOf('direct', 'head')),
  'speculation?': shape({ mode: oneOf('off', 'ngram', 'draft'), drafted: isNumber, accepted: isNumber, acceptanceRate: isNumber, steps: isNumber, tokensPerRoundTrip: isNumber }),
  state: oneOf('running', 'finished', 'cancelled', 'error'),
  'error?': isString,
});
const totals = shape({ requests: isNumber, errors: isNumber, tokensOut: isNumber, tokensPerSecond: isNumber });
const state = shape({
  model: shape({ id: isString, numLayers: isNumber, dtype: oneOf('fp32', 'fp16'), 'weights?': isString }),
  peers: arrayOf(peer),
  route,
  sessions: arrayOf(session),
  finished: arrayOf(session),
  totals,
  headStartedAt: isNumber,
});

/** The payload field each kind carries, and its check. */
const payloads: Record<MeshEventKind, [field: string, check: Check]> = {
  snapshot: ['state', state],
  'peer.joined': ['peer', peer],
  'peer.updated': ['peer', peer],
  'peer.left': ['peerId', isString],
  'peer.removed': ['peerId', isString],
  'route.changed': ['route', route],
  'session.started': ['session', session],
  'session.updated': ['session', session],
  'session.finished': ['session', session],
  totals: ['totals', totals],
};

/**
 * The event named `kind` (the SSE event name) whose data is `json` (the event object, as
 * the head serializes it; its own `kind`, when present, must agree), or undefined.
 */
export function parseMeshEvent(kind: string, json: unknown): MeshEvent | undefined {
  if (!Object.hasOwn(payloads, kind) || !isObject(json)) return undefined;
  if (json.kind !== undefined && json.kind !== kind) return undefined;
  const [field, check] = payloads[kind as MeshEventKind];
  if (!check(json[field])) return undefined;
  const event: Record<string, unknown> = { kind, [field]: json[field] };
  if (kind === 'peer.left' && isNumber(json.at)) event.at = json.at;
  return event as unknown as MeshEvent;
}
