// Worker entry: onnxruntime's session.run() blocks its thread, so a Node peer runs its
// ShardPeer here and keeps the main thread free for sockets. tsx loads the TypeScript.
import { register } from 'tsx/esm/api';

register();
await import('./shard-worker-main.ts');
