/**
 * ShardLoader for a browser peer: downloads only its assigned artifact from the head —
 * manifest, graph and that range's packed weights — with progress, and opens it on
 * onnxruntime-web (WebGPU, else wasm) with the KV kept on the GPU.
 */
import { parseShardManifest } from '../core/model/manifest-parse.ts';
import { checkAssignedWeights, type ShardLoader } from '../core/peer/shard-loader.ts';
import { createShardExecutor } from '../core/runtime/ort-loader.ts';
import type { ShardExecutor } from '../core/runtime/shard-executor.ts';
import type { AssignMessage } from '../shared/control.ts';
import { ARTIFACT_TOKEN_HEADER } from '../shared/protocol.ts';
import { browserLoaderOptions } from './ort-web-runtime.ts';

export interface FetchLoaderOptions {
  readonly origin: string;
  readonly joinToken?: string;
  readonly device: string;
  /** A shard's download begins (its manifest read): the size of its weights, bytes. */
  readonly onStart?: (weightsBytes: number) => void;
  readonly onProgress?: (file: string, received: number, total: number | undefined) => void;
  /** Every byte is here; onnxruntime now builds the session. */
  readonly onLoading?: () => void;
}

async function download(url: URL, headers: Record<string, string>, onProgress?: (received: number, total?: number) => void): Promise<Uint8Array> {
  const response = await fetch(url, { headers });
  if (!response.ok) throw new Error(`GET ${url.pathname}: HTTP ${response.status} ${await response.text().catch(() => '')}`.trim());
  const total = Number(response.headers.get('content-length')) || undefined;
  const reader = response.body!.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.byteLength;
    onProgress?.(received, total);
  }
  const out = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

export function fetchShardLoader(options: FetchLoaderOptions): ShardLoader {
  const headers: Record<string, string> = options.joinToken ? { [ARTIFACT_TOKEN_HEADER]: options.joinToken } : {};
  return {
    async load(assign: AssignMessage): Promise<ShardExecutor> {
      const base = new URL(assign.artifactUrl, options.origin);
      const file = (name: string) => new URL(`${base.pathname.replace(/\/$/, '')}/${name}`, base);
      const manifestBytes = await download(file('manifest.json'), headers);
      const manifest = parseShardManifest(JSON.parse(new TextDecoder().decode(manifestBytes)), 'manifest.json');
      const { part } = manifest;
      // The same checks as the Node peer's loader (src/node/peer/http-shard-loader.ts).
      if (manifest.modelKey !== assign.modelKey || manifest.dtype !== assign.dtype || part.kind !== 'layers' || part.range.start !== assign.range.start || part.range.end !== assign.range.end) {
        throw new Error(`the head sent the artifact of another part (${JSON.stringify(part)}, ${manifest.dtype}) for layers [${assign.range.start}, ${assign.range.end}) in ${assign.dtype}`);
      }
      checkAssignedWeights(assign, manifest.weights, 'the head\'s artifact');
      options.onStart?.(manifest.weightsLength);
      const graph = await download(file('graph.onnx'), headers, (r, t) => options.onProgress?.('graph.onnx', r, t));
      const weights = await download(file('weights.bin'), headers, (r, t) => options.onProgress?.('weights.bin', r, t));
      options.onLoading?.();
      const loader = browserLoaderOptions({ device: options.device, wasmPaths: new URL('/ort/', options.origin).href, threads: globalThis.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1 });
      return (await createShardExecutor(assign.config, manifest, graph, weights, loader)) as ShardExecutor;
    },
  };
}
