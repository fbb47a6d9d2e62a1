import { describe, expect, it } from 'vitest';
import { SUPPORTED_ARCHITECTURES } from '../../src/core/model/architectures.ts';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { parseModelConfig } from '../../src/core/model/config.ts';

const llama = {
  architectures: ['LlamaForCausalLM'],
  hidden_size: 64,
  intermediate_size: 172,
  num_hidden_layers: 5,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  vocab_size: 512,
  max_position_embeddings: 512,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  tie_word_embeddings: true,
  bos_token_id: 1,
  eos_token_id: 2,
};

function refusal(json: unknown, generation?: unknown): CheckpointError {
  try {
    parseModelConfig('config.json', json, generation);
  } catch (error) {
    expect(error).toBeInstanceOf(CheckpointError);
    return error as CheckpointError;
  }
  throw new Error('expected a CheckpointError');
}

describe('parseModelConfig', () => {
  it('normalizes a Llama config', () => {
    expect(parseModelConfig('config.json', llama, { bos_token_id: 1, eos_token_id: [2, 7] })).toEqual({
      architecture: 'LlamaForCausalLM',
      hiddenSize: 64,
      intermediateSize: 172,
      numLayers: 5,
      numHeads: 8,
      numKvHeads: 4,
      headDim: 8,
      vocabSize: 512,
      maxPositionEmbeddings: 512,
      rmsNormEps: 1e-5,
      rope: { theta: 10000 },
      tieWordEmbeddings: true,
      attentionBias: false,
      qkNorm: false,
      bosTokenId: 1,
      eosTokenIds: [2, 7],
    });
  });

  it("takes generation_config.json's max_new_tokens as the default answer length, validated", () => {
    expect(parseModelConfig('config.json', llama, { max_new_tokens: 48 }).maxNewTokens).toBe(48);
    expect(parseModelConfig('config.json', llama, {}).maxNewTokens).toBeUndefined();
    const error = refusal(llama, { max_new_tokens: 0 });
    expect(error.file).toBe('generation_config.json');
    expect(error.message).toMatch(/field 'max_new_tokens' must be a positive integer, got 0/);
  });

  it('defaults num_key_value_heads to num_attention_heads and accepts eos arrays', () => {
    const { num_key_value_heads: _, ...noKv } = llama;
    const config = parseModelConfig('config.json', { ...noKv, eos_token_id: [2, 3] });
    expect(config.numKvHeads).toBe(8);
    expect(config.eosTokenIds).toEqual([2, 3]);
  });

  it('names a missing or wrong-typed field and the file', () => {
    const { hidden_size: _, ...missing } = llama;
    const error = refusal(missing);
    expect(error.file).toBe('config.json');
    expect(error.message).toBe("config.json: field 'hidden_size' is missing");
    expect(refusal({ ...llama, vocab_size: '512' }).message).toMatch(/field 'vocab_size' must be a positive integer, got "512"/);
    expect(refusal({ ...llama, rms_norm_eps: -1 }).message).toMatch(/field 'rms_norm_eps' must be a positive number/);
    expect(refusal({ ...llama, tie_word_embeddings: 'yes' }).message).toMatch(/field 'tie_word_embeddings' must be true or false/);
    expect(refusal({ ...llama, eos_token_id: ['x'] }).message).toMatch(/field 'eos_token_id'/);
    expect(refusal(llama, { eos_token_id: -1 }).file).toBe('generation_config.json');
    expect(refusal([]).message).toBe('config.json: is not a JSON object');
    expect(refusal({ ...llama, architectures: undefined }).message).toMatch(/field 'architectures' is missing/);
  });

  it('refuses an unknown architecture, listing the supported ones', () => {
    const message = refusal({ ...llama, architectures: ['GPT2LMHeadModel'] }).message;
    expect(message).toMatch(/architecture 'GPT2LMHeadModel' is not supported/);
    for (const name of SUPPORTED_ARCHITECTURES) expect(message).toContain(name);
    expect(SUPPORTED_ARCHITECTURES).toEqual(['LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM', 'Phi3ForCausalLM', 'Gemma2ForCausalLM', 'Gemma3ForCausalLM', 'Gemma3ForConditionalGeneration', 'MixtralForCausalLM', 'Qwen2MoeForCausalLM', 'Qwen3MoeForCausalLM', 'GptOssForCausalLM']);
  });

  it('checks head counts', () => {
    expect(refusal({ ...llama, num_key_value_heads: 3 }).message).toMatch(/'num_key_value_heads' \(3\) must divide num_attention_heads \(8\)/);
    expect(refusal({ ...llama, hidden_size: 60 }).message).toMatch(/'head_dim' is missing and hidden_size \(60\) is not divisible/);
  });

  it('parses llama3 rope scaling and refuses other types clearly', () => {
    const rope_scaling = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
    const config = parseModelConfig('config.json', { ...llama, rope_theta: 500000, rope_scaling });
    expect(config.rope).toEqual({
      theta: 500000,
      llama3: { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    });
    expect(parseModelConfig('config.json', { ...llama, rope_scaling: null }).rope).toEqual({ theta: 10000 });
    expect(refusal({ ...llama, rope_scaling: { type: 'yarn', factor: 4 } }).message).toMatch(
      /field 'rope_scaling.rope_type' "yarn" is not supported for LlamaForCausalLM \(supported: llama3\)/,
    );
    expect(refusal({ ...llama, rope_scaling: { rope_type: 'llama3', factor: 8 } }).message).toMatch(/'rope_scaling.low_freq_factor' is missing/);
    expect(refusal({ ...llama, architectures: ['MistralForCausalLM'], rope_scaling }).message).toMatch(/supported: none/);
  });

  it('records Mistral sliding_window only when not null', () => {
    const mistral = { ...llama, architectures: ['MistralForCausalLM'] };
    expect(parseModelConfig('config.json', { ...mistral, sliding_window: 4096 }).slidingWindow).toBe(4096);
    expect(parseModelConfig('config.json', { ...mistral, sliding_window: null }).slidingWindow).toBeUndefined();
  });

  it('Qwen2: biases always; sliding window only with use_sliding_window', () => {
    const qwen2 = { ...llama, architectures: ['Qwen2ForCausalLM'], sliding_window: 4096, use_sliding_window: false, max_window_layers: 5 };
    const config = parseModelConfig('config.json', qwen2);
    expect(config.attentionBias).toBe(true);
    expect(config.qkNorm).toBe(false);
    expect(config.slidingWindow).toBeUndefined();
    expect(parseModelConfig('config.json', { ...qwen2, use_sliding_window: true, max_window_layers: 0 }).slidingWindow).toBe(4096);
    expect(parseModelConfig('config.json', { ...qwen2, use_sliding_window: true }).slidingWindow).toBeUndefined(); // no layer slides
    expect(parseModelConfig('config.json', { ...qwen2, use_sliding_window: true, max_window_layers: 2 }).slidingLayers).toEqual([false, false, true, true, true]);
  });

  it('Qwen3: qk norm, head_dim from config, attention_bias from config', () => {
    const qwen3 = { ...llama, architectures: ['Qwen3ForCausalLM'], head_dim: 32, attention_bias: false };
    const config = parseModelConfig('config.json', qwen3);
    expect(config.qkNorm).toBe(true);
    expect(config.headDim).toBe(32);
    expect(config.attentionBias).toBe(false);
    expect(parseModelConfig('config.json', { ...qwen3, attention_bias: true }).attentionBias).toBe(true);
  });

  it('refuses unsupported activations and MLP biases', () => {
    expect(refusal({ ...llama, hidden_act: 'gelu' }).message).toMatch(/'hidden_act' "gelu" is not supported/);
    expect(refusal({ ...llama, mlp_bias: true }).message).toMatch(/'mlp_bias' true is not supported/);
  });
});
