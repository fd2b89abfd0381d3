/** @file Parses one stdout line into a generation-1 runtime frame, with hand checks equal to the schemas. */

/** @typedef {import("./shapes.mjs").Frame} Frame */

export const PROTOCOL_VERSION = 1;
export const RUNTIME_ID = "open-design";
export const REQUIRED_CAPABILITIES = ["session_resume", "session_cancel", "structured_events"];

/** Frame types that belong to one run and must carry its `request_id`. */
export const RUN_SCOPED_TYPES = new Set([
  "session",
  "thinking",
  "text",
  "tool_call",
  "tool_result",
  "usage",
  "result",
  "protocol_error",
]);
const KNOWN_TYPES = new Set(["probe", "ready", "models", ...RUN_SCOPED_TYPES]);
const RESULT_STATUSES = new Set(["completed", "cancelled", "failed"]);
const COMPATIBILITY_GENERATION = /^[A-Za-z0-9._:-]{1,128}$/;
const BYTE_ORDER_MARK = "\ufeff";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Thrown by the checks below; `code` is a `DSH_PROFILE_*` code. */
export class FrameError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * Whether a line holds only JSON whitespace (skipped by the checker).
 * @param {Uint8Array} bytes
 * @returns {boolean}
 */
export function isBlank(bytes) {
  for (const byte of bytes) {
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0c && byte !== 0x0d) return false;
  }
  return true;
}

/**
 * Decode and parse one line into a frame object, checked against its type's schema.
 * Throws `FrameError` with `DSH_PROFILE_MALFORMED_FRAME` (not UTF-8, BOM, not JSON) or
 * `DSH_PROFILE_INVALID_FRAME` (JSON but not a valid generation-1 frame).
 * @param {Uint8Array} bytes
 * @returns {Frame}
 */
export function parseFrame(bytes) {
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new FrameError("DSH_PROFILE_MALFORMED_FRAME", "is not valid UTF-8");
  }
  if (text.startsWith(BYTE_ORDER_MARK)) {
    throw new FrameError("DSH_PROFILE_MALFORMED_FRAME", "starts with a byte order mark");
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    throw new FrameError("DSH_PROFILE_MALFORMED_FRAME", "is not a JSON document");
  }
  if (!isPlainObject(value)) {
    throw invalid("is JSON but not an object");
  }
  const duplicate = findDuplicateKey(text);
  if (duplicate !== null) {
    throw invalid(`repeats the key ${JSON.stringify(duplicate)}`);
  }
  checkFrame(value);
  return /** @type {Frame} */ (value);
}

/**
 * Check a parsed object against the generation-1 frame schemas. Unknown members are tolerated.
 * @param {Record<string, any>} frame
 */
export function checkFrame(frame) {
  if (frame.v !== PROTOCOL_VERSION) {
    throw invalid(`has v ${JSON.stringify(frame.v)}, generation 1 requires v: 1`);
  }
  if (typeof frame.type !== "string") throw invalid("has no string `type`");
  if (!KNOWN_TYPES.has(frame.type)) throw invalid(`has unknown type ${JSON.stringify(frame.type)}`);
  const field = fieldChecker(frame);
  switch (frame.type) {
    case "probe":
    case "ready":
      field.string("runtime");
      field.count("protocol_version");
      field.nonEmptyString("plugin_version");
      field.optionalPattern("compatibility_generation", COMPATIBILITY_GENERATION);
      field.object("capabilities");
      for (const name of REQUIRED_CAPABILITIES) {
        const flag = frame.capabilities[name];
        if (flag !== undefined && typeof flag !== "boolean") {
          throw invalid(`capability ${name} is not a boolean`);
        }
      }
      break;
    case "models":
      field.string("runtime");
      if (!Array.isArray(frame.models)) throw invalid("`models` is not an array");
      break;
    case "session":
      field.nonEmptyString("request_id");
      field.nonEmptyString("session_id");
      field.boolean("resumed");
      break;
    case "thinking":
    case "text":
      field.nonEmptyString("request_id");
      field.string("content");
      break;
    case "tool_call":
      field.nonEmptyString("request_id");
      field.nonEmptyString("call_id");
      field.nonEmptyString("name");
      field.string("arguments");
      try {
        JSON.parse(frame.arguments);
      } catch {
        throw invalid("tool_call `arguments` is not a JSON-encoded string");
      }
      break;
    case "tool_result":
      field.nonEmptyString("request_id");
      field.nonEmptyString("call_id");
      field.nonEmptyString("name");
      field.string("output");
      field.boolean("is_error");
      break;
    case "usage":
      field.nonEmptyString("request_id");
      field.string("provider");
      field.string("model");
      field.count("input_tokens");
      field.count("output_tokens");
      field.optionalCount("cache_read_tokens");
      field.optionalCount("cache_write_tokens");
      break;
    case "result":
      checkResult(frame, field);
      break;
    case "protocol_error":
      field.optionalNonEmptyString("request_id");
      field.nonEmptyString("code");
      field.string("message");
      break;
  }
}

/**
 * @param {Record<string, any>} frame
 * @param {FieldChecker} field
 */
function checkResult(frame, field) {
  field.nonEmptyString("request_id");
  if (!RESULT_STATUSES.has(frame.status)) {
    throw invalid("result `status` is not completed, cancelled or failed");
  }
  field.nonEmptyString("session_id");
  field.boolean("resume_rejected");
  if (frame.resume_rejected && frame.status !== "failed") {
    throw invalid("a result with resume_rejected: true must have status failed");
  }
  field.omittedOrNonEmptyString("output");
  field.omittedOrNonEmptyString("stop_reason");
  const hasError = Object.hasOwn(frame, "error");
  if (frame.status === "failed" && !hasError) throw invalid("a failed result has no `error`");
  if (hasError) {
    if (!isPlainObject(frame.error)) throw invalid("result `error` is not an object");
    const { code, message } = frame.error;
    if (typeof code !== "string" || code.length === 0 || typeof message !== "string") {
      throw invalid("result `error` needs string `code` and `message`");
    }
  }
}

/**
 * The checks of one frame's members, each throwing `DSH_PROFILE_INVALID_FRAME` with the member named.
 * @typedef {{ [check: string]: (name: string, pattern?: any) => void }} FieldChecker
 */

/**
 * @param {Record<string, any>} frame
 * @returns {FieldChecker}
 */
function fieldChecker(frame) {
  /** @param {string} name */
  const where = (name) => `${frame.type} \`${name}\``;
  /** @param {string} name */
  const present = (name) => Object.hasOwn(frame, name) && frame[name] !== undefined;
  /** @type {FieldChecker} */
  const checker = {
    string(name) {
      if (typeof frame[name] !== "string") throw invalid(`${where(name)} is missing or not a string`);
    },
    nonEmptyString(name) {
      checker.string(name);
      if (frame[name].length === 0) throw invalid(`${where(name)} is empty`);
    },
    optionalNonEmptyString(name) {
      if (present(name) && frame[name] !== null) checker.nonEmptyString(name);
    },
    /** Optional members of a result are omitted when absent, never null. */
    omittedOrNonEmptyString(name) {
      if (Object.hasOwn(frame, name)) checker.nonEmptyString(name);
    },
    optionalPattern(name, pattern) {
      if (present(name) && (typeof frame[name] !== "string" || !pattern.test(frame[name]))) {
        throw invalid(`${where(name)} does not match ${pattern}`);
      }
    },
    boolean(name) {
      if (typeof frame[name] !== "boolean") throw invalid(`${where(name)} is missing or not a boolean`);
    },
    object(name) {
      if (!isPlainObject(frame[name])) throw invalid(`${where(name)} is missing or not an object`);
    },
    count(name) {
      const value = frame[name];
      if (!Number.isSafeInteger(value) || value < 0) {
        throw invalid(`${where(name)} is missing or not an integer from 0 to 2^53-1`);
      }
    },
    optionalCount(name) {
      if (present(name)) checker.count(name);
    },
  };
  return checker;
}

/** @param {string} message */
function invalid(message) {
  return new FrameError("DSH_PROFILE_INVALID_FRAME", message);
}

/**
 * Whether `value` is a JSON object (not null, not an array).
 * @param {unknown} value
 * @returns {value is Record<string, any>}
 */
export function isPlainObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The first key repeated inside one object of `text`, or null. `JSON.parse` keeps the last
 * duplicate silently; the protocol treats a duplicate key as an invalid frame. `text` must
 * already be known to be valid JSON.
 * @param {string} text
 * @returns {string | null}
 */
export function findDuplicateKey(text) {
  /** @type {({ keys: Set<string>, expectingKey: boolean } | null)[]} */
  const objects = [];
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (char === "{") {
      objects.push({ keys: new Set(), expectingKey: true });
    } else if (char === "[") {
      objects.push(null);
    } else if (char === "}" || char === "]") {
      objects.pop();
    } else if (char === ",") {
      const top = objects[objects.length - 1];
      if (top) top.expectingKey = true;
    } else if (char === '"') {
      let end = index + 1;
      while (text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      const top = objects[objects.length - 1];
      if (top && top.expectingKey) {
        const key = JSON.parse(text.slice(index, end + 1));
        if (top.keys.has(key)) return key;
        top.keys.add(key);
        top.expectingKey = false;
      }
      index = end;
    }
    index += 1;
  }
  return null;
}
