/**
 * Peers outlive their head, black-box: a `meshnet serve` process (stories260k, no layers of
 * its own, a fixed port and join token) and two `meshnet peer` processes. The head is
 * SIGKILLed and started again on the same port: the peers — the same processes, never
 * restarted — dial again with back-off, rejoin, get their layers (still loaded: the same
 * model), and the new head serves the one-process golden answer within 10 s of answering
 * HTTP. Their stderr says they rejoined.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from '../cli/run-cli.ts';
import { STORIES_DIR, STORIES_GOLDEN, tempDir } from '../engine/harness.ts';

const TOKEN = 'head-restart-token';
const GOLDEN_WITHIN_MS = 10_000;

let home: { dir: string; remove: () => Promise<void> };
let port: number;
const children: ChildProcess[] = [];
const peerLogs = new Map<string, string>();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

function start(args: string[], name: string): ChildProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, MESHNET_HOME: path.join(home.dir, 'home'), MESHNET_JOIN_TOKEN: undefined }, stdio: ['ignore', 'ignore', 'pipe'] });
  peerLogs.set(name, '');
  child.stderr!.on('data', (d: Buffer) => peerLogs.set(name, peerLogs.get(name)! + d.toString()));
  children.push(child);
  return child;
}

const startHead = () =>
  start(['serve', '--model', STORIES_DIR, '--port', String(port), '--host', '127.0.0.1', '--head-layers', 'none', '--join-token', TOKEN, '--device', 'cpu', '--threads', '1', '--no-announce'], 'head');
const startPeer = (id: string) => start(['peer', '--head', `ws://127.0.0.1:${port}/peer/ws`, '--join-token', TOKEN, '--device', 'cpu', '--threads', '1', '--memory-budget', '256', '--prefix-cache', '0', '--peer-id', id], id);

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const base = () => `http://127.0.0.1:${port}`;
const readyWithPeers = async () => {
  const health = (await (await fetch(`${base()}/health`)).json()) as { ready: boolean; peers: { id: string; layers: number[][] }[] };
  return health.ready && health.peers.filter((p) => p.layers.length > 0).length === 2 ? health : undefined;
};
async function golden(): Promise<number[]> {
  const response = await fetch(`${base()}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0 }) });
  const body = (await response.json()) as { choices: { text: string }[] };
  return body.choices[0]!.text.trim().split(/\s+/).map((t) => Number(t.slice(1)));
}

beforeAll(async () => {
  home = await tempDir('head-restart');
  port = await freePort();
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await home?.remove();
});

describe('a killed and restarted head gets its peers back', () => {
  it(`without restarting them; golden within ${GOLDEN_WITHIN_MS / 1000} s of the new head answering`, { timeout: 180_000 }, async () => {
    const first = startHead();
    await until('the first head answering HTTP', 90_000, async () => ((await fetch(`${base()}/health/live`)).ok ? true : undefined));
    const peers = [startPeer('r1'), startPeer('r2')];
    await until('the first head with 2 peers', 90_000, readyWithPeers);
    expect(await golden()).toEqual(STORIES_GOLDEN);

    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    // Peers keep dialling a head that is not there.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const peer of peers) expect(peer.exitCode, 'the peer process lives on').toBeNull();

    const spawned = Date.now();
    startHead();
    await until('the new head answering HTTP', 90_000, async () => ((await fetch(`${base()}/health/live`)).ok ? true : undefined));
    const answering = Date.now();
    const health = await until('the new head with its 2 peers back', GOLDEN_WITHIN_MS, readyWithPeers);
    const ids = await golden();
    const served = Date.now();
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(served - answering, 'golden after the new head answered HTTP').toBeLessThanOrEqual(GOLDEN_WITHIN_MS);
    expect(health.peers.map((p) => p.id).sort()).toEqual(['r1', 'r2']);
    for (const peer of peers) expect(peer.exitCode, 'never restarted').toBeNull();
    for (const id of ['r1', 'r2']) expect(peerLogs.get(id)).toMatch(/rejoined the head after \d+ attempt/);
    // 3.5 hello.rejoin: the new head never saw them, yet its dashboard state shows both rejoined once.
    const state = (await (await fetch(`${base()}/api/state`)).json()) as { peers: { id: string; rejoins?: number }[] };
    expect(state.peers.map((p) => [p.id, p.rejoins]).sort()).toEqual([['r1', 1], ['r2', 1]]);
    console.log(`head restart: golden ${served - answering} ms after the new head answered HTTP (${served - spawned} ms after its spawn, start-up included)`);

    for (const peer of peers) peer.kill('SIGTERM');
    const codes = await Promise.all(peers.map((p) => new Promise<number | null>((resolve) => p.once('exit', (code) => resolve(code)))));
    expect(codes, 'SIGTERM: exit 0').toEqual([0, 0]);
  });

  it('a peer started while its head is down waits for it and joins (a peer respawned just before a head restart)', { timeout: 180_000 }, async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    port = await freePort();
    const peer = startPeer('r3');
    await until('the peer trying the absent head', 60_000, async () => (/first join: .*retrying/.test(peerLogs.get('r3')!) ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(peer.exitCode, 'the peer process waits for its head').toBeNull();
    startHead();
    await until('the head with the waiting peer', 90_000, async () => {
      const health = (await (await fetch(`${base()}/health`)).json()) as { ready: boolean; peers: { id: string; layers: number[][] }[] };
      return health.ready && health.peers.some((p) => p.id === 'r3' && p.layers.length > 0) ? true : undefined;
    });
    expect(await golden()).toEqual(STORIES_GOLDEN);
    expect(peerLogs.get('r3')).toMatch(/joined the head after \d+ attempt/);
  });
});
