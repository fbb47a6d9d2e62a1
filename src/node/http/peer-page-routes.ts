/**
 * The browser join page: `/peer` (HTML), `/peer/app.js` (the bundled browser peer) and
 * `/ort/<file>` (onnxruntime-web's own files, served locally). Cross-origin isolated so
 * wasm can use threads.
 */
import type { H3 } from 'h3';
import { browserScript, ISOLATION_HEADERS, javascript, ortFile } from './browser-bundles.ts';

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>meshnet — join the mesh</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:15px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1b1f24}
 h1{font-size:1.4rem} label{display:block;margin:1rem 0 .3rem} input{width:100%;padding:.5rem;font:inherit}
 button{margin-top:1rem;padding:.6rem 1.4rem;font:inherit;cursor:pointer} dl{display:grid;grid-template-columns:12rem 1fr;gap:.3rem 1rem}
 dt{color:#57606a} [data-state=connected]{color:#1a7f37;font-weight:600} [data-state=refused]{color:#cf222e;font-weight:600}
 #error{color:#cf222e}
</style></head><body>
<h1>Join this meshnet mesh</h1>
<p>This tab will serve some of the model's layers on your GPU (WebGPU) or CPU (wasm) until you close it.</p>
<label for="token">Join token (printed by the head)</label><input id="token" autocomplete="off" placeholder="leave empty on the head's own machine">
<button id="join">Join mesh</button>
<dl>
 <dt>Status</dt><dd id="state">not joined</dd>
 <dt>Execution provider</dt><dd id="provider">—</dd>
 <dt>GPU adapter</dt><dd id="adapter">—</dd>
 <dt>Layers served</dt><dd id="layers">—</dd>
 <dt>Tokens served</dt><dd id="tokens">0</dd>
 <dt>Download</dt><dd id="progress"></dd>
 <dt>Last error</dt><dd id="error"></dd>
</dl>
<script type="module" src="/peer/app.js"></script>
</body></html>`;

export function mountPeerPage(app: H3): void {
  app.get('/peer', () => new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', ...ISOLATION_HEADERS } }));
  app.get('/peer/app.js', async () => javascript(await browserScript('peer/app.js'), ISOLATION_HEADERS));
  app.get('/ort/:file', (event) => ortFile(String(event.context.params?.file ?? '')));
}
