/**
 * ShardExecutor on onnxruntime (either runtime, injected). Feeds the session's past KV,
 * runs the shard graph, and hands the present KV to the KvState, which owns it from then on.
 */
import type * as Ort from 'onnxruntime-common';
import {
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
  SHARD_INPUT_HIDDEN,
  SHARD_OUTPUT_HIDDEN,
  type ActivationDtype,
} from '../model/shard-graph.ts';
import type { WeightSpec } from '../model/quant/weight-format.ts';
import type { LayerRange, ModelConfig } from '../model/types.ts';
import type { KvState, KvTensorOps, LayerKv } from './kv-state.ts';
import type { OrtModule } from './ort-session.ts';
import type { RunQueue } from './run-queue.ts';
import { CacheMissError, checkActivations, type Activations, type ShardExecutor, type ShardStep } from './shard-executor.ts';

type Tensor = Ort.Tensor;

/** KV tensor operations for ORT tensors; truncation works on CPU-resident tensors only. */
export function ortKvOps(ort: OrtModule): KvTensorOps<Tensor> {
  return {
    bytes: (t) => {
      const itemSize = t.type === 'float16' ? 2 : 4;
      return t.dims.reduce((a, b) => a * b, 1) * itemSize;
    },
    truncate: (t, length) => {
      if (t.location !== 'cpu') return undefined; // GPU-resident KV: rebuilt instead of trimmed
      const [b, heads, positions, headDim] = t.dims;
      const data = t.data as Float32Array | Uint16Array;
      const out = new (data.constructor as Float32ArrayConstructor | Uint16ArrayConstructor)(b * heads * length * headDim);
      for (let h = 0; h < b * heads; h++) {
        out.set(data.subarray(h * positions * headDim, h * positions * headDim + length * headDim), h * length * headDim);
      }
      return new ort.Tensor(t.type as 'float32', out as Float32Array, [b, heads, length, headDim]);
    },
    dispose: (t) => {
      if (t.location === 'gpu-buffer') t.dispose();
    },
  };
}

export class OrtShardExecutor implements ShardExecutor<Tensor> {
  readonly kvOps: KvTensorOps<Tensor>;
  private readonly tensorType: 'float32' | 'float16';

  constructor(
    private readonly ort: OrtModule,
    private readonly session: Ort.InferenceSession,
    private readonly config: Pick<ModelConfig, 'hiddenSize' | 'numKvHeads' | 'headDim'>,
    readonly range: LayerRange,
    readonly dtype: ActivationDtype,
    readonly device: string,
    readonly weights: WeightSpec,
    readonly weightsBytes = 0,
    /** Runs go through it one at a time when given (onnxruntime-web). */
    private readonly queue?: RunQueue,
  ) {
    this.kvOps = ortKvOps(ort);
    this.tensorType = dtype === 'fp16' ? 'float16' : 'float32';
  }

  async run(step: ShardStep, kv: KvState<Tensor>): Promise<Activations> {
    checkActivations(step.hidden, this.config.hiddenSize);
    if (step.hidden.dtype !== this.dtype) throw new RangeError(`activations are ${step.hidden.dtype}, the shard runs ${this.dtype}`);
    if (kv.length < step.startPosition) throw new CacheMissError(step.sessionId, kv.length, step.startPosition);
    if (kv.length > step.startPosition) kv.truncate(step.startPosition);

    const { hiddenSize } = this.config;
    const feeds: Record<string, Tensor> = {
      [SHARD_INPUT_HIDDEN]: new this.ort.Tensor(this.tensorType, step.hidden.data as Float32Array, [1, step.hidden.tokens, hiddenSize]),
    };
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const past = kv.past(layer) ?? this.emptyPast();
      feeds[pastKeyName(layer)] = past.key;
      feeds[pastValueName(layer)] = past.value;
    }
    const results = await (this.queue ? this.queue.run(() => this.session.run(feeds)) : this.session.run(feeds));
    const present = new Map<number, LayerKv<Tensor>>();
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      present.set(layer, { key: results[presentKeyName(layer)], value: results[presentValueName(layer)] });
    }
    const total = step.startPosition + step.hidden.tokens;
    if (present.get(this.range.start)!.key.dims[2] !== total) {
      throw new Error(`shard returned KV of ${present.get(this.range.start)!.key.dims[2]} positions, expected ${total}`);
    }
    kv.append(present, total);
    const out = results[SHARD_OUTPUT_HIDDEN];
    return { dtype: this.dtype, data: out.data as Float32Array | Uint16Array, tokens: step.hidden.tokens, hiddenSize };
  }

  private emptyPast(): LayerKv<Tensor> {
    const { numKvHeads, headDim } = this.config;
    const empty = () =>
      new this.ort.Tensor(this.tensorType, (this.dtype === 'fp16' ? new Uint16Array(0) : new Float32Array(0)) as Float32Array, [1, numKvHeads, 0, headDim]);
    return { key: empty(), value: empty() };
  }

  async dispose(): Promise<void> {
    await this.session.release();
  }
}
