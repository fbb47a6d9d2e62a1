/**
 * Dialing a WebSocket from Node (crossws's client: Node 20's global WebSocket needs a flag)
 * and wiring it to a message sink: binary messages arrive as Uint8Array, text as string.
 */
import WebSocket from 'crossws/websocket';
import type { LinkSocket } from '../../core/runtime/socket-link.ts';

export interface SocketSink {
  receive(data: string | Uint8Array): void;
  terminated(reason: string): void;
}

export interface DialedSocket {
  readonly socket: LinkSocket;
  /** Attach the receiver; messages that arrive before are queued. */
  attach(sink: SocketSink): void;
}

/** Open a WebSocket to `url`; rejects if it cannot connect within `timeoutMs`. */
export function dialSocket(url: string, timeoutMs = 10_000): Promise<DialedSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    let sink: SocketSink | undefined;
    const queued: (string | Uint8Array)[] = [];
    let closedReason: string | undefined;
    const timer = setTimeout(() => {
      ws.close();
      reject(new Error(`could not connect to ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.onmessage = (event: MessageEvent) => {
      const data = typeof event.data === 'string' ? event.data : new Uint8Array(event.data as ArrayBuffer);
      if (sink) sink.receive(data);
      else queued.push(data);
    };
    ws.onclose = (event: CloseEvent) => {
      clearTimeout(timer);
      closedReason = `socket closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`;
      sink?.terminated(closedReason);
      reject(new Error(`could not connect to ${url}: ${closedReason}`));
    };
    ws.onerror = () => {
      // onclose follows with the code; nothing else to do here.
    };
    ws.onopen = () => {
      clearTimeout(timer);
      resolve({
        socket: {
          send: (data) => ws.send(data),
          close: (code, reason) => ws.close(code, reason),
        },
        attach(next) {
          sink = next;
          for (const data of queued.splice(0)) next.receive(data);
          if (closedReason) next.terminated(closedReason);
        },
      });
    };
  });
}

/** The http(s) origin of a ws(s) URL. */
export function httpOrigin(wsUrl: string): string {
  const url = new URL(wsUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return url.origin;
}
