/** The OpenAI edge is pure translation: no server framework, no Node built-ins, no sockets. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const DIR = path.resolve(import.meta.dirname, '../../src/node/openai');

function imports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && ts.isStringLiteral(node.arguments[0])) {
      found.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('src/node/openai', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.ts'));
  it.each(files)('%s imports only relative modules', (file) => {
    for (const specifier of imports(path.join(DIR, file))) expect(specifier, `${file} imports ${specifier}`).toMatch(/^\.\.?\//);
  });
});
