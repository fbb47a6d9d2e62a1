/**
 * `GET /artifacts/<modelKey>/<part>/<file>`: peers fetch the shard artifact they were
 * assigned — `manifest.json`, `graph.onnx` and the packed `weights.bin` (just that part's
 * weights, in the mesh's weight format). Guarded by the join token in the `x-meshnet-token`
 * header (never the URL: URLs end up in logs and proxies), so `--api-key` leaves these
 * routes to this check. Only the head's own activation dtype and weight format are served,
 * so a request cannot make the head build artifacts nobody was assigned.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { H3 } from 'h3';
import { parsePartName } from '../../core/model/part-name.ts';
import { isLoopbackAddress, sameToken } from '../../core/mesh/peer-admission.ts';
import { WEIGHTS_FILE } from '../../core/model/shard-artifact.ts';
import { ARTIFACT_TOKEN_HEADER } from '../../shared/protocol.ts';
import { sameWeightSpec, type WeightSpec } from '../../core/model/quant/weight-format.ts';
import type { ActivationDtype } from '../../core/model/activations.ts';
import { getShardArtifact } from '../artifact-cache.ts';
import type { LocalModel } from '../local-model.ts';


const json = (status: number, message: string) =>
  new Response(JSON.stringify({ error: { message, type: 'artifact_error', param: null, code: null } }), {
    status,
    headers: { 'content-type': 'application/json' },
  });

export function mountArtifactRoutes(
  app: H3,
  model: LocalModel,
  served: { readonly dtype: ActivationDtype; readonly weights: WeightSpec },
  joinToken: string | undefined,
  allowLoopbackWithoutToken = false,
): void {
  app.get('/artifacts/:key/:part/:file', async (event) => {
    const request = event.req;
    if (joinToken !== undefined) {
      const given = request.headers.get(ARTIFACT_TOKEN_HEADER) ?? undefined;
      const local = allowLoopbackWithoutToken && given === undefined && isLoopbackAddress((request as { ip?: string }).ip);
      if (!local && !sameToken(given ?? '', joinToken)) return json(401, 'a valid join token is required to fetch artifacts');
    }
    const { key, part: name, file } = event.context.params as { key: string; part: string; file: string };
    if (key !== model.key) return json(404, `this head serves model ${model.key}, not ${key}`);
    const parsed = parsePartName(name);
    if (!parsed) return json(404, `'${name}' is not a part name`);
    if (parsed.part.kind === 'layers' && parsed.part.range.end > model.checkpoint.config.numLayers) return json(404, `the model has ${model.checkpoint.config.numLayers} layers`);
    if (parsed.dtype !== served.dtype || !sameWeightSpec(parsed.weights, served.weights)) return json(404, `this head serves ${served.dtype} activations with its own weight format, not '${name}'`);
    const { artifact, directory } = await getShardArtifact(model.checkpoint, model.key, parsed.part, parsed.dtype, parsed.weights);
    switch (file) {
      case 'manifest.json':
        return new Response(JSON.stringify(artifact.manifest), { headers: { 'content-type': 'application/json' } });
      case 'graph.onnx':
        return new Response(artifact.graph as Uint8Array<ArrayBuffer>, { headers: { 'content-type': 'application/octet-stream' } });
      case WEIGHTS_FILE: {
        const weights = path.join(directory, WEIGHTS_FILE);
        const size = (await stat(weights)).size;
        const body = Readable.toWeb(createReadStream(weights)) as ReadableStream<Uint8Array>;
        return new Response(body, { headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) } });
      }
      default:
        return json(404, `unknown artifact file '${file}'`);
    }
  });
}
