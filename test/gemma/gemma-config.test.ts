/**
 * Gemma config.json files as the Hub has them (gemma-2-2b-it, gemma-3-1b-it, gemma-3-4b-it's
 * Gemma3ForConditionalGeneration with a sparse text_config, transformers 5's per-layer-type
 * rope_parameters), and the refusals.
 */
import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { parseModelConfig } from '../../src/core/model/config.ts';
import { headTensorNames, layerTensorNames } from '../../src/core/model/architectures.ts';
import { layerAttention } from '../../src/core/model/layer-attention.ts';

const gemma2 = {
  architectures: ['Gemma2ForCausalLM'], attention_bias: false, attn_logit_softcapping: 50.0, bos_token_id: 2, cache_implementation: 'hybrid',
  eos_token_id: [1, 107], final_logit_softcapping: 30.0, head_dim: 256, hidden_act: 'gelu_pytorch_tanh', hidden_activation: 'gelu_pytorch_tanh',
  hidden_size: 2304, intermediate_size: 9216, max_position_embeddings: 8192, model_type: 'gemma2', num_attention_heads: 8, num_hidden_layers: 26,
  num_key_value_heads: 4, pad_token_id: 0, query_pre_attn_scalar: 256, rms_norm_eps: 1e-6, rope_theta: 10000.0, sliding_window: 4096, vocab_size: 256000,
};
const gemma3 = {
  architectures: ['Gemma3ForCausalLM'], attention_bias: false, attn_logit_softcapping: null, bos_token_id: 2, eos_token_id: [1, 106],
  final_logit_softcapping: null, head_dim: 256, hidden_activation: 'gelu_pytorch_tanh', hidden_size: 1152, intermediate_size: 6912,
  max_position_embeddings: 32768, model_type: 'gemma3_text', num_attention_heads: 4, num_hidden_layers: 26, num_key_value_heads: 1, pad_token_id: 0,
  query_pre_attn_scalar: 256, rms_norm_eps: 1e-6, rope_local_base_freq: 10000, rope_scaling: null, rope_theta: 1000000, sliding_window: 512,
  sliding_window_pattern: 6, vocab_size: 262144,
};
const gemma3Vision = {
  architectures: ['Gemma3ForConditionalGeneration'], boi_token_index: 255999, eoi_token_index: 256000, eos_token_id: [1, 106], image_token_index: 262144,
  mm_tokens_per_image: 256, model_type: 'gemma3',
  text_config: { hidden_size: 2560, intermediate_size: 10240, model_type: 'gemma3_text', num_hidden_layers: 34, rope_scaling: { factor: 8.0, rope_type: 'linear' }, sliding_window: 1024 },
  vision_config: { hidden_size: 1152, image_size: 896, model_type: 'siglip_vision_model', num_hidden_layers: 27, patch_size: 14 },
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

describe('Gemma configs', () => {
  it('gemma-2-2b-it: softcaps, every other layer sliding (layer 0 first), one rotary', () => {
    const config = parseModelConfig('config.json', gemma2);
    expect(config.gemma).toEqual({ version: 2, queryPreAttnScalar: 256, attnLogitSoftcap: 50, finalLogitSoftcap: 30 });
    expect(config.slidingWindow).toBe(4096);
    expect(config.slidingLayers!.slice(0, 4)).toEqual([true, false, true, false]);
    expect(config.localRope).toBeUndefined();
    expect(config.tieWordEmbeddings).toBe(true); // Gemma's default
    expect(config.qkNorm).toBe(false);
    expect(config.eosTokenIds).toEqual([1, 107]);
    expect(layerAttention(config, 0)).toEqual({ window: 4096, localRope: false, rope: { theta: 10000 }, scale: 1 / 16, softcap: 50 });
    expect(layerTensorNames(config, 3).preFeedforwardNorm).toBe('model.layers.3.pre_feedforward_layernorm.weight');
  });

  it('gemma-3-1b-it: five local layers to one global, local rotary 10k, global 1M, q/k norms', () => {
    const config = parseModelConfig('config.json', gemma3);
    expect(config.gemma).toEqual({ version: 3, queryPreAttnScalar: 256 });
    expect(config.slidingLayers!.slice(0, 12)).toEqual([true, true, true, true, true, false, true, true, true, true, true, false]);
    expect(config.rope).toEqual({ theta: 1000000 });
    expect(config.localRope).toEqual({ theta: 10000 });
    expect(config.qkNorm).toBe(true);
    expect(config.headDim).toBe(256);
    expect(layerAttention(config, 0)).toMatchObject({ window: 512, localRope: true, rope: { theta: 10000 } });
    expect(layerAttention(config, 5)).toEqual({ localRope: false, rope: { theta: 1000000 }, scale: 1 / 16 });
  });

  it('gemma-3-4b-it (Gemma3ForConditionalGeneration): the text model from a sparse text_config with transformers defaults', () => {
    const config = parseModelConfig('config.json', gemma3Vision);
    expect(config.architecture).toBe('Gemma3ForConditionalGeneration');
    expect(config).toMatchObject({ hiddenSize: 2560, numLayers: 34, numHeads: 8, numKvHeads: 4, headDim: 256, vocabSize: 262208, slidingWindow: 1024, tieWordEmbeddings: true });
    expect(config.rope).toEqual({ theta: 1000000, linearFactor: 8 });
    expect(config.localRope).toEqual({ theta: 10000 });
    expect(config.eosTokenIds).toEqual([1, 106]);
    expect(config.tensorPrefix).toBe('language_model.model.');
    expect(headTensorNames(config)).toEqual({
      embedTokens: 'language_model.model.embed_tokens.weight',
      finalNorm: 'language_model.model.norm.weight',
      lmHead: 'language_model.model.embed_tokens.weight',
    });
    expect(headTensorNames({ ...config, tieWordEmbeddings: false }).lmHead).toBe('language_model.lm_head.weight');
  });

  it('layer_types and transformers 5 rope_parameters per layer type', () => {
    const layerTypes = Array.from({ length: 26 }, (_, i) => (i % 3 === 2 ? 'full_attention' : 'sliding_attention'));
    const config = parseModelConfig('config.json', {
      ...gemma3,
      rope_theta: undefined,
      rope_local_base_freq: undefined,
      sliding_window_pattern: undefined,
      layer_types: layerTypes,
      rope_parameters: { full_attention: { rope_type: 'linear', factor: 4, rope_theta: 500000 }, sliding_attention: { rope_type: 'default', rope_theta: 20000 } },
    });
    expect(config.slidingLayers).toEqual(layerTypes.map((t) => t === 'sliding_attention'));
    expect(config.rope).toEqual({ theta: 500000, linearFactor: 4 });
    expect(config.localRope).toEqual({ theta: 20000 });
  });

  it('refuses what it cannot run, by name', () => {
    expect(refusal({ ...gemma3, hidden_activation: 'gelu' }).message).toMatch(/hidden_activation.*"gelu" is not supported.*gelu_pytorch_tanh/);
    expect(refusal({ ...gemma3, layer_types: ['sliding_attention'] }).message).toMatch(/layer_types.*26 entries/);
    expect(refusal({ ...gemma3, rope_scaling: { rope_type: 'yarn', factor: 2 } }).message).toMatch(/"yarn" is not supported for Gemma3ForCausalLM \(supported: linear\)/);
    expect(refusal({ ...gemma3Vision, text_config: undefined }).message).toMatch(/text_config/);
    expect(refusal({ ...gemma2, query_pre_attn_scalar: -1 }).message).toMatch(/query_pre_attn_scalar/);
  });
});
