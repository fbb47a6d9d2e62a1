/**
 * The head's `/api/events` stream with reconnect. Every named event is checked by
 * `parseMeshEvent` and handed to `onEvent`; each (re)connection starts with a `snapshot`, so
 * the caller just folds what arrives. `onStatus` reports 'live' once the stream is open and
 * 'reconnecting' after it breaks; retries back off from 0.5 s to 5 s. The stream owns its
 * timer and EventSource; `close` stops both.
 */
import { MESH_EVENT_KINDS, parseMeshEvent } from '../../../src/shared/dashboard-events.ts';
import type { MeshEvent } from '../../../src/shared/dashboard-state.ts';

export type StreamStatus = 'connecting' | 'live' | 'reconnecting';

export interface MeshEventStream {
  close(): void;
}

export interface StreamOptions {
  readonly url: string;
  readonly onEvent: (event: MeshEvent) => void;
  readonly onStatus: (status: StreamStatus, attempt: number) => void;
}

const MIN_RETRY_MS = 500;
const MAX_RETRY_MS = 5000;

export function openMeshEvents(options: StreamOptions): MeshEventStream {
  let source: EventSource | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let attempt = 0;
  let closed = false;

  const connect = () => {
    timer = undefined;
    const current = new EventSource(options.url, { withCredentials: true });
    source = current;
    current.onopen = () => {
      attempt = 0;
      options.onStatus('live', 0);
    };
    for (const kind of MESH_EVENT_KINDS) {
      current.addEventListener(kind, (message) => {
        const event = parseMeshEvent(kind, parseJson((message as MessageEvent<string>).data));
        if (event) options.onEvent(event);
      });
    }
    // EventSource retries on its own only sometimes (not after an HTTP error, and with a
    // fixed delay): close it and own the retry, so the banner and backoff are ours.
    current.onerror = () => {
      current.close();
      if (closed || source !== current) return;
      attempt++;
      options.onStatus('reconnecting', attempt);
      const delay = Math.min(MAX_RETRY_MS, MIN_RETRY_MS * 2 ** (attempt - 1));
      timer = setTimeout(connect, delay);
    };
  };

  options.onStatus('connecting', 0);
  connect();
  return {
    close() {
      closed = true;
      source?.close();
      if (timer) clearTimeout(timer);
    },
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined; // parseMeshEvent refuses it; the event is skipped
  }
}
