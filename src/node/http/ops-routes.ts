/**
 * Operations endpoints: `/health` (open; readiness: 200 only when a request would be served
 * now — `--min-peers` met and a route over the peers that are up — else 503 with the reason),
 * `/health/live` (open; liveness: 200 whenever the server answers), `/metrics` (open;
 * Prometheus text), `/api/state` and `/api/events` (SSE, one named event per MeshEvent kind,
 * a snapshot first) for the dashboard.
 */
import type { H3 } from 'h3';
import { weightSpecName } from '../../core/model/quant/weight-format.ts';
import { routeReadiness } from '../../core/mesh/readiness.ts';
import type { HeadContext } from '../head/head-node.ts';
import type { MeshStateStore } from '../head/state-store.ts';
import { SERVICE_UNAVAILABLE_RETRY_SECONDS } from '../openai/errors.ts';
import type { HeadMetrics } from '../metrics/head-metrics.ts';
import { PROMETHEUS_CONTENT_TYPE } from '../metrics/registry.ts';
import { jsonResponse, SSE_HEADERS } from './respond.ts';

export interface OpsOptions {
  /** `--min-peers`: /health is 503 until this many peers joined (default 0). */
  readonly minPeers?: number;
}

export function mountOpsRoutes(app: H3, head: HeadContext, store: MeshStateStore, metrics: HeadMetrics, options: OpsOptions = {}): void {
  app.get('/health', () => {
    const minPeers = options.minPeers ?? 0;
    // Only warm ranges count: the plan a request would be served by now.
    const readiness = routeReadiness({ plan: () => head.mesh.servingPlan(), remotePeerCount: head.mesh.remotePeerCount }, minPeers);
    const { bytesPerLayer } = head.mesh.model;
    const peers = head.mesh.peers.map((p) => ({
      id: p.id,
      runtime: p.runtime,
      device: p.device ?? p.executionProvider,
      layers: p.ranges.filter((r) => head.mesh.holdsWarm(p.id, r)).map((r) => [r.start, r.end]),
      // The format and packed bytes of what it loaded (a peer that loaded nothing has neither).
      ...(p.weights ? { weights: weightSpecName(p.weights), weightBytes: p.ranges.reduce((n, r) => n + r.end - r.start, 0) * bytesPerLayer } : {}),
    }));
    const body = { model: head.name, weights: weightSpecName(head.weights), route: routeView(head), peers, minPeers };
    if (!readiness.ready) {
      const retry = { 'retry-after': String(SERVICE_UNAVAILABLE_RETRY_SECONDS) };
      return jsonResponse({ status: 'unavailable', ready: false, reason: readiness.reason, ...body }, 503, retry);
    }
    return jsonResponse({ status: 'ok', ready: true, ...body });
  });

  // Liveness: 200 while the process serves HTTP, whatever the mesh is doing (open, like /health).
  app.get('/health/live', () => jsonResponse({ status: 'ok' }));

  app.get('/metrics', () => new Response(metrics.render(), { headers: { 'content-type': PROMETHEUS_CONTENT_TYPE } }));

  app.get('/api/state', () => jsonResponse(store.state));

  app.get('/api/events', (event) => {
    const encoder = new TextEncoder();
    let unsubscribe = () => {};
    let keepAlive: ReturnType<typeof setInterval> | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        const send = (kind: string, data: unknown) => controller.enqueue(encoder.encode(`event: ${kind}\ndata: ${JSON.stringify(data)}\n\n`));
        const snapshot = store.snapshotEvent();
        send(snapshot.kind, snapshot);
        unsubscribe = store.subscribe((e) => {
          try {
            send(e.kind, e);
          } catch {
            unsubscribe();
          }
        });
        keepAlive = setInterval(() => {
          try {
            controller.enqueue(encoder.encode(': keep-alive\n\n'));
          } catch {
            clearInterval(keepAlive);
          }
        }, 15_000);
        event.req.signal.addEventListener('abort', () => {
          unsubscribe();
          clearInterval(keepAlive);
        });
      },
      cancel() {
        unsubscribe();
        clearInterval(keepAlive);
      },
    });
    return new Response(body, { headers: SSE_HEADERS });
  });
}

/** The route a request would take now, over warm ranges (whatever --min-peers says), or why there is none. */
function routeView(head: HeadContext): { ready: boolean; hops?: { peerId: string; range: [number, number] }[]; reason?: string } {
  try {
    return { ready: true, hops: head.mesh.servingPlan().hops.map((h) => ({ peerId: h.peerId, range: [h.range.start, h.range.end] })) };
  } catch (error) {
    return { ready: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
