/**
 * In-process meshes for Route Session tests: real ShardPeers (real onnxruntime shards of
 * stories260k) behind real links, a real Mesh, and a head runner — no HTTP.
 */
import { randomUUID } from 'node:crypto';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { Mesh, type MeshOptions } from '../../src/core/mesh/mesh.ts';
import { RouteSession, type RouteSessionDeps, type SessionHooks, type SessionPolicy } from '../../src/core/route/route-session.ts';
import type { SessionEvent } from '../../src/core/route/route-types.ts';
import type { HopLease, RouteProvider } from '../../src/core/mesh/route-provider.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import { loadHeadRunner } from '../../src/core/runtime/ort-loader.ts';
import { validateSamplingParams, type SamplingParams } from '../../src/core/sampling/index.ts';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';
import type { SpeculateMode } from '../../src/core/speculation/drafter.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import { openLocalModel, openLocalTokenizer, type LocalModel } from '../../src/node/local-model.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { nodeLoaderOptions } from '../../src/node/ort-node-runtime.ts';
import { generateLocal } from '../../src/core/route/local-pipeline.ts';
import { afterAll, beforeAll } from 'vitest';
import { pipeline, STORIES_DIR, tempDir } from '../engine/harness.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';

const FP32 = weightSpec('fp32');

export interface StoriesContext {
  readonly model: LocalModel;
  readonly head: HeadRunner;
  readonly tokenizer: TextTokenizer;
}

export async function openStories(): Promise<StoriesContext> {
  return openContext(STORIES_DIR);
}

/** A model folder opened for Route Session tests: the model, its head runner (cpu, 1 thread) and tokenizer. */
export async function openContext(dir: string): Promise<StoriesContext> {
  const model = await openLocalModel(dir);
  const loader = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
  const embedding = await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, 'fp32', FP32);
  const head = await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, 'fp32', FP32);
  return {
    model,
    head: await loadHeadRunner(model.checkpoint.config, embedding.artifact, head.artifact, model.checkpoint.source, loader),
    tokenizer: await openLocalTokenizer(model),
  };
}

/** A ShardPeer that tests can make forget every session's KV (to force cache misses). */
export class EvictableShardPeer extends ShardPeer {
  evictAll(): void {
    this.store?.clear();
  }

  /** Forget one session's KV (its next step is a cache miss); the others keep theirs. */
  evictSession(sessionId: string): number {
    return this.store?.release(sessionId) ?? 0;
  }

  /** Forget every prefix entry (a later fork from one is a cache miss). */
  evictPrefixes(): void {
    this.prefixes.clear();
  }

  /** Set the prefix budget (entries over it are evicted, least recently used first). */
  setPrefixBudget(bytes: number): void {
    this.prefixes.setBudget(bytes);
  }

  /** Per prefix entry, a sum over every value of its KV buffers (spare capacity too): unchanged while the entry is not written. */
  prefixChecksums(): Map<string, number> {
    const sums = new Map<string, number>();
    type Part = { past(l: number): { key: { data: Float32Array }; value: { data: Float32Array } } | undefined; range: { start: number; end: number } };
    const entries = (this.prefixes as unknown as { entries: Map<string, { parts: Map<string, Part> }> }).entries;
    for (const [id, entry] of entries) {
      let sum = 0;
      for (const state of entry.parts.values()) {
        for (let l = state.range.start; l < state.range.end; l++) {
          const kv = state.past(l)!;
          for (const x of kv.key.data) sum += x;
          for (const x of kv.value.data) sum += x * 3;
        }
      }
      sums.set(id, sum);
    }
    return sums;
  }
}

export function createPeer(ctx: StoriesContext, memoryBudgetBytes = 1 << 30, prefixBudgetBytes = 0): EvictableShardPeer {
  return new EvictableShardPeer({ loader: localShardLoader(ctx.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes, prefixBudgetBytes });
}

/** Records every lease the mesh hands out, so tests can check each was closed. */
export class CountingProvider implements RouteProvider {
  readonly leases: HopLease[] = [];
  constructor(readonly mesh: Mesh) {}
  async route(signal?: AbortSignal) {
    const hops = await this.mesh.route(signal);
    this.leases.push(...hops);
    this.track(hops);
    return hops;
  }
  async replace(...args: Parameters<Mesh['replace']>) {
    const hop = await this.mesh.replace(...args);
    if (hop) {
      this.leases.push(hop);
      this.track([hop]);
    }
    return hop;
  }
  private closedLeases = 0;
  private track(leases: HopLease[]): void {
    for (const lease of leases) void lease.link.closed.then(() => this.closedLeases++);
  }
  /** Leases not closed yet (a lease's `closed` resolves on a microtask after it closes). */
  get openLeases(): number {
    return this.leases.length - this.closedLeases;
  }
  reportFault(...args: Parameters<Mesh['reportFault']>): void {
    this.mesh.reportFault(...args);
  }
  /** Resolves when every lease handed out so far is closed (sessions release in the background). */
  async allClosed(): Promise<void> {
    await Promise.all(this.leases.map((l) => l.link.closed));
  }

}

export interface TestMesh {
  readonly mesh: Mesh;
  readonly provider: CountingProvider;
  readonly peers: Map<string, EvictableShardPeer>;
  readonly links: Map<string, PeerLink>;
}

/** A mesh of `n` in-process peers (ids p1…pn), or peers reached through `linkFor`. */
export function inProcessMesh(
  ctx: StoriesContext,
  n: number,
  linkFor?: (id: string, peer: ShardPeer) => PeerLink,
  options: Partial<MeshOptions> = {},
  prefixBudgetBytes = 0,
): TestMesh {
  // No warm-up frames by default: these tests count the frames each peer sees (test/mesh/warm-up.test.ts has them).
  const mesh = new Mesh(meshModel(ctx.model, 'stories260k', 'fp32', FP32), { headLayers: 'none', warmUpFrames: false, ...options });
  const peers = new Map<string, EvictableShardPeer>();
  const links = new Map<string, PeerLink>();
  for (let i = 1; i <= n; i++) {
    const id = `p${i}`;
    const peer = createPeer(ctx, 1 << 30, prefixBudgetBytes);
    const link = linkFor?.(id, peer) ?? new InProcessLink(peer);
    peers.set(id, peer);
    links.set(id, link);
    mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link });
  }
  return { mesh, provider: new CountingProvider(mesh), peers, links };
}

export function greedy(maxTokens = 32, extra: Partial<SamplingParams> = {}): SamplingParams {
  return validateSamplingParams({ temperature: 0, maxTokens, ...extra });
}

/** What a test sets on one session, flat: the shared deps, the policy's fields and the hooks. */
export type SessionOverrides = Partial<Omit<RouteSessionDeps, 'policy'>> & SessionPolicy & SessionHooks;

/** A session over `provider`; it speculates by prompt lookup (the default) unless `speculate` says otherwise. */
export function openSession(ctx: StoriesContext, provider: RouteProvider, params: SamplingParams, signal?: AbortSignal, overrides: SessionOverrides = {}, promptIds = [1], speculate?: SpeculateMode) {
  const { onUpdate, onSettled, maxReplacements, maxRebuilds, backoff = { baseMs: 1, maxMs: 10 }, releaseTimeoutMs, hopTimeoutMs, prefillChunk, draftLength, routeMode, ...deps } = overrides;
  return new RouteSession(
    { head: ctx.head, route: provider, vocabSize: ctx.model.checkpoint.config.vocabSize, tokenizer: ctx.tokenizer, policy: { maxReplacements, maxRebuilds, backoff, releaseTimeoutMs, hopTimeoutMs, prefillChunk, draftLength, routeMode }, ...deps },
    { sessionId: randomUUID(), promptIds, params, speculate },
    signal,
    { onUpdate, onSettled },
  );
}

/** Token ids of a session, calling `onToken(index)` after each one. */
export async function collect(session: AsyncIterable<SessionEvent>, onToken?: (index: number) => void | Promise<void>): Promise<{ ids: number[]; done?: SessionEvent }> {
  const ids: number[] = [];
  let done: SessionEvent | undefined;
  for await (const event of session) {
    if (event.type === 'token') {
      ids.push(event.tokenId);
      await onToken?.(ids.length);
    } else done = event;
  }
  return { ids, done };
}

/** A multi-token prompt (9 tokens): prefill, replays and repairs then carry many positions. */
export const PROMPT = [1, 45, 67, 89, 123, 200, 301, 17, 64];

/** The greedy tokens of `promptIds` in one process (complete-model mode, one shard, no speculation): what every route must give. */
export async function oneProcessTokens(ctx: StoriesContext, promptIds: readonly number[], maxTokens: number): Promise<number[]> {
  const p = await pipeline(ctx.model, [{ start: 0, end: ctx.model.checkpoint.config.numLayers }]);
  try {
    const ids: number[] = [];
    for await (const token of generateLocal(p, promptIds, greedy(maxTokens), randomUUID(), undefined, 'off')) ids.push(token.tokenId);
    return ids;
  } finally {
    await p.dispose();
  }
}

/** What `useStories` opens: valid inside the file's tests (set by its beforeAll). */
export interface StoriesFixture {
  ctx: StoriesContext;
  /** The file's MESHNET_HOME (a temporary folder, removed after): room for its own fixture files too. */
  home: string;
  /** The one-process greedy tokens of PROMPT (`tokens` of them; empty when not asked for). */
  expected: number[];
}

/**
 * The usual set-up of a route test file: its own MESHNET_HOME (a temporary folder named after
 * `name`), stories260k opened, and (given `tokens`) the one-process greedy answer to PROMPT;
 * all released after. vitest runs after-hooks in reverse order, so a file's own after-hook
 * (closing its heads, peers and sockets) registered after this call runs before the release.
 */
export function useStories(name: string, tokens?: number): StoriesFixture {
  const fixture = {} as StoriesFixture;
  let root: { dir: string; remove: () => Promise<void> } | undefined;
  beforeAll(async () => {
    root = await tempDir(name);
    process.env.MESHNET_HOME = fixture.home = root.dir;
    fixture.ctx = await openStories();
    fixture.expected = tokens === undefined ? [] : await oneProcessTokens(fixture.ctx, PROMPT, tokens);
  });
  afterAll(async () => {
    await fixture.ctx?.head.dispose();
    await root?.remove();
  });
  return fixture;
}
