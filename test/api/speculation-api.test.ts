/**
 * Speculative decoding through the OpenAI API over real sockets: greedy output equals the
 * golden ids over relay and direct links (by prompt lookup, the default, and with
 * `speculate: 'off'`), also when a peer is lost during a speculative step; the telemetry
 * (acceptance rate, tokens per round trip) reaches `/api/state` and `/metrics`; the
 * `speculate` field is validated; a draft model drafting for itself keeps every draft; a
 * draft model with another vocabulary is refused before anything is served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionView } from '../../src/shared/dashboard-state.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { serveHead } from '../../src/node/serve/serve-head.ts';
import { AIDREAMS_DIR, STORIES_DIR, STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';
import { clientFor, eventually, postRaw, serveStories, storiesText } from './api-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('speculation-api');
  process.env.MESHNET_HOME = root.dir;
});
afterAll(() => root.remove());

/** The finished session the dashboard state lists under `id`. */
async function finishedSession(serving: ServingHead, id: string): Promise<SessionView> {
  let found: SessionView | undefined;
  await eventually(() => (found = serving.store.state.finished.find((s) => s.id === id)) !== undefined);
  return found!;
}

describe.each(['relay', 'direct'] as const)('over %s links', (link) => {
  let serving: ServingHead;
  const peers: RunningPeer[] = [];
  beforeAll(async () => {
    serving = await serveStories({ headLayers: 'none', link });
    for (const id of ['s-1', 's-2', 's-3']) {
      peers.push(await runPeer({ headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, device: 'cpu', memoryBudgetBytes: 2 ** 30, peerId: id, threads: 1, ...(link === 'direct' && { listenPort: 0 }) }));
    }
    await serving.head.waitForPeers(3, 30_000);
  });
  afterAll(async () => {
    await serving.close();
    for (const peer of peers) await peer.close();
  });

  it('greedy with speculation gives the golden ids, fewer round trips than tokens', async () => {
    const client = clientFor(serving);
    const answer = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
    expect(answer.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
    const session = await finishedSession(serving, answer.id);
    expect(session.speculation).toMatchObject({ mode: 'ngram' });
    expect(session.speculation!.accepted).toBeGreaterThan(0);
    expect(session.speculation!.steps).toBeLessThan(32);
    expect(session.speculation!.tokensPerRoundTrip).toBeCloseTo(32 / session.speculation!.steps, 10);
    const off = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0, speculate: 'off' } as never);
    expect(off.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
    expect((await finishedSession(serving, off.id)).speculation).toMatchObject({ mode: 'off', drafted: 0, steps: 32, tokensPerRoundTrip: 1 });
  });

  it('/metrics counts drafts kept and rejected, route steps, and per session acceptance and tokens per round trip', async () => {
    const text = await (await specFetch(`${serving.head.url}metrics`)).text();
    const value = (series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('meshnet_draft_tokens_total{result="accepted"}')).toBeGreaterThan(0);
    expect(value('meshnet_draft_tokens_total{result="rejected"}')).toBeGreaterThanOrEqual(0);
    expect(value('meshnet_route_steps_total')).toBeGreaterThan(0);
    expect(value('meshnet_session_acceptance_rate_count')).toBeGreaterThan(0);
    expect(value('meshnet_session_tokens_per_round_trip_count')).toBeGreaterThan(0);
  });

  it('a peer lost during a speculative step: the stream goes on with the golden ids', async () => {
    const client = clientFor(serving);
    const stream = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0, stream: true });
    let text = '';
    let chunks = 0;
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      text += chunk.choices[0]?.text ?? '';
      // By the twelfth chunk the repetition is drafted: the step in flight is speculative.
      if (++chunks === 12) await peers.pop()!.close();
    }
    expect(text).toBe(storiesText(STORIES_GOLDEN));
    const session = await finishedSession(serving, id);
    expect(session.repairs.some((r) => r.kind === 'replaced')).toBe(true);
    expect(session.speculation!.accepted).toBeGreaterThan(0);
  });

  it("refuses an unknown speculate value, and 'draft' without a draft model, naming the field", async () => {
    const url = `${serving.head.url}v1/completions`;
    const bad = await postRaw(url, JSON.stringify({ model: serving.modelId, prompt: [1], speculate: 'fast' }));
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: { param: 'speculate', type: 'invalid_request_error' } });
    const draft = await postRaw(url, JSON.stringify({ model: serving.modelId, prompt: [1], speculate: 'draft' }));
    expect(draft.status).toBe(400);
    expect(draft.json).toMatchObject({ error: { param: 'speculate', message: expect.stringContaining('--draft-model') } });
  });
});

describe('a draft model', () => {
  it('drafting for itself keeps every draft and gives the golden ids', async () => {
    const serving = await serveStories({ speculation: { draftModel: STORIES_DIR } });
    try {
      const client = clientFor(serving);
      const answer = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
      expect(answer.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
      const { speculation } = await finishedSession(serving, answer.id);
      expect(speculation).toMatchObject({ mode: 'draft', acceptanceRate: 1 });
      expect(speculation!.tokensPerRoundTrip).toBeGreaterThan(3);
      // A request may still ask for prompt lookup, or for none.
      const ngram = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0, speculate: 'ngram' } as never);
      expect(ngram.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
    } finally {
      await serving.close();
    }
  });

  it('with another vocabulary is refused before the head serves, naming the first token that differs', async () => {
    const refused = serveHead({ model: AIDREAMS_DIR, port: 0, host: '127.0.0.1', localPeers: 0, link: 'relay', headLayers: 'auto', maxSessions: 2, device: 'cpu', dtype: 'fp32', threads: 1, speculation: { draftModel: STORIES_DIR } });
    await expect(refused).rejects.toThrow(/another vocabulary: token \d+ is .* a draft model must use the model's tokenizer/);
  });
});
