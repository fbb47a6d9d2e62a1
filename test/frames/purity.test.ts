import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// src/core/frames runs in any JS runtime: it may import its siblings, src/shared, and only
// types from the runtime seams.
const dir = fileURLToPath(new URL('../../src/core/frames/', import.meta.url));

describe('src/core/frames purity', () => {
  it.each(readdirSync(dir).filter((f) => f.endsWith('.ts')))('%s imports only siblings, src/shared and seam types', (file) => {
    const source = readFileSync(dir + file, 'utf8');
    for (const m of source.matchAll(/^(import|export)(\s+type)?\s[^;]*?from\s+['"]([^'"]+)['"]/gm)) {
      const [, , typeOnly, specifier] = m;
      if (typeOnly && specifier === '../runtime/shard-executor.ts') continue;
      expect(specifier).toMatch(/^(\.\/[\w-]+|\.\.\/\.\.\/shared\/[\w-]+)\.ts$/);
    }
    expect(source).not.toMatch(/\bimport\s*\(|\b(process|require|Buffer)\b[.(]/);
  });
});
