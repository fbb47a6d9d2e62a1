/**
 * What an answer must look like, as plain data: JSON of any shape, JSON matching a schema, or
 * a structural tag (free text with constrained regions: tool calls). Built by the chat layer
 * (`response_format`, `tools`, later the Responses API's `text.format`) and compiled by a
 * {@link GrammarEngine} into a per-sequence {@link TokenConstraint}.
 *
 * JSON is always written in one fixed layout: one line, `", "` between items and `": "` after
 * keys (Python's `json.dumps` defaults, and the layout Qwen's and Hermes' tool calls use). A
 * fixed layout keeps every bounded schema bounded in tokens (free whitespace would let a model
 * pad forever) and costs nothing in validity.
 */
import type { TokenConstraint } from '../constraint.ts';

/** A JSON Schema document (an object, or `true` / `false`). */
export type JsonSchema = Readonly<Record<string, unknown>> | boolean;

/**
 * The structural tag formats this project builds (a subset of xgrammar's, same field names):
 * - `const_string`: exactly `value`;
 * - `json_schema`: JSON matching `json_schema`, in the fixed layout above;
 * - `any_text`: any text (up to the enclosing tag's end);
 * - `sequence`: each element in turn; `or`: one of the elements;
 * - `tag`: `begin`, then `content`, then `end`;
 * - `triggered_tags`: free text, and whenever a trigger appears, one of the tags that begins
 *   with it (`at_least_one`: the output starts with a tag; `stop_after_first`: ends after one);
 * - `tags_with_separator`: only tags, separated by `separator`.
 */
export type StructuralFormat =
  | { readonly type: 'const_string'; readonly value: string }
  | { readonly type: 'json_schema'; readonly json_schema: JsonSchema }
  | { readonly type: 'any_text' }
  | { readonly type: 'sequence'; readonly elements: readonly StructuralFormat[] }
  | { readonly type: 'or'; readonly elements: readonly StructuralFormat[] }
  | TagFormat
  | {
      readonly type: 'triggered_tags';
      readonly triggers: readonly string[];
      readonly tags: readonly TagFormat[];
      readonly at_least_one?: boolean;
      readonly stop_after_first?: boolean;
    }
  | {
      readonly type: 'tags_with_separator';
      readonly tags: readonly TagFormat[];
      readonly separator: string;
      readonly at_least_one?: boolean;
      readonly stop_after_first?: boolean;
    };

export interface TagFormat {
  readonly type: 'tag';
  readonly begin: string;
  readonly content: StructuralFormat;
  readonly end: string;
}

export type OutputGrammar =
  /** Any JSON object (OpenAI's JSON mode). */
  | { readonly kind: 'json_object' }
  /** JSON matching `schema`; properties the schema does not name are never produced. */
  | { readonly kind: 'json_schema'; readonly schema: JsonSchema }
  /** Text shaped by a structural tag (tool calls). */
  | { readonly kind: 'structural_tag'; readonly format: StructuralFormat };

/** A grammar that cannot be compiled: an unsupported or contradictory schema, a bad tag. */
export class GrammarError extends Error {
  override readonly name = 'GrammarError';
  readonly code = 'invalid_grammar';
}

/** Compiles output grammars for one model's vocabulary. Shared by every session of a model. */
export interface GrammarEngine {
  /**
   * A fresh constraint at the start of `grammar`, for one sequence; the caller disposes it.
   * Compilations are cached, so the same schema or tool set compiles once. Throws
   * {@link GrammarError} for a grammar it cannot compile (never leaves the engine unusable).
   */
  constraint(grammar: OutputGrammar): Promise<TokenConstraint>;
  /** Frees every compiled grammar and the engine's instances. */
  dispose(): void;
}
