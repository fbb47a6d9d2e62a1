/** The bench report as Markdown: targets first, then one figures table per model. */
import { LLAMA_CPP_COUNTERPART, MESHNET_WEIGHTS } from './meshnet-weights.ts';
import type { BenchReport, Row } from './report.ts';

const MiB = 2 ** 20;
const fixed = (x: number | undefined, digits = 1) => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '—');

/** One line per meshnet weight format (and accuracy level) with a one-process or 2-peer relay row. */
function formatSummary(rows: readonly Row[]): { label: string; packedMiB?: number; one?: Row; peers?: Row }[] {
  const out = new Map<string, { label: string; packedMiB?: number; one?: Row; peers?: Row }>();
  for (const r of rows) {
    const isOne = r.kind === 'one-process' && !r.spinning;
    const isPeers = r.kind === 'pipeline' && r.label.startsWith('2 peers, relay') && !r.label.includes('RTT');
    if (!isOne && !isPeers) continue;
    const label = `${r.weightSpec ?? r.weights}${r.accuracyLevel !== undefined ? ` level ${r.accuracyLevel}` : ''}`;
    const entry = out.get(label) ?? { label };
    if (r.packedBytesPerLayer !== undefined) entry.packedMiB = r.packedBytesPerLayer / MiB;
    if (isOne) entry.one = r;
    else entry.peers = r;
    out.set(label, entry);
  }
  return [...out.values()];
}

export function renderMarkdown(report: BenchReport): string {
  const lines: string[] = [];
  const bw = report.bandwidth;
  lines.push(`# meshnet bench — ${report.startedAt}${report.quick ? ' (quick)' : ''}`, '');
  lines.push(
    `${report.machine.cpus} × ${report.machine.cpuModel}, ${(Number(report.machine.totalMemoryBytes) / 2 ** 30).toFixed(0)} GiB, Node ${report.machine.node}, ${report.machine.platform}. ` +
      `${report.threads} threads per process (onnxruntime's, llama.cpp's), on the CPU, greedy, ${report.decodeTokens} decode tokens after a 32-token prompt. ` +
      `meshnet rows are fp32 weights unless the row names a format (this build: ${report.meshnetWeights.available.join(', ')}). ` +
      `Run took ${report.durationS.toFixed(0)} s.`,
    '',
  );
  lines.push(
    report.llamaCpp.status === 'measured'
      ? `llama.cpp: node-llama-cpp ${report.llamaCpp.version}'s prebuilt CPU binary, the same thread count, its defaults otherwise (F16 KV cache, flash attention on, weights mmap'd), on GGUF files of the same checkpoints written by bench/gguf (every 2-D weight in the row's type — embedding and LM head included, like \`llama-quantize --pure\` — norms F32).`
      : `llama.cpp rows skipped: ${report.llamaCpp.reason}.`,
    '',
  );
  const peakLoad = Math.max(0, ...report.models.flatMap((m) => m.rows.flatMap((r) => r.loadAverage)));
  if (peakLoad > Number(report.machine.cpus)) {
    lines.push(
      `**The load average reached ${peakLoad.toFixed(1)} on ${report.machine.cpus} cores during this run**: other work held the cores, and every figure is slower than on a quiet machine. ` +
        (report.threads > 1
          ? `llama.cpp's threads wait for each other by spinning (ggml's barrier; node-llama-cpp ${report.llamaCpp.version} has no setting for it), so with fewer free cores than threads its rate falls far more than meshnet's (onnxruntime spinning off) — ` +
            'measured at load 14: llama.cpp Q4_0 on the SmolLM2-shaped model 72 tok/s with 1 thread, 1.6 with 2. Ratios against llama.cpp from such a run do not show what it does on a quiet machine; `--threads 1` compares all engines without that effect.'
          : 'With one thread per process no engine waits for its own threads, so the ratios hold up better than the rates.'),
      '',
    );
  }
  lines.push(
    `Memory bandwidth (TypedArray copy, bytes read + written per second): ${(bw.oneStream / 1e9).toFixed(1)} GB/s one stream, ` +
      `${(bw.allStreams / 1e9).toFixed(1)} GB/s with ${bw.streams} streams (used as the limit).`,
    '',
  );
  lines.push('## Targets', '', '| target | measured | met |', '| --- | --- | --- |');
  for (const t of report.targets) lines.push(`| ${t.target} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`);
  lines.push('');
  for (const model of report.models) {
    const c = model.config;
    lines.push(`## ${model.name}`, '');
    lines.push(
      `${c.numLayers} layers, hidden ${c.hiddenSize}, ${c.numHeads}/${c.numKvHeads} heads, vocabulary ${c.vocabSize}. ` +
        `Weights read per token: ${(model.weightBytesPerToken / MiB).toFixed(1)} MiB → limit ${fixed(model.limitTokensPerSecond)} tokens/s at the measured bandwidth. ` +
        `Long prompt: ${model.longPrompt} tokens.`,
      '',
    );
    lines.push(
      '| configuration | decode tok/s | mean tok/s | fastest token (ms) | ms/token | TTFT 32 (ms) | TTFT ' + model.longPrompt + ' (ms) | ÷ one process | ÷ transformers.js | of bandwidth limit | added ms/hop/token | hop decode ms | activation B/token/hop (→ / ←) | peak RSS (MiB) | same tokens | load avg | CPU/wall | rounds (tok/s) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const r of model.rows) {
      const rss = r.peakRss.map((p) => `${p.process}${p.range ? ` [${p.range.join(',')})` : ''} ${(p.bytes / MiB).toFixed(0)}`).join('; ');
      lines.push(
        `| ${r.label} | ${fixed(r.decodeTokensPerSecond)} | ${fixed(r.meanDecodeTokensPerSecond)} | ${fixed(r.fastestTokenMs, 2)} | ${fixed(r.msPerToken, 2)} | ${fixed(r.ttftShortMs, 0)} | ${fixed(r.ttftLongMs, 0)} | ${pct(r.vsOneProcess)} | ${Number.isFinite(r.vsTransformers) ? `${fixed(r.vsTransformers, 2)}×` : '—'} | ${pct(r.fractionOfLimit)} | ` +
          `${fixed(r.addedMsPerHopPerToken, 2)} | ${r.hopDecodeMs ? r.hopDecodeMs.map((m) => m.toFixed(2)).join(' / ') : '—'} | ` +
          `${r.activationBytesPerTokenPerHop ? `${r.activationBytesPerTokenPerHop.sent.toFixed(0)} / ${r.activationBytesPerTokenPerHop.received.toFixed(0)}` : '—'} | ${rss} | ${r.sameTokens ? 'yes' : 'no'} | ${r.loadAverage.map((l) => l.toFixed(1)).join('→')} | ${fixed(r.cpuPerWall, 2)} | ${r.roundsTokensPerSecond.map((x) => fixed(x)).join(' / ')} |`,
      );
    }
    lines.push('');
    if (model.unavailable.length) {
      lines.push('Not measured:', '');
      for (const u of model.unavailable) lines.push(`- ${u.label}: ${u.reason}`);
      lines.push('');
    }
    const formats = formatSummary(model.rows);
    if (formats.length > 1) {
      lines.push('meshnet by weight format (one process, and 2 peers over relay; q8/q4 at block 32, accuracy level 4 unless the row says otherwise):', '');
      lines.push('| weights | packed MiB/layer | one process tok/s | × fp32 | TTFT 32 / ' + model.longPrompt + ' (ms) | peak RSS (MiB) | 2 peers tok/s | ÷ its one process | peers\' peak RSS (MiB) |', '| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
      for (const f of formats) {
        const peers = f.peers ? f.peers.peakRss.filter((p) => p.process !== 'head').map((p) => (p.bytes / MiB).toFixed(0)).join(' / ') : '—';
        lines.push(
          `| ${f.label} | ${fixed(f.packedMiB, 2)} | ${fixed(f.one?.decodeTokensPerSecond)} | ${fixed(f.one?.vsFp32, 2)}× | ${fixed(f.one?.ttftShortMs, 0)} / ${fixed(f.one?.ttftLongMs, 0)} | ${f.one ? (f.one.peakRss[0].bytes / MiB).toFixed(0) : '—'} | ${fixed(f.peers?.decodeTokensPerSecond)} | ${f.peers ? pct(f.peers.vsOneProcess) : '—'} | ${peers} |`,
        );
      }
      lines.push('');
    }
    lines.push(...againstLlamaCpp(model), '');
    lines.push('Where a decode token\'s time goes (median ms per token):', '');
    for (const r of model.rows) {
      if (r.breakdownMs) lines.push(`- ${r.label}: ${Object.entries(r.breakdownMs).map(([part, ms]) => `${part} ${fixed(ms, 2)}`).join(', ')}`);
      if (r.hopDecodeMs && r.hopOverheadMs) {
        const peer = r.peerBusyMs?.some((m) => m !== undefined)
          ? `; the peer's own time per frame ${r.peerBusyMs.map((m) => fixed(m, 2)).join(' / ')} (inside the shard run ${r.peerRunMs!.map((m) => fixed(m, 2)).join(' / ')}), so outside the peer's frame handling (sockets, both event loops, the peer's worker hand-off with --shard-thread worker, head-side frame work) ${r.hopDecodeMs.map((m, i) => fixed(m - (r.peerBusyMs![i] ?? NaN), 2)).join(' / ')}`
          : '';
        const ping = r.pingMs?.some((m) => m !== undefined) ? `; a control ping's round trip ${r.pingMs.map((m) => fixed(m, 2)).join(' / ')}` : '';
        lines.push(`- ${r.label}: per hop, the head's request ${r.hopDecodeMs.map((m) => fixed(m, 2)).join(' / ')}; beyond its layers' one-process compute ${r.hopOverheadMs.map((m) => fixed(m, 2)).join(' / ')}${peer}${ping}`);
      }
    }
    lines.push('');
  }
  if (report.grammarMask) {
    lines.push('## Grammar-constrained sampling (xgrammar mask per token)', '');
    lines.push('Mask for the next token + advancing the grammar + applying the mask to the logits, over seeded random walks; target ≤ 1 ms per token at 49,152 tokens (CPU time: independent of other load on the machine).', '');
    lines.push('| vocabulary | grammar | tokens | compile ms | mean ms | p95 ms | mean CPU ms | p95 CPU ms |', '| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const r of report.grammarMask.rows) {
      lines.push(`| ${r.vocabSize} | ${r.grammar} | ${r.tokens} | ${r.compileMs.toFixed(0)} | ${r.meanMs.toFixed(3)} | ${r.p95Ms.toFixed(3)} | ${r.meanCpuMs.toFixed(3)} | ${r.p95CpuMs.toFixed(3)} |`);
    }
    lines.push('');
  }
  lines.push(
    '## How to read this',
    '',
    '- Decode tokens/s: 1000 ÷ the median interval between tokens, after a warm-up request, best of the rounds (each round runs every configuration once, in turn, each in a fresh process); mean tok/s is (tokens − 1) ÷ (last − first token time). The machine may be shared with other work: the load average and CPU/wall (CPU time of the measuring process ÷ wall time) show how much; the median and the best round keep brief interference out, the rounds column shows the spread.',
    '- ms/token = 1000 ÷ decode tok/s. Spinning: onnxruntime pool threads spin between operators (transformers.js\'s default); meshnet turns it off (peers share the cores). ÷ transformers.js compares runs with the same setting (pipelines: spinning off).',
    '- TTFT: fastest of the rounds, from the request to its first token (prefill of the whole prompt + one LM head). transformers.js computes logits for every prompt position (the Optimum layout); meshnet only for the last.',
    '- Added ms/hop/token: (pipeline ms/token − one-process ms/token) ÷ hops. It is the whole cost of splitting, per hop: frame encode/decode, socket, event loop, worker hand-offs, and the head\'s extra embedding/LM-head runs.',
    '- Hop decode ms: the head\'s mean request time per decode frame on each hop, the peer\'s compute included.',
    '- Activation bytes: whole frames (header + fp32 hidden state) per decode step per hop, head → peer and peer → head.',
    '- Peak RSS: VmHWM of each peer process, maxRSS of the head/one process. Layer bytes are the weights of the process\'s layers: fp32 from the checkpoint, or the packed bytes of the row\'s compact format (what its artifacts hold).',
    '- Compact formats (`, fp16`, `, q8`, `, q4` rows): `--weights` with block 32 and meshnet\'s default accuracy level 4 (int8 activations inside MatMulNBits) unless the row says `level 0`. A pipeline\'s ÷ one process and added ms/hop are against the one process of its own format; × fp32 against the fp32 one process; same tokens against the one process of the same format.',
    '- Same tokens: the 32-token prompt\'s greedy tokens equal the one-process run\'s (transformers.js is run with min_new_tokens, which masks EOS, so it may differ once EOS would win).',
    '- Link delay (`--link-delay-ms N`): N ms of added round-trip time per frame, half before sending and half after the answer (head side).',
    '- llama.cpp rows: the same requests from the same token ids, greedy, each from an empty KV cache, in a process that loads node-llama-cpp and nothing of meshnet (its peak RSS is llama.cpp\'s + Node\'s + tsx\'s). Their "of bandwidth limit" uses the GGUF\'s bytes per token; "same tokens" against meshnet fp32 is expected only of F32 (the quantized types compute other logits; F16 KV may also flip a near tie). `npm run bench:llama-check` shows llama.cpp computes meshnet\'s logits on the F32 GGUFs (fp32 KV there).',
    '',
  );
  return lines.join('\n');
}

/** meshnet per weight format against llama.cpp on the counterpart GGUF type, one process each. */
function againstLlamaCpp(model: BenchReport['models'][number]): string[] {
  // Each one-process row of the format at the default level: one per `--q4-specs` name, else the first.
  const ones = (weights: string): (Row | undefined)[] => {
    const all = model.rows.filter((r) => r.kind === 'one-process' && !r.spinning && r.weights === weights);
    const named = all.filter((r) => r.weightSpec !== undefined);
    return named.length ? named : [all[0]];
  };
  const llama = (weights: string) => model.rows.find((r) => r.label === `llama.cpp ${weights}`);
  const reason = (label: string) => model.unavailable.find((u) => u.label === label)?.reason ?? 'not measured';
  const cell = (row: Row | undefined, pick: (r: Row) => string, label: string) => (row ? pick(row) : `— (${reason(label)})`);
  const lines = [
    'Against llama.cpp (one process each, same threads):',
    '',
    '| meshnet weights | decode tok/s | llama.cpp type | decode tok/s | meshnet ÷ llama.cpp | TTFT 32 (ms) meshnet / llama.cpp | TTFT ' + model.longPrompt + ' (ms) meshnet / llama.cpp | peak RSS (MiB) meshnet / llama.cpp | GGUF (MiB) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const weights of MESHNET_WEIGHTS) {
    const type = LLAMA_CPP_COUNTERPART[weights];
    const theirs = llama(type);
    if (!theirs && !model.ggufs.some((g) => g.weights === type) && weights === 'fp16') continue; // no F16 GGUF row in this bench
    const gguf = model.ggufs.find((g) => g.weights === type);
    for (const ours of ones(weights)) {
      const both = (pick: (r: Row) => number, digits = 0) => `${ours ? fixed(pick(ours), digits) : '—'} / ${theirs ? fixed(pick(theirs), digits) : '—'}`;
      lines.push(
        `| ${ours?.weightSpec ?? weights} | ${cell(ours, (r) => fixed(r.decodeTokensPerSecond), `meshnet, one process${weights === 'fp32' ? '' : `, ${weights}`}`)} | ${type} | ${cell(theirs, (r) => fixed(r.decodeTokensPerSecond), `llama.cpp ${type}`)} | ` +
          `${ours && theirs ? `${fixed(ours.decodeTokensPerSecond / theirs.decodeTokensPerSecond, 2)}×` : '—'} | ${both((r) => r.ttftShortMs)} | ${both((r) => r.ttftLongMs)} | ${both((r) => r.peakRss[0].bytes / MiB)} | ${gguf ? fixed(gguf.fileBytes / MiB) : '—'} |`,
      );
    }
  }
  // `--llama-cpp-avx2`: llama.cpp on its AVX2 kernels, beside each meshnet row of the same format.
  for (const avx2 of model.rows.filter((r) => r.kind === 'llama-cpp' && r.label.endsWith(', avx2 kernels'))) {
    const weights = MESHNET_WEIGHTS.find((w) => LLAMA_CPP_COUNTERPART[w] === avx2.weights);
    const ours = weights ? ones(weights).filter((r): r is Row => r !== undefined) : [];
    lines.push('', `${avx2.label} (its CPU backends up to AVX2 only): ${fixed(avx2.decodeTokensPerSecond)} tok/s${ours.map((r) => `; meshnet ${r.weightSpec ?? r.weights} ÷ it ${fixed(r.decodeTokensPerSecond / avx2.decodeTokensPerSecond, 2)}×`).join('')}.`);
  }
  const engines = model.rows.filter((r) => r.kind === 'llama-cpp' && r.devices?.length);
  if (engines.length) lines.push('', ...engines.map((r) => `- ${r.label}: ${r.devices!.join('; ')}`));
  const fallbacks = model.ggufs.filter((g) => g.fallbacks.length);
  if (fallbacks.length) lines.push('', `GGUF tensors in F16 because their rows are not whole 32-value blocks: ${fallbacks.map((g) => `${g.weights}: ${g.fallbacks.join(', ')}`).join('; ')}.`);
  return lines;
}
