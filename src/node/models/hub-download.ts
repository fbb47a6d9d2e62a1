/**
 * Downloads a model repository from the Hugging Face Hub (or any server with the same
 * `/{org}/{name}/resolve/{revision}/{file}` URLs) into
 * `<home>/hub/<org>--<name>/<revision>/`, as a folder openLocalModel reads.
 *
 * - Files: config.json, tokenizer.json, tokenizer_config.json (required);
 *   generation_config.json and chat_template.jinja (optional, 404 is fine); then
 *   model.safetensors, or when that is 404, model.safetensors.index.json and every shard
 *   its weight_map names.
 * - Resumable: a file is written to `<file>.partial` and renamed when complete; a later run
 *   asks for the rest with `Range: bytes=<size>-` (206 appends, 200 starts over).
 * - Offline reuse: once every file is complete a `.complete` marker is written, and later
 *   calls return the folder without any request.
 */
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseWeightIndex, WEIGHT_INDEX_FILE } from '../../core/model/weight-index.ts';
import { meshnetHome } from '../meshnet-home.ts';
import type { DownloadProgress } from './progress.ts';
import { checkRevision, HubDownloadError, isSafeFileName, parseHubRepoId, revisionFolder } from './hub-repo.ts';

export { HubDownloadError, isHubRepoId, parseHubRepoId } from './hub-repo.ts';

export interface HubDownloadOptions {
  /** Branch, tag or commit; default `main`. */
  readonly revision?: string;
  /** Hub base URL; default `HF_ENDPOINT`, else https://huggingface.co. */
  readonly endpoint?: string;
  /** Sent as `Authorization: Bearer <token>`; default `HF_TOKEN`. */
  readonly token?: string;
  /** Cache root; default {@link meshnetHome}. */
  readonly home?: string;
  /** Called as bytes arrive, and once per file with `done: true`. */
  readonly onProgress?: (p: DownloadProgress) => void;
  /** fetch to use (tests); default the global one. */
  readonly fetch?: typeof fetch;
}

/** Marker written when every file is in place; its presence means "use offline". */
export const COMPLETE_MARKER = '.complete';
const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
const OPTIONAL_FILES = ['generation_config.json', 'chat_template.jinja'];
const SINGLE_WEIGHTS = 'model.safetensors';

interface Download {
  readonly repo: string;
  readonly baseUrl: string;
  readonly dir: string;
  readonly headers: Record<string, string>;
  readonly fetch: typeof fetch;
  readonly onProgress?: (p: DownloadProgress) => void;
}

/**
 * Downloads `repo` (`org/name`) and returns its folder. Rejects with a
 * {@link HubDownloadError} naming the file and HTTP status that failed, or the invalid
 * repo id, revision or shard name. Safe to call again after a failure: finished files are
 * kept and a partial one resumes.
 */
export async function downloadFromHub(repo: string, opts: HubDownloadOptions = {}): Promise<string> {
  const { org, name } = parseHubRepoId(repo);
  const revision = checkRevision(opts.revision ?? 'main');
  const dir = path.join(opts.home ?? meshnetHome(), 'hub', `${org}--${name}`, revisionFolder(revision));
  if (await exists(path.join(dir, COMPLETE_MARKER))) return dir;

  const endpoint = (opts.endpoint ?? process.env.HF_ENDPOINT ?? 'https://huggingface.co').replace(/\/+$/, '');
  const token = opts.token ?? process.env.HF_TOKEN;
  const download: Download = {
    repo,
    baseUrl: `${endpoint}/${org}/${name}/resolve/${encodeURIComponent(revision)}/`,
    dir,
    // identity: Content-Length then counts the bytes we write, and Range offsets match the file.
    headers: { 'accept-encoding': 'identity', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    fetch: opts.fetch ?? fetch,
    onProgress: opts.onProgress,
  };
  await mkdir(dir, { recursive: true });

  const files: string[] = [];
  for (const file of REQUIRED_FILES) {
    await downloadFile(download, file, false);
    files.push(file);
  }
  for (const file of OPTIONAL_FILES) {
    if (await downloadFile(download, file, true)) files.push(file);
  }
  files.push(...(await downloadWeights(download)));
  await writeFile(path.join(dir, COMPLETE_MARKER), `${JSON.stringify({ repo, revision, files }, null, 2)}\n`);
  return dir;
}

/** model.safetensors, else the index and its shards. Returns the file names written. */
async function downloadWeights(download: Download): Promise<string[]> {
  const indexPath = path.join(download.dir, WEIGHT_INDEX_FILE);
  if (!(await exists(indexPath)) && (await downloadFile(download, SINGLE_WEIGHTS, true))) return [SINGLE_WEIGHTS];
  if (!(await downloadFile(download, WEIGHT_INDEX_FILE, true))) {
    throw new HubDownloadError(`${download.repo}: neither ${SINGLE_WEIGHTS} nor ${WEIGHT_INDEX_FILE} was found (HTTP 404); meshnet needs safetensors weights`, SINGLE_WEIGHTS, 404);
  }
  const shards = await readShardNames(indexPath);
  for (const shard of shards) await downloadFile(download, shard, false);
  return [WEIGHT_INDEX_FILE, ...shards];
}

async function readShardNames(indexPath: string): Promise<string[]> {
  let weightMap: Map<string, string>;
  try {
    weightMap = parseWeightIndex(WEIGHT_INDEX_FILE, JSON.parse(await readFile(indexPath, 'utf8')));
  } catch (cause) {
    await rm(indexPath, { force: true }); // so that a retry fetches it again
    throw new HubDownloadError(`${WEIGHT_INDEX_FILE}: ${(cause as Error).message}`, WEIGHT_INDEX_FILE, undefined, { cause });
  }
  const shards = [...new Set(weightMap.values())];
  for (const shard of shards) {
    if (!isSafeFileName(shard)) {
      throw new HubDownloadError(`${WEIGHT_INDEX_FILE}: refusing shard name '${shard}' (only plain file names inside the model folder are allowed)`, WEIGHT_INDEX_FILE);
    }
  }
  return shards;
}

/**
 * Fetches one file into the folder unless it is already there. Returns false when
 * `optional` and the server answers 404.
 */
async function downloadFile(download: Download, file: string, optional: boolean): Promise<boolean> {
  const target = path.join(download.dir, file);
  if (await exists(target)) return true;
  const partial = `${target}.partial`;
  const url = download.baseUrl + encodeURIComponent(file);
  // Two attempts: a resume the server cannot honour (416, wrong range) starts over once.
  for (let attempt = 0; attempt < 2; attempt++) {
    const offset = attempt === 0 ? await sizeOf(partial) : 0;
    if (attempt > 0) await rm(partial, { force: true });
    const headers = { ...download.headers, ...(offset > 0 ? { range: `bytes=${offset}-` } : {}) };
    let response: Response;
    try {
      response = await download.fetch(url, { headers, redirect: 'follow' });
    } catch (cause) {
      throw new HubDownloadError(`${file}: cannot reach ${url} (${describe(cause)})`, file, undefined, { cause });
    }
    if (response.status === 404 && optional) {
      await response.body?.cancel();
      return false;
    }
    if (response.status === 416 && offset > 0) {
      await response.body?.cancel();
      continue;
    }
    if (!response.ok) throw await httpError(download, file, response);
    const resumed = response.status === 206;
    if (resumed && contentRangeStart(response) !== offset) {
      await response.body?.cancel();
      continue;
    }
    const total = expectedTotal(response, resumed ? offset : 0);
    await receive(download, file, response, partial, resumed ? offset : 0, total);
    await rename(partial, target);
    return true;
  }
  throw new HubDownloadError(`${file}: the server did not honour a resume request twice; delete ${partial} and retry`, file);
}

/** Streams the body to `partial` (appending after `start` bytes), reporting progress. */
async function receive(download: Download, file: string, response: Response, partial: string, start: number, total: number | undefined): Promise<void> {
  const handle = await open(partial, start > 0 ? 'a' : 'w');
  const reader = response.body?.getReader();
  let received = start;
  try {
    download.onProgress?.({ file, received, total, done: false });
    // Each chunk is on disk before the next is read, so a cut connection leaves a
    // .partial that holds exactly the bytes received.
    for (let chunk = await reader?.read(); chunk !== undefined && !chunk.done; chunk = await reader!.read()) {
      await handle.write(chunk.value);
      received += chunk.value.byteLength;
      download.onProgress?.({ file, received, total, done: false });
    }
  } catch (cause) {
    await reader?.cancel().catch(() => {}); // a failed write must not leave the socket open
    throw new HubDownloadError(`${file}: download interrupted after ${received} bytes (${describe(cause)}); run again to resume`, file, undefined, { cause });
  } finally {
    await handle.close();
  }
  if (total !== undefined && received !== total) {
    throw new HubDownloadError(`${file}: received ${received} of ${total} bytes; run again to resume`, file);
  }
  download.onProgress?.({ file, received, total: total ?? received, done: true });
}

/** Names the resolve URL, not response.url: after a redirect that is a signed CDN link. */
async function httpError(download: Download, file: string, response: Response): Promise<HubDownloadError> {
  await response.body?.cancel();
  const status = response.status;
  const hint =
    status === 401 || status === 403
      ? download.headers.authorization
        ? ' (the token has no access to this repo; gated models need their terms accepted on the Hub)'
        : ' (private or gated repo, or no such repo: set HF_TOKEN)'
      : status === 404
        ? ' (not in this repo or revision)'
        : '';
  return new HubDownloadError(`${file}: HTTP ${status} ${response.statusText} from ${download.baseUrl}${encodeURIComponent(file)}${hint}`, file, status);
}

/** `Content-Range: bytes <start>-<end>/<total>` → start, or undefined if unreadable. */
function contentRangeStart(response: Response): number | undefined {
  const match = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(response.headers.get('content-range') ?? '');
  return match ? Number(match[1]) : undefined;
}

/** The complete file's size, when the response says it (and is not re-encoded). */
function expectedTotal(response: Response, start: number): number | undefined {
  const encoding = response.headers.get('content-encoding');
  if (encoding !== null && encoding !== 'identity') return undefined;
  const range = /\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
  if (response.status === 206 && range) return Number(range[1]);
  const length = response.headers.get('content-length');
  return length !== null && /^\d+$/.test(length) ? start + Number(length) : undefined;
}

async function sizeOf(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

function describe(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  const inner = cause.cause instanceof Error ? `: ${cause.cause.message}` : '';
  return `${cause.message}${inner}`;
}
