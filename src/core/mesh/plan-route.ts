/**
 * Route planning as pure functions over plain data (exo `placement_utils.py` style): which
 * peer holds which layers, and who takes over a lost hop. No sockets, no clocks, no ORT.
 */
import type { LayerRange } from '../model/types.ts';
import { layerCounts } from './assign-layers.ts';
import { PlanError } from './plan-error.ts';

/** The head's peer id in a plan. Reserved: no listed peer may use it. */
export const HEAD_PEER_ID = 'head';

export interface PeerInfo {
  readonly id: string;
  /** Bytes this peer may spend on layer weights (and their KV headroom, see `bytesPerLayer`). */
  readonly memoryBudgetBytes: number;
  readonly runtime: 'node' | 'browser' | 'head';
  /** `false` leaves the peer out (still loading, draining). Undefined means ready. */
  readonly ready?: boolean;
}

export interface PlanModel {
  readonly numLayers: number;
  /** Memory one decoder layer costs on a peer: weights plus whatever KV headroom you reserve. */
  readonly bytesPerLayer: number;
  /** Memory the head spends on embedding, final norm and LM head, taken from its budget first. */
  readonly headBytes?: number;
}

export interface PlanOptions {
  /**
   * 'auto': the head is a peer like any other, with `headBudgetBytes` (required).
   * 'none': the head holds no layers (`--head-layers none`).
   * A range: the head holds exactly that range (checked against `headBudgetBytes` if given).
   */
  readonly headLayers: 'auto' | 'none' | LayerRange;
  readonly headBudgetBytes?: number;
}

/** One shard on one peer. */
export interface RouteHop {
  readonly peerId: string;
  readonly range: LayerRange; // [start, end)
}

/** Hops ordered by layer; their ranges cover `[0, numLayers)` exactly once. */
export interface RoutePlan {
  readonly hops: readonly RouteHop[];
}

interface Participant {
  readonly id: string;
  readonly capacity: number; // whole layers that fit in its budget
}

/**
 * Plan a route over the ready peers.
 *
 * - A peer's weight is its capacity in whole layers, `floor(budget / bytesPerLayer)` (for the
 *   head, `headBudgetBytes − headBytes`); a peer that fits no layer is left out. Weighting by
 *   capacity means no peer is ever given more layers than it fits.
 * - Memory: the plan fails when the capacities add up to fewer layers than needed. (Whole
 *   layers, so this is slightly stricter than Σ budgets < numLayers × bytesPerLayer.)
 * - Order: with 'auto' the head comes first (its layers then cost no network hop before the
 *   first peer); the peers follow sorted by id. If there are more participants than layers,
 *   the ones with the least capacity are left out (ties: the later id is dropped).
 * - Explicit head range `[s, e)`: the peers share the other `numLayers − (e − s)` layers as if
 *   `[0, s)` and `[e, numLayers)` were one run, in id order, then that run is cut at `s`.
 *   Each peer's total stays proportional to its capacity; at most one peer straddles the cut
 *   and then holds two hops (one before the head's, one after) — a peer may hold several ranges.
 *
 * Throws PlanError('route_unavailable') with the reason when the layers cannot be placed, and
 * PlanError('invalid_input') for malformed model, options, or peer list (duplicate ids, the
 * reserved id 'head', runtime 'head' on a listed peer).
 */
export function planRoute(model: PlanModel, peers: readonly PeerInfo[], options: PlanOptions): RoutePlan {
  checkModel(model);
  checkOptions(model, options);
  checkPeers(peers);
  const candidates = peers
    .map((p) => ({ id: p.id, capacity: p.ready === false ? 0 : capacityOf(p.memoryBudgetBytes, model.bytesPerLayer) }))
    .filter((p) => p.capacity >= 1)
    .sort((a, b) => compareIds(a.id, b.id));
  const head = options.headLayers;

  if (head === 'none' || head === 'auto') {
    const participants: Participant[] = [];
    if (head === 'auto') {
      const capacity = headCapacity(model, options.headBudgetBytes ?? 0);
      if (capacity >= 1) participants.push({ id: HEAD_PEER_ID, capacity });
    }
    participants.push(...candidates);
    const why = head === 'none' ? ' (the head holds none: --head-layers none)' : '';
    return { hops: contiguousHops(share(model, model.numLayers, participants, why)) };
  }

  const headSize = head.end - head.start;
  if (options.headBudgetBytes !== undefined) {
    const capacity = headCapacity(model, options.headBudgetBytes);
    if (capacity < headSize) {
      throw new PlanError('route_unavailable', `the head's budget fits ${capacity} layers, its range [${head.start}, ${head.end}) has ${headSize}`);
    }
  }
  const rest = model.numLayers - headSize;
  const headHop: RouteHop = { peerId: HEAD_PEER_ID, range: { start: head.start, end: head.end } };
  if (rest === 0) return { hops: [headHop] };
  const why = ` besides the head's [${head.start}, ${head.end})`;
  const virtual = contiguousHops(share(model, rest, candidates, why));
  const hops: RouteHop[] = [];
  for (const hop of virtual) {
    // Virtual layer v is real layer v before the cut and v + headSize after it.
    const { start, end } = hop.range;
    if (start < head.start) hops.push({ peerId: hop.peerId, range: { start, end: Math.min(end, head.start) } });
    if (end > head.start) hops.push({ peerId: hop.peerId, range: { start: Math.max(start, head.start) + headSize, end: end + headSize } });
  }
  hops.push(headHop);
  hops.sort((a, b) => a.range.start - b.range.start);
  return { hops };
}

export interface ReplacementOptions extends PlanOptions {
  readonly model: PlanModel;
  /** The current route: layers it gives a peer count against that peer's free memory. */
  readonly plan?: RoutePlan;
}

/**
 * Who takes over `range` after its peer was lost. Candidates are ready, non-banned peers whose
 * free memory (budget minus `bytesPerLayer` × layers they hold in `options.plan`) fits the
 * range; the one with the most free memory wins, ties to the smaller id. If no peer fits, the
 * head is the fallback unless `headLayers` is 'none' or 'head' is banned; its free memory is
 * checked when `headBudgetBytes` is given. Returns the peer id, or undefined when nobody fits.
 * Ban the lost peer yourself: it is a candidate like any other otherwise.
 */
export function replacementFor(
  range: LayerRange,
  peers: readonly PeerInfo[],
  banned: ReadonlySet<string>,
  options: ReplacementOptions,
): string | undefined {
  const { model } = options;
  checkModel(model);
  checkOptions(model, options);
  checkPeers(peers);
  checkRange(model, range, 'the lost range');
  const needed = (range.end - range.start) * model.bytesPerLayer;
  const held = new Map<string, number>();
  for (const hop of options.plan?.hops ?? []) {
    held.set(hop.peerId, (held.get(hop.peerId) ?? 0) + (hop.range.end - hop.range.start));
  }
  const freeOf = (id: string, budget: number): number => budget - (held.get(id) ?? 0) * model.bytesPerLayer;

  let best: { id: string; free: number } | undefined;
  for (const peer of peers) {
    if (banned.has(peer.id) || peer.ready === false || !validBudget(peer.memoryBudgetBytes)) continue;
    const free = freeOf(peer.id, peer.memoryBudgetBytes);
    if (free < needed) continue;
    if (!best || free > best.free || (free === best.free && compareIds(peer.id, best.id) < 0)) best = { id: peer.id, free };
  }
  if (best) return best.id;
  if (options.headLayers === 'none' || banned.has(HEAD_PEER_ID)) return undefined;
  if (options.headBudgetBytes === undefined) return HEAD_PEER_ID;
  const headFree = freeOf(HEAD_PEER_ID, options.headBudgetBytes - (model.headBytes ?? 0));
  return headFree >= needed ? HEAD_PEER_ID : undefined;
}

/** True when the hops are ordered, contiguous and cover `[0, numLayers)` exactly once. */
export function coversModel(plan: RoutePlan, numLayers: number): boolean {
  let next = 0;
  for (const hop of plan.hops) {
    if (hop.range.start !== next || hop.range.end <= hop.range.start) return false;
    next = hop.range.end;
  }
  return next === numLayers && numLayers > 0;
}

/** Layer counts for `layers` layers over `participants` (order kept), or why it cannot be done. */
function share(model: PlanModel, layers: number, participants: readonly Participant[], why: string): { id: string; size: number }[] {
  if (participants.length === 0) throw new PlanError('route_unavailable', `no ready peer has room for one layer${why}`);
  let chosen = participants;
  if (participants.length > layers) {
    // Keep the `layers` largest capacities; ties keep the smaller id. Their sum still ≥ layers.
    const keep = new Set(
      [...participants].sort((a, b) => b.capacity - a.capacity || compareIds(a.id, b.id)).slice(0, layers).map((p) => p.id),
    );
    chosen = participants.filter((p) => keep.has(p.id));
  }
  const capacity = chosen.reduce((total, p) => total + p.capacity, 0);
  if (capacity < layers) {
    throw new PlanError(
      'route_unavailable',
      `not enough memory: ${chosen.length} peer(s) fit ${capacity} of ${layers} layers${why} ` +
        `(${layers * model.bytesPerLayer} bytes needed at ${model.bytesPerLayer} per layer)`,
    );
  }
  const sizes = layerCounts(layers, chosen.map((p) => p.capacity));
  return chosen.map((p, i) => ({ id: p.id, size: sizes[i] }));
}

/** Hops from layer 0 up, one per participant, in order. */
function contiguousHops(sizes: readonly { id: string; size: number }[]): RouteHop[] {
  const hops: RouteHop[] = [];
  let start = 0;
  for (const { id, size } of sizes) {
    hops.push({ peerId: id, range: { start, end: start + size } });
    start += size;
  }
  return hops;
}

function capacityOf(budget: number, bytesPerLayer: number): number {
  return validBudget(budget) ? Math.floor(budget / bytesPerLayer) : 0;
}

function headCapacity(model: PlanModel, headBudgetBytes: number): number {
  return capacityOf(Math.max(0, headBudgetBytes - (model.headBytes ?? 0)), model.bytesPerLayer);
}

function validBudget(bytes: number): boolean {
  return typeof bytes === 'number' && Number.isFinite(bytes) && bytes >= 0;
}

/** Code-unit order, the same in every runtime (localeCompare is not). */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function checkModel(model: PlanModel): void {
  if (!Number.isSafeInteger(model.numLayers) || model.numLayers < 1) {
    throw new PlanError('invalid_input', `numLayers must be a positive integer, got ${model.numLayers}`);
  }
  if (!Number.isFinite(model.bytesPerLayer) || model.bytesPerLayer <= 0) {
    throw new PlanError('invalid_input', `bytesPerLayer must be a positive finite number, got ${model.bytesPerLayer}`);
  }
  if (model.headBytes !== undefined && !validBudget(model.headBytes)) {
    throw new PlanError('invalid_input', `headBytes must be a finite number ≥ 0, got ${model.headBytes}`);
  }
}

function checkOptions(model: PlanModel, options: PlanOptions): void {
  if (options.headBudgetBytes !== undefined && !validBudget(options.headBudgetBytes)) {
    throw new PlanError('invalid_input', `headBudgetBytes must be a finite number ≥ 0, got ${options.headBudgetBytes}`);
  }
  const head = options.headLayers;
  if (head === 'auto') {
    if (options.headBudgetBytes === undefined) throw new PlanError('invalid_input', "headLayers 'auto' needs headBudgetBytes");
  } else if (head !== 'none') {
    checkRange(model, head, "the head's range");
  }
}

function checkRange(model: PlanModel, range: LayerRange, what: string): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start >= end || end > model.numLayers) {
    throw new PlanError('invalid_input', `${what} [${start}, ${end}) is not a non-empty range inside [0, ${model.numLayers})`);
  }
}

function checkPeers(peers: readonly PeerInfo[]): void {
  const seen = new Set<string>();
  for (const peer of peers) {
    if (peer.id === HEAD_PEER_ID || peer.runtime === 'head') {
      throw new PlanError('invalid_input', `peer '${peer.id}': the head is described by the options, not listed as a peer`);
    }
    if (seen.has(peer.id)) throw new PlanError('invalid_input', `peer id '${peer.id}' is listed twice`);
    seen.add(peer.id);
  }
}
