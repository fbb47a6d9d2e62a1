// Worker entry when running from the TypeScript sources (a checkout): tsx loads the
// TypeScript of the head worker. The built package starts head-worker-main.js directly
// (head-worker.ts), and the build does not ship this file.
import { register } from 'tsx/esm/api';

register();
await import('./head-worker-main.ts');
