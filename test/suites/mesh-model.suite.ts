/**
 * The MeshModel conformance suite (src/core/mesh/mesh-model.ts states the contract): what a
 * Mesh tells peers in `assign` and what its planner budgets. Every implementation runs it
 * (test/mesh/mesh-models.test.ts: src/node/mesh-model.ts over checkpoints and weight formats).
 */
import { describe, expect, it } from 'vitest';
import type { MeshModel } from '../../src/core/mesh/mesh-model.ts';
import { planRoute } from '../../src/core/mesh/plan-route.ts';
import type { LayerRange } from '../../src/core/model/types.ts';
import { parseControlMessage, serializeControlMessage, type AssignMessage, type ShardConfigSummary } from '../../src/shared/control.ts';

export interface MeshModelFixture {
  readonly model: MeshModel;
  /** What the model is: the checkpoint's shape and the name clients call it by. */
  readonly expected: { readonly name: string; readonly config: ShardConfigSummary; readonly weightFormat: string };
}

/** The `assign` a Mesh's RangeLoader sends for `range`. */
const assignOf = (m: MeshModel, range: LayerRange): AssignMessage => ({
  kind: 'assign',
  id: 'a1',
  modelKey: m.modelKey,
  model: m.name,
  range,
  dtype: m.artifacts.dtype,
  weights: m.artifacts.weights,
  artifactUrl: m.artifacts.url(range),
  config: m.config,
});

export function meshModelSuite(name: string, factory: () => Promise<MeshModelFixture>): void {
  describe(`MeshModel conformance: ${name}`, () => {
    it('names the model: a key, the name clients use, the checkpoint shape, the weight format', async () => {
      const { model, expected } = await factory();
      expect(model.modelKey).toMatch(/^\S+$/);
      expect(model.name).toBe(expected.name);
      expect(model.config).toEqual(expected.config);
      expect(model.artifacts.weights.format).toBe(expected.weightFormat);
    });

    it('every range it assigns passes the wire check unchanged', async () => {
      const { model } = await factory();
      const n = model.config.numLayers;
      for (const range of [{ start: 0, end: n }, { start: 0, end: 1 }, { start: n - 1, end: n }]) {
        const assign = assignOf(model, range);
        expect(parseControlMessage(serializeControlMessage(assign))).toEqual(assign);
      }
    });

    it("an artifact's address is stable, its own per range, and a path or an http(s) URL", async () => {
      const { model } = await factory();
      const n = model.config.numLayers;
      const ranges = Array.from({ length: n }, (_, start) => ({ start, end: n }));
      const urls = ranges.map((r) => model.artifacts.url(r));
      expect(new Set(urls).size).toBe(ranges.length);
      expect(ranges.map((r) => model.artifacts.url({ ...r }))).toEqual(urls);
      for (const url of urls) expect(url).toMatch(/^(\/|https?:\/\/)\S+$/);
    });

    it('its budget figures plan: one peer with room for every layer (and the head its own bytes) gets them all', async () => {
      const { model } = await factory();
      expect(Number.isSafeInteger(model.bytesPerLayer) && model.bytesPerLayer > 0).toBe(true);
      if (model.headBytes !== undefined) expect(Number.isSafeInteger(model.headBytes) && model.headBytes >= 0).toBe(true);
      const plan = { numLayers: model.config.numLayers, bytesPerLayer: model.bytesPerLayer, headBytes: model.headBytes };
      const all = model.config.numLayers * model.bytesPerLayer;
      expect(planRoute(plan, [{ id: 'p', memoryBudgetBytes: all, runtime: 'node' }], { headLayers: 'none' }).hops).toEqual([{ peerId: 'p', range: { start: 0, end: model.config.numLayers } }]);
      const short = planRoute(plan, [{ id: 'p', memoryBudgetBytes: all - model.bytesPerLayer, runtime: 'node' }], { headLayers: 'auto', headBudgetBytes: (model.headBytes ?? 0) + model.bytesPerLayer });
      expect(short.hops.map((h) => h.range.end - h.range.start).reduce((a, b) => a + b, 0)).toBe(model.config.numLayers);
      expect(short.hops.length).toBe(2); // the head takes the one layer its budget holds beyond its own bytes
    });
  });
}
