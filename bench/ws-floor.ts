/**
 * The floor under a hop's added time (issue #24, "the hop"): a bare WebSocket echo between two
 * Node processes on loopback, with nothing of meshnet's in it. The parent serves (`ws`, the
 * library under crossws's Node adapter, as the head serves its relay peers); the child dials it
 * with crossws's client (as a peer dials the head: its frames are masked) and sends every binary
 * frame straight back. The parent sends one frame of a decode step's size, waits for its echo,
 * and sends the next: the median round trip is what one hop pays in sockets, kernel wake-ups and
 * ws framing before any frame codec, deadline, batching or shard run. Three partners:
 *   - `meshnet transport`: the head's own server (startServer: h3 + crossws, a
 *     defineWebSocketHandler route reading `message.uint8Array()` as the peer gateway does) and
 *     the peer's own dialer (dialSocket);
 *   - `ws`: a bare `ws` server (the library under crossws's Node adapter) and crossws's client;
 *   - `tcp`: a plain node:net echo, for how much of it is ws's own.
 *
 *   node --import tsx bench/ws-floor.ts [--bytes 2400,288] [--frames 3000] [--rounds 3] [--gap-ms 0,1,10]
 *
 * `--gap-ms`: idle time before each frame (a timer), as a hop's socket waits through the other
 * hops' shard runs: both processes sleep between frames and are woken by the next one.
 *
 * Sizes: a SmolLM2-135M-shaped decode frame carries 576 fp32 (2,304 bytes + header), a
 * stories260k one 64 (256 bytes + header).
 */
import { fork } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';

if (process.argv[2] === '--child') {
  const [kind, port] = [process.argv[3], Number(process.argv[4])];
  if (kind === 'meshnet') {
    const { dialSocket } = await import('../src/node/net/ws-dial.ts');
    const dialed = await dialSocket(`ws://127.0.0.1:${port}/echo`);
    dialed.attach({ receive: (data) => dialed.socket.send(data), terminated: () => process.exit(0) });
  } else if (kind === 'ws') {
    const { default: WebSocket } = await import('crossws/websocket');
    const socket = new WebSocket(`ws://127.0.0.1:${port}/`);
    socket.binaryType = 'arraybuffer';
    socket.onmessage = (event: MessageEvent) => socket.send(event.data as ArrayBuffer);
    socket.onclose = () => process.exit(0);
  } else {
    const socket = net.connect(port, '127.0.0.1', () => socket.setNoDelay(true));
    socket.on('data', (chunk) => socket.write(chunk));
    socket.on('close', () => process.exit(0));
  }
} else {
  const { values } = parseArgs({ options: { bytes: { type: 'string', default: '2400,288' }, frames: { type: 'string', default: '3000' }, rounds: { type: 'string', default: '3' }, 'gap-ms': { type: 'string', default: '0,1,10' } } });
  const gaps = values['gap-ms'].split(',').map(Number);
  const sizes = values.bytes.split(',').map(Number);
  const frames = Number(values.frames);
  const rounds = Number(values.rounds);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;

  /** One echo partner: `send(frame)` resolves when its echo is whole. */
  async function wsPartner(): Promise<{ send(frame: Uint8Array): Promise<void>; close(): void }> {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => server.once('listening', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    const child = fork(import.meta.filename, ['--child', 'ws', String(port)], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
    const socket = await new Promise<ServerSocket>((r) => server.once('connection', r));
    let waiting: (() => void) | undefined;
    socket.on('message', () => waiting?.());
    return {
      send: (frame) => new Promise<void>((resolve) => ((waiting = resolve), socket.send(frame))),
      close: () => (socket.close(), server.close(), child.kill()),
    };
  }
  async function meshnetPartner(): Promise<{ send(frame: Uint8Array): Promise<void>; close(): void }> {
    const { H3, defineWebSocketHandler } = await import('h3');
    const { startServer } = await import('../src/node/net/start-server.ts');
    let waiting: (() => void) | undefined;
    let connected!: (peer: { send(data: Uint8Array): void }) => void;
    const peer = new Promise<{ send(data: Uint8Array): void }>((r) => (connected = r));
    const app = new H3();
    app.get(
      '/echo',
      defineWebSocketHandler({
        open: (p) => connected(p as never),
        message(_p, message) {
          message.uint8Array();
          waiting?.();
        },
      }),
    );
    const server = await startServer(app, { port: 0, host: '127.0.0.1' });
    const child = fork(import.meta.filename, ['--child', 'meshnet', String(server.port)], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
    const socket = await peer;
    return {
      send: (frame) => new Promise<void>((resolve) => ((waiting = resolve), socket.send(frame))),
      close: () => (void server.close(), child.kill()),
    };
  }
  async function tcpPartner(): Promise<{ send(frame: Uint8Array): Promise<void>; close(): void }> {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    const child = fork(import.meta.filename, ['--child', 'tcp', String(port)], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
    const socket = await new Promise<net.Socket>((r) => server.once('connection', r));
    socket.setNoDelay(true);
    let want = 0;
    let waiting: (() => void) | undefined;
    socket.on('data', (chunk) => {
      want -= chunk.length;
      if (want <= 0) waiting?.();
    });
    return {
      send: (frame) => new Promise<void>((resolve) => ((want = frame.length), (waiting = resolve), socket.write(frame))),
      close: () => (socket.destroy(), server.close(), child.kill()),
    };
  }

  console.log(`ws-floor: ${frames} frames a round, ${rounds} rounds, load ${os.loadavg()[0]!.toFixed(2)}`);
  for (const [name, make] of [['meshnet transport (h3 + crossws server, dialSocket client)', meshnetPartner], ['ws (crossws client, masked)', wsPartner], ['tcp (node:net)', tcpPartner]] as const) {
    const partner = await make();
    for (const bytes of sizes) for (const gap of gaps) {
      const frame = new Uint8Array(bytes).fill(7);
      for (let i = 0; i < 200; i++) await partner.send(frame); // warm-up
      const medians: string[] = [];
      const n = gap === 0 ? frames : Math.min(frames, Math.ceil(3000 / gap));
      for (let r = 0; r < rounds; r++) {
        const rtt: number[] = [];
        for (let i = 0; i < n; i++) {
          if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap));
          const t0 = performance.now();
          await partner.send(frame);
          rtt.push((performance.now() - t0) * 1000);
        }
        medians.push(`${median(rtt).toFixed(0)} (p90 ${p90(rtt).toFixed(0)})`);
      }
      console.log(`  ${name}, ${bytes} B, ${gap} ms idle before each (${n} a round): round trip µs, median per round: ${medians.join(', ')}`);
    }
    partner.close();
  }
  console.log(`  load after ${os.loadavg()[0]!.toFixed(2)}`);
  process.exit(0);
}
