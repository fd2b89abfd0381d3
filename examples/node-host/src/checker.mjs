/** @file The strict stream checker: the state machine one run's stdout goes through (spec 6 and 7). */

import {
  FrameError, RUNTIME_ID, PROTOCOL_VERSION, REQUIRED_CAPABILITIES, RUN_SCOPED_TYPES, isBlank, parseFrame,
} from "./frames.mjs";

/** @typedef {import("./shapes.mjs").Frame} Frame */
/** @typedef {import("./shapes.mjs").LineEvent} LineEvent */
/** @typedef {import("./shapes.mjs").ResultFrame} ResultFrame */
/** @typedef {import("./shapes.mjs").Step} Step */
/** @typedef {import("./shapes.mjs").Terminal} Terminal */
/** @typedef {import("./shapes.mjs").Violation} Violation */

const CONTENT_TYPES = new Set(["thinking", "text", "tool_call", "tool_result", "usage"]);

/**
 * One run's checker. Feed it framer events with `check`; each returns a step:
 * `{ kind: "skipped" }`, `{ kind: "foreign" }`, `{ kind: "accepted", frame }` or
 * `{ kind: "violation", violation: { code, line, message } }`. After the first violation the run
 * has failed and later lines are skipped. `finish()` gives the terminal state at EOF.
 */
export class StreamChecker {
  /** @param {{ requestId: string, resumeSessionId?: string | null }} context */
  constructor({ requestId, resumeSessionId = null }) {
    this.requestId = requestId;
    /** @type {string | null} */
    this.resumeSessionId = resumeSessionId;
    /** @type {Frame | null} */
    this.ready = null;
    /** @type {string | null} */
    this.sessionId = null;
    this.resumed = false;
    /** @type {ResultFrame | null} */
    this.result = null;
    /** @type {Violation | null} */
    this.violation = null;
    this.foreignFrames = 0;
    this.cancelSent = false;
    /** @type {Set<string>} */
    this.toolCallIds = new Set();
  }

  /**
   * The host decided, after `ready`, to resume this session (or not: null).
   * @param {string | null} sessionId
   */
  setResumeSessionId(sessionId) {
    this.resumeSessionId = sessionId;
  }

  /** The host sent `cancel` for the active request: `result: cancelled` becomes legitimate. */
  noteCancelSent() {
    this.cancelSent = true;
  }

  /**
   * The run's terminal state so far: `{ kind: "result", frame }`, `{ kind: "violation", violation }`
   * or null.
   * @returns {Terminal | null}
   */
  terminal() {
    if (this.violation) return { kind: "violation", violation: this.violation };
    if (this.result) return { kind: "result", frame: this.result };
    return null;
  }

  /**
   * The stream ended: the terminal state, or `DSH_PROFILE_MISSING_RESULT` when there is none.
   * @returns {Terminal}
   */
  finish() {
    const terminal = this.terminal();
    if (terminal) return terminal;
    this.violation = {
      code: "DSH_PROFILE_MISSING_RESULT",
      line: null,
      message: "stdout ended without a terminal result; EOF, exit or text alone never mean success (spec 6)",
    };
    return { kind: "violation", violation: this.violation };
  }

  /**
   * Check one framer event (`line`, `too_large`, `truncated`).
   * @param {LineEvent} event
   * @returns {Step}
   */
  check(event) {
    if (this.violation) return { kind: "skipped" };
    switch (event.kind) {
      case "too_large":
        return this.#fail("DSH_PROFILE_FRAME_TOO_LARGE", event.number, "is longer than the 1 MiB frame limit");
      case "truncated":
        if (isBlank(event.bytes)) return { kind: "skipped" };
        try {
          parseFrame(event.bytes);
        } catch {
          const what = "ends without a newline and is not a complete frame (spec 6)";
          return this.#fail("DSH_PROFILE_TRUNCATED_FRAME", event.number, what);
        }
        return this.#checkLine(event.number, event.bytes);
      default:
        return this.#checkLine(event.number, event.bytes);
    }
  }

  /**
   * @param {number} number
   * @param {Buffer} bytes
   * @returns {Step}
   */
  #checkLine(number, bytes) {
    if (isBlank(bytes)) return { kind: "skipped" };
    let frame;
    try {
      frame = parseFrame(bytes);
    } catch (error) {
      if (error instanceof FrameError) {
        return this.#fail(error.code, number, `${error.message} (spec 6: every frame is valid generation-1 JSON)`);
      }
      throw error;
    }
    return this.#checkFrame(number, frame);
  }

  /**
   * @param {number} number
   * @param {Frame} frame
   * @returns {Step}
   */
  #checkFrame(number, frame) {
    const unaddressedError = frame.type === "protocol_error" && frame.request_id == null;
    const forThisRun = frame.request_id === this.requestId || unaddressedError;
    if (!this.ready) {
      if (frame.type === "protocol_error" && forThisRun) {
        return this.#runtimeError(number, frame);
      }
      if (frame.type !== "ready") {
        return this.#fail("DSH_PROFILE_READY_NOT_FIRST", number, `is a ${frame.type} frame before ready (spec 6)`);
      }
      return this.#checkReady(number, frame);
    }
    if (frame.type === "ready") {
      return this.#fail("DSH_PROFILE_DUPLICATE_READY", number, "is a second ready frame (spec 6)");
    }
    if (!RUN_SCOPED_TYPES.has(frame.type)) {
      const what = `is a ${frame.type} frame, which does not belong on the --stdio stream`;
      return this.#fail("DSH_PROFILE_INVALID_FRAME", number, what);
    }
    if (!forThisRun) {
      this.foreignFrames += 1;
      return { kind: "foreign" };
    }
    if (this.result) {
      const what = frame.type === "result"
        ? "is a second terminal result; only one is accepted (spec 6)"
        : `is a ${frame.type} frame after the terminal result (spec 6)`;
      return this.#fail("DSH_PROFILE_DUPLICATE_RESULT", number, what);
    }
    if (frame.type === "protocol_error") return this.#runtimeError(number, frame);
    if (frame.type === "session") return this.#checkSession(number, frame);
    if (CONTENT_TYPES.has(frame.type)) return this.#checkContent(number, frame);
    return this.#checkResult(number, /** @type {ResultFrame} */ (frame));
  }

  /**
   * The runtime's own protocol_error for this run: a violation carrying its code.
   * @param {number} number
   * @param {Frame} frame
   * @returns {Step}
   */
  #runtimeError(number, frame) {
    const what = `is a protocol_error from the runtime: ${frame.code} (spec 6)`;
    return this.#fail("DSH_PROFILE_PROTOCOL_ERROR", number, what, frame.code);
  }

  /**
   * @param {number} number
   * @param {Frame} ready
   * @returns {Step}
   */
  #checkReady(number, ready) {
    if (ready.runtime !== RUNTIME_ID) {
      const what = `reports runtime ${JSON.stringify(ready.runtime)}, not ${RUNTIME_ID}`;
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, what);
    }
    if (ready.protocol_version !== PROTOCOL_VERSION) {
      const what = `reports protocol_version ${ready.protocol_version}, this host speaks 1`;
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, what);
    }
    const missing = REQUIRED_CAPABILITIES.filter((name) => ready.capabilities[name] !== true);
    if (missing.length > 0) {
      const what = `lacks the required capabilities ${missing.join(", ")}`;
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, what);
    }
    this.ready = ready;
    return { kind: "accepted", frame: ready };
  }

  /**
   * @param {number} number
   * @param {Frame} session
   * @returns {Step}
   */
  #checkSession(number, session) {
    if (this.sessionId !== null) {
      return this.#fail("DSH_PROFILE_DUPLICATE_SESSION", number, "is a second session frame (spec 6)");
    }
    if (this.resumeSessionId !== null) {
      if (session.session_id !== this.resumeSessionId || session.resumed !== true) {
        const what = "does not confirm the requested resume: the session id must equal the requested one "
          + "and resumed must be true (spec 6)";
        return this.#fail("DSH_PROFILE_RESUME_MISMATCH", number, what);
      }
    } else if (session.resumed) {
      const what = "claims resumed: true although no resume was requested (spec 6)";
      return this.#fail("DSH_PROFILE_UNREQUESTED_RESUME", number, what);
    }
    this.sessionId = session.session_id;
    this.resumed = session.resumed;
    return { kind: "accepted", frame: session };
  }

  /**
   * @param {number} number
   * @param {Frame} frame
   * @returns {Step}
   */
  #checkContent(number, frame) {
    if (this.sessionId === null) {
      const what = `is a ${frame.type} frame before the session frame (spec 6)`;
      return this.#fail("DSH_PROFILE_CONTENT_BEFORE_SESSION", number, what);
    }
    if (frame.type === "tool_call") this.toolCallIds.add(frame.call_id);
    if (frame.type === "tool_result" && !this.toolCallIds.has(frame.call_id)) {
      const what = `is a tool_result for call ${JSON.stringify(frame.call_id)}, which no tool_call announced`;
      return this.#fail("DSH_PROFILE_UNMATCHED_TOOL_RESULT", number, what);
    }
    return { kind: "accepted", frame };
  }

  /**
   * @param {number} number
   * @param {ResultFrame} result
   * @returns {Step}
   */
  #checkResult(number, result) {
    const resuming = this.resumeSessionId;
    if (result.resume_rejected) {
      if (resuming === null) {
        const what = "has resume_rejected: true although no resume was requested (spec 6)";
        return this.#fail("DSH_PROFILE_UNREQUESTED_RESUME", number, what);
      }
      if (this.sessionId !== null) {
        const what = "has resume_rejected: true after the session was confirmed as resumed (spec 6)";
        return this.#fail("DSH_PROFILE_RESUME_MISMATCH", number, what);
      }
    }
    if (this.sessionId !== null && result.session_id !== this.sessionId) {
      const what = "names another session than the session frame did (spec 6)";
      return this.#fail("DSH_PROFILE_SESSION_MISMATCH", number, what);
    }
    if (this.sessionId === null && resuming !== null && result.session_id !== resuming) {
      const what = "names another session than the requested resume id, and no session frame arrived (spec 6)";
      return this.#fail("DSH_PROFILE_SESSION_MISMATCH", number, what);
    }
    if (result.status === "completed" && this.sessionId === null) {
      const what = "is result: completed without a prior session frame (spec 6, 7)";
      return this.#fail("DSH_PROFILE_UNANNOUNCED_SESSION", number, what);
    }
    if (result.status === "cancelled" && !this.cancelSent) {
      const what = "is result: cancelled although the host sent no cancel (spec 6, 10)";
      return this.#fail("DSH_PROFILE_UNSOLICITED_CANCELLED", number, what);
    }
    this.result = result;
    return { kind: "accepted", frame: result };
  }

  /**
   * The run failed: `runtimeCode` is the runtime's own code, when the violation is its protocol_error.
   * @param {string} code
   * @param {number} line
   * @param {string} what
   * @param {string | null} [runtimeCode]
   * @returns {Step}
   */
  #fail(code, line, what, runtimeCode = null) {
    this.violation = { code, line, message: `line ${line}: ${what}`, runtimeCode };
    return { kind: "violation", violation: this.violation };
  }
}
