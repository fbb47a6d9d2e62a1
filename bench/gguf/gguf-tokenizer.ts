/**
 * A Hugging Face `tokenizer.json` as GGUF tokenizer metadata: `tokenizer.ggml.tokens` in id
 * order, `token_type` beside them, and the special ids. The bench feeds llama.cpp token ids
 * directly, so what matters is that llama.cpp loads the vocabulary and that id i is the
 * same piece on both sides; the text tokenizer's details only steer llama.cpp's own text
 * tokenization.
 *
 * Style (`tokenizer.ggml.model`): SentencePiece-like vocabularies (BPE with byte fallback,
 * Unigram) are written as 'llama' with scores (Unigram's own, else −id, SentencePiece's
 * order for BPE pieces). Everything else (byte-level BPE, WordLevel such as the bench's
 * `t<i>` stand-in) is written as 'gpt2' with the BPE merges (none for WordLevel): llama.cpp's
 * SentencePiece tokenizer throws on a character with no piece and no byte-fallback piece
 * (uncaught, in node-llama-cpp's load), its BPE tokenizer skips it.
 *
 * Token types (llama.cpp `llama_token_type`): 1 normal, 2 unknown, 3 control (special added
 * tokens), 6 byte (`<0xNN>` byte-fallback pieces). A vocabulary shorter than the model's
 * embedding gets `[PAD<i>]` pieces, as llama.cpp's converter adds.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { gguf, type GgufValue } from './gguf-format.ts';

const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, unused: 5, byte: 6 } as const;

interface TokenizerJson {
  model?: { type?: string; vocab?: Record<string, number> | [string, number][]; unk_token?: string; byte_fallback?: boolean; merges?: (string | [string, string])[] };
  added_tokens?: { id: number; content: string; special?: boolean }[];
}

export interface TokenizerSpecials {
  readonly bosTokenId?: number;
  readonly eosTokenId?: number;
  readonly addBosToken: boolean;
}

/**
 * GGUF tokenizer entries for the tokenizer in `dir`, padded to `vocabSize` pieces.
 * @throws Error naming the file when tokenizer.json is missing, has no vocabulary, has gaps
 *   or duplicate ids, or more pieces than the model's vocabulary.
 */
export async function ggufTokenizerMetadata(dir: string, vocabSize: number, specials: TokenizerSpecials): Promise<Map<string, GgufValue>> {
  const file = path.join(dir, 'tokenizer.json');
  const json = JSON.parse(await readFile(file, 'utf8')) as TokenizerJson;
  const vocab = json.model?.vocab;
  if (!vocab || typeof vocab !== 'object') throw new Error(`${file}: no model.vocab (WordLevel, BPE or Unigram vocabulary expected)`);
  // Unigram stores [piece, score] pairs in id order; WordLevel and BPE a piece → id map.
  const entries: [string, number][] = Array.isArray(vocab) ? vocab.map(([piece], id) => [piece, id]) : Object.entries(vocab);
  const pieces: (string | undefined)[] = new Array(vocabSize);
  const put = (piece: string, id: number) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new Error(`${file}: token '${piece}' has id ${id}, outside the model's vocabulary of ${vocabSize}`);
    if (pieces[id] !== undefined && pieces[id] !== piece) throw new Error(`${file}: id ${id} is both '${pieces[id]}' and '${piece}'`);
    pieces[id] = piece;
  };
  for (const [piece, id] of entries) put(piece, id);
  const control = new Set<number>();
  for (const added of json.added_tokens ?? []) {
    put(added.content, added.id);
    if (added.special) control.add(added.id);
  }
  const unkId = json.model?.unk_token === undefined ? undefined : pieces.indexOf(json.model.unk_token);
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  for (let id = 0; id < vocabSize; id++) {
    const piece = pieces[id];
    tokens.push(piece ?? `[PAD${id}]`);
    scores.push(Array.isArray(vocab) ? Number(vocab[id]?.[1] ?? 0) : -id);
    types.push(
      piece === undefined ? TOKEN_TYPE.unused
        : id === unkId ? TOKEN_TYPE.unknown
          : control.has(id) ? TOKEN_TYPE.control
            : /^<0x[0-9A-F]{2}>$/.test(piece) ? TOKEN_TYPE.byte
              : TOKEN_TYPE.normal,
    );
  }
  const sentencePiece = json.model?.type === 'Unigram' || (json.model?.type === 'BPE' && json.model.byte_fallback === true);
  const out = new Map<string, GgufValue>([
    ['tokenizer.ggml.model', gguf.string(sentencePiece ? 'llama' : 'gpt2')],
    ['tokenizer.ggml.pre', gguf.string('default')],
    ['tokenizer.ggml.tokens', gguf.strings(tokens)],
  ]);
  if (sentencePiece) out.set('tokenizer.ggml.scores', gguf.f32s(scores));
  out.set('tokenizer.ggml.token_type', gguf.i32s(types));
  if (!sentencePiece) out.set('tokenizer.ggml.merges', gguf.strings((json.model?.merges ?? []).map((m) => (Array.isArray(m) ? m.join(' ') : m))));
  if (specials.bosTokenId !== undefined) out.set('tokenizer.ggml.bos_token_id', gguf.u32(specials.bosTokenId));
  if (specials.eosTokenId !== undefined) out.set('tokenizer.ggml.eos_token_id', gguf.u32(specials.eosTokenId));
  if (unkId !== undefined && unkId >= 0) out.set('tokenizer.ggml.unknown_token_id', gguf.u32(unkId));
  out.set('tokenizer.ggml.add_bos_token', gguf.bool(specials.addBosToken));
  out.set('tokenizer.ggml.add_eos_token', gguf.bool(false));
  return out;
}

/** `add_bos_token` from tokenizer_config.json (false when absent or unreadable). */
export async function readAddBosToken(dir: string): Promise<boolean> {
  const text = await readFile(path.join(dir, 'tokenizer_config.json'), 'utf8').catch(() => '{}');
  return (JSON.parse(text) as { add_bos_token?: unknown }).add_bos_token === true;
}
