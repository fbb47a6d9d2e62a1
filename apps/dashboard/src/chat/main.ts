/**
 * The chat page (`/dashboard/chat`): a conversation with the served model over the public
 * API only — `/v1/models` for its name and context, `/v1/chat/completions` streamed for the
 * answers, `/api/events` folded with the shared `applyEvent` for the route at work. Same
 * origin and the same `--api-key` rules as the dashboard (the cookie a `?key=` visit sets).
 * When the conversation no longer fits the context, the oldest turns are dropped, and the
 * page says so. Stop aborts the stream, which cancels the session on every hop.
 */
import { applyEvent, emptyState, type MeshEvent, type MeshState, type SessionView } from '../../../../src/shared/dashboard-state.ts';
import { h } from '../dom.ts';
import { openMeshEvents, type StreamStatus } from '../event-stream.ts';
import { ms, rate } from '../format.ts';
import { CompletionError, streamChatCompletion } from './completion-stream.ts';
import { dropOldestTurn, droppedNotice, isContextLengthError, messagesToSend, type Turn } from './conversation.ts';
import { HopActivity } from './hop-activity.ts';
import { renderLiveRoute } from './render-live-route.ts';
import { renderTranscript, type AnswerState } from './render-transcript.ts';

const element = <T extends HTMLElement>(id: string) => {
  const found = document.getElementById(id);
  if (!found) throw new Error(`chat: #${id} is missing from chat.html`);
  return found as T;
};

const view = {
  banner: element('banner'),
  model: element('model'),
  context: element('context'),
  connection: element('connection'),
  notice: element('notice'),
  transcript: element('transcript'),
  composer: element<HTMLFormElement>('composer'),
  message: element<HTMLTextAreaElement>('message'),
  temperature: element<HTMLInputElement>('temperature'),
  maxTokens: element<HTMLInputElement>('max-tokens'),
  seed: element<HTMLInputElement>('seed'),
  send: element<HTMLButtonElement>('send'),
  stop: element<HTMLButtonElement>('stop'),
  keyForm: element<HTMLFormElement>('key-form'),
  key: element<HTMLInputElement>('key'),
  liveRoute: element('live-route'),
  sessionLine: element('session-line'),
  sessionStats: element('session-stats'),
};

let state: MeshState = emptyState();
let status: StreamStatus = 'connecting';
let model: { id: string; contextLength?: number } | undefined;
const turns: Turn[] = [];
const answers = new Map<number, AnswerState>();
const activity = new HopActivity();
let followed: string | undefined;
let controller: AbortController | undefined;
let pending = false;

// A `?key=` visit has set the cookie by now: keep the key out of the address bar and history.
if (new URLSearchParams(location.search).has('key')) history.replaceState(null, '', location.pathname);

function followedSession(): SessionView | undefined {
  if (!followed) return undefined;
  return state.sessions.find((s) => s.id === followed) ?? state.finished.find((s) => s.id === followed);
}

function render(): void {
  pending = false;
  const now = performance.now();
  const session = followedSession();
  view.connection.textContent = status;
  view.connection.className = `badge conn conn-${status}`;
  view.banner.hidden = status !== 'reconnecting';
  view.banner.textContent = 'Head unreachable — reconnecting. The route panel is as of the last update.';
  view.transcript.replaceChildren(renderTranscript(turns, answers));
  view.transcript.scrollTop = view.transcript.scrollHeight;
  view.liveRoute.replaceChildren(renderLiveRoute(state, session, session ? activity.view(session, now) : []));
  view.sessionLine.replaceChildren(
    ...(session
      ? [h('span', { class: 'mono muted', 'data-testid': 'session-id' }, session.id), h('span', { class: `badge state-${session.state}`, 'data-testid': 'session-state' }, session.state)]
      : [h('span', { class: 'muted' }, 'The answer travels embedding → hops → LM head once per token.')]),
  );
  view.sessionStats.replaceChildren(...(session ? sessionStats(session) : []));
  view.send.disabled = controller !== undefined || model === undefined;
  view.stop.disabled = controller === undefined;
  document.body.dataset.status = status;
}

function sessionStats(session: SessionView): HTMLElement[] {
  const stat = (label: string, value: string, testId: string) => h('div', { class: 'stat' }, h('span', { class: 'stat-value', 'data-testid': testId }, value), h('span', { class: 'stat-label' }, label));
  return [
    stat('generated', session.completionTokens.toLocaleString(), 'completion-tokens'),
    stat('tokens/s', rate(session.tokensPerSecond), 'tokens-per-second'),
    stat('TTFT', ms(session.timeToFirstTokenMs), 'ttft'),
    stat('repairs', String(session.repairs.length), 'repairs-count'),
  ];
}

function schedule(): void {
  if (pending) return;
  pending = true;
  requestAnimationFrame(render);
}

function onMeshEvent(event: MeshEvent): void {
  state = applyEvent(state, event);
  const session = followedSession();
  if (session && 'session' in event && event.session.id === session.id) activity.update(session, performance.now());
  schedule();
}

function setNotice(text: string | undefined): void {
  view.notice.hidden = text === undefined;
  view.notice.textContent = text ?? '';
}

async function loadModel(): Promise<void> {
  const response = await fetch('/v1/models', { credentials: 'same-origin' });
  if (response.status === 401) return askForKey();
  const card = ((await response.json()) as { data: { id: string; max_model_len?: number }[] }).data[0];
  if (!card) return setNotice('The head serves no model.');
  model = { id: card.id, ...(card.max_model_len !== undefined ? { contextLength: card.max_model_len } : {}) };
  view.model.textContent = model.id;
  view.context.textContent = model.contextLength !== undefined ? `context ${model.contextLength} tokens` : '';
  schedule();
}

function askForKey(): void {
  view.keyForm.hidden = false;
  view.key.focus();
}

function settings(): Record<string, number> {
  const out: Record<string, number> = {};
  const number = (input: HTMLInputElement) => (input.value.trim() === '' ? undefined : Number(input.value));
  const temperature = number(view.temperature);
  const maxTokens = number(view.maxTokens);
  const seed = number(view.seed);
  if (temperature !== undefined && Number.isFinite(temperature)) out.temperature = temperature;
  if (maxTokens !== undefined && Number.isInteger(maxTokens)) out.max_tokens = maxTokens;
  if (seed !== undefined && Number.isInteger(seed)) out.seed = seed;
  return out;
}

async function send(text: string): Promise<void> {
  if (!model || controller) return;
  turns.push({ role: 'user', content: text });
  const index = turns.push({ role: 'assistant', content: '' }) - 1;
  const answer = (patch: Partial<AnswerState>) => answers.set(index, { ...(answers.get(index) ?? { index, streaming: true }), ...patch });
  answer({ streaming: true });
  const own = (controller = new AbortController());
  setNotice(undefined);
  schedule();
  let dropped = 0;
  try {
    for (;;) {
      try {
        await streamChatCompletion({ model: model.id, messages: messagesToSend(turns.slice(0, index)), ...settings() }, own.signal, {
          onId(id) {
            followed = id;
            answer({ sessionId: id });
            schedule();
          },
          onDelta(delta) {
            turns[index]!.content += delta;
            schedule();
          },
          onFinish: (reason) => answer({ ending: reason }),
          onUsage: (usage) => answer({ usage }),
        });
        break;
      } catch (error) {
        // Too long for the context: make room by dropping the oldest turn, then try again.
        if (error instanceof CompletionError && isContextLengthError(error.status, error.body)) {
          const count = dropOldestTurn(turns.slice(0, index));
          if (count > 0) {
            dropped += count;
            continue;
          }
        }
        throw error;
      }
    }
    if (!answers.get(index)?.ending) answer({ ending: 'cancelled' });
  } catch (error) {
    if (own.signal.aborted) answer({ ending: 'cancelled' });
    else {
      if (error instanceof CompletionError && error.status === 401) askForKey();
      answer({ ending: `error: ${error instanceof Error ? error.message : String(error)}` });
      // A refused question is not part of the conversation the model sees.
      if (turns[index]!.content === '') turns[index - 1]!.dropped = turns[index]!.dropped = true;
    }
  } finally {
    answer({ streaming: false });
    controller = undefined;
    if (dropped > 0) setNotice(droppedNotice(dropped, model.contextLength));
    schedule();
  }
}

view.composer.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = view.message.value.trim();
  if (!text || controller) return;
  view.message.value = '';
  void send(text);
});
view.message.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    view.composer.requestSubmit();
  }
});
view.stop.addEventListener('click', () => controller?.abort());
view.keyForm.addEventListener('submit', (event) => {
  event.preventDefault();
  // The head sets the key cookie on a `?key=` visit of the dashboard's pages.
  if (view.key.value) location.href = `/dashboard/chat?key=${encodeURIComponent(view.key.value)}`;
});

openMeshEvents({
  url: '/api/events',
  onEvent: onMeshEvent,
  onStatus(next) {
    status = next;
    schedule();
  },
});
// While an answer streams, redraw often enough for hops to go dark when frames stop passing.
setInterval(() => controller && schedule(), 200);
void loadModel().catch((error: unknown) => setNotice(`Could not reach the head: ${error instanceof Error ? error.message : String(error)}`));
schedule();
