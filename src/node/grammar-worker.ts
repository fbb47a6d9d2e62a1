/**
 * The grammar engine in a worker thread: xgrammar's compilation runs synchronously in its
 * WebAssembly (1.7 s for a bounded schema at a 151,936-token vocabulary), so on the head's
 * main thread it would stall every stream. Here the XGrammarEngine — compiles, its cache by
 * grammar, every sequence's matcher — lives in one worker (grammar-worker-main.ts), started on
 * the first constrained request; the main thread keeps each sequence's accepted tokens and last
 * mask, so `accept` is checked at once against the mask the sampler drew from and `finished`
 * needs no round trip. What stays: constrained sequences share the worker, so theirs wait
 * while it compiles a new grammar (xgrammar's web build cannot move a compiled grammar
 * between instances); unconstrained streams and the event loop do not.
 */
import { Worker } from 'node:worker_threads';
import { ConstraintViolationError, type TokenConstraint, type TokenMask } from '../core/sampling/constraint.ts';
import { GrammarError, type GrammarEngine, type OutputGrammar } from '../core/sampling/grammar/output-grammar.ts';
import type { TokenVocabulary } from '../core/sampling/grammar/vocabulary.ts';
import type { XGrammarEngineOptions } from '../core/sampling/grammar/xgrammar-engine.ts';
import { FROM_SOURCES } from './package-files.ts';

const WORKER_ENTRY = new URL(FROM_SOURCES ? './grammar-worker.mjs' : './grammar-worker-main.js', import.meta.url);

export interface GrammarWorkerData {
  readonly vocabulary: TokenVocabulary;
  readonly options: XGrammarEngineOptions;
}

export type GrammarWorkerRequest =
  | { readonly id: number; readonly op: 'open'; readonly grammar: OutputGrammar }
  | { readonly id: number; readonly op: 'mask' | 'fork'; readonly handle: number }
  | { readonly op: 'accept'; readonly handle: number; readonly token: number }
  | { readonly op: 'rollback'; readonly handle: number; readonly tokens: number }
  | { readonly op: 'dispose'; readonly handle: number };

export interface GrammarWorkerReply {
  readonly id: number;
  readonly handle?: number;
  readonly mask?: Int32Array;
  readonly error?: { readonly message: string; readonly grammar: boolean; readonly violation?: number };
}

/** The worker-side error as the type the engine's callers know. */
function rebuilt(error: NonNullable<GrammarWorkerReply['error']>): Error {
  if (error.grammar) return new GrammarError(error.message);
  if (error.violation !== undefined) return new ConstraintViolationError(error.violation, error.message.replace(/^.*?: /, ''));
  return new Error(error.message);
}

export class WorkerGrammarEngine implements GrammarEngine {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, (reply: GrammarWorkerReply) => void>();
  private nextId = 1;
  private exited: Error | undefined;
  private disposed = false;

  constructor(
    private readonly vocabulary: TokenVocabulary,
    private readonly options: XGrammarEngineOptions,
  ) {
    if (options.stopTokenIds.length === 0) throw new RangeError('a grammar engine needs at least one stop token id');
  }

  async constraint(grammar: OutputGrammar): Promise<TokenConstraint> {
    if (this.disposed) throw new Error('the grammar engine is disposed');
    const reply = await this.call({ op: 'open', grammar });
    return new WorkerConstraint(this, reply.handle!, this.options.stopTokenIds);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    void this.worker?.terminate();
  }

  /** A request that answers (open, mask, fork); rejects with the worker's error. */
  async call(request: { op: 'open'; grammar: OutputGrammar } | { op: 'mask' | 'fork'; handle: number }): Promise<GrammarWorkerReply> {
    const worker = this.started();
    if (this.exited) throw this.exited;
    const id = this.nextId++;
    const reply = await new Promise<GrammarWorkerReply>((resolve) => {
      this.pending.set(id, resolve);
      worker.postMessage({ id, ...request });
    });
    if (reply.error) throw rebuilt(reply.error);
    return reply;
  }

  /** A request that does not answer (accept, rollback, dispose); a failure is told at the handle's next call. */
  tell(request: GrammarWorkerRequest): void {
    if (!this.exited && !this.disposed) this.started().postMessage(request);
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const data: GrammarWorkerData = { vocabulary: this.vocabulary, options: this.options };
    const worker = (this.worker = new Worker(WORKER_ENTRY, { workerData: data }));
    worker.unref();
    worker.on('message', (reply: GrammarWorkerReply) => {
      const resolve = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      resolve?.(reply);
    });
    worker.on('error', (error) => (this.exited = new Error(`the grammar worker failed: ${error.message}`)));
    worker.on('exit', (code) => {
      this.exited ??= new Error(`the grammar worker exited (code ${code})`);
      for (const resolve of this.pending.values()) resolve({ id: -1, error: { message: this.exited.message, grammar: false } });
      this.pending.clear();
    });
    return worker;
  }
}

/** One sequence's constraint, its matcher in the worker; see the file's header. */
class WorkerConstraint implements TokenConstraint {
  private readonly accepted: number[] = [];
  /** The mask of the next position, while known (cleared by accept and rollback). */
  private mask: TokenMask | undefined | null = null;
  private disposed = false;

  constructor(
    private readonly engine: WorkerGrammarEngine,
    private readonly handle: number,
    private readonly stopTokenIds: readonly number[],
  ) {}

  /** A stop token is allowed only where the grammar may end, and accepting it ends it. */
  get finished(): boolean {
    this.check();
    const last = this.accepted.at(-1);
    return last !== undefined && this.stopTokenIds.includes(last);
  }

  async nextMask(): Promise<TokenMask | undefined> {
    this.check();
    if (this.finished) throw new ConstraintViolationError(-1, 'the grammar already ended; no further token is allowed');
    if (this.mask === null) {
      const reply = await this.engine.call({ op: 'mask', handle: this.handle });
      this.mask = reply.mask;
    }
    return this.mask && this.mask.slice();
  }

  accept(tokenId: number): void {
    this.check();
    const mask = this.mask;
    if (mask && !(((mask[tokenId >> 5] ?? 0) >>> (tokenId & 31)) & 1)) throw new ConstraintViolationError(tokenId);
    this.engine.tell({ op: 'accept', handle: this.handle, token: tokenId });
    this.accepted.push(tokenId);
    this.mask = null;
  }

  rollback(tokens: number): void {
    this.check();
    if (!Number.isInteger(tokens) || tokens < 0 || tokens > this.accepted.length) {
      throw new RangeError(`cannot roll back ${tokens} tokens: ${this.accepted.length} were accepted`);
    }
    if (tokens === 0) return;
    this.engine.tell({ op: 'rollback', handle: this.handle, tokens });
    this.accepted.length -= tokens;
    this.mask = null;
  }

  async fork(): Promise<TokenConstraint> {
    this.check();
    // The worker forks in the state of the requests sent so far: this state, now.
    const accepted = [...this.accepted];
    const mask = this.mask === null ? null : this.mask && this.mask.slice();
    const reply = await this.engine.call({ op: 'fork', handle: this.handle });
    const copy = new WorkerConstraint(this.engine, reply.handle!, this.stopTokenIds);
    copy.accepted.push(...accepted);
    copy.mask = mask;
    return copy;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.engine.tell({ op: 'dispose', handle: this.handle });
  }

  private check(): void {
    if (this.disposed) throw new Error('the output constraint is disposed');
  }
}
