/**
 * `meshnet generate`: run a model in one process (complete-model mode), optionally as a
 * chain of shard graphs (`--split`), and print the generated text or a JSON line.
 */
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { completionBudget, ContextLengthError, generationLimits } from '../../core/model/generation-limits.ts';
import { validateSamplingParams } from '../../core/sampling/index.ts';
import { openLocalSession } from '../../core/route/local-pipeline.ts';
import { rangesFromSplit } from '../../core/mesh/split.ts';
import { loadLocalPipeline, openLocalModel, openLocalTokenizer } from '../local-model.ts';
import { NODE_DEVICES } from '../ort-node-runtime.ts';
import { parseChoice, parseInteger, parseIntegerList, parseNumber, UsageError } from './args.ts';
import { generateDistributed } from './generate-distributed.ts';
import { resolveModel } from '../models/resolve-model.ts';
import { parseHeadLayers } from './head-layers.ts';
import { asUsageError, parseSpeculation, SPECULATION_OPTIONS, SPECULATION_USAGE } from './speculation-args.ts';
import { Drafters } from '../../core/speculation/drafters.ts';
import { loadDraftModel } from '../head/draft-model.ts';
import { readWeightFlags, WEIGHT_OPTIONS, WEIGHT_USAGE } from './weight-flags.ts';
import { resolveWeightSpec, weightSpecName } from '../../core/model/quant/weight-format.ts';

export const GENERATE_USAGE = `meshnet generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [options]

  --model M            a checkpoint folder, a Hugging Face id (org/name) or demo
  --prompt TEXT        prompt, tokenized with the tokenizer's own special-token rule (no chat template)
  --prompt-ids IDS     prompt token ids, used as given (no BOS added)
  --max-tokens N       tokens to generate (default 128, or what is left of the context)
  --temperature T      0 = greedy (default 1.0)
  --top-p P            nucleus sampling (default 1)
  --top-k K            keep the K most likely tokens (default 0 = off)
  --seed S             RNG seed
  --split A,B          chain shard graphs [0,A) [A,B) [B,L)
  --device D           ${Object.keys(NODE_DEVICES).join('|')} (default auto)
  --dtype fp32|fp16    activation dtype (default fp32)
${WEIGHT_USAGE}
  --threads N          onnxruntime threads per session (default: onnxruntime's; 1 per peer with --local-peers)
  --local-peers N      spawn N Node peer processes on loopback and run across them
  --link direct|relay  how the head reaches local peers (default relay)
  --head-layers L      auto|none|START:END layers the head holds (default none with peers)
  --json               print one JSON line: token_ids, text, finish_reason, device, speculation, …
${SPECULATION_USAGE}`;

export async function generateCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      prompt: { type: 'string' },
      'prompt-ids': { type: 'string' },
      'max-tokens': { type: 'string' },
      temperature: { type: 'string' },
      'top-p': { type: 'string' },
      'top-k': { type: 'string' },
      seed: { type: 'string' },
      split: { type: 'string' },
      device: { type: 'string' },
      dtype: { type: 'string' },
      threads: { type: 'string' },
      ...WEIGHT_OPTIONS,
      json: { type: 'boolean', default: false },
      'local-peers': { type: 'string' },
      link: { type: 'string' },
      'head-layers': { type: 'string' },
      ...SPECULATION_OPTIONS,
    },
    strict: true,
  });
  if (!values.model) throw new UsageError('--model DIR is required');
  if ((values.prompt === undefined) === (values['prompt-ids'] === undefined)) {
    throw new UsageError('give exactly one of --prompt TEXT and --prompt-ids IDS');
  }
  const speculation = parseSpeculation(values);
  const device = parseChoice('device', values.device, Object.keys(NODE_DEVICES), 'auto');
  const dtype = parseChoice('dtype', values.dtype, ['fp32', 'fp16'] as const, 'fp32');
  const weightRequest = readWeightFlags(values);
  const threads = values.threads === undefined ? undefined : parseInteger('threads', values.threads, 1, 1);

  const model = await openLocalModel((await resolveModel(values.model)).dir);
  const { config } = model.checkpoint;
  const weights = resolveWeightSpec(config, dtype, weightRequest);
  const tokenizer = await openLocalTokenizer(model);
  const promptIds = parseIntegerList('prompt-ids', values['prompt-ids']) ?? tokenizer.encode(values.prompt!);
  if (promptIds.length === 0) throw new UsageError('the prompt has no tokens');
  const limits = generationLimits(config, tokenizer);
  // Without --max-tokens: 128, cut to what the prompt leaves of the context (the demo's is short).
  const asked = values['max-tokens'] === undefined ? undefined : parseInteger('max-tokens', values['max-tokens'], 128, 1);
  let maxTokens: number;
  try {
    maxTokens = completionBudget(limits, promptIds.length, asked, 128);
  } catch (error) {
    if (!(error instanceof ContextLengthError)) throw error;
    throw new UsageError(error.message);
  }
  const params = validateSamplingParams({
    temperature: parseNumber('temperature', values.temperature, 1, (n) => n >= 0),
    topP: parseNumber('top-p', values['top-p'], 1),
    topK: parseInteger('top-k', values['top-k'], 0),
    seed: values.seed === undefined ? undefined : parseInteger('seed', values.seed, 0),
    maxTokens,
    stopTokenIds: limits.stopTokenIds,
  });
  const localPeers = parseInteger('local-peers', values['local-peers'], 0);
  if (localPeers > 0 || values['head-layers'] !== undefined) {
    if (values.split !== undefined) throw new UsageError('--split chains shards in one process; with peers the planner splits the layers');
    const started = performance.now();
    const run = await generateDistributed({
      model,
      tokenizer,
      promptIds,
      params,
      localPeers,
      link: parseChoice('link', values.link, ['relay', 'direct'] as const, 'relay'),
      headLayers: parseHeadLayers(values['head-layers'], localPeers > 0 ? 'none' : 'auto', config.numLayers),
      device,
      dtype,
      speculation,
      weights,
      threads,
      onText: values.json ? undefined : (delta) => process.stdout.write(delta),
    }).catch(asUsageError);
    process.stderr.write(`meshnet: ${run.tokenIds.length} tokens over ${run.hops.length} hop(s) in ${(performance.now() - started).toFixed(0)} ms: ${run.hops.map((h) => `${h.peerId}[${h.range[0]},${h.range[1]}) ${h.meanMs.toFixed(2)} ms/frame`).join(', ')}\n`);
    if (values.json) {
      process.stdout.write(JSON.stringify({ token_ids: run.tokenIds, text: run.text, finish_reason: run.finishReason, device: run.hops[0]?.device, prompt_ids: promptIds, hops: run.hops, repairs: run.repairs, dtype, weights: weightSpecName(weights), speculation: run.speculation }) + '\n');
    } else process.stdout.write('\n');
    return;
  }
  const ranges = rangesFromSplit(config.numLayers, parseIntegerList('split', values.split) ?? []);

  const started = performance.now();
  const pipeline = await loadLocalPipeline(model, { ranges, device, dtype, weights, threads });
  const log = (line: string) => process.stderr.write(`meshnet: ${line}\n`);
  const draftModel = speculation.draftModel === undefined ? undefined : await loadDraftModel(speculation.draftModel, { model, tokenizer }, { device, dtype, log }).catch(async (error: unknown) => {
    await pipeline.dispose();
    return asUsageError(error);
  });
  const speculate = speculation.mode ?? (draftModel ? 'draft' : 'ngram');
  const loaded = performance.now();
  const tokenIds: number[] = [];
  let text = '';
  let finishReason = 'length';
  let speculationTelemetry;
  try {
    // Complete-model mode: the same Route Session, over in-process hops.
    const session = openLocalSession(pipeline, { sessionId: randomUUID(), promptIds, params, speculate }, undefined, tokenizer, new Drafters(draftModel));
    speculationTelemetry = session.telemetry.speculation;
    for await (const event of session) {
      if (event.type === 'token') tokenIds.push(event.tokenId);
      else finishReason = event.finishReason;
      text += event.text;
      if (!values.json) process.stdout.write(event.text);
    }
    if (!values.json) process.stdout.write('\n');
  } finally {
    await draftModel?.dispose();
    await pipeline.dispose();
  }
  const finished = performance.now();
  const device0 = pipeline.devices[0];
  process.stderr.write(`meshnet: ${tokenIds.length} tokens on ${device0} (${ranges.length} shard${ranges.length > 1 ? 's' : ''}), load ${(loaded - started).toFixed(0)} ms, generate ${(finished - loaded).toFixed(0)} ms\n`);
  if (values.json) {
    const result = {
      token_ids: tokenIds,
      text,
      finish_reason: finishReason,
      device: device0,
      devices: pipeline.devices,
      prompt_ids: promptIds,
      ranges: ranges.map((r) => [r.start, r.end]),
      dtype,
      weights: weightSpecName(weights),
      generate_ms: Math.round(finished - loaded),
      speculation: speculationTelemetry,
    };
    process.stdout.write(JSON.stringify(result) + '\n');
  }
}
