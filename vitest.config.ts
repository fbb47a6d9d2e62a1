import { defineConfig } from 'vitest/config';

/**
 * Two groups, run one after the other. Most files run two at a time (both cores of the CI
 * machine: many of them wait on processes, sockets and model loads). The files that assert
 * on time or memory — hang and replacement deadlines, event-loop delay, the soak and the
 * chaos soak, RSS growth, head restarts — run alone afterwards, so no other test file shares
 * the machine with them. (The packed-package and clone-alone checks assert on neither: they run
 * in the first group.)
 */
const SERIAL = [
  'test/hostile/**/*.test.ts',
  'test/soak/**/*.test.ts',
  'test/chaos/**/*.test.ts',
  'test/memory/**/*.test.ts',
  'test/api/grammar-off-loop.test.ts',
  'test/api/disconnect.test.ts',
  'test/api/first-run.test.ts',
  'test/api/min-peers.test.ts',
  'test/api/quarantine.test.ts',
  'test/api/serve-cli.test.ts',
  'test/cli/lan-discovery.test.ts',
  'test/state/gone-peers.test.ts',
];

export default defineConfig({
  test: {
    // Every body received through test/openapi/spec-fetch.ts is checked against the OpenAI spec.
    setupFiles: ['test/openapi/spec-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'parallel', include: ['test/**/*.test.ts'], exclude: SERIAL, maxWorkers: 2, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'serial', include: SERIAL, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
