import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// src/shared is wire types and pure functions, read by core, node, browser and the
// dashboard alike: it imports only its own siblings.
const dir = fileURLToPath(new URL('../../src/shared/', import.meta.url));

describe('src/shared purity', () => {
  it.each(readdirSync(dir).filter((f) => f.endsWith('.ts')))('%s imports only ./ siblings', (file) => {
    const source = readFileSync(dir + file, 'utf8');
    const specifiers = [...source.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]/g)].map(
      (m) => m[1] ?? m[2],
    );
    for (const s of specifiers) expect(s).toMatch(/^\.\/[\w-]+\.ts$/);
    expect(source).not.toMatch(/\b(process|require|Buffer)\b[.(]/);
  });
});
