/**
 * The {@link GrammarEngine} on xgrammar (the engine WebLLM, vLLM and SGLang use): JSON schema
 * and structural tags → EBNF → a grammar compiled against the model's vocabulary → one
 * `GrammarMatcher` per sequence that fills the next token's bitmask.
 *
 * Two instances of the WebAssembly module (see xgrammar-module.ts for why):
 * - the *converter* turns client input (JSON schemas, structural tags) into EBNF and checks
 *   that the EBNF parses; when bad input aborts it, it is dropped and a new one is made;
 * - the *matcher* instance holds the vocabulary, compiled grammars (an LRU cache) and every
 *   live matcher; it only ever sees EBNF the converter produced and checked.
 */
import type { TokenVocabulary } from './vocabulary.ts';
import type { TokenConstraint } from '../constraint.ts';
import { GrammarError, type GrammarEngine, type JsonSchema, type OutputGrammar, type StructuralFormat } from './output-grammar.ts';
import { XGrammarConstraint } from './xgrammar-constraint.ts';
import type { XGrammarCompiledGrammar, XGrammarCompiler, XGrammarInstance, XGrammarLoader } from './xgrammar-module.ts';

/** The one JSON layout every grammar writes (see output-grammar.ts). */
const SEPARATORS: [string, string] = [', ', ': '];
const ONE_LINE = -1;

/**
 * xgrammar 0.1.27 writes strings with `minLength` / `maxLength` as characters of
 * `[^"\\\r\n]`, which lets raw control characters (a tab, U+0001) into a JSON string and makes
 * the JSON invalid. Upstream fixed it after 0.1.27; until npm has that release, narrow the class
 * to JSON's own rule (no control characters, no quote, no backslash).
 */
const LOOSE_STRING_CHAR = '[^\\"\\\\\\r\\n]';
const JSON_STRING_CHAR = '[^\\0-\\x1f\\"\\\\]';

export interface XGrammarEngineOptions {
  /** The model's logits length (may exceed the tokenizer's vocabulary). */
  readonly vocabSize: number;
  /** Ids that end a sequence (the model's EOS); the grammar allows them only at its end. */
  readonly stopTokenIds: readonly number[];
  /** Compiled grammars kept (least recently used dropped first). Default 16. */
  readonly cacheSize?: number;
}

interface MatcherSide {
  readonly instance: XGrammarInstance;
  readonly compiler: XGrammarCompiler;
}

export class XGrammarEngine implements GrammarEngine {
  private converter: XGrammarInstance | undefined;
  private matcherSide: Promise<MatcherSide> | undefined;
  private readonly cache = new Map<string, XGrammarCompiledGrammar>();
  private disposed = false;

  constructor(
    private readonly load: XGrammarLoader,
    private readonly vocabulary: TokenVocabulary,
    private readonly options: XGrammarEngineOptions,
  ) {
    if (options.stopTokenIds.length === 0) throw new RangeError('a grammar engine needs at least one stop token id');
  }

  async constraint(grammar: OutputGrammar): Promise<TokenConstraint> {
    if (this.disposed) throw new Error('the grammar engine is disposed');
    const compiled = await this.compiled(grammar);
    const side = await this.matchers();
    const matcher = await side.instance.module.GrammarMatcher.createGrammarMatcher(compiled, [...this.options.stopTokenIds]);
    return new XGrammarConstraint(matcher, () => side.instance.module.GrammarMatcher.createGrammarMatcher(compiled, [...this.options.stopTokenIds]));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const compiled of this.cache.values()) compiled.dispose();
    this.cache.clear();
  }

  /** The compiled grammar for `grammar`, from the cache or compiled now. */
  private async compiled(grammar: OutputGrammar): Promise<XGrammarCompiledGrammar> {
    const key = JSON.stringify(grammar);
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key); // re-insert: most recently used last
      this.cache.set(key, hit);
      return hit;
    }
    const source = await this.convert(grammar);
    const { compiler } = await this.matchers();
    const compiled = source.kind === 'ebnf' ? await compiler.compileGrammar(source.text) : await compiler.compileStructuralTag(source.text);
    this.cache.set(key, compiled);
    const limit = this.options.cacheSize ?? 16;
    while (this.cache.size > limit) {
      const [oldest, value] = this.cache.entries().next().value as [string, XGrammarCompiledGrammar];
      this.cache.delete(oldest);
      value.dispose(); // live matchers hold their own reference to the compiled grammar
    }
    return compiled;
  }

  private matchers(): Promise<MatcherSide> {
    this.matcherSide ??= (async () => {
      const instance = this.load();
      const { tokens, kind, addPrefixSpace } = this.vocabulary;
      const info = await instance.module.TokenizerInfo.createTokenizerInfo([...tokens], kind, addPrefixSpace, this.options.vocabSize, [...this.options.stopTokenIds]);
      // Our own LRU bounds memory; xgrammar's cache would grow with every distinct schema.
      const compiler = await instance.module.GrammarCompiler.createGrammarCompiler(info, false);
      return { instance, compiler };
    })();
    return this.matcherSide;
  }

  /** Client input → checked EBNF or structural tag JSON, in the converter instance. */
  private async convert(grammar: OutputGrammar): Promise<{ kind: 'ebnf' | 'tag'; text: string }> {
    try {
      if (grammar.kind === 'json_object') return { kind: 'ebnf', text: await this.jsonEbnf({ type: 'object' }, false) };
      if (grammar.kind === 'json_schema') return { kind: 'ebnf', text: await this.jsonEbnf(grammar.schema, true) };
      const format = await this.lowerFormat(grammar.format);
      const text = JSON.stringify({ type: 'structural_tag', format });
      (await this.converterModule().Grammar.fromStructuralTag(text)).dispose(); // check it converts
      return { kind: 'tag', text };
    } catch (error) {
      throw this.conversionError(error);
    }
  }

  /** Schema → EBNF (fixed layout; `strict` forbids properties the schema does not name), checked. */
  private async jsonEbnf(schema: JsonSchema, strict: boolean): Promise<string> {
    const module = this.converterModule();
    const grammar = await module.Grammar.fromJSONSchema(JSON.stringify(schema), false, ONE_LINE, SEPARATORS, strict);
    const ebnf = grammar.toString().split(LOOSE_STRING_CHAR).join(JSON_STRING_CHAR);
    grammar.dispose();
    (await module.Grammar.fromEBNF(ebnf)).dispose(); // the patched text still parses
    return ebnf;
  }

  /** Replaces every `json_schema` node by its EBNF (so tool arguments get the same layout). */
  private async lowerFormat(format: StructuralFormat): Promise<Record<string, unknown>> {
    switch (format.type) {
      case 'json_schema':
        return { type: 'grammar', grammar: await this.jsonEbnf(format.json_schema, true) };
      case 'sequence':
      case 'or':
        return { ...format, elements: await Promise.all(format.elements.map((e) => this.lowerFormat(e))) };
      case 'tag':
        return { ...format, content: await this.lowerFormat(format.content) };
      case 'triggered_tags':
      case 'tags_with_separator':
        return { ...format, tags: await Promise.all(format.tags.map((t) => this.lowerFormat(t))) };
      default:
        return { ...format };
    }
  }

  private converterModule() {
    this.converter ??= this.load();
    return this.converter.module;
  }

  /** Drops an aborted converter and names what it complained about. */
  private conversionError(error: unknown): GrammarError {
    const printed = this.converter?.lastError();
    this.converter = undefined; // aborted (or possibly so): the next conversion gets a new instance
    // A C++ exception reaches JavaScript as a bare number (a pointer) with nothing printed.
    const detail = printed ?? (error instanceof Error ? error.message : 'xgrammar cannot convert this grammar (an unsupported combination of formats)');
    return new GrammarError(detail);
  }
}
