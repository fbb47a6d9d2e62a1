/**
 * LAN discovery with the real `meshnet` command and real multicast: two network namespaces
 * joined by a veth pair (two "machines" on one link; needs root, which CI has), the heads in
 * one, the peer in the other. Loopback carries no multicast on Linux, so the namespaces are
 * what makes this testable on one machine; without the rights to make them, the heads and
 * the peer run on this machine's first non-loopback IPv4 interface instead.
 *
 * Heads A and B announce, C runs with --no-announce: a peer without --head and without a
 * terminal lists A and B (never C) and exits 2; once B has gone (its goodbye), the peer joins
 * A. The announcement's TXT holds model and protocol, never the join token.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { tempDir } from '../engine/harness.ts';
import { STORIES_DIR } from '../fixtures/paths.ts';
import { BIN } from './run-cli.ts';

const TOKEN = 'lan-test-join-token-5f2a';
const tag = String(process.pid % 100000);
const nets = { head: `mnh${tag}`, peer: `mnp${tag}` };
const subnet = `10.${100 + (process.pid % 100)}.${process.pid % 250}`;
let headHost = `${subnet}.1`;
let namespaces = false;
const children: ChildProcess[] = [];
let home: { dir: string; remove: () => Promise<void> } | undefined;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'pipe' });
}

function makeNamespaces(): boolean {
  try {
    ip('netns', 'add', nets.head);
    ip('netns', 'add', nets.peer);
    ip('link', 'add', `mv${tag}h`, 'type', 'veth', 'peer', 'name', `mv${tag}p`);
    for (const [side, ns, host] of [['h', nets.head, 1], ['p', nets.peer, 2]] as const) {
      ip('link', 'set', `mv${tag}${side}`, 'netns', ns);
      ip('-n', ns, 'addr', 'add', `${subnet}.${host}/24`, 'dev', `mv${tag}${side}`);
      ip('-n', ns, 'link', 'set', `mv${tag}${side}`, 'up');
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      // mDNS sends to 224.0.0.251: a namespace without a default route needs a multicast route.
      ip('-n', ns, 'route', 'add', '224.0.0.0/4', 'dev', `mv${tag}${side}`);
    }
    return true;
  } catch {
    removeNamespaces();
    return false;
  }
}

function removeNamespaces(): void {
  for (const ns of Object.values(nets)) {
    try {
      ip('netns', 'del', ns);
    } catch {
      // not made
    }
  }
}

/** `node ARGS` in the head's or the peer's namespace (or on this machine). */
function node(where: 'head' | 'peer', args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const command = namespaces ? (['ip', ['netns', 'exec', nets[where], process.execPath, ...args]] as const) : ([process.execPath, args] as const);
  const child = spawn(command[0], [...command[1]], { env: { ...process.env, MESHNET_HOME: path.join(home!.dir, 'home') }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, out: () => out, err: () => err, exited };
}

const meshnet = (where: 'head' | 'peer', args: string[]) => node(where, [BIN, ...args]);

async function until(check: () => boolean, what: () => string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function serve(port: number, extra: string[] = []) {
  const head = meshnet('head', ['serve', '--model', STORIES_DIR, '--host', headHost, '--port', String(port), '--join-token', TOKEN, '--device', 'cpu', '--threads', '1', ...extra]);
  return { ...head, ready: until(() => head.out().includes('meshnet is serving'), () => head.err()) };
}

beforeAll(async () => {
  home = await tempDir('lan');
  namespaces = makeNamespaces();
  if (!namespaces) {
    const address = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal);
    if (!address) throw new Error('no network namespaces (not root?) and no non-loopback IPv4 interface: LAN discovery cannot be tested here');
    headHost = address.address;
  }
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 200));
  if (namespaces) removeNamespaces();
  await home?.remove();
});

describe('meshnet serve announces, meshnet peer finds', () => {
  it('lists the announced heads (not --no-announce), refuses to pick without a terminal, joins the only one', async () => {
    const base = 40_000 + (process.pid % 10_000);
    const [a, b, c] = [serve(base), serve(base + 1), serve(base + 2, ['--no-announce'])];
    await Promise.all([a.ready, b.ready, c.ready]);
    expect(a.err()).toContain('announced on the LAN');
    expect(c.err()).not.toContain('announced on the LAN');

    // The raw announcement, as any mDNS browser on the link hears it.
    const heard = node('peer', [
      '--input-type=module',
      '-e',
      "import { Bonjour } from 'bonjour-service'; const b = new Bonjour(); const seen = []; b.find({ type: 'meshnet' }, (s) => seen.push({ port: s.port, txt: s.txt })); setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(0); }, 1500);",
    ]);
    const several = meshnet('peer', ['peer', '--join-token', TOKEN, '--discover-wait', '1.5']);
    expect(await several.exited).toBe(2);
    expect(several.err()).toContain(`ws://${headHost}:${base}/peer/ws`);
    expect(several.err()).toContain(`ws://${headHost}:${base + 1}/peer/ws`);
    expect(several.err()).not.toContain(`:${base + 2}/`);
    expect(several.err()).toContain('choose one with --head');
    expect(await heard.exited).toBe(0);
    const records = (JSON.parse(heard.out()) as { port: number; txt: Record<string, string> }[]).filter((r) => r.port >= base && r.port <= base + 2);
    expect(records.map((r) => r.port).sort()).toEqual([base, base + 1]);
    for (const { txt } of records) {
      expect(txt).toMatchObject({ model: 'stories260k', protocol: `${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`, path: '/peer/ws' });
      expect(JSON.stringify(txt)).not.toContain(TOKEN);
    }

    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    const only = meshnet('peer', ['peer', '--join-token', TOKEN, '--discover-wait', '1.5']);
    await until(() => only.err().includes(`joined ws://${headHost}:${base}/peer/ws`), () => only.err(), 30_000);
    expect(only.err()).toContain('found 1 head on the LAN');
    only.child.kill('SIGTERM');
    expect(await only.exited).toBe(0);
  }, 60_000);
});
