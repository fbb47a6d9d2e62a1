/**
 * The head's own JS per hop frame, without sockets (issue #24, "the hop"): one Hop sending
 * decode frames through the stack a relay peer's frames take on the head — LeasedLink →
 * BatchingLink → SocketLink — over a fake socket that answers each frame on the next turn
 * (setImmediate) with a result of the same shape. Reports CPU µs per round trip (process.cpuUsage,
 * which other load on a shared machine inflates less than wall time) for each round.
 *
 *   node --import tsx bench/hop-js.ts [--hidden 576] [--frames 20000] [--rounds 5]
 */
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { BatchingLink } from '../src/core/mesh/batching-link.ts';
import { LeasedLink } from '../src/core/mesh/leased-link.ts';
import { Hop } from '../src/core/route/hop.ts';
import { systemClock } from '../src/core/runtime/clock.ts';
import { SocketLink } from '../src/core/runtime/socket-link.ts';
import { decodeFrame, encodeFrame } from '../src/core/frames/frame-codec.ts';

const { values } = parseArgs({ options: { hidden: { type: 'string', default: '576' }, frames: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '5' } } });
const hiddenSize = Number(values.hidden);
const frames = Number(values.frames);
const range = { start: 0, end: 15 };
let link!: SocketLink;
const socket = {
  send(data: string | Uint8Array) {
    if (typeof data === 'string') return;
    const f = decodeFrame(data);
    const answer = encodeFrame({ kind: 'result', requestId: f.requestId, sessionId: f.sessionId, startPosition: f.startPosition, range: f.range, activations: f.activations });
    setImmediate(() => link.receive(answer));
  },
  close() {},
};
link = new SocketLink(socket, { timeoutMs: 60_000 });
const shared = new BatchingLink(link);
const sessionId = randomUUID();
const lease = { peerId: 'p', range, link: new LeasedLink(shared) };
const hop = new Hop(0, lease, { sessionId, clock: systemClock, deadline: { ceilingMs: 30_000 } });
const hidden = { dtype: 'fp32' as const, data: new Float32Array(hiddenSize).fill(0.5), tokens: 1, hiddenSize };
const signal = new AbortController().signal;
const results: number[] = [];
for (let r = 0; r < Number(values.rounds); r++) {
  const t0 = process.cpuUsage();
  for (let i = 0; i < frames; i++) await hop.send(hidden, 10 + (i % 1000), signal);
  const t = process.cpuUsage(t0);
  results.push((t.user + t.system) / frames);
}
const sorted = [...results].sort((a, b) => a - b);
console.log(`hop-js hidden ${hiddenSize}: CPU µs per frame round trip ${results.map((x) => x.toFixed(2)).join(' ')} (median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)})`);
await link.close();
