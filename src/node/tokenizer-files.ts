/**
 * Loads a tokenizer from a model folder on disk, offline: `tokenizer.json` and
 * `tokenizer_config.json` are required; the chat template comes from `chatTemplateFile`
 * when given, else `chat_template.jinja` in the folder (where newer transformers saves
 * it), else `chat_template` in tokenizer_config.json, else the fallback.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createTokenizer, type TextTokenizer, TokenizerError } from '../core/model/tokenizer.ts';

export interface LoadTokenizerOptions {
  /** Chat template file (Jinja) overriding the tokenizer's own; relative paths resolve against `dir`. */
  readonly chatTemplateFile?: string;
  /** Passed through to {@link createTokenizer}. */
  readonly fallbackTemplate?: string;
}

/**
 * Reads the tokenizer files in `dir` and builds a {@link TextTokenizer}. Rejects with a
 * {@link TokenizerError} whose `file` is the full path of the missing, unreadable or
 * malformed file.
 */
export async function loadTokenizer(dir: string, opts: LoadTokenizerOptions = {}): Promise<TextTokenizer> {
  const files = {
    'tokenizer.json': path.join(dir, 'tokenizer.json'),
    'tokenizer_config.json': path.join(dir, 'tokenizer_config.json'),
  };
  // One after the other, so a folder missing both always reports tokenizer.json first.
  const tokenizerJson = await readJson(files['tokenizer.json']);
  const tokenizerConfig = await readJson(files['tokenizer_config.json']);

  let chatTemplate: { text: string; file: string } | undefined;
  if (opts.chatTemplateFile !== undefined) {
    const file = path.resolve(dir, opts.chatTemplateFile);
    chatTemplate = { text: await readText(file, 'chat template file'), file };
  } else {
    const file = path.join(dir, 'chat_template.jinja');
    const text = await readOptionalText(file);
    if (text !== undefined) chatTemplate = { text, file };
  }

  try {
    return createTokenizer(tokenizerJson, tokenizerConfig, {
      chatTemplate: chatTemplate?.text,
      chatTemplateSource: chatTemplate?.file,
      fallbackTemplate: opts.fallbackTemplate,
    });
  } catch (error) {
    // Core names files by their bare names; report the path the user can open.
    if (error instanceof TokenizerError && error.file in files) {
      const full = files[error.file as keyof typeof files];
      throw new TokenizerError(full, error.detail, { cause: error.cause ?? error });
    }
    throw error;
  }
}

async function readJson(file: string): Promise<unknown> {
  const text = await readText(file, 'required tokenizer file');
  try {
    return JSON.parse(text) as unknown;
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new TokenizerError(file, `not valid JSON (${reason})`, { cause });
  }
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'not found' : `cannot be read (${code ?? String(cause)})`;
    throw new TokenizerError(file, `${what} ${reason}`, { cause });
  }
}

async function readOptionalText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new TokenizerError(file, 'cannot be read', { cause });
  }
}
