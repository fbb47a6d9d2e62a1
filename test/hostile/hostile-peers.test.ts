/**
 * The hostile-peer suite, over real sockets: one head (stories260k, its own layers in its
 * worker, `--hop-timeout 1.5`, `--ready-timeout 2`) and, for each way a peer can lie or fail,
 * a hostile peer that joins with the join token, gets routed (its first answers are honest),
 * then misbehaves (hostile-peer.ts). For every case three concurrent greedy streams through
 * the official client give the golden ids, no request fails, and the peer ends quarantined —
 * or, for hellos, refused — while the head keeps serving. A peer that echoes its input
 * (well-formed, finite, wrong) spoils the tokens unless the head runs with `--verify`: then
 * it is caught at its first wrong answer on each session, quarantined, and the streams are
 * golden.
 */
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { clientFor, eventually, serveStories } from '../api/api-harness.ts';
import { STORIES_DIR, STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { CONTROL_BEHAVIOURS, FRAME_BEHAVIOURS, HostilePeer, helloRefusal, type Behaviour } from './hostile-peer.ts';

const JOIN_TOKEN = 'hostile-suite-token';
let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;
let model: LocalModel;

beforeAll(async () => {
  home = await tempDir('hostile-peers');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  model = await openLocalModel(STORIES_DIR);
  serving = await serveStories({ joinToken: JOIN_TOKEN, hopTimeoutMs: 1500, readyTimeoutMs: 2000, maxSessions: 16 });
  client = clientFor(serving);
});
afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

/** Greedy ids of one streamed completion of [1]. */
async function greedyStream(through = client): Promise<number[]> {
  const stream = await through.completions.create({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  return text.trim().split(/\s+/).map((t) => Number(t.slice(1)));
}

const meshPeer = (id: string) => serving.head.mesh.peers.find((p) => p.id === id);

async function hostileCase(behaviour: Behaviour, streams = 3): Promise<{ peer: HostilePeer; quarantine: string | undefined }> {
  const peerId = `hostile-${behaviour}`;
  const peer = await HostilePeer.join({ headUrl: serving.head.peerUrl, joinToken: JOIN_TOKEN, peerId, behaviour, model });
  const control = (CONTROL_BEHAVIOURS as readonly string[]).includes(behaviour);
  try {
    expect(await eventually(() => meshPeer(peerId) !== undefined, 5000)).toBe(true);
    expect(serving.head.mesh.plan().hops.map((h) => h.peerId), 'the hostile peer is planned').toContain(peerId);
    // It serves sessions once its range answered the warm-up (its first two frames, honest);
    // one that never gets ready is quarantined without a request waiting on it.
    if (!control) expect(await eventually(() => serving.head.mesh.routeReady(), 5000), 'warm').toBe(true);
    const results = await Promise.all(Array.from({ length: streams }, greedyStream));
    for (const ids of results) expect(ids).toEqual(STORIES_GOLDEN);
    if (control) await eventually(() => meshPeer(peerId)?.quarantine !== undefined, 5000);
    return { peer, quarantine: meshPeer(peerId)?.quarantine?.reason };
  } finally {
    peer.close();
    await eventually(() => meshPeer(peerId) === undefined, 5000);
  }
}

describe('a hostile peer is quarantined, and concurrent greedy streams stay golden', () => {
  it('an honest peer (the control): routed, golden, not quarantined', async () => {
    const { peer, quarantine } = await hostileCase('honest');
    expect(peer.frames).toBeGreaterThan(10);
    expect(quarantine).toBeUndefined();
  });

  for (const behaviour of FRAME_BEHAVIOURS) {
    it(`frames: ${behaviour}`, async () => {
      const { peer, quarantine } = await hostileCase(behaviour);
      expect(peer.misbehaved, 'it did misbehave').toBeGreaterThan(0);
      expect(quarantine, 'quarantined').toMatch(/^(faulty|hung) on layers/);
    });
  }

  for (const behaviour of CONTROL_BEHAVIOURS) {
    it(`control: ${behaviour}`, async () => {
      const { peer, quarantine } = await hostileCase(behaviour);
      expect(peer.assigns).toBeGreaterThan(0);
      expect(quarantine, 'quarantined').toMatch(/^not ready for layers/);
    });
  }

  it('answers twice: the second answer is dropped, the tokens golden (harmless, so not quarantined)', async () => {
    const { peer, quarantine } = await hostileCase('answer-twice');
    expect(peer.frames).toBeGreaterThan(3);
    expect(quarantine).toBeUndefined();
  });
});

describe('hellos the head refuses (and it keeps serving)', () => {
  it('a duplicate peer id, another protocol major, a wrong token, no token', async () => {
    const holder = await HostilePeer.join({ headUrl: serving.head.peerUrl, joinToken: JOIN_TOKEN, peerId: 'holder', behaviour: 'honest', model });
    try {
      const duplicate = await helloRefusal(serving.head.peerUrl, { peerId: 'holder', joinToken: JOIN_TOKEN });
      expect(duplicate.answer).toMatchObject({ kind: 'error', code: 'peer_id_taken' });
      expect(duplicate.closed).toMatch(/socket closed \(400/);
      expect(meshPeer('holder'), 'the holder keeps serving').toBeDefined();
      const version = await helloRefusal(serving.head.peerUrl, { protocol: { major: PROTOCOL_VERSION.major + 1, minor: 0 }, joinToken: JOIN_TOKEN });
      expect(version.answer).toMatchObject({ kind: 'error', code: 'version_mismatch' });
      expect((await helloRefusal(serving.head.peerUrl, { joinToken: 'wrong' })).answer).toMatchObject({ code: 'unauthorized' });
      expect((await helloRefusal(serving.head.peerUrl, {})).answer).toMatchObject({ code: 'unauthorized' });
      expect(await greedyStream()).toEqual(STORIES_GOLDEN);
    } finally {
      holder.close();
    }
  });
});

describe('--verify over real sockets: a peer that echoes its input', () => {
  let verifying: ServingHead;
  afterAll(async () => {
    await verifying?.close();
  });

  it('without --verify it spoils the tokens unnoticed', async () => {
    const peer = await HostilePeer.join({ headUrl: serving.head.peerUrl, joinToken: JOIN_TOKEN, peerId: 'echo-unchecked', behaviour: 'echo', model });
    try {
      expect(await eventually(() => meshPeer('echo-unchecked') !== undefined, 5000)).toBe(true);
      expect(await eventually(() => serving.head.mesh.routeReady(), 5000), 'warm').toBe(true);
      expect(await greedyStream()).not.toEqual(STORIES_GOLDEN);
      expect(meshPeer('echo-unchecked')?.quarantine).toBeUndefined();
    } finally {
      peer.close();
      await eventually(() => meshPeer('echo-unchecked') === undefined, 5000);
    }
  });

  it('with --verify 1 it is caught at its first wrong answer per session and quarantined; the streams are golden', async () => {
    verifying = await serveStories({ joinToken: JOIN_TOKEN, hopTimeoutMs: 1500, verifyFraction: 1 });
    const verifyingClient = clientFor(verifying);
    const peer = await HostilePeer.join({ headUrl: verifying.head.peerUrl, joinToken: JOIN_TOKEN, peerId: 'echo-checked', behaviour: 'echo', model });
    try {
      expect(await eventually(() => verifying.head.mesh.peers.some((p) => p.id === 'echo-checked'), 5000)).toBe(true);
      expect(await eventually(() => verifying.head.mesh.routeReady(), 5000), 'warm').toBe(true);
      expect(verifying.head.mesh.plan().hops.map((h) => h.peerId)).toContain('echo-checked');
      const results = await Promise.all(Array.from({ length: 3 }, () => greedyStream(verifyingClient)));
      for (const ids of results) expect(ids).toEqual(STORIES_GOLDEN);
      expect(peer.misbehaved, 'wrong answers before it was caught: at most one per session').toBeGreaterThanOrEqual(1);
      expect(peer.misbehaved).toBeLessThanOrEqual(3);
      expect(verifying.head.mesh.peers.find((p) => p.id === 'echo-checked')?.quarantine?.reason).toMatch(/^mismatch on layers .*differ from head's replay/);
      const metrics = verifying.metrics.render();
      expect(metrics).toMatch(/meshnet_verifications_total\{result="mismatch"\} [1-3]\n/);
      expect(metrics).toMatch(/meshnet_repair_causes_total\{cause="mismatch"\} [1-3]\n/);
      expect(metrics).not.toMatch(/meshnet_verifications_total\{result="agreed"\} 0\n/);
      expect(await greedyStream(verifyingClient)).toEqual(STORIES_GOLDEN);
    } finally {
      peer.close();
    }
  });
});
