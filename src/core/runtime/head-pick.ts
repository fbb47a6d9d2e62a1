/**
 * Rows sampled where the head computed their logits (`HeadRunner.startBlocks`): a step's
 * `HeadPick` names the sequence's sampler, its history and mask, and a speculative step's
 * drafts. Row i verifies draft i, the row after the last draft samples, and the chain stops
 * at the first replaced draft — exactly the calls TokenOutput makes one by one, in the same
 * order on the same Sampler, so the same RNG draws. (Draws past a token that ends the answer
 * are made for nothing: the session ends with it, so nothing observes them.) Here too: the
 * fallback for a head that cannot sample beside its logits, and for a pick whose sampler the
 * head did not make.
 */
import type { SampledToken, SequenceSampler, VerifiedSample } from '../sampling/index.ts';
import type { HeadBlock, HeadBlockResult, HeadPick, HeadRunner } from './ort-head-runner.ts';
import type { Activations } from './shard-executor.ts';

export type { HeadBlock, HeadBlockResult, HeadPick } from './ort-head-runner.ts';

/** What a picked block must look like; throws RangeError otherwise. */
export function checkPickedBlock(block: HeadBlock): void {
  const { pick, rows } = block;
  if (!pick) return;
  const want = (pick.drafts?.length ?? 0) + 1;
  if ((rows?.length ?? 1) !== want) throw new RangeError(`a pick with ${want - 1} drafts samples ${want} rows, got ${rows?.length ?? 1}`);
  if (pick.drafts?.length && pick.mask) throw new RangeError('a pick with drafts takes no mask');
}

/** The tokens of `hidden`'s rows `firstRow…` (one per draft, plus one), sampled by `pick` beside the head's logits when the head can. */
export async function pickRows(head: HeadRunner, hidden: Activations, firstRow: number, pick: HeadPick): Promise<readonly VerifiedSample[]> {
  const rows = Array.from({ length: (pick.drafts?.length ?? 0) + 1 }, (_, i) => firstRow + i);
  const [result] = await runBlocks(head, [{ hidden, rows, pick }]);
  if (result instanceof Error) throw result;
  if (result instanceof Float32Array) throw new Error('the head answered logits where tokens were asked for');
  return result;
}

/** One sampled row as a pick answers it. */
export async function pickToken(head: HeadRunner, hidden: Activations, row: number, pick: Omit<HeadPick, 'drafts'>): Promise<SampledToken> {
  return (await pickRows(head, hidden, row, pick))[0];
}

/** The chain of a pick over its rows (`row(i)`: [vocab]); see the file's header. */
export async function sampleChain(sampler: Pick<SequenceSampler, 'sample' | 'verify'>, row: (i: number) => Float32Array, pick: Omit<HeadPick, 'sampler'>): Promise<VerifiedSample[]> {
  const drafts = pick.drafts ?? [];
  const out: VerifiedSample[] = [];
  for (let i = 0; i <= drafts.length; i++) {
    // Row i follows the drafts before it, all kept so far.
    const history = i === 0 ? pick.history : { prompt: pick.history.prompt, generated: [...pick.history.generated, ...drafts.slice(0, i).map((d) => d.tokenId)] };
    const sampled = i < drafts.length ? await sampler.verify(row(i), history, drafts[i], i === 0 ? pick.mask : undefined) : { ...(await sampler.sample(row(i), history, i === 0 ? pick.mask : undefined)), accepted: false };
    out.push(sampled);
    if (i < drafts.length && !sampled.accepted) break;
  }
  return out;
}

/**
 * `blocks` run as `logitsBatch` (or `logits` one after another); once the logits are back, one
 * promise per block: its rows, or its pick's tokens sampled here (a sampler's failure as the
 * block's error). Every pick starts in the same turn, so samplers that batch their calls (the
 * sampler worker) send them together.
 */
export async function startBlocksLocally(head: HeadRunner, blocks: readonly HeadBlock[]): Promise<Promise<HeadBlockResult>[]> {
  blocks.forEach(checkPickedBlock);
  let rows: Float32Array[];
  if (blocks.length > 1 && head.logitsBatch) rows = await head.logitsBatch(blocks.map((b) => b.hidden), blocks.map((b) => b.rows));
  else {
    rows = [];
    for (const b of blocks) rows.push(await head.logits(b.hidden, b.rows));
  }
  return blocks.map((b, i) => (b.pick ? pickHere(b.pick, rows[i]) : Promise.resolve(rows[i])));
}

/** `blocks` through the head's `startBlocks` (or `startBlocksLocally`), every block settled. */
export async function runBlocks(head: HeadRunner, blocks: readonly HeadBlock[]): Promise<HeadBlockResult[]> {
  return Promise.all(await (head.startBlocks ? head.startBlocks(blocks) : startBlocksLocally(head, blocks)));
}

/** A pick's chain over `logits` ([rows, vocab]) with its own sampler; a failure as the result. */
export async function pickHere(pick: HeadPick, logits: Float32Array): Promise<readonly VerifiedSample[] | Error> {
  const vocab = logits.length / ((pick.drafts?.length ?? 0) + 1);
  try {
    return await sampleChain(pick.sampler, (i) => logits.subarray(i * vocab, (i + 1) * vocab), pick);
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
