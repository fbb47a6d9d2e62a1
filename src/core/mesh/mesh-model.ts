/**
 * The MeshModel seam: what the mesh knows of the model it serves — what peers are told in
 * `assign`, and what the planner budgets (six members; the conformance suite is
 * test/suites/mesh-model.suite.ts). src/node/mesh-model.ts builds it from a local checkpoint;
 * unit tests build plain objects.
 */
import type { ShardConfigSummary } from '../../shared/control.ts';
import type { WireDtype, WireWeights } from '../../shared/protocol.ts';
import type { LayerRange } from '../model/types.ts';

/** The artifacts every range is served from: one activation dtype and weight format. */
export interface RangeArtifacts {
  readonly dtype: WireDtype;
  /** The weight format every range is served in. */
  readonly weights: WireWeights;
  /** Where a peer fetches the artifact of a range (a path on the head's origin or a URL). */
  url(range: LayerRange): string;
}

export interface MeshModel {
  readonly modelKey: string;
  /** What clients call the model. */
  readonly name: string;
  readonly config: ShardConfigSummary;
  readonly artifacts: RangeArtifacts;
  /** Packed weight bytes of one decoder layer in that format (what the planner budgets). */
  readonly bytesPerLayer: number;
  /** Packed weight bytes of the embedding and LM head the head holds (taken from its budget first). */
  readonly headBytes?: number;
}
