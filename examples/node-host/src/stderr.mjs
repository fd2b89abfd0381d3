/**
 * @file Drains a runtime's stderr concurrently into a bounded buffer and redacts secrets and
 * prompts from it.
 */

/** What the host keeps of a runtime's stderr, at most (64 KiB, in UTF-8 bytes). */
export const STDERR_LIMIT_BYTES = 64 * 1024;
export const REDACTED = "[redacted]";
const TRUNCATION_NOTE = "\n[stderr truncated]";
const CREDENTIAL_NAME = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE)/i;
const SHORTEST_REDACTED_VALUE = 4;

/**
 * Values of environment variables whose names look like credentials (`*_KEY`, `*_TOKEN`, ...).
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {string[]}
 */
export function credentialValues(env = process.env) {
  /** @type {string[]} */
  const values = [];
  for (const [name, value] of Object.entries(env)) {
    if (CREDENTIAL_NAME.test(name) && typeof value === "string" && value.length >= SHORTEST_REDACTED_VALUE) {
      values.push(value);
    }
  }
  return values;
}

/**
 * Replace every occurrence of every secret (raw and JSON-escaped) with `[redacted]`, longest first.
 * @param {string} text
 * @param {readonly unknown[]} secrets non-strings and empty strings are ignored
 * @returns {string}
 */
export function redact(text, secrets) {
  /** @type {Set<string>} */
  const forms = new Set();
  for (const secret of secrets) {
    if (typeof secret !== "string" || secret.length === 0) continue;
    forms.add(secret);
    forms.add(JSON.stringify(secret).slice(1, -1));
    for (const line of secret.split(/\r?\n/)) {
      if (line.trim().length >= SHORTEST_REDACTED_VALUE) forms.add(line);
    }
  }
  let result = text;
  for (const form of [...forms].sort((a, b) => b.length - a.length)) {
    if (form.length > 0) result = result.split(form).join(REDACTED);
  }
  return result;
}

/**
 * Reads a stream to its end, keeping the first `limit` bytes (plus enough slack that no secret
 * starting inside the window is cut) and counting the rest. `text()` gives the redacted, bounded
 * result.
 */
export class StderrCapture {
  /**
   * @param {import("node:stream").Readable} stream
   * @param {{ secrets?: readonly unknown[], limit?: number }} [options] non-string secrets are ignored
   */
  constructor(stream, { secrets = [], limit = STDERR_LIMIT_BYTES } = {}) {
    /** @type {string[]} */
    this.secrets = secrets.filter((secret) => typeof secret === "string" && secret.length > 0).map(String);
    this.limit = limit;
    this.slack = Math.max(0, ...this.secrets.map((secret) => Buffer.byteLength(JSON.stringify(secret))));
    /** @type {Buffer[]} */
    this.kept = [];
    this.keptBytes = 0;
    this.droppedBytes = 0;
    /** @type {Promise<void>} */
    this.ended = new Promise((resolve) => {
      stream.on("data", (/** @type {Buffer} */ chunk) => this.#take(chunk));
      stream.on("end", resolve);
      stream.on("close", resolve);
      stream.on("error", resolve);
    });
  }

  /** @param {Buffer} chunk */
  #take(chunk) {
    const room = this.limit + this.slack - this.keptBytes;
    if (room > 0) {
      const piece = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.kept.push(Buffer.from(piece));
      this.keptBytes += piece.length;
    }
    this.droppedBytes += Math.max(0, chunk.length - Math.max(room, 0));
  }

  /**
   * The kept stderr: redacted, at most `limit` UTF-8 bytes.
   * @returns {string}
   */
  text() {
    let text = redact(Buffer.concat(this.kept).toString("utf8"), this.secrets);
    const truncated = this.droppedBytes > 0 || Buffer.byteLength(text) > this.limit;
    if (!truncated) return text;
    if (this.droppedBytes > 0) {
      // The raw cut may have split a secret: drop the tail that could hold its first part.
      text = text.slice(0, Math.max(0, text.length - this.slack));
    }
    return cutToBytes(text, this.limit - Buffer.byteLength(TRUNCATION_NOTE)) + TRUNCATION_NOTE;
  }
}

/**
 * The longest prefix of `text` that fits in `maxBytes` UTF-8 bytes, never splitting a character.
 * @param {string} text
 * @param {number} maxBytes
 * @returns {string}
 */
export function cutToBytes(text, maxBytes) {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  let end = Math.max(0, maxBytes);
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString("utf8");
}
