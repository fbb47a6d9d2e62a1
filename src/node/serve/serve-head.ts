/**
 * `meshnet serve` as a function: resolve the model, start the head (mesh, /peer/ws,
 * artifacts) with the OpenAI API, operations endpoints and dashboard mounted, and
 * optionally spawn local peers. Tests call this directly on loopback ports.
 */
import { networkInterfaces } from 'node:os';
import type { H3 } from 'h3';
import type { ActivationDtype } from '../../core/model/activations.ts';
import { resolveWeightSpec, weightSpecName, type WeightRequest } from '../../core/model/quant/weight-format.ts';
import type { LayerRange } from '../../core/model/types.ts';
import type { RouteMode } from '../../core/route/chain-route.ts';
import { emptyState } from '../../shared/dashboard-state.ts';
import { startHead, type HeadContext, type HeadSpeculationOptions, type RunningHead } from '../head/head-node.ts';
import { feedMeshState } from '../head/mesh-feed.ts';
import { SessionTracker } from '../head/session-tracker.ts';
import { MeshStateStore } from '../head/state-store.ts';
import { CATCH_ALL_ROUTE, isAuthorized, isOpenRequest, KEY_COOKIE, matchedRoute } from '../http/auth.ts';
import { CorsPolicy, DEFAULT_CORS, ownOrigins, parseCorsOption } from '../http/cors.ts';
import { edgeHeaders } from '../http/edge-headers.ts';
import { mountDashboard } from '../http/dashboard-routes.ts';
import { mountOllamaRoutes, OLLAMA_ROUTES, ollamaErrorResponse } from '../http/ollama-routes.ts';
import { mountOpenAIRoutes } from '../http/openai-routes.ts';
import { mountOpsRoutes } from '../http/ops-routes.ts';
import { mountPeerPage } from '../http/peer-page-routes.ts';
import { type BodyLimits, clientErrorAnswer, DEFAULT_BODY_LIMITS, errorResponse } from '../http/respond.ts';
import { openLocalModel } from '../local-model.ts';
import { packageVersion } from '../package-files.ts';
import { HeadMetrics } from '../metrics/head-metrics.ts';
import { resolveModel } from '../models/resolve-model.ts';
import { unauthorized, unknownPath } from '../openai/errors.ts';
import { spawnLocalPeers, type LocalPeers } from '../peer/local-peers.ts';
import { parseHeadLayers } from '../../core/mesh/head-layers.ts';
import type { QuarantinePolicy } from '../../core/mesh/quarantine.ts';
import { loadTokenizer } from '../tokenizer-files.ts';

export interface ServeOptions {
  readonly model: string; // folder, Hub id or 'demo'
  readonly port: number;
  readonly host: string;
  readonly localPeers: number;
  readonly link: 'relay' | 'direct';
  /** `--peer-ping-timeout`: a duplicate peer id is refused while its holder answers a ping this fast. */
  readonly peerPingTimeoutMs?: number;
  /** `--allow-peer-hosts`: hosts peers may announce for direct links. */
  readonly allowPeerHosts?: readonly string[];
  readonly headLayers: 'auto' | 'none' | LayerRange | string;
  readonly apiKey?: string;
  /** `--cors ORIGIN[,ORIGIN…]|*|none` (default: `DEFAULT_CORS`); the head's own origins always. */
  readonly cors?: string;
  readonly joinToken?: string | null;
  readonly maxSessions: number;
  /** `--prefix-cache`: MB of prefix entries per peer and for the head's own layers (omitted: off; `meshnet serve` passes its default, 256). */
  readonly prefixCacheMb?: number;
  /** `--no-batch` sets false: concurrent decode steps travel alone (default true). */
  readonly batching?: boolean;
  /** Where tokens are sampled (default `worker`; see HeadOptions; library and bench). */
  readonly samplingThread?: 'worker' | 'main';
  /** Where the embedding and LM head run (default `worker`; see HeadOptions; library and bench). */
  readonly headThread?: 'worker' | 'main';
  /** Requests wait until this many peers (of any kind) joined… */
  readonly minPeers?: number;
  /** …for at most this many seconds (default 60), then get a 503. */
  readonly peerWaitSeconds?: number;
  readonly chatTemplateFile?: string;
  readonly device: string;
  readonly dtype: ActivationDtype;
  /** `--weights`, `--quant-block`, `--accuracy-level` (defaults: see resolveWeightSpec). */
  readonly weights?: WeightRequest;
  readonly threads?: number;
  readonly bodyLimitBytes?: number;
  /** `--verify FRACTION`: the share of hop steps checked against a replay on the head or a second holder (default 0: none). */
  readonly verifyFraction?: number;
  /** `--request-timeout`: a request's headers, and its whole body, must arrive within this (default 30 s). */
  readonly requestTimeoutMs?: number;
  readonly linkTimeoutMs?: number;
  /** Ceiling of every hop's adaptive deadline, ms (`--hop-timeout`; default 5 s). */
  readonly hopTimeoutMs?: number;
  /** `--route-mode` (the CLI's default: auto; absent here: star). */
  readonly routeMode?: RouteMode;
  /** Floor of the adaptive deadline, ms (default 1 s, DEADLINE_FLOOR_MS; library and tests). */
  readonly hopFloorMs?: number;
  /** How long a peer may take to get ready for its layers, ms (`--ready-timeout`; default 30 s). */
  readonly readyTimeoutMs?: number;
  /** The cold-start deadline of a newly loaded range's warm-up frame, ms (`--warm-up-timeout`; default 60 s). */
  readonly warmUpTimeoutMs?: number;
  /** Quarantine back-off of hung or faulty peers (default 10 s doubling to 5 min; library and tests). */
  readonly quarantine?: QuarantinePolicy;
  /** `--speculate`, `--draft-model`, `--prefill-chunk` (see HeadSpeculationOptions). */
  readonly speculation?: HeadSpeculationOptions;
  readonly log?: (line: string) => void;
  /** More routes (the dashboard, the browser peer page). */
  readonly mount?: (app: H3, head: HeadContext) => void;
}

export interface ServingHead {
  readonly head: RunningHead;
  readonly store: MeshStateStore;
  readonly metrics: HeadMetrics;
  readonly tracker: SessionTracker;
  readonly peers?: LocalPeers;
  readonly modelId: string;
  close(): Promise<void>;
}

export async function serveHead(options: ServeOptions): Promise<ServingHead> {
  const log = options.log ?? (() => {});
  if (options.apiKey === '') throw new Error('the API key is empty: give a non-empty --api-key, or none to serve without one');
  if (options.joinToken === '') throw new Error('the join token is empty: give a non-empty --join-token, or none to have one generated');
  const resolved = await resolveModel(options.model);
  const model = await openLocalModel(resolved.dir);
  const tokenizer = await loadTokenizer(resolved.dir, { chatTemplateFile: options.chatTemplateFile });
  if (tokenizer.chatTemplate.isFallback) log(`${resolved.id} has no chat template: chat requests use meshnet's plain fallback template (README, "Chat templates")`);
  const config = model.checkpoint.config;
  const weights = resolveWeightSpec(config, options.dtype, options.weights);
  const headLayers = typeof options.headLayers === 'string' ? parseHeadLayers(options.headLayers, config.numLayers) : options.headLayers;
  if (options.verifyFraction) {
    const witness = headLayers === 'none' ? 'a second peer holding the same layers (with --head-layers none the head cannot replay them itself; a hop without one is not checked)' : 'the head itself';
    log(`--verify ${options.verifyFraction}: that share of hop answers is checked by replaying the hop's inputs on ${witness}`);
  }
  const startedAt = Date.now();
  const store = new MeshStateStore({ initial: emptyState({ id: resolved.id, numLayers: config.numLayers, dtype: options.dtype, weights: weightSpecName(weights) }, startedAt) });
  const metrics = new HeadMetrics();
  const tracker = new SessionTracker(store, metrics, resolved.id);
  let listenUrl: string | undefined; // known once the head listens (port 0)
  const localAddresses = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
  // The head's own origins are known once it listens, and do not change after: built once.
  let origins: { readonly url: string; readonly list: readonly string[] } | undefined;
  const headOrigins = () => {
    if (!listenUrl) return [];
    if (origins?.url !== listenUrl) origins = { url: listenUrl, list: ownOrigins(listenUrl, localAddresses) };
    return origins.list;
  };
  const cors = new CorsPolicy(parseCorsOption(options.cors ?? DEFAULT_CORS), headOrigins);

  const body: BodyLimits = { bytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMITS.bytes, timeoutMs: options.requestTimeoutMs ?? DEFAULT_BODY_LIMITS.timeoutMs };
  const head = await startHead({
    model,
    tokenizer,
    name: resolved.id,
    port: options.port,
    host: options.host,
    joinToken: options.joinToken,
    link: options.link,
    allowPeerHosts: options.allowPeerHosts,
    peerPingTimeoutMs: options.peerPingTimeoutMs,
    headLayers,
    dtype: options.dtype,
    weights,
    device: options.device,
    threads: options.threads,
    linkTimeoutMs: options.linkTimeoutMs,
    requestTimeoutMs: body.timeoutMs,
    clientError: (error) => {
      // Refused by Node before any route: counted like a path that names no route.
      const answer = clientErrorAnswer(error, body.timeoutMs);
      metrics.requestFinished('unknown', answer.status);
      return answer.raw;
    },
    readyTimeoutMs: options.readyTimeoutMs,
    warmUpTimeoutMs: options.warmUpTimeoutMs,
    quarantine: options.quarantine,
    speculation: options.speculation,
    prefixCacheBytes: (options.prefixCacheMb ?? 0) * 2 ** 20,
    batching: options.batching,
    samplingThread: options.samplingThread,
    headThread: options.headThread,
    sessions: {
      maxSessions: options.maxSessions,
      minPeers: options.minPeers || undefined,
      peerWaitMs: (options.peerWaitSeconds ?? 60) * 1000,
      hopTimeoutMs: options.hopTimeoutMs,
      routeMode: options.routeMode,
      hopFloorMs: options.hopFloorMs,
      observer: tracker,
      verifyFraction: options.verifyFraction,
      onVerify: (result, peerId, detail) => {
        metrics.verified(result);
        if (result === 'mismatch') log(`--verify: ${detail}; peer ${peerId} is quarantined`);
      },
      onClientAbort: () => metrics.clientAborted('answer'),
    },
    warmUp: { expectPeers: options.localPeers },
    log,
    mount(app, ctx) {
      // First: x-request-id and CORS on every response, and CORS preflights answered here,
      // before the key check below (the one exemption from it; see edge-headers.ts).
      app.use(edgeHeaders(cors));
      app.use((event, next) => {
        if (isOpenRequest(event)) return next();
        const route = matchedRoute(event);
        if (!isAuthorized(event.req, options.apiKey)) {
          // Label by route pattern, never by the raw path (a client could mint endless series).
          metrics.requestFinished(route === undefined || route === CATCH_ALL_ROUTE ? 'unknown' : route, 401);
          // Ollama's routes answer in Ollama's error shape, the rest in OpenAI's.
          return route !== undefined && OLLAMA_ROUTES.has(route) ? ollamaErrorResponse(unauthorized()) : errorResponse(unauthorized());
        }
        const key = new URL(event.req.url).searchParams.get('key');
        if (key && route?.startsWith('/dashboard')) {
          event.res.headers.append('set-cookie', `${KEY_COOKIE}=${encodeURIComponent(key)}; Path=/; HttpOnly; SameSite=Strict`);
        }
        return next();
      });
      mountOpenAIRoutes(app, {
        head: ctx,
        body,
        startedAt,
        onResponse: (endpoint, status) => metrics.requestFinished(endpoint, status),
      });
      mountOllamaRoutes(app, {
        head: ctx,
        body,
        startedAt,
        version: packageVersion(),
        onResponse: (endpoint, status) => metrics.requestFinished(endpoint, status),
      });
      mountOpsRoutes(app, ctx, store, metrics, { minPeers: options.minPeers });
      mountPeerPage(app);
      mountDashboard(app);
      options.mount?.(app, ctx);
      app.all(CATCH_ALL_ROUTE, (event) => {
        metrics.requestFinished('unknown', 404);
        return errorResponse(unknownPath(event.req.method, new URL(event.req.url).pathname));
      });
    },
  });
  listenUrl = head.url;
  const feed = feedMeshState(head.mesh, store, metrics);
  const peers =
    options.localPeers > 0
      ? spawnLocalPeers({ count: options.localPeers, headUrl: head.peerUrl, joinToken: head.joinToken, link: options.link, device: options.device, threads: options.threads ?? 1, prefixCacheMb: options.prefixCacheMb ?? 0, log })
      : undefined;
  return {
    head,
    store,
    metrics,
    tracker,
    peers,
    modelId: resolved.id,
    async close() {
      feed.close();
      await head.close();
      await peers?.close();
    },
  };
}
