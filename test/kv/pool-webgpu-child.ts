/**
 * Child process for the WebGPU leg of test/kv/kv-pool.test.ts (software Vulkan needs its
 * environment set before onnxruntime-node loads): teacher-forces the fixture on WebGPU (KV
 * kept in GPU buffers) against the unpooled CPU path and prints the result as JSON.
 * argv: checkpoint folder, token count. Steps carry at most 16 tokens: onnxruntime 1.30's
 * WebGPU GroupQueryAttention gives wrong results for a prefill of 32 or more positions on
 * this fixture (and on main's graphs alike; see the note of issue 17).
 */
import { randomUUID } from 'node:crypto';
import { loadLocalPipeline, openLocalModel } from '../../src/node/local-model.ts';
import { referenceTokens, teacherForce } from './teacher-forcing.ts';

const [dir, count] = process.argv.slice(2);
const model = await openLocalModel(dir!);
// One layer is enough to hold the KV under test (SwiftShader is slow per run).
const ranges = [{ start: 0, end: 1 }];
const gpu = await loadLocalPipeline(model, { ranges, device: 'webgpu', dtype: 'fp32', threads: 1 });
const cpu = await loadLocalPipeline(model, { ranges, device: 'cpu', dtype: 'fp32', threads: 1, kvMode: 'replace' });
const sessionId = randomUUID();
const tokens = referenceTokens(Number(count), model.checkpoint.config.vocabSize);
const result = await teacherForce(gpu, cpu, tokens, { chunk: 16, singleFrom: Number(count) - 24, rollbackAt: Number(count) - 12, rollbackBy: 3, sessionId });
const kvBefore = gpu.stages[0].kv.bytes;
gpu.stages[0].kv.release(sessionId);
process.stdout.write(JSON.stringify({ ...result, device: gpu.devices[0], kvBefore, kvAfter: gpu.stages[0].kv.bytes }) + '\n');
await gpu.dispose();
await cpu.dispose();
