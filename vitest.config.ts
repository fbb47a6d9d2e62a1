import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Every body received through test/openapi/spec-fetch.ts is checked against the OpenAI spec.
    setupFiles: ['test/openapi/spec-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
