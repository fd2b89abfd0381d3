/**
 * @file The plumbing under src/run.mjs's steps: the runtime's stdout as a queue of line events a
 * step takes one at a time, and a bounded wait for a promise.
 */

import { LineFramer } from "./lines.mjs";

/** @typedef {import("./shapes.mjs").LineEvent} LineEvent */

/**
 * The runtime's stdout cut into line events as chunks arrive. A step takes them with `take()`
 * and, when none is queued, waits for the next with `arrival()`. The stream ends at EOF, or when
 * `end()` is called (the runtime exited and its stdout did not close in time).
 */
export class FrameReader {
  /** @param {import("node:stream").Readable} stdout */
  constructor(stdout) {
    this.framer = new LineFramer();
    /** @type {LineEvent[]} */
    this.queued = [];
    this.ended = false;
    /** @type {() => void} */
    this.markClosed = () => {};
    /** Resolves at the end of the stream. */
    this.closed = new Promise((resolve) => {
      this.markClosed = () => resolve(undefined);
    });
    /** @type {(() => void) | null} */
    this.wake = null;
    stdout.on("data", (/** @type {Buffer} */ chunk) => {
      this.queued.push(...this.framer.push(chunk));
      this.#wakeUp();
    });
    stdout.on("close", () => this.end());
  }

  /** The end of the stream: a line left without its newline is queued as `truncated`. */
  end() {
    if (this.ended) return;
    this.ended = true;
    const tail = this.framer.finish();
    if (tail) this.queued.push(tail);
    this.markClosed();
    this.#wakeUp();
  }

  /**
   * The next line event, null at the end of the stream, undefined when none has arrived yet.
   * @returns {LineEvent | null | undefined}
   */
  take() {
    const event = this.queued.shift();
    if (event) return event;
    return this.ended ? null : undefined;
  }

  /**
   * Resolves when a line event is queued or the stream ended.
   * @returns {Promise<void>}
   */
  arrival() {
    if (this.queued.length > 0 || this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  #wakeUp() {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/**
 * Whether `promise` settles within `ms`.
 * @param {Promise<unknown>} promise
 * @param {number} ms
 * @returns {Promise<boolean>}
 */
export async function settlesWithin(promise, ms) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = await Promise.race([promise.then(() => true), timedOut]);
  clearTimeout(timer);
  return settled;
}
