// Worker entry when running from the TypeScript sources (a checkout): tsx loads the
// TypeScript of the sampler worker. The built package starts sampler-worker-main.js directly
// (sampler-worker.ts), and the build does not ship this file.
import { register } from 'tsx/esm/api';

register();
await import('./sampler-worker-main.ts');
