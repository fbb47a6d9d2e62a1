/** `meshnet serve`: the head worker — OpenAI API, peers, dashboard. Runs until interrupted. */
import { parseArgs } from 'node:util';
import { NODE_DEVICES } from '../ort-node-runtime.ts';
import { serveHead } from '../serve/serve-head.ts';
import { weightSpecName } from '../../core/model/quant/weight-format.ts';
import { parseChoice, parseInteger, UsageError } from './args.ts';
import { readWeightFlags, WEIGHT_OPTIONS, WEIGHT_USAGE } from './weight-flags.ts';

export const SERVE_USAGE = `meshnet serve [--model DIR|HUB_ID|demo] [options]

  --model M            a checkpoint folder, a Hugging Face id (org/name) or demo (default demo)
  --port N             HTTP port (default 8080; 0 = any free port)
  --host H             address to listen on (default 127.0.0.1)
  --local-peers N      spawn N Node peer processes on loopback (default 0)
  --link relay|direct  how the head reaches peers (default relay)
  --head-layers L      auto|none|START:END: layers the head holds itself (default auto)
  --api-key K          require this key for /v1, /api and the dashboard
  --join-token T       peers must present this token (default: generated and printed)
  --max-sessions N     concurrent sessions before 429 (default 8)
  --min-peers N        requests wait for N peers (Node or browser) to join…
  --peer-wait S        …for up to S seconds (default 60), then get a 503
  --chat-template FILE a Jinja chat template overriding the model's
  --device D           ${Object.keys(NODE_DEVICES).join('|')} for the head's own work (default auto)
  --dtype fp32|fp16    activation dtype (default fp32)
${WEIGHT_USAGE}
  --threads N          onnxruntime threads per session`;

export async function serveCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'local-peers': { type: 'string' },
      link: { type: 'string' },
      'head-layers': { type: 'string' },
      'api-key': { type: 'string' },
      'join-token': { type: 'string' },
      'max-sessions': { type: 'string' },
      'min-peers': { type: 'string' },
      'peer-wait': { type: 'string' },
      'chat-template': { type: 'string' },
      device: { type: 'string' },
      dtype: { type: 'string' },
      threads: { type: 'string' },
      ...WEIGHT_OPTIONS,
    },
    strict: true,
  });
  const headLayers = values['head-layers'] ?? 'auto';
  if (!/^(auto|none|\d+:\d+)$/.test(headLayers)) throw new UsageError(`--head-layers: '${headLayers}' is not auto, none or START:END`);
  const log = (line: string) => process.stderr.write(`meshnet: ${line}\n`);
  const serving = await serveHead({
    model: values.model ?? 'demo',
    port: parseInteger('port', values.port, 8080),
    host: values.host ?? '127.0.0.1',
    localPeers: parseInteger('local-peers', values['local-peers'], 0),
    link: parseChoice('link', values.link, ['relay', 'direct'] as const, 'relay'),
    headLayers,
    apiKey: values['api-key'],
    joinToken: values['join-token'],
    maxSessions: parseInteger('max-sessions', values['max-sessions'], 8, 1),
    minPeers: parseInteger('min-peers', values['min-peers'], 0),
    peerWaitSeconds: parseInteger('peer-wait', values['peer-wait'], 60, 1),
    chatTemplateFile: values['chat-template'],
    device: parseChoice('device', values.device, Object.keys(NODE_DEVICES), 'auto'),
    dtype: parseChoice('dtype', values.dtype, ['fp32', 'fp16'] as const, 'fp32'),
    weights: readWeightFlags(values),
    threads: values.threads === undefined ? undefined : parseInteger('threads', values.threads, 1, 1),
    log,
  });
  const base = serving.head.url.replace(/\/$/, '');
  const auth = values['api-key'] ? ` -H "Authorization: Bearer ${values['api-key']}"` : '';
  process.stdout.write(
    [
      `meshnet is serving ${serving.modelId} (weights ${weightSpecName(serving.head.weights)})`,
      `  API        ${base}/v1`,
      `  dashboard  ${base}/dashboard${values['api-key'] ? `?key=${values['api-key']}` : ''}`,
      `  peers      meshnet peer --head ${serving.head.peerUrl}${serving.head.joinToken ? ` --join-token ${serving.head.joinToken}` : ''}`,
      `  join page  ${base}/peer`,
      '',
      'Try it:',
      `  curl ${base}/v1/chat/completions -H "Content-Type: application/json"${auth} \\`,
      `    -d '{"model": "${serving.modelId}", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'`,
      '',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  log('shutting down');
  await serving.close();
}
