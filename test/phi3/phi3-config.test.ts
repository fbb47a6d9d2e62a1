/** Phi-3 config.json files shaped as the Hub has them, and the refusals. */
import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { parseModelConfig } from '../../src/core/model/config.ts';
import { layerTensorNames, layerTensorShapes } from '../../src/core/model/architectures.ts';

const phi3Mini4k = {
  architectures: ['Phi3ForCausalLM'], attention_bias: false, bos_token_id: 1, eos_token_id: 32000, hidden_act: 'silu', hidden_size: 3072,
  intermediate_size: 8192, max_position_embeddings: 4096, model_type: 'phi3', num_attention_heads: 32, num_hidden_layers: 32, num_key_value_heads: 32,
  original_max_position_embeddings: 4096, pad_token_id: 32000, rms_norm_eps: 1e-5, rope_scaling: null, rope_theta: 10000.0, sliding_window: 2047,
  tie_word_embeddings: false, vocab_size: 32064,
};
const factors = (n: number, v: number) => Array.from({ length: n }, (_, i) => v + i / 100);
const phi35Mini = { ...phi3Mini4k, max_position_embeddings: 131072, sliding_window: 262144, rope_scaling: { type: 'longrope', short_factor: factors(48, 1), long_factor: factors(48, 1.1) } };
const phi4Mini = {
  ...phi3Mini4k, hidden_size: 3072, num_attention_heads: 24, num_key_value_heads: 8, num_hidden_layers: 32, intermediate_size: 8192, vocab_size: 200064,
  max_position_embeddings: 131072, partial_rotary_factor: 0.75, tie_word_embeddings: true, sliding_window: 262144,
  rope_scaling: { type: 'longrope', short_factor: factors(48, 1), long_factor: factors(48, 1.2) },
};

const refusal = (json: unknown) => {
  try {
    parseModelConfig('config.json', json);
  } catch (error) {
    expect(error).toBeInstanceOf(CheckpointError);
    return error as Error;
  }
  throw new Error('expected a refusal');
};

describe('Phi-3 configs', () => {
  it('Phi-3-mini-4k: fused projections, its 2047 window on every layer, plain rotary', () => {
    const config = parseModelConfig('config.json', phi3Mini4k);
    expect(config).toMatchObject({ architecture: 'Phi3ForCausalLM', headDim: 96, fusedProjections: true, slidingWindow: 2047, rope: { theta: 10000 } });
    expect(config.rotaryDim).toBeUndefined();
    expect(config.slidingLayers).toBeUndefined();
    const names = layerTensorNames(config, 1);
    expect([names.qkvProj, names.gateUpProj]).toEqual(['model.layers.1.self_attn.qkv_proj.weight', 'model.layers.1.mlp.gate_up_proj.weight']);
    const shapes = Object.fromEntries(layerTensorShapes(config, 1).map((t) => [t.name, t.shape]));
    expect(shapes[names.qkvProj!]).toEqual([9216, 3072]);
    expect(shapes[names.gateUpProj!]).toEqual([16384, 3072]);
    expect(shapes[names.qProj]).toBeUndefined();
  });

  it('Phi-3.5-mini: longrope against the top-level original length, attention factor from the length ratio', () => {
    const { rope } = parseModelConfig('config.json', phi35Mini);
    expect(rope.longrope?.originalMaxPositionEmbeddings).toBe(4096);
    expect(rope.longrope?.shortFactor).toHaveLength(48);
    expect(rope.longrope?.attentionFactor).toBeCloseTo(Math.sqrt(1 + Math.log(32) / Math.log(4096)), 12);
  });

  it('Phi-4-mini: partial rotary 0.75 of head 128 = 96 dimensions, longrope lists of 48', () => {
    const config = parseModelConfig('config.json', phi4Mini);
    expect(config.headDim).toBe(128);
    expect(config.rotaryDim).toBe(96);
    expect(config.tieWordEmbeddings).toBe(true);
  });

  it('refuses what it cannot run, by name', () => {
    expect(refusal({ ...phi35Mini, rope_scaling: { ...phi35Mini.rope_scaling, short_factor: factors(47, 1) } }).message).toMatch(/short_factor' must hold 48 numbers, got 47/);
    expect(refusal({ ...phi3Mini4k, partial_rotary_factor: 0.01 }).message).toMatch(/partial_rotary_factor/);
    expect(refusal({ ...phi3Mini4k, rope_scaling: { type: 'yarn', factor: 4 } }).message).toMatch(/"yarn" is not supported for Phi3ForCausalLM \(supported: longrope\)/);
  });
});
