/**
 * A local stand-in for the Hugging Face Hub: serves `/{org}/{name}/resolve/{rev}/{file}`
 * from fixture folders on 127.0.0.1 (random port). It honours `Range: bytes=N-` with 206,
 * records every request, can require a bearer token, and can cut a file's next response
 * midway to test resuming.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

export interface SeenRequest {
  readonly repo: string;
  readonly revision: string;
  readonly file: string;
  readonly range?: string;
  readonly authorization?: string;
}

export interface FakeHub {
  /** Base URL to pass as `endpoint`. */
  readonly url: string;
  readonly requests: SeenRequest[];
  /** The next response for `file` sends its headers and `bytes` bytes, then drops the connection. */
  cutNext(file: string, bytes: number): void;
  /** Answer every request for a file with the whole file (200), ignoring Range. */
  ignoreRange: boolean;
  close(): Promise<void>;
}

export interface FakeHubOptions {
  /** Repo id → folder whose files it serves. */
  readonly repos: Record<string, string>;
  /** When set, requests without `Authorization: Bearer <token>` get 401. */
  readonly token?: string;
}

export async function startFakeHub(options: FakeHubOptions): Promise<FakeHub> {
  const requests: SeenRequest[] = [];
  const cuts = new Map<string, number>();
  const hub = {
    url: '',
    requests,
    ignoreRange: false,
    cutNext: (file: string, bytes: number) => void cuts.set(file, bytes),
    close: async () => {},
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const match = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(req.url ?? '');
    if (!match) return void res.writeHead(400).end('bad path');
    const [, repo, revision, encodedFile] = match as unknown as [string, string, string, string];
    const file = decodeURIComponent(encodedFile);
    requests.push({ repo, revision: decodeURIComponent(revision), file, range: req.headers.range, authorization: req.headers.authorization });
    if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
      return void res.writeHead(401, 'Unauthorized').end('Invalid credentials');
    }
    const folder = options.repos[repo];
    if (folder === undefined) return void res.writeHead(404, 'Not Found').end('Repository not found');
    let data: Buffer;
    try {
      data = await readFile(path.join(folder, path.basename(file)));
    } catch {
      return void res.writeHead(404, 'Not Found').end('Entry not found');
    }
    let start = 0;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    if (range && !hub.ignoreRange) {
      start = Number(range[1]);
      if (start >= data.length) {
        return void res.writeHead(416, { 'content-range': `bytes */${data.length}` }).end();
      }
      res.writeHead(206, { 'content-length': data.length - start, 'content-range': `bytes ${start}-${data.length - 1}/${data.length}` });
    } else {
      res.writeHead(200, { 'content-length': data.length, 'content-type': 'application/octet-stream' });
    }
    const body = data.subarray(start);
    const cut = cuts.get(file);
    if (cut === undefined) return void res.end(body);
    cuts.delete(file);
    res.write(body.subarray(0, cut));
    // Let the bytes reach the client before the connection drops.
    setTimeout(() => res.socket?.destroy(), 50);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => res.writeHead(500).end(String(error)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  hub.close = () =>
    new Promise<void>((resolve, reject) => {
      server.closeAllConnections();
      server.close((error) => (error ? reject(error) : resolve()));
    });
  return hub;
}
