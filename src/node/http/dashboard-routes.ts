/**
 * The dashboard (`apps/dashboard`): its page at `/dashboard` and the chat page at
 * `/dashboard/chat`, their scripts (bundled from TypeScript on first request) at
 * `/dashboard/app.js` and `/dashboard/chat.js`, and their stylesheets. The dashboard reads
 * only `/api/state` and `/api/events`; the chat page also `/v1/models` and
 * `/v1/chat/completions`. The `--api-key` guard on `/dashboard*`, `/api/*` and `/v1/*` is
 * applied before these routes (a `?key=` visit sets the cookie the scripts' requests carry).
 */
import type { H3 } from 'h3';
import { bundle, javascript, repoFile } from './browser-bundles.ts';

const ENTRY = 'apps/dashboard/src/main.ts';
const CHAT_ENTRY = 'apps/dashboard/src/chat/main.ts';

async function script(entry: string): Promise<Response> {
  try {
    return javascript(await bundle(entry));
  } catch (error) {
    // A build error is the developer's to read: show it rather than a blank page.
    const message = error instanceof Error ? error.message : String(error);
    return new Response(`dashboard bundle failed: ${message}`, { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
  }
}

export function mountDashboard(app: H3): void {
  const page = () => repoFile('apps/dashboard/index.html', 'text/html; charset=utf-8');
  const chat = () => repoFile('apps/dashboard/chat.html', 'text/html; charset=utf-8');
  app.get('/dashboard', page);
  app.get('/dashboard/', page);
  app.get('/dashboard/chat', chat);
  app.get('/dashboard/chat/', chat);
  app.get('/dashboard/dashboard.css', () => repoFile('apps/dashboard/dashboard.css', 'text/css; charset=utf-8'));
  app.get('/dashboard/chat.css', () => repoFile('apps/dashboard/chat.css', 'text/css; charset=utf-8'));
  app.get('/dashboard/app.js', () => script(ENTRY));
  app.get('/dashboard/chat.js', () => script(CHAT_ENTRY));
}
