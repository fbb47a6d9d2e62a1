/**
 * The browser join page: `/peer` (apps/dashboard/peer.html), its stylesheets — the dashboard's
 * own (`/peer/dashboard.css`, the same file as `/dashboard/dashboard.css`, open here because
 * the join page needs no API key) and the page's layout (`/peer/peer.css`) —, `/peer/app.js`
 * (the bundled browser peer) and `/ort/<file>` (onnxruntime-web's own files, served locally).
 * Cross-origin isolated so wasm can use threads.
 */
import type { H3 } from 'h3';
import { browserScript, ISOLATION_HEADERS, javascript, ortFile, staticFile } from './browser-bundles.ts';

async function isolated(name: string, contentType: string): Promise<Response> {
  const file = await staticFile('dashboard', name, contentType);
  return new Response(file.body, { headers: { 'content-type': contentType, 'cache-control': 'no-cache', ...ISOLATION_HEADERS } });
}

export function mountPeerPage(app: H3): void {
  app.get('/peer', () => isolated('peer.html', 'text/html; charset=utf-8'));
  app.get('/peer/dashboard.css', () => isolated('dashboard.css', 'text/css; charset=utf-8'));
  app.get('/peer/peer.css', () => isolated('peer.css', 'text/css; charset=utf-8'));
  app.get('/peer/app.js', async () => javascript(await browserScript('peer/app.js'), ISOLATION_HEADERS));
  app.get('/ort/:file', (event) => ortFile(String(event.context.params?.file ?? '')));
}
