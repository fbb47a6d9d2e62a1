import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// src/core must run in any JS runtime: route code imports only relative core modules.
const dir = fileURLToPath(new URL('../../src/core/route/', import.meta.url));

describe('src/core/route purity', () => {
  it.each(readdirSync(dir).filter((f) => f.endsWith('.ts')))('%s imports only relative core modules', (file) => {
    const source = readFileSync(dir + file, 'utf8');
    const specifiers = [...source.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]/g)].map(
      (m) => m[1] ?? m[2],
    );
    for (const s of specifiers) expect(s).toMatch(/^\.\.?\/[\w./-]+\.ts$/);
    expect(source).not.toMatch(/\b(process|require|Buffer)\b[.(]/);
  });

  const planning = ['assign-layers.ts', 'plan-route.ts', 'plan-error.ts', 'backoff.ts', 'hop-history.ts'];
  it.each(planning)('%s imports only types and siblings (pure decisions)', (file) => {
    const source = readFileSync(dir + file, 'utf8');
    for (const m of source.matchAll(/^import\s+(type\s+)?[^;]*from\s+['"]([^'"]+)['"]/gm)) {
      if (!m[1]) expect(m[2]).toMatch(/^\.\/[\w-]+\.ts$/);
    }
  });
});
