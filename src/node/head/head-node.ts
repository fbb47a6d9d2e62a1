/**
 * The head worker's engine side: the model's embedding and LM head, the mesh of peers (the
 * head's own layers as an in-process peer unless `headLayers` is 'none'), the /peer/ws
 * gateway and artifact routes on an h3 app, and Route Sessions opened over that mesh —
 * requests enter through `completions`, core's one entry. HTTP APIs (OpenAI, dashboard)
 * mount onto `app` before the server starts.
 */
import {
  BatchingHeadRunner,
  Completions,
  Drafters,
  HEAD_PEER_ID,
  HopVerifier,
  InProcessLink,
  Mesh,
  PrefixForgetter,
  PrefixRegistry,
  RouteSessions,
  asWeightSpec,
  generationLimits,
  naturalEndTokens,
  warmUp,
  type ActivationDtype,
  type ChainPort,
  type GenerationLimits,
  type HeadRunner,
  type LayerRange,
  type PeerLink,
  type QuarantinePolicy,
  type Rng,
  type RouteMode,
  type SessionObserver,
  type ShardService,
  type SpeculateMode,
  type TextTokenizer,
  type VerifyResult,
  type WeightFormat,
  type WeightSpec,
} from '../../core/index.ts';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { H3 } from 'h3';
import { WorkerShardService } from '../peer/worker-shard.ts';
import { WorkerGrammarEngine } from '../grammar-worker.ts';
import { SamplerWorker } from '../sampler-worker.ts';
import { WorkerHeadRunner } from '../head-worker.ts';
import { loadLocalHeadRunner } from '../local-head-runner.ts';
import { loadXGrammar } from '../xgrammar-node.ts';
import { loadDraftModel, type LoadedDraftModel } from './draft-model.ts';
import type { LocalModel } from '../local-model.ts';
import { meshModel } from '../mesh-model.ts';
import { startServer, type RunningServer } from '../net/start-server.ts';
import { describeProviders, nodeLoaderOptions } from '../ort-node-runtime.ts';
import { mountArtifactRoutes } from './artifact-routes.ts';
import { createPeerGateway } from './peer-gateway.ts';
import { installHopTraceFromEnv } from '../hop-trace-file.ts';

export interface HeadOptions {
  readonly model: LocalModel;
  readonly tokenizer: TextTokenizer;
  /** What clients call the model: folder name, Hub id or 'demo'. */
  readonly name: string;
  readonly port: number;
  readonly host: string;
  /**
   * undefined: generate one (and let peers on this machine join without it); `null`: admit
   * peers without a token.
   */
  readonly joinToken?: string | null;
  readonly link: 'relay' | 'direct';
  /** A peer id's holder that does not answer a ping within this is replaced by a newcomer with its id (default 3000). */
  readonly peerPingTimeoutMs?: number;
  /** Hosts a peer may announce for direct links (default: only the address it connected from). */
  readonly allowPeerHosts?: readonly string[];
  readonly headLayers: 'auto' | 'none' | LayerRange;
  readonly dtype: ActivationDtype;
  /** Weight format of every part: a spec or a format name (default: the float format of `dtype`; q4 for AWQ/GPTQ). */
  readonly weights?: WeightSpec | WeightFormat;
  readonly device: string;
  readonly threads?: number;
  /** The head's memory budget for its own layers and KV (default: half the free memory). */
  readonly memoryBudgetBytes?: number;
  readonly linkTimeoutMs?: number;
  /** Headers (and, with a grace, whole requests) must arrive within this (`--request-timeout`; start-server.ts). */
  readonly requestTimeoutMs?: number;
  /** The raw HTTP answer to malformed or late requests Node refuses itself (start-server.ts). */
  readonly clientError?: (error: NodeJS.ErrnoException) => string | undefined;
  /** How long a peer may take to answer `assign` with `ready` before it is dropped from the plan (default 30 s). */
  readonly readyTimeoutMs?: number;
  /** The cold-start deadline of a range's warm-up frame, ms (default 60 s). */
  readonly warmUpTimeoutMs?: number;
  /** Quarantine back-off of hung or faulty peers (default DEFAULT_QUARANTINE). */
  readonly quarantine?: QuarantinePolicy;
  readonly log?: (line: string) => void;
  /** The session table: admission, --min-peers, deadlines, accounting. */
  readonly sessions?: HeadSessionOptions;
  /** Speculative decoding and pipelined prefill. */
  readonly speculation?: HeadSpeculationOptions;
  /**
   * Prefix reuse (`--prefix-cache`): bytes the head's own layers keep for prefix entries;
   * any value above 0 also turns on the head's registry of what its hops hold. Default 0.
   */
  readonly prefixCacheBytes?: number;
  /** Fold concurrent decode steps into batched frames (default true; `--no-batch` turns it off). */
  readonly batching?: boolean;
  /**
   * Where tokens are sampled: `worker` (default: in the head worker beside the LM head,
   * channel-sampler.ts; with `headThread: 'main'`, in the sampler worker, sampler-worker.ts)
   * or `main`, the event loop itself (what the head did before; `npm run bench:event-loop`
   * measures one against the other).
   */
  readonly samplingThread?: 'worker' | 'main';
  /**
   * Where the head's embedding and LM head run: `worker` (default; head-worker.ts) or `main`
   * (onnxruntime-node runs a session synchronously on the calling thread, holding the loop).
   */
  readonly headThread?: 'worker' | 'main';
  /**
   * Keep the plan loaded ahead of requests (mesh/warm-up.ts): `expectPeers` local peers are
   * waited for first. Absent: ranges load with the first request.
   */
  readonly warmUp?: { readonly expectPeers: number };
  /** Decorate each remote peer's link (the bench meters frames and injects link delay). */
  readonly wrapLink?: (link: PeerLink, peerId: string) => PeerLink;
  /** Decorate each remote peer's chain port (the bench injects the same delay on chained frames). */
  readonly wrapChain?: (port: ChainPort, peerId: string) => ChainPort;
  /** Mount more routes (OpenAI API, dashboard) before the server starts. */
  readonly mount?: (app: H3, head: HeadContext) => void;
}

export interface HeadSessionOptions {
  /** Live sessions before 429 (`--max-sessions`, default 8). */
  readonly maxSessions?: number;
  /** `--min-peers`: requests wait for this many peers to have joined… */
  readonly minPeers?: number;
  /** …for at most this long (`--peer-wait`, default 60 s), then get a 503. */
  readonly peerWaitMs?: number;
  /** Ceiling of every hop's adaptive deadline (`--hop-timeout`, default 5 s). */
  readonly hopTimeoutMs?: number;
  /** Floor of the adaptive deadline (default DEADLINE_FLOOR_MS, 1 s). */
  readonly hopFloorMs?: number;
  /** `--route-mode`: star (head → hop → head), chain (hop to hop where the links can be made), auto (default for now: star). */
  readonly routeMode?: RouteMode;
  readonly observer?: SessionObserver;
  /** `--verify`: the share of hop steps checked against a replay elsewhere (0 or absent: none). */
  readonly verifyFraction?: number;
  /** Each verification's outcome (metrics, logs). */
  readonly onVerify?: (result: VerifyResult, peerId: string, detail: string) => void;
  /** Draws the verified steps (tests seed it). */
  readonly verifyRng?: Rng;
  /** A client left before its answer ended (metrics). */
  readonly onClientAbort?: () => void;
}

export interface HeadSpeculationOptions {
  /** How sessions draft unless a request says (`--speculate`; default 'draft' with a draft model, else 'ngram'). */
  readonly mode?: SpeculateMode;
  /** `--draft-model DIR|HUB_ID`: a small model with the same tokenizer, run by the head to draft. */
  readonly draftModel?: string;
  /** `--prefill-chunk N`: tokens per chunk of a pipelined prefill (0 = never; default auto). */
  readonly prefillChunk?: number;
}

/** Floor of every hop's deadline when `--hop-timeout` is not given. */
export const DEFAULT_HOP_TIMEOUT_MS = 5000;

export interface HeadContext {
  readonly mesh: Mesh;
  readonly headRunner: HeadRunner;
  readonly tokenizer: TextTokenizer;
  readonly model: LocalModel;
  readonly name: string;
  readonly joinToken: string | undefined;
  /** The weight format the mesh serves. */
  readonly weights: WeightSpec;
  /** The context length and stop tokens, derived once from the model. */
  readonly limits: GenerationLimits;
  /** Every live Route Session (admission, shutdown). */
  readonly sessions: RouteSessions;
  /** Core's one entry for a request: template, tokenizing, admission, grammar, the session. */
  readonly completions: Completions;
  /** Where sessions' drafters come from (prompt lookup; the draft model when one was given). */
  readonly drafters: Drafters;
  /** The default speculation mode and the pipelined prefill's chunk setting, as the sessions use them. */
  readonly speculation: { readonly mode: SpeculateMode; readonly prefillChunk?: number; readonly draftModel?: string };
}

export interface RunningHead extends HeadContext {
  readonly url: string; // http://host:port/
  readonly peerUrl: string; // ws://host:port/peer/ws
  waitForPeers(count: number, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

export function generateJoinToken(): string {
  return randomBytes(16).toString('hex');
}

export async function startHead(options: HeadOptions): Promise<RunningHead> {
  installHopTraceFromEnv();
  const { model, dtype } = options;
  const weights = asWeightSpec(model.checkpoint.config, dtype, options.weights);
  const log = options.log ?? (() => {});
  const joinToken = options.joinToken === null ? undefined : (options.joinToken ?? generateJoinToken());
  const budget = options.memoryBudgetBytes ?? Math.floor(os.freemem() / 2);
  const loader = await nodeLoaderOptions({ device: options.device, dtype, threads: options.threads });
  const loadedHead = options.headThread === 'main' ? await loadLocalHeadRunner(model, dtype, weights, loader) : await WorkerHeadRunner.start({ modelDir: model.directory, device: options.device, dtype, weights, threads: options.threads });
  // Concurrent sessions' LM heads run as one batch, like their decode steps on the peers.
  const headRunner = options.batching === false ? loadedHead : new BatchingHeadRunner(loadedHead);
  // One line says where this process runs what. The head's own layers (in a worker thread)
  // get the same providers: the probe's verdict is inherited (provider-probe.ts).
  const parts = options.headLayers === 'none' ? 'the embedding and LM head' : 'the embedding, LM head and its own layers';
  log(`head runs ${parts} on ${describeProviders(options.device, headRunner.device, loader.skipped)}`);

  const spec = options.speculation ?? {};
  let draftModel: LoadedDraftModel | undefined;
  if (spec.draftModel !== undefined) {
    draftModel = await loadDraftModel(spec.draftModel, { model, tokenizer: options.tokenizer }, { device: options.device, dtype, threads: options.threads, log }).catch(async (error: unknown) => {
      await headRunner.dispose();
      throw error;
    });
  }
  const drafters = new Drafters(draftModel);
  const speculateMode = spec.mode ?? (draftModel ? 'draft' : 'ngram');

  const mesh = new Mesh(meshModel(model, options.name, dtype, weights), { headLayers: options.headLayers, headBudgetBytes: budget, readyTimeoutMs: options.readyTimeoutMs, warmUpTimeoutMs: options.warmUpTimeoutMs, quarantine: options.quarantine, hopTimeoutMs: options.sessions?.hopTimeoutMs ?? DEFAULT_HOP_TIMEOUT_MS, batching: options.batching });
  let headPeer: ShardService | undefined;
  if (options.headLayers !== 'none') {
    // The head serves sockets too: its own layers run in a worker thread, like a Node peer's.
    headPeer = new WorkerShardService(
      { loader: { kind: 'local', modelDir: model.directory, device: options.device, threads: options.threads }, memoryBudgetBytes: budget, prefixBudgetBytes: options.prefixCacheBytes },
      log,
    );
    mesh.addPeer({ id: HEAD_PEER_ID, runtime: 'head', executionProvider: headRunner.device, memoryBudgetBytes: budget, link: new InProcessLink(headPeer), weightFormats: [weights.format] });
  }

  // The served API ends answers at the model's natural end (`meshnet generate` runs to its budget).
  const { config } = model.checkpoint;
  const naturalEnd = naturalEndTokens(config, config.vocabSize, (id) => options.tokenizer.decode([id], { skipSpecialTokens: true }));
  const limits = generationLimits(config, options.tokenizer, naturalEnd);
  const s = options.sessions ?? {};
  const verifier = s.verifyFraction ? new HopVerifier({ fraction: s.verifyFraction, source: mesh, rng: s.verifyRng, onResult: s.onVerify }) : undefined;
  // Sampling off the event loop: beside the LM head in the head worker (channel-sampler.ts),
  // so a decode step's logits never reach this thread; with the head here, in the sampler worker.
  const samplerWorker = options.samplingThread === 'main' || loadedHead instanceof WorkerHeadRunner ? undefined : new SamplerWorker();
  const samplers = options.samplingThread === 'main' ? undefined : loadedHead instanceof WorkerHeadRunner ? loadedHead.samplers : samplerWorker!.factory;
  const sessions = new RouteSessions({
    session: {
      head: headRunner,
      route: mesh,
      vocabSize: model.checkpoint.config.vocabSize,
      tokenizer: options.tokenizer,
      policy: { hopTimeoutMs: s.hopTimeoutMs ?? DEFAULT_HOP_TIMEOUT_MS, hopFloorMs: s.hopFloorMs, prefillChunk: spec.prefillChunk, routeMode: s.routeMode },
      drafters,
      prefixes: (options.prefixCacheBytes ?? 0) > 0 ? prefixRegistryFor(mesh) : undefined,
      verifier,
      samplers,
    },
    limits,
    maxSessions: s.maxSessions ?? 8,
    observer: s.observer,
    speculate: speculateMode,
    minPeers: s.minPeers
      ? { count: s.minPeers, waitMs: s.peerWaitMs ?? 60_000, joined: () => mesh.remotePeerCount, onChange: (listener) => mesh.onChange(listener) }
      : undefined,
  });
  const completions = new Completions({ sessions, tokenizer: options.tokenizer, limits, vocabSize: model.checkpoint.config.vocabSize, loadGrammar: loadXGrammar, grammarHost: (vocabulary, grammarOptions) => new WorkerGrammarEngine(vocabulary, grammarOptions), onClientAbort: s.onClientAbort });
  const context: HeadContext = {
    mesh,
    headRunner,
    tokenizer: options.tokenizer,
    model,
    name: options.name,
    joinToken,
    weights,
    limits,
    sessions,
    completions,
    drafters,
    speculation: { mode: speculateMode, prefillChunk: spec.prefillChunk, draftModel: draftModel?.id },
  };
  const app = new H3();
  const allowLoopbackWithoutToken = options.joinToken === undefined;
  const gateway = createPeerGateway({ mesh, joinToken, allowLoopbackWithoutToken, link: options.link, allowPeerHosts: options.allowPeerHosts, pingTimeoutMs: options.peerPingTimeoutMs, timeoutMs: options.linkTimeoutMs ?? 60_000, log, wrapLink: options.wrapLink, wrapChain: options.wrapChain });
  app.get('/peer/ws', gateway.handler);
  mountArtifactRoutes(app, model, { dtype, weights }, joinToken, allowLoopbackWithoutToken);
  options.mount?.(app, context);
  const server: RunningServer = await startServer(app, { port: options.port, host: options.host, requestTimeoutMs: options.requestTimeoutMs, clientError: options.clientError });
  const peerUrl = `ws://${options.host}:${server.port}/peer/ws`;
  const stopWarmUp = options.warmUp ? warmUp(mesh, { expectPeers: options.warmUp.expectPeers, onError: (error) => log(`route not ready: ${error instanceof Error ? error.message : String(error)}`) }) : undefined;

  return {
    ...context,
    url: server.url,
    peerUrl,
    waitForPeers(count, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (mesh.remotePeerCount < count) return false;
          off();
          clearTimeout(timer);
          resolve();
          return true;
        };
        const off = mesh.onChange(check);
        const timer = setTimeout(() => {
          off();
          reject(new Error(`only ${mesh.remotePeerCount} of ${count} peers joined within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        check();
      });
    },
    async close() {
      stopWarmUp?.();
      // Live sessions end as cancelled and release their hops while the links are still up.
      await sessions.abortAll();
      for (const peer of mesh.peers) mesh.removePeer(peer.id);
      await gateway.closeAll('the head is shutting down');
      await server.close();
      await headPeer?.dispose();
      await draftModel?.dispose();
      await headRunner.dispose();
      completions.dispose();
      await samplerWorker?.close();
    },
  };
}

/** The head's prefix registry; each entry it forgets is forgotten by the peers holding it too (3.5 `forget`, prefix-forget.ts). */
function prefixRegistryFor(mesh: Mesh): PrefixRegistry {
  const forgetter = new PrefixForgetter((id) => mesh.peers.find((p) => p.id === id));
  return new PrefixRegistry({ onForget: (id, hops) => forgetter.forgotten(id, hops) });
}
