/**
 * Finiteness check for activations that arrived from elsewhere. `decodeFrame` checks only
 * structure; call this where values matter (before running a shard, before sampling), so a
 * peer that produced NaN is named instead of poisoning the rest of the route.
 */
import { ProtocolError, type ProtocolErrorContext } from '../../shared/protocol-error.ts';
import type { Activations } from '../model/activations.ts';

const FP16_EXPONENT = 0x7c00;
const FP16_MANTISSA = 0x03ff;

/**
 * Throws `ProtocolError('nan_activations')` naming the first NaN or ±Infinity (its token and
 * channel). fp32 data is checked as floats; fp16 data (`Uint16Array` bits) is bad when all
 * five exponent bits are set: mantissa 0 is ±Infinity, anything else NaN. The branch follows
 * the array type, not `a.dtype`, so mislabelled data cannot slip through unchecked.
 */
export function assertFiniteActivations(a: Activations, context: ProtocolErrorContext = {}): void {
  const { data } = a;
  let bad = -1;
  let what = '';
  if (data instanceof Float32Array) {
    for (let i = 0; i < data.length; i++) {
      const v = data[i];
      // v - v is 0 for every finite v and NaN for NaN and ±Infinity.
      if (v - v !== 0) {
        bad = i;
        what = Number.isNaN(v) ? 'NaN' : v > 0 ? '+Infinity' : '-Infinity';
        break;
      }
    }
  } else {
    for (let i = 0; i < data.length; i++) {
      const bits = data[i];
      if ((bits & FP16_EXPONENT) === FP16_EXPONENT) {
        bad = i;
        what = (bits & FP16_MANTISSA) !== 0 ? 'NaN' : bits & 0x8000 ? '-Infinity' : '+Infinity';
        break;
      }
    }
  }
  if (bad < 0) return;
  const hidden = Math.max(1, a.hiddenSize);
  const where = `token ${Math.floor(bad / hidden)}, channel ${bad % hidden}`;
  throw new ProtocolError('nan_activations', `${a.dtype} activations hold ${what} at ${where} (value ${bad})`, context);
}
