/** The browser's native WebSocket as a LinkSocket plus a message sink (binary → Uint8Array). */
import type { LinkSocket } from '../core/runtime/socket-link.ts';

export interface BrowserSocket {
  readonly socket: LinkSocket;
  /** Receive messages and the close reason; messages that arrive before are queued. */
  attach(sink: { receive(data: string | Uint8Array): void; terminated(reason: string): void }): void;
}

export function openBrowserSocket(url: string): Promise<BrowserSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    let sink: Parameters<BrowserSocket['attach']>[0] | undefined;
    const queued: (string | Uint8Array)[] = [];
    let closedReason: string | undefined;
    ws.onmessage = (event) => {
      const data = typeof event.data === 'string' ? event.data : new Uint8Array(event.data as ArrayBuffer);
      if (sink) sink.receive(data);
      else queued.push(data);
    };
    ws.onclose = (event) => {
      closedReason = `socket closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`;
      sink?.terminated(closedReason);
      reject(new Error(`could not connect to ${url}: ${closedReason}`));
    };
    ws.onopen = () =>
      resolve({
        socket: { send: (data) => ws.send(data as string), close: (code, reason) => ws.close(code, reason) },
        attach(next) {
          sink = next;
          for (const data of queued.splice(0)) next.receive(data);
          if (closedReason) next.terminated(closedReason);
        },
      });
  });
}
