/**
 * One call at a time: jobs run in order of arrival, each after the previous settled. An
 * onnxruntime-web session refuses a `run` while another is in flight ("Session already
 * started"; transformers.js chains its runs for the same reason), and WebGPU sessions of one
 * tab share one device queue, so a browser peer's executors share one RunQueue.
 */
export class RunQueue {
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;

  /** Jobs queued or running. */
  get size(): number {
    return this.waiting;
  }

  /** Run `job` once every job queued before it has settled; its result or rejection is yours. */
  run<T>(job: () => Promise<T>): Promise<T> {
    this.waiting++;
    const result = this.tail.then(job);
    const settled = result.then(
      () => this.waiting--,
      () => this.waiting--,
    );
    this.tail = settled;
    return result;
  }
}
