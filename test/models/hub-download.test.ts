import { mkdtemp, readFile, readdir, rm, stat, writeFile, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLocalModel } from '../../src/node/local-model.ts';
import { downloadFromHub, HubDownloadError } from '../../src/node/models/hub-download.ts';
import type { DownloadProgress } from '../../src/node/models/progress.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { TINY_PRESETS, writeTinyCheckpoint } from '../fixtures/checkpoints.ts';
import { startFakeHub, type FakeHub } from './fake-hub.ts';

let root: string;
let hub: FakeHub;
let privateHub: FakeHub;
const TOKEN = 'hf_test_token_123';
const repos: Record<string, string> = {};

/** A fresh MESHNET_HOME for one test. */
const freshHome = () => mkdtemp(path.join(root, 'home-'));
/** A fetch that fails the test if anything calls it. */
const noFetch = (() => {
  throw new Error('no request expected');
}) as unknown as typeof fetch;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'meshnet-hub-'));
  const fixture = async (name: string, sharded: boolean) => {
    const dir = path.join(root, 'fixtures', name);
    await writeTinyCheckpoint(dir, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 7, sharded, vocabSize: 4096 });
    return dir;
  };
  repos['tiny/single'] = await fixture('single', false);
  repos['tiny/sharded'] = await fixture('sharded', true);
  repos['tiny/no-tokenizer'] = await fixture('no-tokenizer', false);
  await unlink(path.join(repos['tiny/no-tokenizer'], 'tokenizer.json'));
  repos['tiny/evil-index'] = await fixture('evil-index', true);
  const indexFile = path.join(repos['tiny/evil-index'], 'model.safetensors.index.json');
  const index = JSON.parse(await readFile(indexFile, 'utf8'));
  index.weight_map['model.norm.weight'] = '../../escape.safetensors';
  await writeFile(indexFile, JSON.stringify(index));
  repos['tiny/sub-shard'] = await fixture('sub-shard', true);
  const subIndexFile = path.join(repos['tiny/sub-shard'], 'model.safetensors.index.json');
  const subIndex = JSON.parse(await readFile(subIndexFile, 'utf8'));
  subIndex.weight_map['model.norm.weight'] = '.complete';
  await writeFile(subIndexFile, JSON.stringify(subIndex));

  hub = await startFakeHub({ repos });
  privateHub = await startFakeHub({ repos, token: TOKEN });
});

afterAll(async () => {
  await hub?.close();
  await privateHub?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

async function expectSameFiles(dir: string, fixture: string): Promise<void> {
  for (const name of await readdir(fixture)) {
    expect(Buffer.compare(await readFile(path.join(dir, name)), await readFile(path.join(fixture, name))), name).toBe(0);
  }
}

describe('downloadFromHub', () => {
  it('downloads a single-file repo into <home>/hub/<org>--<name>/<revision> that openLocalModel opens', async () => {
    const home = await freshHome();
    const progress: DownloadProgress[] = [];
    const dir = await downloadFromHub('tiny/single', { endpoint: hub.url, home, token: '', onProgress: (p) => progress.push(p) });
    expect(dir).toBe(path.join(home, 'hub', 'tiny--single', 'main'));
    await expectSameFiles(dir, repos['tiny/single']!);
    const model = await openLocalModel(dir);
    expect(model.checkpoint.weightsFile).toBe('model.safetensors');
    await loadTokenizer(dir);
    expect((await readdir(dir)).filter((f) => f.endsWith('.partial'))).toEqual([]);
    const done = progress.filter((p) => p.done).map((p) => p.file);
    expect(done).toEqual(['config.json', 'tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'model.safetensors']);
    const last = progress.at(-1)!;
    expect(last.received).toBe(last.total);
    // chat_template.jinja is optional: its 404 is fine.
    expect(hub.requests.some((r) => r.file === 'chat_template.jinja')).toBe(true);
  });

  it('falls back to the index and every shard it names when model.safetensors is 404', async () => {
    const home = await freshHome();
    const before = hub.requests.length;
    const dir = await downloadFromHub('tiny/sharded', { endpoint: hub.url, home, token: '', revision: 'v1.0' });
    expect(dir).toBe(path.join(home, 'hub', 'tiny--sharded', 'v1.0'));
    await expectSameFiles(dir, repos['tiny/sharded']!);
    const model = await openLocalModel(dir);
    expect(model.checkpoint.files.map((f) => f.name).sort()).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
    const files = hub.requests.slice(before).map((r) => r.file);
    expect(files).toContain('model.safetensors');
    expect(files).toContain('model.safetensors.index.json');
    expect(hub.requests.slice(before).every((r) => r.revision === 'v1.0' && r.repo === 'tiny/sharded')).toBe(true);
  });

  it('resumes a cut download with a Range request and ends with the exact bytes', async () => {
    const home = await freshHome();
    const cutAt = 100_000;
    hub.cutNext('model.safetensors', cutAt);
    const failed = await downloadFromHub('tiny/single', { endpoint: hub.url, home, token: '' }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(HubDownloadError);
    expect((failed as HubDownloadError).file).toBe('model.safetensors');
    expect((failed as Error).message).toMatch(/model\.safetensors: download interrupted after \d+ bytes/);
    const dir = path.join(home, 'hub', 'tiny--single', 'main');
    const kept = (await stat(path.join(dir, 'model.safetensors.partial'))).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(cutAt);

    const before = hub.requests.length;
    await downloadFromHub('tiny/single', { endpoint: hub.url, home, token: '' });
    const retried = hub.requests.slice(before);
    // Finished files are not fetched again; only the weights resume, from where they stopped.
    expect(retried.map((r) => r.file)).toEqual(['chat_template.jinja', 'model.safetensors']);
    expect(retried.at(-1)!.range).toBe(`bytes=${kept}-`);
    await expectSameFiles(dir, repos['tiny/single']!);
    await openLocalModel(dir);
  });

  it('starts a file over when the server answers a Range request with 200', async () => {
    const home = await freshHome();
    hub.cutNext('model.safetensors', 50_000);
    await expect(downloadFromHub('tiny/single', { endpoint: hub.url, home, token: '' })).rejects.toThrow(/download interrupted/);
    hub.ignoreRange = true;
    try {
      const before = hub.requests.length;
      const dir = await downloadFromHub('tiny/single', { endpoint: hub.url, home, token: '' });
      expect(hub.requests.at(-1)!.range).toMatch(/^bytes=\d+-$/);
      expect(hub.requests.length).toBeGreaterThan(before);
      await expectSameFiles(dir, repos['tiny/single']!);
    } finally {
      hub.ignoreRange = false;
    }
  });

  it('reuses a complete folder offline: a second call makes zero requests', async () => {
    const home = await freshHome();
    const first = await downloadFromHub('tiny/sharded', { endpoint: hub.url, home, token: '' });
    const before = hub.requests.length;
    const second = await downloadFromHub('tiny/sharded', { endpoint: hub.url, home, token: '' });
    expect(second).toBe(first);
    expect(hub.requests.length).toBe(before);
    // Not even a fetch call, whatever the endpoint.
    expect(await downloadFromHub('tiny/sharded', { endpoint: 'http://127.0.0.1:9', home, fetch: noFetch })).toBe(first);
  });

  it('sends the bearer token and names the file and status when it is missing', async () => {
    const home = await freshHome();
    const denied = await downloadFromHub('tiny/single', { endpoint: privateHub.url, home, token: '' }).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(HubDownloadError);
    expect(denied).toMatchObject({ file: 'config.json', status: 401 });
    expect((denied as Error).message).toMatch(/^config\.json: HTTP 401 .*HF_TOKEN/);

    const before = privateHub.requests.length;
    const dir = await downloadFromHub('tiny/single', { endpoint: privateHub.url, home, token: TOKEN });
    expect(privateHub.requests.slice(before).every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    await openLocalModel(dir);
  });

  it('takes the token from HF_TOKEN and the endpoint from HF_ENDPOINT by default', async () => {
    const home = await freshHome();
    const saved = { token: process.env.HF_TOKEN, endpoint: process.env.HF_ENDPOINT };
    process.env.HF_TOKEN = TOKEN;
    process.env.HF_ENDPOINT = privateHub.url;
    try {
      await openLocalModel(await downloadFromHub('tiny/single', { home }));
    } finally {
      for (const [key, value] of [['HF_TOKEN', saved.token], ['HF_ENDPOINT', saved.endpoint]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  it('fails on a 404 for a required file with an error naming it', async () => {
    const home = await freshHome();
    const error = await downloadFromHub('tiny/no-tokenizer', { endpoint: hub.url, home, token: '' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubDownloadError);
    expect(error).toMatchObject({ file: 'tokenizer.json', status: 404 });
    expect((error as Error).message).toMatch(/^tokenizer\.json: HTTP 404/);
    const dir = path.join(home, 'hub', 'tiny--no-tokenizer', 'main');
    await expect(stat(path.join(dir, '.complete'))).rejects.toThrow();
  });

  it('fails when the repo has neither model.safetensors nor an index', async () => {
    const error = await downloadFromHub('tiny/absent', { endpoint: hub.url, home: await freshHome(), token: '' }).catch((e: unknown) => e);
    // The fake answers 404 for an unknown repo, so the first required file names it.
    expect(error).toMatchObject({ file: 'config.json', status: 404 });
  });

  it.each([
    ['tiny/evil-index', '../../escape.safetensors'],
    ['tiny/sub-shard', '.complete'],
  ])('refuses shard names that are not plain file names (%s names %s)', async (repo, shard) => {
    const home = await freshHome();
    const before = hub.requests.length;
    const error = await downloadFromHub(repo, { endpoint: hub.url, home, token: '' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubDownloadError);
    expect(error).toMatchObject({ file: 'model.safetensors.index.json' });
    expect((error as Error).message).toContain(shard);
    expect(hub.requests.slice(before).some((r) => r.file === shard)).toBe(false);
    expect(await readdir(path.join(home, 'hub'))).toEqual([repo.replace('/', '--')]);
  });

  it.each(['gpt2', 'a/b/c', '../x', 'org/..', 'org/../../etc', '/org/name', 'org/na me', 'org--x/name', 'org/name.', '-org/name', 'org/', ''])(
    'refuses the repo id %j without any request',
    async (repo) => {
      await expect(downloadFromHub(repo, { endpoint: hub.url, home: await freshHome(), fetch: noFetch })).rejects.toThrow(HubDownloadError);
      await expect(downloadFromHub(repo, { endpoint: hub.url, home: await freshHome(), fetch: noFetch })).rejects.toThrow(/not a Hugging Face repo id/);
    },
  );

  it('refuses a revision that could leave the cache folder', async () => {
    for (const revision of ['..', 'main/../..', 'a b']) {
      await expect(downloadFromHub('tiny/single', { revision, home: await freshHome(), fetch: noFetch })).rejects.toThrow(/not a valid revision/);
    }
  });

  it('reports an unreachable endpoint with the file name', async () => {
    const error = await downloadFromHub('tiny/single', { endpoint: 'http://127.0.0.1:9', home: await freshHome(), token: '' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ file: 'config.json' });
    expect((error as Error).message).toMatch(/^config\.json: cannot reach http:\/\/127\.0\.0\.1:9\//);
  });
});
