/** @file Splits the runtime's stdout byte stream into protocol lines with bounded memory. */

/** @typedef {import("./shapes.mjs").LineEvent} LineEvent */

/** The largest accepted line in bytes, excluding its line terminator (1 MiB). */
export const MAX_LINE_BYTES = 1024 * 1024;

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * Feed it chunks; it returns line events:
 * - `{ kind: "line", number, bytes }`: a complete line without `\n` / `\r\n` (empty lines included);
 * - `{ kind: "too_large", number }`: the line outgrew the limit before its newline; the rest of
 *   that line is discarded up to the next newline, never buffered;
 * - `{ kind: "truncated", number, bytes }` (from `finish`): the stream ended inside a line.
 */
export class LineFramer {
  /** @param {number} [maxLineBytes] */
  constructor(maxLineBytes = MAX_LINE_BYTES) {
    this.maxLineBytes = maxLineBytes;
    /** @type {Buffer[]} */
    this.pending = [];
    this.pendingBytes = 0;
    this.lineNumber = 0;
    this.discarding = false;
  }

  /**
   * @param {Buffer} chunk
   * @returns {LineEvent[]}
   */
  push(chunk) {
    /** @type {LineEvent[]} */
    const events = [];
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!this.discarding) {
        const piece = chunk.subarray(start, end);
        const limit = this.maxLineBytes + this.#allowedCarriageReturn(piece, newline);
        if (this.pendingBytes + piece.length > limit) {
          this.lineNumber += 1;
          events.push({ kind: "too_large", number: this.lineNumber });
          this.#clear();
          this.discarding = true;
        } else if (piece.length > 0) {
          this.pending.push(Buffer.from(piece));
          this.pendingBytes += piece.length;
        }
      }
      if (newline === -1) break;
      if (this.discarding) {
        this.discarding = false;
      } else {
        this.lineNumber += 1;
        events.push({ kind: "line", number: this.lineNumber, bytes: stripCarriageReturn(this.#take()) });
      }
      this.#clear();
      start = newline + 1;
    }
    return events;
  }

  /**
   * The stream ended: a pending partial line becomes a `truncated` event (or null).
   * @returns {LineEvent | null}
   */
  finish() {
    if (this.discarding || this.pendingBytes === 0) {
      this.#clear();
      this.discarding = false;
      return null;
    }
    this.lineNumber += 1;
    /** @type {LineEvent} */
    const event = { kind: "truncated", number: this.lineNumber, bytes: stripCarriageReturn(this.#take()) };
    this.#clear();
    return event;
  }

  /** A `\r` right before the newline is a terminator, not content: it may sit past the limit. */
  /**
   * @param {Buffer} piece
   * @param {number} newline
   */
  #allowedCarriageReturn(piece, newline) {
    return newline !== -1 && piece.length > 0 && piece[piece.length - 1] === CARRIAGE_RETURN ? 1 : 0;
  }

  #take() {
    return this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
  }

  #clear() {
    this.pending = [];
    this.pendingBytes = 0;
  }
}

/**
 * @param {Buffer} bytes
 * @returns {Buffer}
 */
function stripCarriageReturn(bytes) {
  const last = bytes.length - 1;
  return last >= 0 && bytes[last] === CARRIAGE_RETURN ? bytes.subarray(0, last) : bytes;
}
