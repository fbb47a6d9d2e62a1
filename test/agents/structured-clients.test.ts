/**
 * Structured outputs and tool calls through real clients, on a random-weight Qwen2 model with
 * the real Qwen2.5-Instruct tokenizer and template: chat completions (`chat-clients.ts`) and
 * the Responses API (`responses-clients.ts`) and Ollama's API through the `ollama` client
 * (`ollama-clients.ts`), on one head (`qwen-head.ts`) with every layer in
 * the head process; the edges agent frameworks hit (cut calls, loose schemas, the history
 * check: `tool-edges.ts`). Every body and stream chunk is checked against the OpenAI OpenAPI
 * description (`specFetch`).
 */
import { chatClientTests } from './chat-clients.ts';
import { ollamaClientTests } from './ollama-clients.ts';
import { useQwenHead } from './qwen-head.ts';
import { responsesClientTests } from './responses-clients.ts';
import { toolEdgeTests } from './tool-edges.ts';

const head = useQwenHead();
chatClientTests(head);
responsesClientTests(head);
toolEdgeTests(head);
ollamaClientTests(head);
