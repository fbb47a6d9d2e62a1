/** What a browse makes of mDNS answers (outside input), and how a peer picks among heads. */
import { describe, expect, it } from 'vitest';
import { discoverHead } from '../../src/node/cli/discover-head.ts';
import { UsageError } from '../../src/node/cli/args.ts';
import { announceHead, type FoundHead, parseFoundHead } from '../../src/node/discovery/lan-discovery.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';

const ours = `${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`;
const answer = (over: Record<string, unknown> = {}) =>
  ({ name: 'meshnet m on box:8080', port: 8080, txt: { model: 'm', protocol: ours, path: '/peer/ws', version: '0.1.0' }, addresses: ['192.168.1.9', 'fe80::1'], referer: { address: '192.168.1.9', family: 'IPv4', port: 5353, size: 100 }, ...over }) as never;

describe('parseFoundHead', () => {
  it('dials the address that answered, at the announced port and path', () => {
    expect(parseFoundHead(answer())).toEqual({ name: 'meshnet m on box:8080', model: 'm', protocol: ours, compatible: true, version: '0.1.0', url: 'ws://192.168.1.9:8080/peer/ws' });
    expect(parseFoundHead(answer({ referer: undefined, addresses: ['fe80::1', 'fd00::5'] }))?.url).toBe('ws://[fd00::5]:8080/peer/ws');
    expect(parseFoundHead(answer({ txt: { model: 'm', protocol: `${PROTOCOL_VERSION.major + 1}.0` } }))?.compatible).toBe(false);
  });

  it('leaves out answers that are not a head\'s', () => {
    for (const bad of [{ txt: {} }, { txt: { model: 'm', protocol: 'x' } }, { txt: { model: 'm', protocol: ours, path: '/a b' } }, { txt: { model: 'x'.repeat(300), protocol: ours } }, { port: 0 }, { port: 70000 }, { referer: undefined, addresses: ['not-an-ip'] }]) {
      expect(parseFoundHead(answer(bad)), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it('a head on loopback is not announced', async () => {
    const announcer = announceHead({ host: '127.0.0.1', port: 8080, model: 'm', version: '0' });
    expect(announcer.name).toBeUndefined();
    expect(announcer.skipped).toContain('--host 0.0.0.0');
    await announcer.close();
  });
});

describe('discoverHead', () => {
  const head = (port: number, compatible = true): FoundHead => ({ name: `h${port}`, model: 'm', protocol: compatible ? ours : '99.0', compatible, url: `ws://10.0.0.1:${port}/peer/ws` });
  const run = (heads: FoundHead[], interactive = false, reply = '1') => discoverHead({ waitMs: 10, interactive, log: () => {}, browse: async () => heads, ask: async () => reply });

  it('joins the only compatible head; asks on a terminal; refuses without one', async () => {
    expect(await run([head(1), head(2, false)])).toBe('ws://10.0.0.1:1/peer/ws');
    expect(await run([head(1), head(2)], true, '2')).toBe('ws://10.0.0.1:2/peer/ws');
    await expect(run([head(1), head(2)])).rejects.toThrow(/2 heads answered.*--head[\s\S]*:1\/peer\/ws[\s\S]*:2\/peer\/ws/);
    await expect(run([head(1), head(2)], true, '3')).rejects.toBeInstanceOf(UsageError);
    await expect(run([])).rejects.toThrow(/no meshnet head answered/);
    await expect(run([head(1, false)])).rejects.toThrow(/protocol/);
  });
});
