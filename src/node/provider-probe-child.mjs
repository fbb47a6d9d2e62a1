// Child process of provider-probe.ts: create one tiny session on the provider named in
// argv[2] and print {"ok":true} or {"ok":false,"error":…} as one line. Native code may write
// to stderr here (Dawn's Vulkan warnings); the parent keeps that out of the user's terminal.
// Plain JavaScript, so the probe costs one Node start and no TypeScript loader.
import * as ort from 'onnxruntime-node';

// A model with one Identity node, float [1] → float [1], as src/core/model/onnx writes it
// (test/runtime/provider-probe.test.ts rebuilds it and compares).
const IDENTITY_MODEL_BASE64 =
  'CAoSB21lc2huZXQ6RwocCgF4EgF5GgpJZGVudGl0eV8wIghJZGVudGl0eRIFcHJvYmVaDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAVQhEKDWNvbS5taWNyb3NvZnQQAQ==';

const provider = process.argv[2];
ort.env.logLevel = 'fatal';
try {
  const session = await ort.InferenceSession.create(Buffer.from(IDENTITY_MODEL_BASE64, 'base64'), { executionProviders: [provider], logSeverityLevel: 4 });
  await session.release();
  process.stdout.write('{"ok":true}\n');
} catch (error) {
  process.stdout.write(`${JSON.stringify({ ok: false, error: error instanceof Error ? error.message : String(error) })}\n`);
}
