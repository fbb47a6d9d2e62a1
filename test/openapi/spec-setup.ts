/**
 * vitest setup file (vitest.config.ts `setupFiles`): a test fails when any body or stream
 * chunk it received through `specFetch` broke the OpenAI spec (see spec-fetch.ts).
 */
import { afterEach } from 'vitest';
import { takeSpecViolations } from './spec-fetch.ts';

afterEach(() => {
  const violations = takeSpecViolations();
  if (violations.length > 0) throw new Error(`OpenAI spec violations:\n- ${violations.join('\n- ')}`);
});
