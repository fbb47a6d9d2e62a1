/**
 * `meshnet generate --local-peers N`: a head on a loopback port, N Node peer processes,
 * and one Route Session across them.
 */
import { randomUUID } from 'node:crypto';
import type { ActivationDtype } from '../../core/model/activations.ts';
import type { WeightSpec } from '../../core/model/quant/weight-format.ts';
import type { TextTokenizer } from '../../core/model/tokenizer.ts';
import type { LayerRange } from '../../core/model/types.ts';
import type { SamplingParams } from '../../core/sampling/index.ts';
import type { SpeculationTelemetry } from '../../core/speculation/speculation.ts';
import { startHead, type HeadSpeculationOptions } from '../head/head-node.ts';
import type { LocalModel } from '../local-model.ts';
import { spawnLocalPeers } from '../peer/local-peers.ts';

export interface DistributedRun {
  readonly tokenIds: number[];
  readonly text: string;
  readonly finishReason: string;
  readonly hops: { peerId: string; range: [number, number]; device?: string; meanMs: number }[];
  readonly repairs: number;
  readonly speculation?: SpeculationTelemetry;
}

export async function generateDistributed(options: {
  model: LocalModel;
  tokenizer: TextTokenizer;
  promptIds: number[];
  params: SamplingParams;
  localPeers: number;
  link: 'relay' | 'direct';
  headLayers: 'auto' | 'none' | LayerRange;
  device: string;
  dtype: ActivationDtype;
  speculation?: HeadSpeculationOptions;
  weights: WeightSpec;
  /** onnxruntime threads per session (default 1: several processes share the cores). */
  threads?: number;
  onText?: (delta: string) => void;
}): Promise<DistributedRun> {
  const log = (line: string) => process.stderr.write(`meshnet: ${line}\n`);
  const threads = options.threads ?? 1;
  const head = await startHead({
    model: options.model,
    tokenizer: options.tokenizer,
    name: 'local',
    port: 0,
    host: '127.0.0.1',
    link: options.link,
    headLayers: options.headLayers,
    dtype: options.dtype,
    weights: options.weights,
    device: options.device,
    threads,
    speculation: options.speculation,
    log,
  });
  const peers = spawnLocalPeers({ count: options.localPeers, headUrl: head.peerUrl, joinToken: head.joinToken, link: options.link, device: options.device, threads, log });
  try {
    await head.waitForPeers(options.localPeers, 60_000);
    const session = await head.sessions.open({ sessionId: randomUUID(), promptIds: options.promptIds, sampling: options.params, maxTokens: options.params.maxTokens });
    const tokenIds: number[] = [];
    let text = '';
    let finishReason = 'length';
    for await (const event of session) {
      if (event.type === 'token') tokenIds.push(event.tokenId);
      else finishReason = event.finishReason;
      text += event.text;
      options.onText?.(event.text);
    }
    const devices = new Map(head.mesh.peers.map((p) => [p.id, p.device]));
    return {
      tokenIds,
      text,
      finishReason,
      hops: session.telemetry.hops.map((h) => ({ peerId: h.peerId, range: [h.range.start, h.range.end], device: devices.get(h.peerId), meanMs: h.frames ? h.totalMs / h.frames : 0 })),
      repairs: session.telemetry.repairs.length,
      speculation: session.telemetry.speculation,
    };
  } finally {
    await head.close();
    await peers.close();
  }
}
