// Worker entry when running from the TypeScript sources (a checkout): onnxruntime's
// session.run() blocks its thread, so a Node peer runs its ShardPeer in a worker and keeps
// the main thread free for sockets; tsx loads the TypeScript. The built package starts
// shard-worker-main.js directly (worker-shard.ts), and the build does not ship this file.
import { register } from 'tsx/esm/api';

register();
await import('./shard-worker-main.ts');
