/**
 * The weight format travels in `assign` (protocol 2.1): the planner uses only peers that
 * announced the mesh's format, a peer refuses an assignment it cannot honour
 * (`unsupported_weights`) and never serves another format silently, the head refuses a
 * `ready` for another format, and the planner budgets the real packed bytes of the format.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseControlMessage, serializeControlMessage, type AssignMessage } from '../../src/shared/control.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';
import { weightSpec, weightSpecName, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { Mesh } from '../../src/core/mesh/mesh.ts';
import { RouteUnavailableError } from '../../src/core/mesh/plan-error.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { ShardExecutor } from '../../src/core/runtime/shard-executor.ts';
import { WEIGHTS_FILE } from '../../src/core/model/shard-artifact.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { STORIES_DIR, tempDir } from '../engine/harness.ts';

const Q4 = weightSpec('fp32', { format: 'q4' });

let root: { dir: string; remove: () => Promise<void> };
let model: LocalModel;
beforeAll(async () => {
  root = await tempDir('weights-assign');
  process.env.MESHNET_HOME = root.dir;
  model = await openLocalModel(STORIES_DIR);
});
afterAll(() => root.remove());

const assignFor = (weights: WeightSpec, range = { start: 0, end: 2 }): AssignMessage => {
  const m = meshModel(model, 'stories260k', 'fp32', weights);
  return { kind: 'assign', id: 'a1', modelKey: m.modelKey, model: m.name, range, dtype: 'fp32', weights: m.artifacts.weights, artifactUrl: m.artifacts.url(range), config: m.config };
};

/** An executor that says it holds `weights` (its run is never called here). */
const fakeExecutor = (weights: WeightSpec): ShardExecutor & { disposed: boolean } => ({
  range: { start: 0, end: 2 },
  loaded: { device: 'cpu', weights, weightsBytes: 1 },
  kvOps: { bytes: () => 0, capacity: () => 0, grow: () => undefined, dispose: () => {} },
  disposed: false,
  async run() {
    throw new Error('not run');
  },
  async dispose() {
    this.disposed = true;
  },
});

describe('a peer refuses an assignment it cannot honour', () => {
  it('a format it does not serve: unsupported_weights, nothing loaded', async () => {
    let loads = 0;
    const peer = new ShardPeer({ loader: { load: async () => (loads++, fakeExecutor(Q4)) }, memoryBudgetBytes: 1 << 30, weightFormats: ['fp32', 'fp16'] });
    const answer = await peer.handleControl(assignFor(Q4));
    expect(answer).toMatchObject({ kind: 'error', id: 'a1', code: 'unsupported_weights' });
    expect((answer as { message: string }).message).toMatch(/serves weights fp32, fp16, not q4-b32-acc4/);
    expect(loads).toBe(0);
    expect(peer.ranges).toEqual([]);
  });

  it('a loader that produced another format: refused and disposed, never served', async () => {
    const wrong = fakeExecutor(weightSpec('fp32'));
    const peer = new ShardPeer({ loader: { load: async () => wrong }, memoryBudgetBytes: 1 << 30 });
    const answer = await peer.handleControl(assignFor(Q4));
    expect(answer).toMatchObject({ kind: 'error', code: 'unsupported_weights' });
    expect((answer as { message: string }).message).toMatch(/holds weights fp32, the assignment says q4-b32-acc4/);
    expect(wrong.disposed).toBe(true);
    expect(peer.ranges).toEqual([]);
  });

  it('layers it already serves in another format are not silently reused', async () => {
    const peer = new ShardPeer({ loader: localShardLoader(model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    try {
      expect(await peer.handleControl(assignFor(weightSpec('fp32')))).toMatchObject({ kind: 'ready', weights: { format: 'fp32' } });
      expect(await peer.handleControl(assignFor(Q4))).toMatchObject({ kind: 'error', code: 'unsupported_weights' });
    } finally {
      await peer.dispose();
    }
  });

  it('the real loader serves the assigned format and says so in ready', async () => {
    const peer = new ShardPeer({ loader: localShardLoader(model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    try {
      const ready = await peer.handleControl(assignFor(Q4));
      expect(ready).toMatchObject({ kind: 'ready', range: { start: 0, end: 2 }, weights: { format: 'q4', blockSize: 32, accuracyLevel: 4 } });
    } finally {
      await peer.dispose();
    }
  });
});

describe('the head', () => {
  it('plans only peers that announced its format; a 2.0 peer (no weightFormats) only for the float format of the dtype', async () => {
    const peerLink = () => new InProcessLink(new ShardPeer({ loader: localShardLoader(model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 }));
    const q4 = new Mesh(meshModel(model, 'stories260k', 'fp32', Q4), { headLayers: 'none' });
    q4.addPeer({ id: 'new', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: peerLink(), weightFormats: ['fp32', 'fp16', 'q8', 'q4'] });
    q4.addPeer({ id: 'floats-only', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: peerLink(), weightFormats: ['fp32', 'fp16'] });
    q4.addPeer({ id: 'old', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: peerLink() });
    expect(q4.plan().hops.map((h) => h.peerId)).toEqual(['new']);
    const fp32 = new Mesh(meshModel(model, 'stories260k', 'fp32', weightSpec('fp32')), { headLayers: 'none' });
    fp32.addPeer({ id: 'old', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: peerLink() });
    expect(fp32.plan().hops.map((h) => h.peerId)).toEqual(['old']);
    for (const mesh of [q4, fp32]) for (const p of mesh.peers) mesh.removePeer(p.id);
  });

  it('turns a refusal into RouteUnavailableError naming the peer and format, and refuses a ready for another format', async () => {
    const refusing = new ShardPeer({ loader: { load: async () => fakeExecutor(Q4) }, memoryBudgetBytes: 1 << 30, weightFormats: ['fp32'] });
    const mesh = new Mesh(meshModel(model, 'stories260k', 'fp32', Q4), { headLayers: 'none' });
    // It announces q4 (so the planner picks it) but refuses when assigned: the refusal reaches the head as data.
    const peer = mesh.addPeer({ id: 'liar', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(refusing), weightFormats: ['q4'] });
    const refused = await mesh.ensureLoaded(peer, { start: 0, end: 5 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RouteUnavailableError);
    expect((refused as Error).message).toMatch(/peer liar refused layers \[0, 5\) in q4-b32-acc4: \[unsupported_weights\]/);

    const fp32Answer = new InProcessLink({
      kvEntries: 0,
      handleFrame: async () => ({ error: { kind: 'error', code: 'internal', message: 'no' } }),
      handleControl: async (m) => ({ kind: 'ready', id: m.id, modelKey: model.key, range: { start: 0, end: 5 }, loadMs: 1, device: 'cpu', weights: { format: 'fp32', blockSize: 0, accuracyLevel: 0 } }),
      dispose: async () => {},
    });
    const other = mesh.addPeer({ id: 'other-format', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: fp32Answer, weightFormats: ['q4'] });
    await expect(mesh.ensureLoaded(other, { start: 0, end: 5 })).rejects.toThrow(/loaded weights fp32, not the assigned q4-b32-acc4/);
    expect(other.ranges).toEqual([]);
    for (const p of mesh.peers) mesh.removePeer(p.id);
  });

  it('budgets the real packed bytes of one layer and of the head in the chosen format', async () => {
    for (const spec of [weightSpec('fp32'), weightSpec('fp32', { format: 'q8' }), Q4]) {
      const m = meshModel(model, 'stories260k', 'fp32', spec);
      const one = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range: { start: 0, end: 1 } }, 'fp32', spec);
      expect((await stat(path.join(one.directory, WEIGHTS_FILE))).size, weightSpecName(spec)).toBe(m.bytesPerLayer);
      const embedding = await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, 'fp32', spec);
      const head = await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, 'fp32', spec);
      expect(m.headBytes).toBe(embedding.artifact.manifest.weightsLength + head.artifact.manifest.weightsLength);
    }
    const fp32 = meshModel(model, 'stories260k', 'fp32', weightSpec('fp32')).bytesPerLayer;
    expect(meshModel(model, 'stories260k', 'fp32', Q4).bytesPerLayer).toBeLessThan(0.3 * fp32);
    expect(JSON.parse(await readFile(path.join((await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range: { start: 0, end: 1 } }, 'fp32', Q4)).directory, 'manifest.json'), 'utf8')).weights).toEqual(Q4);
  });
});

describe('control messages carry the weight format strictly', () => {
  it('round-trips assign.weights, ready.weights and hello.weightFormats', () => {
    const assign = assignFor(Q4);
    expect(parseControlMessage(serializeControlMessage(assign))).toEqual(assign);
    const hello = parseControlMessage(
      JSON.stringify({ kind: 'hello', protocol: { major: 2, minor: 1 }, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1, peerId: 'p', weightFormats: ['fp32', 'q4'] }),
    );
    expect(hello).toMatchObject({ weightFormats: ['fp32', 'q4'] });
  });

  it('refuses malformed weight formats with a protocol_error naming the field', () => {
    const base = assignFor(Q4) as unknown as Record<string, unknown>;
    for (const [weights, field] of [
      [{ format: 'q3', blockSize: 32, accuracyLevel: 4 }, 'weights.format'],
      [{ format: 'q4', blockSize: 48, accuracyLevel: 4 }, 'weights.blockSize'],
      [{ format: 'q4', blockSize: 32, accuracyLevel: 2 }, 'weights.accuracyLevel'],
      [{ format: 'fp32', blockSize: 32, accuracyLevel: 0 }, 'weights.blockSize'],
      ['q4', 'weights'],
    ] as const) {
      const error = (() => {
        try {
          parseControlMessage(JSON.stringify({ ...base, weights }));
        } catch (e) {
          return e;
        }
      })();
      expect(error, JSON.stringify(weights)).toBeInstanceOf(ProtocolError);
      expect((error as ProtocolError).code).toBe('protocol_error');
      expect((error as Error).message).toContain(`field '${field}'`);
    }
    expect(() =>
      parseControlMessage(JSON.stringify({ kind: 'hello', protocol: { major: 2, minor: 1 }, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1, peerId: 'p', weightFormats: ['q5'] })),
    ).toThrow(/weightFormats\[0\]/);
  });
});
