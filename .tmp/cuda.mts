import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '/work/wt/issue-13/src/core/model/onnx/graph-builder.ts';
import { serializeModel, OnnxType } from '/work/wt/issue-13/src/core/model/onnx/onnx-model.ts';
const b = new GraphBuilder('probe');
const x = b.input('x', OnnxType.FLOAT, [1]);
b.op('Identity', [x], {}, { outputs: ['y'] });
b.output('y', OnnxType.FLOAT, [1]);
const bytes = serializeModel(b.build());
console.log(Buffer.from(bytes).toString('base64'));
ort.env.logLevel = process.argv[2] as any;
try {
  const s = await ort.InferenceSession.create(bytes, { executionProviders: ['cuda'], logSeverityLevel: Number(process.argv[3]) as any });
  console.log('OK cuda');
} catch (e) { console.log('FAIL', (e as Error).message.split('\n')[0]); }
