/**
 * Filling a part's packed weights from the checkpoint, segment by segment and, within a
 * segment, a few MiB of rows at a time: a build holds at most one chunk of float rows (never
 * a whole fp32 layer, let alone the model) besides what the consumer keeps. Each chunk is
 * yielded with its offset in the packed buffer; the consumer writes it (a file in Node, one
 * buffer in a browser or for the wasm runtime).
 */
import type { ByteSource } from './byte-source.ts';
import { fromFloat32, toFloat32 } from './dtype.ts';
import { quantizeRows, rowBytes } from './quant/block-quant.ts';
import { packPrequantized } from './quant/prequantized-pack.ts';
import { packMxfp4 } from './moe/mxfp4.ts';
import type { FloatDtype } from './types.ts';
import type { FloatSegment, PackedChunk, QuantizeSegment, SourceTensor, WeightSegment } from './weight-segments.ts';


/** Source bytes read per chunk. */
export const PACK_CHUNK_BYTES = 4 * 2 ** 20;

/** Reads `source` in whole first-axis rows, at most about `chunkBytes` at a time. */
async function* rowChunks(source: SourceTensor, reader: ByteSource, chunkBytes: number): AsyncGenerator<{ row: number; rows: number; bytes: Uint8Array }> {
  const totalRows = source.shape[0] ?? 1;
  const rowLength = totalRows === 0 ? 0 : source.length / totalRows;
  const perChunk = Math.max(1, Math.floor(chunkBytes / Math.max(1, rowLength)));
  for (let row = 0; row < totalRows; row += perChunk) {
    const rows = Math.min(perChunk, totalRows - row);
    const bytes = await reader.read(source.file, source.offset + row * rowLength, rows * rowLength);
    if (bytes.byteLength !== rows * rowLength) throw new RangeError(`tensor '${source.name}': read ${bytes.byteLength} bytes of ${source.file}, expected ${rows * rowLength}`);
    yield { row, rows, bytes };
  }
}

async function* packFloat(segment: FloatSegment, reader: ByteSource, chunkBytes: number): AsyncGenerator<PackedChunk> {
  const src = segment.source;
  const from = src.dtype as FloatDtype;
  const outRow = segment.out.length / (src.shape[0] ?? 1);
  let written = 0;
  for await (const { row, bytes } of rowChunks(src, reader, chunkBytes)) {
    const converted = from === segment.target ? bytes : fromFloat32(toFloat32(bytes, from), segment.target);
    written += converted.byteLength;
    yield { offset: segment.out.offset + row * outRow, bytes: converted };
  }
  if (written !== segment.out.length) throw new RangeError(`weight '${segment.name}' packed to ${written} bytes, the graph expects ${segment.out.length}`);
}

async function* packQuantized(segment: QuantizeSegment, reader: ByteSource, chunkBytes: number): AsyncGenerator<PackedChunk> {
  const { layout, out } = segment;
  const per = rowBytes(layout);
  for await (const { row, bytes } of rowChunks(segment.source, reader, chunkBytes)) {
    const q = quantizeRows(toFloat32(bytes, segment.source.dtype as FloatDtype), layout);
    yield { offset: out.data.offset + row * per.data, bytes: q.data };
    yield { offset: out.scales.offset + row * per.scales, bytes: q.scales };
    if (q.zeroPoints && out.zeroPoints) yield { offset: out.zeroPoints.offset + row * per.zeroPoints, bytes: q.zeroPoints };
  }
}

/** The packed bytes of one segment, in chunks. */
export function packSegment(segment: WeightSegment, reader: ByteSource, chunkBytes = PACK_CHUNK_BYTES): AsyncGenerator<PackedChunk> {
  switch (segment.kind) {
    case 'float':
      return packFloat(segment, reader, chunkBytes);
    case 'quantize':
      return packQuantized(segment, reader, chunkBytes);
    case 'mxfp4':
      return packMxfp4(segment, reader, chunkBytes);
    default:
      return packPrequantized(segment, reader);
  }
}

/** The packed bytes of every segment, in chunks. */
export async function* packWeights(segments: readonly WeightSegment[], reader: ByteSource, chunkBytes = PACK_CHUNK_BYTES): AsyncGenerator<PackedChunk> {
  for (const segment of segments) yield* packSegment(segment, reader, chunkBytes);
}
