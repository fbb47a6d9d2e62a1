/**
 * The browser peer's artifact loader (src/browser/fetch-loader.ts) against a real head's
 * artifact routes: it refuses an artifact that is not the one assigned — another range, or
 * another dtype — as the Node peer's loader does. (A matching artifact loads in every browser
 * test: test/e2e tabs fetch theirs through this loader.)
 */
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { H3 } from 'h3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { fetchShardLoader } from '../../src/browser/fetch-loader.ts';
import { mountArtifactRoutes } from '../../src/node/head/artifact-routes.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { startServer } from '../../src/node/net/start-server.ts';
import { STORIES_DIR, tempDir } from '../engine/harness.ts';
import { storiesAssign } from '../suites/peer-link.suite.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('fetch-loader');
  process.env.MESHNET_HOME = root.dir;
});
afterAll(() => root.remove());

it('refuses an artifact whose dtype or range differs from the assignment', async () => {
  const model = await openLocalModel(STORIES_DIR);
  const app = new H3();
  mountArtifactRoutes(app, model, { dtype: 'fp32', weights: weightSpec('fp32') }, 'token');
  const server = await startServer(app, { port: 0, host: '127.0.0.1' });
  try {
    const loader = fetchShardLoader({ origin: new URL(server.url).origin, joinToken: 'token', device: 'wasm' });
    const assign = storiesAssign(model, { start: 0, end: 2 });
    // The fp32 artifact's URL, but an fp16 assignment: the manifest says fp32.
    await expect(loader.load({ ...assign, dtype: 'fp16' })).rejects.toThrow(/artifact of another part .*fp32.* in fp16/);
    await expect(loader.load({ ...assign, range: { start: 0, end: 3 } })).rejects.toThrow(/artifact of another part/);
  } finally {
    await server.close();
  }
});
