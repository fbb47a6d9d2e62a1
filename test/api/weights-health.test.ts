/**
 * A head serving q4 weights: after a completion through the official client, /health and
 * the dashboard state name the format of the model and of each peer's loaded ranges, with
 * their packed bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { MeshState } from '../../src/shared/dashboard-state.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor, serveStories } from './api-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
beforeAll(async () => {
  root = await tempDir('weights-health');
  process.env.MESHNET_HOME = root.dir;
  serving = await serveStories({ weights: { format: 'q4', blockSize: 64 } });
});
afterAll(async () => {
  await serving?.close();
  await root?.remove();
});

describe('a q4 mesh says what it serves', () => {
  it('/health and /api/state name the weight format and the packed bytes of each loaded range', async () => {
    const client = clientFor(serving);
    const completion = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 4, temperature: 0 });
    expect(completion.choices[0].finish_reason).toBe('length');

    const health = (await (await fetch(`${serving.head.url}health`)).json()) as {
      weights: string;
      peers: { id: string; layers: [number, number][]; weights?: string; weightBytes?: number }[];
    };
    expect(health.weights).toBe('q4-b64-acc4');
    const head = health.peers.find((p) => p.id === 'head')!;
    expect(head.layers).toEqual([[0, 5]]);
    expect(head.weights).toBe('q4-b64-acc4');
    expect(head.weightBytes).toBe(5 * serving.head.mesh.model.bytesPerLayer);
    expect(serving.head.weights).toEqual(weightSpec('fp32', { format: 'q4', blockSize: 64 }));

    const state = (await (await fetch(`${serving.head.url}api/state`)).json()) as MeshState;
    expect(state.model.weights).toBe('q4-b64-acc4');
    const view = state.peers.find((p) => p.id === 'head')!;
    expect(view.weights).toBe('q4-b64-acc4');
    expect(view.weightBytes).toBe(head.weightBytes);
  });
});
