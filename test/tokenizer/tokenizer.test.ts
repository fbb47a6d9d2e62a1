import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_CHAT_TEMPLATE,
  TokenizerError,
  createTokenizer,
} from '../../src/core/model/tokenizer.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';

const STORIES = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');

const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// The Llama-2-chat template as shipped in meta-llama/Llama-2-7b-chat-hf.
const LLAMA2 =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}" +
  "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

let storiesJson: unknown;
let storiesConfig: Record<string, unknown>;
let temp: string;

beforeAll(async () => {
  storiesJson = JSON.parse(await readFile(path.join(STORIES, 'tokenizer.json'), 'utf8'));
  storiesConfig = JSON.parse(await readFile(path.join(STORIES, 'tokenizer_config.json'), 'utf8'));
  temp = await mkdtemp(path.join(tmpdir(), 'meshnet-tokenizer-'));
});
afterAll(async () => {
  await rm(temp, { recursive: true, force: true });
});

/** A model folder in `temp` with stories260k's tokenizer.json and the given files. */
async function folder(name: string, files: Record<string, string | object>): Promise<string> {
  const dir = path.join(temp, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir);
  const all = { 'tokenizer.json': storiesJson as object, ...files };
  for (const [file, content] of Object.entries(all)) {
    await writeFile(path.join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
}

describe('stories260k tokenizer', () => {
  it('encodes "t<i>" words to their ids and decodes them back', async () => {
    const tokenizer = await loadTokenizer(STORIES);
    expect(tokenizer.encode('t461 t401', { addSpecialTokens: false })).toEqual([461, 401]);
    expect(tokenizer.decode([461, 401])).toBe('t461 t401');
    expect(tokenizer.encode('  t3\nt511 ')).toEqual([3, 511]);
    expect(tokenizer.encode('nope')).toEqual([0]);
    expect(tokenizer.encode('')).toEqual([]);
    expect(tokenizer.decode([])).toBe('');
  });

  it('adds no special tokens: add_bos_token is false and there is no post-processor', async () => {
    const tokenizer = await loadTokenizer(STORIES);
    expect(tokenizer.encode('t461 t401')).toEqual([461, 401]);
    expect(tokenizer.encode('t461 t401', { addSpecialTokens: true })).toEqual([461, 401]);
    // Special-token text still maps to its id.
    expect(tokenizer.encode('<s> t461</s>')).toEqual([1, 461, 2]);
  });

  it('exposes bos/eos and decodes special tokens unless skipped', async () => {
    const tokenizer = await loadTokenizer(STORIES);
    expect(tokenizer.specialTokens.bosId).toBe(1);
    expect(tokenizer.specialTokens.eosIds).toEqual([2]);
    expect(tokenizer.specialTokens).toMatchObject({ bos: '<s>', eos: '</s>', unk: '<unk>' });
    expect([...tokenizer.specialTokens.ids]).toEqual([['<unk>', 0], ['<s>', 1], ['</s>', 2]]);
    expect(tokenizer.decode([1, 461, 2])).toBe('<s> t461 </s>');
    expect(tokenizer.decode([1, 461, 2], { skipSpecialTokens: true })).toBe('t461');
  });

  it('honours add_bos_token / add_eos_token from tokenizer_config.json', () => {
    const tokenizer = createTokenizer(storiesJson, { ...storiesConfig, add_bos_token: true, add_eos_token: true });
    expect(tokenizer.encode('t461 t401')).toEqual([1, 461, 401, 2]);
    expect(tokenizer.encode('t461 t401', { addSpecialTokens: false })).toEqual([461, 401]);
    expect(tokenizer.encode('')).toEqual([1, 2]);
  });

  it('uses the post-processor when the config has no flag, and the flag over it', () => {
    const withTemplate = {
      ...(storiesJson as object),
      post_processor: {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
      },
    };
    const { add_bos_token: _, ...noFlag } = storiesConfig;
    expect(createTokenizer(withTemplate, noFlag).encode('t461 t401')).toEqual([1, 461, 401]);
    expect(createTokenizer(withTemplate, storiesConfig).encode('t461 t401')).toEqual([461, 401]);
    expect(createTokenizer(withTemplate, noFlag).encode('t461', { addSpecialTokens: false })).toEqual([461]);
  });
});

describe('chat templates', () => {
  const conversation = [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: 'Hi' },
    { role: 'assistant' as const, content: 'Hello!' },
    { role: 'user' as const, content: 'Bye' },
  ];

  it('falls back to DEFAULT_CHAT_TEMPLATE for stories260k, which has none', async () => {
    const tokenizer = await loadTokenizer(STORIES);
    expect(tokenizer.chatTemplate.isFallback).toBe(true);
    expect(tokenizer.chatTemplate.isFallback).toBe(true);
    const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hi' }];
    expect(tokenizer.chatTemplate.render(messages, { addGenerationPrompt: true })).toBe(
      '<s><|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n',
    );
    expect(tokenizer.chatTemplate.render(messages, { addGenerationPrompt: false })).toBe(
      '<s><|system|>\nBe brief.\n<|user|>\nHi\n',
    );
    // Without a bos token the fallback starts directly with the first turn.
    const noBos = createTokenizer(storiesJson, { eos_token: '</s>' });
    expect(noBos.chatTemplate.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false })).toBe(
      '<|user|>\nHi\n',
    );
    expect(DEFAULT_CHAT_TEMPLATE).toContain('add_generation_prompt');
  });

  it('uses a custom fallbackTemplate and still reports the fallback', () => {
    const tokenizer = createTokenizer(storiesJson, storiesConfig, {
      fallbackTemplate: '{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}',
    });
    expect(tokenizer.chatTemplate.isFallback).toBe(true);
    expect(tokenizer.chatTemplate.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true })).toBe('Hi</s>');
  });

  it('renders a Llama-2 template from tokenizer_config.json with bos/eos strings', async () => {
    const dir = await folder('llama2', { 'tokenizer_config.json': { ...storiesConfig, chat_template: LLAMA2 } });
    const tokenizer = await loadTokenizer(dir);
    expect(tokenizer.chatTemplate.isFallback).toBe(false);
    expect(tokenizer.chatTemplate.isFallback).toBe(false);
    expect(tokenizer.chatTemplate.render(conversation, { addGenerationPrompt: true })).toBe(
      '<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]',
    );
    const error = (() => {
      try {
        tokenizer.chatTemplate.render([{ role: 'assistant', content: 'x' }], { addGenerationPrompt: false });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(TokenizerError);
    expect((error as TokenizerError).message).toContain('Conversation roles must alternate');
  });

  it('picks "default" from a list of named ChatML templates, honouring add_generation_prompt', async () => {
    const dir = await folder('chatml', {
      'tokenizer_config.json': {
        ...storiesConfig,
        chat_template: [
          { name: 'tool_use', template: 'TOOLS' },
          { name: 'default', template: CHATML },
        ],
      },
    });
    const tokenizer = await loadTokenizer(dir);
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    expect(tokenizer.chatTemplate.render(messages, { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(tokenizer.chatTemplate.render(messages, { addGenerationPrompt: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n',
    );
  });

  it('prefers chatTemplateFile, then chat_template.jinja, over tokenizer_config.json', async () => {
    const dir = await folder('override', {
      'tokenizer_config.json': { ...storiesConfig, chat_template: CHATML },
      'chat_template.jinja': 'JINJA {{ messages[0].content }}',
      'other.jinja': 'OTHER {{ bos_token }}',
    });
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    expect((await loadTokenizer(dir)).chatTemplate.render(messages, { addGenerationPrompt: false })).toBe('JINJA Hi');
    const overridden = await loadTokenizer(dir, { chatTemplateFile: 'other.jinja' });
    expect(overridden.chatTemplate.render(messages, { addGenerationPrompt: false })).toBe('OTHER <s>');
    expect(overridden.chatTemplate.isFallback).toBe(false);
  });
});

describe('errors', () => {
  async function rejection(promise: Promise<unknown>): Promise<TokenizerError> {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenizerError);
    return error as TokenizerError;
  }

  it('names a missing tokenizer.json or tokenizer_config.json', async () => {
    const noConfig = await folder('no-config', {});
    const error = await rejection(loadTokenizer(noConfig));
    expect(error.file).toBe(path.join(noConfig, 'tokenizer_config.json'));
    expect(error.message).toContain('not found');

    const empty = path.join(temp, 'empty');
    await rm(empty, { recursive: true, force: true });
    await mkdir(empty);
    const noJson = await rejection(loadTokenizer(empty));
    expect(noJson.file).toBe(path.join(empty, 'tokenizer.json'));
    expect(noJson.message).toContain('required tokenizer file not found');

    const missingTemplate = await rejection(loadTokenizer(STORIES, { chatTemplateFile: '/nonexistent/t.jinja' }));
    expect(missingTemplate.file).toBe('/nonexistent/t.jinja');
  });

  it('names malformed JSON and malformed contents with the full path', async () => {
    const badJson = await folder('bad-json', { 'tokenizer_config.json': '{ "bos_token": ' });
    const jsonError = await rejection(loadTokenizer(badJson));
    expect(jsonError.file).toBe(path.join(badJson, 'tokenizer_config.json'));
    expect(jsonError.message).toContain('not valid JSON');

    const noModel = await folder('no-model', { 'tokenizer.json': { added_tokens: [] }, 'tokenizer_config.json': {} });
    const modelError = await rejection(loadTokenizer(noModel));
    expect(modelError.file).toBe(path.join(noModel, 'tokenizer.json'));
    expect(modelError.message).toContain('"model"');

    const badTemplate = await folder('bad-template', {
      'tokenizer_config.json': { ...storiesConfig, chat_template: '{% for m in messages %}' },
    });
    const templateError = await rejection(loadTokenizer(badTemplate));
    expect(templateError.file).toBe(path.join(badTemplate, 'tokenizer_config.json'));
    expect(templateError.message).toContain('chat template does not parse');
  });

  it('rejects configs that contradict the vocabulary or the template format', () => {
    expect(() => createTokenizer(storiesJson, { bos_token: '<bos>' })).toThrow(/bos_token "<bos>" is not in the vocabulary/);
    expect(() => createTokenizer(storiesJson, { add_bos_token: true })).toThrow(/add_bos_token is true/);
    expect(() => createTokenizer(storiesJson, { chat_template: [{ name: 'x', template: 'y' }] })).toThrow(/"default"/);
    expect(() => createTokenizer(storiesJson, [])).toThrow(TokenizerError);
    expect(() => createTokenizer({ model: { type: 'Nope' }, added_tokens: [] }, {})).toThrow(/cannot build the tokenizer/);
  });
});

describe('runtime boundaries', () => {
  it('keeps the core tokenizer modules free of node:* imports', async () => {
    const dir = path.resolve(import.meta.dirname, '../../src/core/model');
    for (const file of ['tokenizer.ts', 'tokenizer-error.ts', 'special-tokens.ts', 'chat-template.ts', 'stream-decoder.ts']) {
      const source = await readFile(path.join(dir, file), 'utf8');
      expect(source, file).not.toMatch(/from ['"]node:|require\(/);
    }
  });
});
