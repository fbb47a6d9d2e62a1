/**
 * parseShardManifest on hostile manifests: a real manifest (built by the artifact builder for
 * layers [0, 1) of stories260k, q4 so it has both float and quantize segments) parses as is;
 * each mutation of one field is a ManifestError whose message names the source and the field.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ManifestError, parseShardManifest } from '../../src/core/model/manifest-parse.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { buildShardArtifact, type ShardManifest } from '../../src/core/model/shard-artifact.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { STORIES_DIR } from '../engine/harness.ts';

let valid: ShardManifest;
const SOURCE = 'peer-cache/layers-0-1/manifest.json';

beforeAll(async () => {
  const model = await openLocalModel(STORIES_DIR);
  const { config, tensors } = model.checkpoint;
  valid = buildShardArtifact(config, tensors, model.key, { kind: 'layers', range: { start: 0, end: 1 } }, 'fp32', weightSpec('fp32', { format: 'q4' })).manifest;
});

/** A deep copy of the valid manifest (as JSON would deliver it), changed by `mutate`. */
function mutated(mutate: (m: Record<string, any>) => void): unknown {
  const copy = JSON.parse(JSON.stringify(valid)) as Record<string, any>;
  mutate(copy);
  return copy;
}

function refusal(json: unknown): ManifestError {
  try {
    parseShardManifest(json, SOURCE);
  } catch (error) {
    expect(error).toBeInstanceOf(ManifestError);
    expect((error as Error).message.startsWith(`${SOURCE}: `), 'the message names where the manifest came from').toBe(true);
    return error as ManifestError;
  }
  throw new Error('the manifest was accepted');
}

const floatAt = () => valid.segments.findIndex((s) => s.kind === 'float');
const quantizeAt = () => valid.segments.findIndex((s) => s.kind === 'quantize');

describe('parseShardManifest refuses a mutated manifest with a ManifestError naming the field', () => {
  it('the unmutated manifest parses (and has float and quantize segments to mutate)', () => {
    expect(floatAt()).toBeGreaterThanOrEqual(0);
    expect(quantizeAt()).toBeGreaterThanOrEqual(0);
    expect(parseShardManifest(JSON.parse(JSON.stringify(valid)), SOURCE)).toMatchObject({ weightsLength: valid.weightsLength, weights: { format: 'q4' } });
  });

  it('a bad weights spec: unknown format, block size not a power of two, wrong accuracy level, not an object, missing', () => {
    const bad: unknown[] = [
      { format: 'q5', blockSize: 32, accuracyLevel: 4 },
      { format: 'q4', blockSize: 33, accuracyLevel: 4 },
      { format: 'q4', blockSize: 32, accuracyLevel: 2 },
      { format: 'q4', blockSize: -32, accuracyLevel: 4 },
      { format: 'q4', blockSize: '32', accuracyLevel: 4 },
      { format: 'fp32', blockSize: 0.5, accuracyLevel: 0 },
      'q4-b32-acc4',
      null,
      undefined,
    ];
    for (const weights of bad) {
      expect(refusal(mutated((m) => (m.weights = weights))).message, JSON.stringify(weights) ?? 'undefined').toMatch(/weights is not a weight format/);
    }
  });

  it('a sliding window: a positive size with layers inside the range parses; anything else is refused', () => {
    expect(parseShardManifest(mutated((m) => (m.window = { size: 4, layers: [0] })), SOURCE).window).toEqual({ size: 4, layers: [0] });
    for (const window of [{ size: 0, layers: [0] }, { size: 4, layers: [1] }, { size: 4, layers: [] }, { size: 4 }, 7]) {
      expect(refusal(mutated((m) => (m.window = window))).message).toMatch(/window is not/);
    }
  });

  it('a segment of an unknown kind, or one that is not an object', () => {
    const i = floatAt();
    expect(refusal(mutated((m) => (m.segments[i].kind = 'int3'))).message).toMatch(new RegExp(`segments\\[${i}\\] is malformed`));
    expect(refusal(mutated((m) => (m.segments[i].kind = undefined))).message).toMatch(new RegExp(`segments\\[${i}\\] is malformed`));
    expect(refusal(mutated((m) => (m.segments[0] = null))).message).toMatch(/segments\[0\] is malformed/);
    expect(refusal(mutated((m) => (m.segments[0] = 'float'))).message).toMatch(/segments\[0\] is malformed/);
    expect(refusal(mutated((m) => (m.segments = { 0: m.segments[0] }))).message).toMatch(/segments is not an array/);
  });

  it('a region ending past weightsLength (a float out, a quantize scales region, a smaller weightsLength)', () => {
    const f = floatAt();
    const q = quantizeAt();
    expect(refusal(mutated((m) => (m.segments[f].out.offset = m.weightsLength - m.segments[f].out.length + 1))).message).toMatch(new RegExp(`segments\\[${f}\\] ends past weightsLength`));
    expect(refusal(mutated((m) => (m.segments[q].out.scales.length = m.weightsLength))).message).toMatch(new RegExp(`segments\\[${q}\\] ends past weightsLength`));
    expect(refusal(mutated((m) => (m.weightsLength -= 1))).message).toMatch(/ends past weightsLength/);
  });

  it('a non-integer, negative or non-numeric offset or length; a region missing', () => {
    const f = floatAt();
    const q = quantizeAt();
    const malformed = (i: number) => new RegExp(`segments\\[${i}\\] has a malformed region`);
    expect(refusal(mutated((m) => (m.segments[f].out.offset += 0.5))).message).toMatch(malformed(f));
    expect(refusal(mutated((m) => (m.segments[f].out.offset = -4))).message).toMatch(malformed(f));
    expect(refusal(mutated((m) => (m.segments[f].out.offset = '0'))).message).toMatch(malformed(f));
    expect(refusal(mutated((m) => (m.segments[f].out.length = 1e300))).message).toMatch(malformed(f));
    expect(refusal(mutated((m) => (m.segments[q].out.data.offset = 1.25))).message).toMatch(malformed(q));
    expect(refusal(mutated((m) => delete m.segments[f].out)).message).toMatch(malformed(f));
    expect(refusal(mutated((m) => delete m.segments[q].out)).message).toMatch(new RegExp(`segments\\[${q}\\] has no packed regions`));
    expect(refusal(mutated((m) => (m.weightsLength = 1.5))).message).toMatch(/weightsLength is not a non-negative integer/);
  });
});
