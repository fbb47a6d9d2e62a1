/**
 * What a ShardPeer loads its ranges with (from the head over HTTP, a local checkpoint, or an
 * executor already loaded), and the one check that it serves the weight format assigned.
 */
import type { AssignMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { WireWeights } from '../../shared/protocol.ts';
import { sameWeightSpec, weightSpecName } from '../model/quant/weight-format.ts';
import type { ShardExecutor } from '../runtime/shard-executor.ts';

/**
 * Loads the executor for an assigned range (from the head over HTTP, or a local checkpoint)
 * in the assigned weight format; an artifact in another format is refused (`unsupported_weights`).
 */
export interface ShardLoader {
  load(assign: AssignMessage): Promise<ShardExecutor>;
}

/** The weight format an assignment asks for: `assign.weights`, or (a 2.0 head) the float format equal to its dtype. */
export function assignedWeights(assign: AssignMessage): WireWeights {
  return assign.weights ?? { format: assign.dtype, blockSize: 0, accuracyLevel: 0 };
}

/** Refuses (ProtocolError 'unsupported_weights') an artifact whose weight format is not the assigned one. */
export function checkAssignedWeights(assign: AssignMessage, loaded: WireWeights, what: string): void {
  const wanted = assignedWeights(assign);
  if (!sameWeightSpec(wanted, loaded)) {
    throw new ProtocolError('unsupported_weights', `${what} holds weights ${weightSpecName(loaded)}, the assignment says ${weightSpecName(wanted)}: refusing to serve another format`);
  }
}
