/**
 * Prefix reuse through the API: the second turn of a chat reports the reused prompt tokens
 * in `usage.prompt_tokens_details.cached_tokens` and answers what a head without a prefix
 * cache answers; /api/state shows each peer's prefix entries apart from its live KV, and
 * /metrics counts them (meshnet_prefix_cache_*, meshnet_kv_bytes, meshnet_prompt_tokens_cached_total).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import type { MeshState } from '../../src/shared/dashboard-state.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor, eventually, serveStories } from './api-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let warm: ServingHead;
let cold: ServingHead;

beforeAll(async () => {
  root = await tempDir('prefix-api');
  process.env.MESHNET_HOME = root.dir;
  [warm, cold] = await Promise.all([serveStories({ prefixCacheMb: 16 }), serveStories({ prefixCacheMb: 0 })]);
});
afterAll(async () => {
  await warm?.close();
  await cold?.close();
  await root?.remove();
});

const words = (from: number, n: number) => Array.from({ length: n }, (_, i) => `t${from + ((i * 13) % 300)}`).join(' ');

async function state(serving: ServingHead): Promise<MeshState> {
  return (await fetch(`${serving.head.url}api/state`)).json() as Promise<MeshState>;
}

describe('prefix cache over HTTP', () => {
  it('the second turn reports cached_tokens and answers as a cold head does', async () => {
    const first = [{ role: 'user' as const, content: words(10, 40) }];
    const ask = (serving: ServingHead, messages: { role: 'user' | 'assistant'; content: string }[]) =>
      clientFor(serving).chat.completions.create({ model: 'stories260k', messages, max_completion_tokens: 8, temperature: 0 });
    const turn1 = await ask(warm, first);
    expect(turn1.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    // The finished session's KV is released into prefix entries in the background.
    let entries = 0;
    expect(await eventually(() => (void state(warm).then((s) => (entries = s.peers.reduce((n, p) => n + (p.prefixEntries ?? 0), 0))), entries > 0), 15_000)).toBe(true);

    const second = [...first, { role: 'assistant' as const, content: turn1.choices[0].message.content ?? '' }, { role: 'user' as const, content: words(400, 6) }];
    const [reused, fresh] = await Promise.all([ask(warm, second), ask(cold, second)]);
    expect(reused.choices[0].message.content).toBe(fresh.choices[0].message.content);
    expect(reused.usage?.prompt_tokens).toBe(fresh.usage?.prompt_tokens);
    const cached = reused.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cached).toBeGreaterThanOrEqual(40);
    expect(cached).toBeLessThan(reused.usage!.prompt_tokens);
    expect(fresh.usage?.prompt_tokens_details?.cached_tokens).toBe(0);

    const s = await state(warm);
    const head = s.peers.find((p) => p.prefixEntries !== undefined && p.prefixEntries > 0);
    expect(head?.prefixBytes).toBeGreaterThan(0);
    expect(head?.prefixBudgetBytes).toBe(16 * 2 ** 20);
    // Live sessions' KV is back to zero while the prefix entries stay (figures from the peers' next stats).
    let metrics = '';
    const sample = (name: string) => Number(metrics.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);
    for (let i = 0; i < 100; i++) {
      metrics = await (await fetch(`${warm.head.url}metrics`)).text();
      if (sample('meshnet_kv_bytes') === 0 && sample('meshnet_prefix_cache_bytes') > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(sample('meshnet_kv_bytes')).toBe(0);
    expect(sample('meshnet_prefix_cache_bytes')).toBeGreaterThan(0);
    expect(sample('meshnet_prefix_cache_entries')).toBeGreaterThan(0);
    expect(sample('meshnet_prefix_cache_budget_bytes')).toBe(16 * 2 ** 20);
    expect(sample('meshnet_prompt_tokens_cached_total')).toBe(cached);
  }, 90_000);
});
