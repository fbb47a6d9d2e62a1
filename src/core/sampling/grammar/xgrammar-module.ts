/**
 * The seam to xgrammar (`@mlc-ai/web-xgrammar`, xgrammar's C++ compiled to WebAssembly): the
 * few classes and methods the engine uses, typed here so core never imports the package.
 * A runtime provides an {@link XGrammarLoader}; in Node, `src/node/xgrammar-node.ts`.
 *
 * Why a loader that makes fresh instances: xgrammar reports a bad input (an unsupported JSON
 * schema, an EBNF error) by printing `[FATAL] …` and aborting its WebAssembly instance, which
 * is unusable afterwards. The engine therefore converts client input in a sacrificial
 * instance and only hands already-checked grammars to the instance that holds live matchers.
 */

export interface XGrammarGrammar {
  toString(): string;
  dispose(): void;
}

export interface XGrammarTokenizerInfo {
  getVocabSize(): number;
  dispose(): void;
}

export interface XGrammarCompiledGrammar {
  dispose(): void;
}

export interface XGrammarCompiler {
  compileGrammar(ebnf: string, rootRule?: string): Promise<XGrammarCompiledGrammar>;
  compileStructuralTag(structuralTag: string): Promise<XGrammarCompiledGrammar>;
  dispose(): void;
}

export interface XGrammarMatcher {
  acceptToken(tokenId: number): boolean;
  /** Int32Array of ⌈vocab / 32⌉ words; bit set = allowed. */
  getNextTokenBitmask(): Promise<Int32Array>;
  isTerminated(): boolean;
  rollBack(tokens: number): void;
  dispose(): void;
}

/** The module's exports this engine uses (xgrammar's web API, 0.1.27). */
export interface XGrammarModule {
  readonly Grammar: {
    fromEBNF(ebnf: string, rootRule?: string): Promise<XGrammarGrammar>;
    fromJSONSchema(
      schema: string,
      anyWhitespace?: boolean,
      indent?: number,
      separators?: [string, string],
      strictMode?: boolean,
    ): Promise<XGrammarGrammar>;
    fromStructuralTag(structuralTag: string): Promise<XGrammarGrammar>;
  };
  readonly TokenizerInfo: {
    createTokenizerInfo(
      encodedVocab: string[],
      vocabType: string,
      prependSpaceInTokenization: boolean,
      vocabSize: number,
      stopTokenIds: number[],
    ): Promise<XGrammarTokenizerInfo>;
  };
  readonly GrammarCompiler: {
    createGrammarCompiler(tokenizerInfo: XGrammarTokenizerInfo, cacheEnabled?: boolean): Promise<XGrammarCompiler>;
  };
  readonly GrammarMatcher: {
    createGrammarMatcher(compiled: XGrammarCompiledGrammar, overrideStopTokens?: number[]): Promise<XGrammarMatcher>;
  };
}

/** One independent instance of the module and what it printed to its error stream. */
export interface XGrammarInstance {
  readonly module: XGrammarModule;
  /** The last `[FATAL]` / error line the instance printed (why it aborted), if any. */
  lastError(): string | undefined;
}

/** Makes a fresh instance with its own WebAssembly memory. May be called many times. */
export type XGrammarLoader = () => XGrammarInstance;
