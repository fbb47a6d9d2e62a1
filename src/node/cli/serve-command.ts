/** `meshnet serve`: the head worker — OpenAI API, peers, dashboard. Runs until interrupted. */
import { parseArgs } from 'node:util';
import { NODE_DEVICES } from '../ort-node-runtime.ts';
import { PlanError } from '../../core/mesh/plan-error.ts';
import { normalizeHost } from '../../core/mesh/dial-target.ts';
import { CorsOptionError, DEFAULT_CORS, parseCorsOption } from '../http/cors.ts';
import { announceHead } from '../discovery/lan-discovery.ts';
import { packageVersion } from '../package-files.ts';
import { serveHead } from '../serve/serve-head.ts';
import { weightSpecName } from '../../core/model/quant/weight-format.ts';
import { ROUTE_MODES } from '../../core/route/chain-route.ts';
import { DEFAULT_PREFIX_CACHE_MB, parseChoice, parseInteger, parseNumber, UsageError } from './args.ts';
import { asUsageError, parseSpeculation, SPECULATION_OPTIONS, SPECULATION_USAGE } from './speculation-args.ts';
import { readWeightFlags, WEIGHT_OPTIONS, WEIGHT_USAGE } from './weight-flags.ts';

export const SERVE_USAGE = `meshnet serve [--model DIR|HUB_ID|demo] [options]

  --model M            a checkpoint folder, a Hugging Face id (org/name) or demo (default demo)
  --port N             HTTP port (default 8080; 0 = any free port)
  --host H             address to listen on (default 127.0.0.1)
  --local-peers N      spawn N Node peer processes on loopback (default 0)
  --link relay|direct  how the head reaches peers (default relay)
  --allow-peer-hosts H[,H]  with --link direct, hosts a peer may announce in its listen
                       URL (default: the head dials the address the peer connected from)
  --peer-ping-timeout MS  a peer id already in use is refused while its holder answers a
                       ping within MS; a silent holder is replaced (default 3000)
  --head-layers L      auto|none|START:END: layers the head holds itself (default auto)
  --api-key K          require this key for /v1, /api and the dashboard
  --cors ORIGINS       origins whose pages may call the API: ORIGIN[,ORIGIN…] (scheme://host:*
                       for any port), * for any, none for the head's own only (default
                       ${DEFAULT_CORS})
  --join-token T       peers must present this token (default: generated and printed)
  --max-sessions N     concurrent sessions before 429 (default 8)
  --prefix-cache MB    memory each peer (and the head's own layers) keeps for prefix
                       entries: a finished request's KV, so a later request that starts
                       with the same tokens (the next chat turn) prefills only the rest
                       (default ${DEFAULT_PREFIX_CACHE_MB}; 0: off)
  --no-batch           send every session's decode steps alone (default: concurrent steps
                       to one peer travel as one batched frame and run as one batch)
  --min-peers N        requests wait for N peers (Node or browser) to join…
  --peer-wait S        …for up to S seconds (default 60), then get a 503
  --route-mode M       star|chain|auto (default auto): how activations travel. star: every
                       hop's frame goes head → peer → head; chain/auto: each peer forwards
                       its output straight to the next (a token pays N + 1 link delays, not
                       2·N; the head still gets a copy of every hop's output), wherever the
                       next peer can be dialled (it runs \`meshnet peer --listen\`); links into
                       a peer that cannot be (a browser tab, NAT) go through the head
  --hop-timeout S      the ceiling of a hop's deadline (default 5): a hop that does not answer a
                       frame within 4 × its recent p99 (at least 1 s, at most S; more for frames
                       of many positions) is replaced and its peer quarantined
  --verify F           for meshes with untrusted peers: check a share F (0–1; default 0, off)
                       of hop answers by replaying that hop's inputs on the head (or another
                       holder of its layers); a peer that disagrees is quarantined
  --request-timeout S  a client must send a request's headers, and then its whole body, within
                       S seconds each (default 30), else 408
  --ready-timeout S    a peer that does not get ready for its layers within S seconds (default 30)
  --warm-up-timeout S  a newly loaded range that does not answer its warm-up frame within S seconds
                       (default 60: a first run may compile kernels, on WebGPU shader pipelines)
                       is dropped from the plan and quarantined
  --chat-template FILE a Jinja chat template overriding the model's
  --device D           ${Object.keys(NODE_DEVICES).join('|')} for the head's own work (default auto)
  --dtype fp32|fp16    activation dtype (default fp32)
${WEIGHT_USAGE}
  --threads N          onnxruntime threads per session
  --no-announce        do not announce the head on the LAN (mDNS _meshnet._tcp, with the
                       model and protocol version, never the join token; a head on a
                       loopback address is never announced)
${SPECULATION_USAGE}`;

/** `H[,H]` → hosts as URL.hostname spells them; a malformed one is a usage error. */
function parseHostList(flag: string, value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return value.split(',').map((raw) => {
    const host = normalizeHost(raw.trim());
    if (host === undefined) throw new UsageError(`--${flag}: '${raw}' is not a host name or address (no port, no scheme)`);
    return host;
  });
}

export async function serveCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'local-peers': { type: 'string' },
      link: { type: 'string' },
      'allow-peer-hosts': { type: 'string' },
      'peer-ping-timeout': { type: 'string' },
      'head-layers': { type: 'string' },
      'api-key': { type: 'string' },
      cors: { type: 'string' },
      'join-token': { type: 'string' },
      'max-sessions': { type: 'string' },
      'prefix-cache': { type: 'string' },
      'no-batch': { type: 'boolean' },
      'no-announce': { type: 'boolean' },
      'min-peers': { type: 'string' },
      'peer-wait': { type: 'string' },
      'hop-timeout': { type: 'string' },
      'route-mode': { type: 'string' },
      'ready-timeout': { type: 'string' },
      'warm-up-timeout': { type: 'string' },
      'request-timeout': { type: 'string' },
      verify: { type: 'string' },
      'chat-template': { type: 'string' },
      device: { type: 'string' },
      dtype: { type: 'string' },
      threads: { type: 'string' },
      ...SPECULATION_OPTIONS,
      ...WEIGHT_OPTIONS,
    },
    strict: true,
  });
  const headLayers = values['head-layers'] ?? 'auto';
  if (!/^(auto|none|\d+:\d+)$/.test(headLayers)) throw new UsageError(`--head-layers: '${headLayers}' is not auto, none or START:END`);
  if (values['api-key'] === '') throw new UsageError('--api-key is empty: give a key, or leave the flag out to serve without one');
  if (values['join-token'] === '') throw new UsageError('--join-token is empty: give a token, or leave the flag out to have one generated');
  const allowPeerHosts = parseHostList('allow-peer-hosts', values['allow-peer-hosts']);
  if (values.cors !== undefined) {
    try {
      parseCorsOption(values.cors);
    } catch (error) {
      if (error instanceof CorsOptionError) throw new UsageError(error.message);
      throw error;
    }
  }
  const speculation = parseSpeculation(values);
  const log = (line: string) => process.stderr.write(`meshnet: ${line}\n`);
  const serving = await serveHead({
    model: values.model ?? 'demo',
    port: parseInteger('port', values.port, 8080),
    host: values.host ?? '127.0.0.1',
    localPeers: parseInteger('local-peers', values['local-peers'], 0),
    link: parseChoice('link', values.link, ['relay', 'direct'] as const, 'relay'),
    allowPeerHosts,
    peerPingTimeoutMs: parseInteger('peer-ping-timeout', values['peer-ping-timeout'], 3000, 1),
    headLayers,
    apiKey: values['api-key'],
    cors: values.cors,
    joinToken: values['join-token'],
    maxSessions: parseInteger('max-sessions', values['max-sessions'], 8, 1),
    prefixCacheMb: parseInteger('prefix-cache', values['prefix-cache'], DEFAULT_PREFIX_CACHE_MB, 0),
    batching: !values['no-batch'],
    minPeers: parseInteger('min-peers', values['min-peers'], 0),
    peerWaitSeconds: parseInteger('peer-wait', values['peer-wait'], 60, 1),
    hopTimeoutMs: parseNumber('hop-timeout', values['hop-timeout'], 5, (n) => n > 0) * 1000,
    routeMode: parseChoice('route-mode', values['route-mode'], ROUTE_MODES, 'auto'),
    verifyFraction: parseNumber('verify', values.verify, 0, (n) => n >= 0 && n <= 1),
    requestTimeoutMs: parseNumber('request-timeout', values['request-timeout'], 30, (n) => n > 0) * 1000,
    readyTimeoutMs: parseNumber('ready-timeout', values['ready-timeout'], 30, (n) => n > 0) * 1000,
    warmUpTimeoutMs: parseNumber('warm-up-timeout', values['warm-up-timeout'], 60, (n) => n > 0) * 1000,
    chatTemplateFile: values['chat-template'],
    device: parseChoice('device', values.device, Object.keys(NODE_DEVICES), 'auto'),
    dtype: parseChoice('dtype', values.dtype, ['fp32', 'fp16'] as const, 'fp32'),
    weights: readWeightFlags(values),
    threads: values.threads === undefined ? undefined : parseInteger('threads', values.threads, 1, 1),
    speculation,
    log,
  }).catch((error: unknown) => {
    // A START:END outside the model is a usage error too (the layer count is known only now).
    if (error instanceof PlanError && error.reason.startsWith('--head-layers')) throw new UsageError(error.reason);
    asUsageError(error);
  });
  const base = serving.head.url.replace(/\/$/, '');
  const listen = new URL(serving.head.url);
  const announcer = values['no-announce']
    ? undefined
    : announceHead({ host: listen.hostname, port: Number(listen.port), model: serving.modelId, version: packageVersion(), peerPath: new URL(serving.head.peerUrl).pathname });
  if (announcer?.skipped) log(announcer.skipped);
  else if (announcer?.name) log(`announced on the LAN as '${announcer.name}' (_meshnet._tcp)`);
  const auth = values['api-key'] ? ` -H "Authorization: Bearer ${values['api-key']}"` : '';
  process.stdout.write(
    [
      // The weight format only when it is not the default (the float format of --dtype).
      `meshnet is serving ${serving.modelId}${serving.head.weights.format === (values.dtype ?? 'fp32') ? '' : ` (${weightSpecName(serving.head.weights)} weights)`}`,
      `  API        ${base}/v1`,
      `  dashboard  ${base}/dashboard${values['api-key'] ? `?key=${values['api-key']}` : ''}`,
      `  chat       ${base}/dashboard/chat${values['api-key'] ? `?key=${values['api-key']}` : ''}`,
      `  peers      meshnet peer --head ${serving.head.peerUrl}${serving.head.joinToken ? ` --join-token ${serving.head.joinToken}` : ''}`,
      `  join page  ${base}/peer`,
      '',
      'Try it:',
      `  curl ${base}/v1/chat/completions -H "Content-Type: application/json"${auth} \\`,
      `    -d '${JSON.stringify(exampleRequest(serving.modelId, serving.head.model.checkpoint.config.maxNewTokens !== undefined), null, 1).replace(/\n\s*/g, ' ')}'`,
      '',
    ].join('\n'),
  );
  // `on`, not `once`: Ctrl-C reaches this process twice under `npm start` (from the terminal
  // and forwarded by npm); a second signal must not kill it halfway through closing.
  await new Promise<void>((resolve) => {
    process.on('SIGINT', () => resolve());
    process.on('SIGTERM', () => resolve());
  });
  log('shutting down');
  await announcer?.close();
  await serving.close();
}

/**
 * The request the printed curl sends: greedy, so the answer is the same every time (the
 * README quotes the demo's). A model with its own default answer length
 * (generation_config.json's max_new_tokens, as the demo has) gets no max_tokens.
 */
export function exampleRequest(model: string, hasDefaultLength: boolean): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'Hello!' }], temperature: 0, ...(hasDefaultLength ? {} : { max_tokens: 32 }) };
}
