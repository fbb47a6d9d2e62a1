/** The bench report as Markdown: targets first, then one figures table per model. */
import type { BenchReport } from './report.ts';

const MiB = 2 ** 20;
const fixed = (x: number | undefined, digits = 1) => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '—');

type Row = BenchReport['models'][number]['rows'][number];

/** One line per weight format (and accuracy level) that has a one-process or 2-peer relay row. */
function formatSummary(rows: readonly Row[]): { label: string; packedMiB?: number; one?: Row; peers?: Row }[] {
  const suffix = (label: string) => /, ((?:fp16|q8|q4)(?: level \d)?)$/.exec(label)?.[1] ?? 'fp32';
  const out = new Map<string, { label: string; packedMiB?: number; one?: Row; peers?: Row }>();
  for (const r of rows) {
    const isOne = r.kind === 'one-process' && !r.spinning;
    const isPeers = r.kind === 'pipeline' && r.label.startsWith('2 peers, relay') && !r.label.includes('RTT');
    if (!isOne && !isPeers) continue;
    const label = suffix(r.label);
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
      `${report.threads} onnxruntime threads per process, fp32 activations on the CPU, greedy, ${report.decodeTokens} decode tokens after a 32-token prompt. ` +
      `Run took ${report.durationS.toFixed(0)} s.`,
    '',
  );
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
        `| ${r.label} | ${fixed(r.decodeTokensPerSecond)} | ${fixed(r.meanDecodeTokensPerSecond)} | ${fixed(r.fastestTokenMs, 2)} | ${fixed(r.msPerToken, 2)} | ${fixed(r.ttftShortMs, 0)} | ${fixed(r.ttftLongMs, 0)} | ${pct(r.vsOneProcess)} | ${fixed(r.vsTransformers, 2)}× | ${pct(r.fractionOfLimit)} | ` +
          `${fixed(r.addedMsPerHopPerToken, 2)} | ${r.hopDecodeMs ? r.hopDecodeMs.map((m) => m.toFixed(2)).join(' / ') : '—'} | ` +
          `${r.activationBytesPerTokenPerHop ? `${r.activationBytesPerTokenPerHop.sent.toFixed(0)} / ${r.activationBytesPerTokenPerHop.received.toFixed(0)}` : '—'} | ${rss} | ${r.sameTokens ? 'yes' : 'no'} | ${r.loadAverage.map((l) => l.toFixed(1)).join('→')} | ${fixed(r.cpuPerWall, 2)} | ${r.roundsTokensPerSecond.map((x) => fixed(x)).join(' / ')} |`,
      );
    }
    lines.push('');
    const formats = formatSummary(model.rows);
    if (formats.length > 1) {
      lines.push('By weight format (one process, and 2 peers over relay):', '');
      lines.push('| weights | packed MiB/layer | one process tok/s | × fp32 | TTFT 32 / ' + model.longPrompt + ' (ms) | peak RSS (MiB) | 2 peers tok/s | peers\' peak RSS (MiB) |', '| --- | --- | --- | --- | --- | --- | --- | --- |');
      for (const f of formats) lines.push(`| ${f.label} | ${fixed(f.packedMiB, 2)} | ${fixed(f.one?.decodeTokensPerSecond)} | ${fixed(f.one?.vsFp32, 2)}× | ${fixed(f.one?.ttftShortMs, 0)} / ${fixed(f.one?.ttftLongMs, 0)} | ${f.one ? (f.one.peakRss[0].bytes / MiB).toFixed(0) : '—'} | ${fixed(f.peers?.decodeTokensPerSecond)} | ${f.peers ? f.peers.peakRss.filter((p) => p.process !== 'head').map((p) => (p.bytes / MiB).toFixed(0)).join(' / ') : '—'} |`);
      lines.push('');
    }
    lines.push('Where a decode token\'s time goes (median ms per token):', '');
    for (const r of model.rows) {
      if (r.breakdownMs) lines.push(`- ${r.label}: ${Object.entries(r.breakdownMs).map(([part, ms]) => `${part} ${fixed(ms, 2)}`).join(', ')}`);
      if (r.hopDecodeMs && r.hopOverheadMs) {
        const peer = r.peerBusyMs?.some((m) => m !== undefined)
          ? `; the peer's own time per frame ${r.peerBusyMs.map((m) => fixed(m, 2)).join(' / ')} (inside the shard run ${r.peerRunMs!.map((m) => fixed(m, 2)).join(' / ')}), so outside the peer's frame handling (sockets, both event loops, the peer's worker hand-off, head-side frame work) ${r.hopDecodeMs.map((m, i) => fixed(m - (r.peerBusyMs![i] ?? NaN), 2)).join(' / ')}`
          : '';
        const ping = r.pingMs?.some((m) => m !== undefined) ? `; a control ping's round trip ${r.pingMs.map((m) => fixed(m, 2)).join(' / ')}` : '';
        lines.push(`- ${r.label}: per hop, the head's request ${r.hopDecodeMs.map((m) => fixed(m, 2)).join(' / ')}; beyond its layers' one-process compute ${r.hopOverheadMs.map((m) => fixed(m, 2)).join(' / ')}${peer}${ping}`);
      }
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
    '- Peak RSS: VmHWM of each peer process, maxRSS of the head/one process. Layer bytes are the weights of the process\'s layers: fp32 from the checkpoint, or the packed bytes of the row\'s format (fp16, q8, q4: what its artifacts hold).',
    '- Weight formats (`, fp16`, `, q8`, `, q4` rows): `--weights` with block 32 and meshnet\'s default accuracy level 4 (int8 activations in MatMulNBits), unless the row says `level 0`; ÷ one process is against the fp32 one process; same tokens compares with the one-process run of the same format.',
    '- Same tokens: the 32-token prompt\'s greedy tokens equal the one-process run\'s (transformers.js is run with min_new_tokens, which masks EOS, so it may differ once EOS would win).',
    '- Link delay (`--link-delay-ms N`): N ms of added round-trip time per frame, half before sending and half after the answer (head side).',
    '',
  );
  return lines.join('\n');
}
