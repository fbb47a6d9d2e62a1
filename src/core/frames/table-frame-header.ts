/**
 * The shared header of frames that carry a table of entries after it (batched frames, kinds
 * 4–5, and lane frames, kinds 8–9): the single frame's header with the start position field
 * holding the entry count and the token count the total over all entries; its session id
 * stays zero (each entry names its own).
 */
import { FRAME_DTYPE_CODES, FRAME_MAGIC, FRAME_OFFSETS as AT } from '../../shared/frame-layout.ts';
import { PROTOCOL_VERSION, type LayerRange, type WireDtype } from '../../shared/protocol.ts';

export interface TableFrameHeader {
  readonly kindCode: number;
  readonly dtype: WireDtype;
  /** 0 for lane frames (each lane carries its own). */
  readonly requestId: number;
  readonly count: number;
  readonly totalTokens: number;
  readonly hiddenSize: number;
  readonly range: LayerRange;
  readonly payload: number;
}

/** Write `h` into the first header bytes of `out` (a zeroed buffer). */
export function writeTableFrameHeader(out: Uint8Array, view: DataView, h: TableFrameHeader): void {
  out.set(FRAME_MAGIC, AT.magic);
  view.setUint8(AT.versionMajor, PROTOCOL_VERSION.major);
  view.setUint8(AT.versionMinor, PROTOCOL_VERSION.minor);
  view.setUint8(AT.kind, h.kindCode);
  view.setUint8(AT.dtype, FRAME_DTYPE_CODES[h.dtype]);
  view.setUint32(AT.requestId, h.requestId, true);
  view.setUint32(AT.startPosition, h.count, true);
  view.setUint32(AT.tokenCount, h.totalTokens, true);
  view.setUint32(AT.hiddenSize, h.hiddenSize, true);
  view.setUint16(AT.layerStart, h.range.start, true);
  view.setUint16(AT.layerEnd, h.range.end, true);
  view.setUint32(AT.payloadLength, h.payload, true);
}
