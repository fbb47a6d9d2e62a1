/**
 * One sequence's {@link TokenConstraint} over an xgrammar `GrammarMatcher`.
 *
 * `fork` makes a new matcher at the grammar's start and replays the accepted tokens (the web
 * build exposes no matcher copy); that costs one `acceptToken` (~0.03 ms) per token so far.
 */
import { ConstraintViolationError, type TokenConstraint, type TokenMask } from '../constraint.ts';
import type { XGrammarMatcher } from './xgrammar-module.ts';

export class XGrammarConstraint implements TokenConstraint {
  private readonly accepted: number[] = [];
  private disposed = false;

  constructor(
    private readonly matcher: XGrammarMatcher,
    private readonly newMatcher: () => Promise<XGrammarMatcher>,
  ) {}

  get finished(): boolean {
    this.check();
    return this.matcher.isTerminated();
  }

  async nextMask(): Promise<TokenMask | undefined> {
    this.check();
    if (this.matcher.isTerminated()) {
      throw new ConstraintViolationError(-1, 'the grammar already ended; no further token is allowed');
    }
    return this.matcher.getNextTokenBitmask();
  }

  accept(tokenId: number): void {
    this.check();
    if (!this.matcher.acceptToken(tokenId)) throw new ConstraintViolationError(tokenId);
    this.accepted.push(tokenId);
  }

  rollback(tokens: number): void {
    this.check();
    if (!Number.isInteger(tokens) || tokens < 0 || tokens > this.accepted.length) {
      throw new RangeError(`cannot roll back ${tokens} tokens: ${this.accepted.length} were accepted`);
    }
    if (tokens === 0) return;
    this.matcher.rollBack(tokens);
    this.accepted.length -= tokens;
  }

  async fork(): Promise<TokenConstraint> {
    this.check();
    const copy = new XGrammarConstraint(await this.newMatcher(), this.newMatcher);
    for (const id of this.accepted) copy.accept(id);
    return copy;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.matcher.dispose();
  }

  private check(): void {
    if (this.disposed) throw new Error('the output constraint is disposed');
  }
}
