/**
 * Inside the grammar worker (grammar-worker.ts): one XGrammarEngine over the model's
 * vocabulary — its converter and matcher instances, its cache of compiled grammars — and
 * every live constraint, by handle. Requests run one at a time, in the order they came, so a
 * sequence's accept, mask and rollback keep their order; a compile blocks only this thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { TokenConstraint } from '../core/sampling/constraint.ts';
import { GrammarError } from '../core/sampling/grammar/output-grammar.ts';
import { XGrammarEngine } from '../core/sampling/grammar/xgrammar-engine.ts';
import { loadXGrammar } from './xgrammar-node.ts';
import type { GrammarWorkerData, GrammarWorkerReply, GrammarWorkerRequest } from './grammar-worker.ts';

const data = workerData as GrammarWorkerData;
const port = parentPort!;
const engine = new XGrammarEngine(loadXGrammar, data.vocabulary, data.options);
const constraints = new Map<number, TokenConstraint>();
/** Why a handle's last accept, rollback or fork failed: told at its next request that answers. */
const broken = new Map<number, Error>();
let nextHandle = 1;

const failure = (error: unknown): GrammarWorkerReply['error'] => ({
  message: error instanceof Error ? error.message : String(error),
  grammar: error instanceof GrammarError,
  violation: error instanceof Error && error.name === 'ConstraintViolationError' ? ((error as { tokenId?: number }).tokenId ?? -1) : undefined,
});

function held(handle: number): TokenConstraint {
  const error = broken.get(handle);
  if (error) {
    broken.delete(handle);
    throw error;
  }
  const constraint = constraints.get(handle);
  if (!constraint) throw new Error(`no grammar constraint ${handle} (disposed)`);
  return constraint;
}

async function handle(request: GrammarWorkerRequest): Promise<GrammarWorkerReply | undefined> {
  switch (request.op) {
    case 'open': {
      const constraint = await engine.constraint(request.grammar);
      const id = nextHandle++;
      constraints.set(id, constraint);
      return { id: request.id, handle: id };
    }
    case 'mask': {
      const mask = await held(request.handle).nextMask();
      return { id: request.id, mask: mask && new Int32Array(mask) };
    }
    case 'fork': {
      const copy = await held(request.handle).fork();
      const id = nextHandle++;
      constraints.set(id, copy);
      return { id: request.id, handle: id };
    }
    case 'accept':
      held(request.handle).accept(request.token);
      return undefined;
    case 'rollback':
      held(request.handle).rollback(request.tokens);
      return undefined;
    case 'dispose':
      constraints.get(request.handle)?.dispose();
      constraints.delete(request.handle);
      broken.delete(request.handle);
      return undefined;
  }
}

let queue = Promise.resolve();
port.on('message', (request: GrammarWorkerRequest) => {
  queue = queue.then(async () => {
    try {
      const reply = await handle(request);
      if (reply) port.postMessage(reply, reply.mask ? [reply.mask.buffer as ArrayBuffer] : []);
    } catch (error) {
      if ('id' in request && request.id !== undefined) port.postMessage({ id: request.id, error: failure(error) });
      else if ('handle' in request) broken.set(request.handle, error instanceof Error ? error : new Error(String(error)));
    }
  });
});
