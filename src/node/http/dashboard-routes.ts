/**
 * The dashboard (`apps/dashboard`): its page at `/dashboard`, its script (bundled from
 * TypeScript on first request) at `/dashboard/app.js` and its stylesheet. The page reads
 * only `/api/state` and `/api/events`; the `--api-key` guard on `/dashboard*` and `/api/*`
 * is applied before these routes (a `?key=` visit sets the cookie the script's requests carry).
 */
import type { H3 } from 'h3';
import { bundle, javascript, repoFile } from './browser-bundles.ts';

const ENTRY = 'apps/dashboard/src/main.ts';

export function mountDashboard(app: H3): void {
  const page = () => repoFile('apps/dashboard/index.html', 'text/html; charset=utf-8');
  app.get('/dashboard', page);
  app.get('/dashboard/', page);
  app.get('/dashboard/dashboard.css', () => repoFile('apps/dashboard/dashboard.css', 'text/css; charset=utf-8'));
  app.get('/dashboard/app.js', async () => {
    try {
      return javascript(await bundle(ENTRY));
    } catch (error) {
      // A build error is the developer's to read: show it rather than a blank page.
      const message = error instanceof Error ? error.message : String(error);
      return new Response(`dashboard bundle failed: ${message}`, { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
    }
  });
}
