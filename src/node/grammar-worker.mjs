// Worker entry when running from the TypeScript sources (a checkout): tsx loads the
// TypeScript of the grammar worker. The built package starts grammar-worker-main.js directly
// (grammar-worker.ts), and the build does not ship this file.
import { register } from 'tsx/esm/api';

register();
await import('./grammar-worker-main.ts');
