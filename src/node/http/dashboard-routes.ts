/**
 * The dashboard (`apps/dashboard`): its page at `/dashboard` and the chat page at
 * `/dashboard/chat`, their scripts (built at pack time, or bundled on first request when
 * running from the sources: browser-bundles.ts) at `/dashboard/app.js` and
 * `/dashboard/chat.js`, and their stylesheets. The dashboard reads
 * only `/api/state` and `/api/events`; the chat page also `/v1/models` and
 * `/v1/chat/completions`. The `--api-key` guard on `/dashboard*`, `/api/*` and `/v1/*` is
 * applied before these routes (a `?key=` visit sets the cookie the scripts' requests carry).
 */
import type { H3 } from 'h3';
import type { BrowserScript } from './browser-assets.ts';
import { browserScript, javascript, staticFile } from './browser-bundles.ts';

async function script(name: BrowserScript): Promise<Response> {
  try {
    return javascript(await browserScript(name));
  } catch (error) {
    // A build error is the developer's to read: show it rather than a blank page.
    const message = error instanceof Error ? error.message : String(error);
    return new Response(`dashboard bundle failed: ${message}`, { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
  }
}

export function mountDashboard(app: H3): void {
  const page = () => staticFile('dashboard', 'index.html', 'text/html; charset=utf-8');
  const chat = () => staticFile('dashboard', 'chat.html', 'text/html; charset=utf-8');
  app.get('/dashboard', page);
  app.get('/dashboard/', page);
  app.get('/dashboard/chat', chat);
  app.get('/dashboard/chat/', chat);
  app.get('/dashboard/dashboard.css', () => staticFile('dashboard', 'dashboard.css', 'text/css; charset=utf-8'));
  app.get('/dashboard/chat.css', () => staticFile('dashboard', 'chat.css', 'text/css; charset=utf-8'));
  app.get('/dashboard/app.js', () => script('dashboard/app.js'));
  app.get('/dashboard/chat.js', () => script('dashboard/chat.js'));
}
