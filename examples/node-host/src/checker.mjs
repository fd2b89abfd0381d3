/** @file The strict stream checker: the state machine one run's stdout goes through (spec 6 and 7). */

import { FrameError, RUNTIME_ID, PROTOCOL_VERSION, REQUIRED_CAPABILITIES, RUN_SCOPED_TYPES, isBlank, parseFrame } from "./frames.mjs";

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
    this.resumeSessionId = resumeSessionId;
    this.ready = null;
    this.sessionId = null;
    this.resumed = false;
    this.result = null;
    this.violation = null;
    this.foreignFrames = 0;
    this.cancelSent = false;
    this.toolCallIds = new Set();
  }

  /** The host decided, after `ready`, to resume this session (or not: null). */
  setResumeSessionId(sessionId) {
    this.resumeSessionId = sessionId;
  }

  /** The host sent `cancel` for the active request: `result: cancelled` becomes legitimate. */
  noteCancelSent() {
    this.cancelSent = true;
  }

  /** The run's terminal state so far: `{ kind: "result", frame }`, `{ kind: "violation", violation }` or null. */
  terminal() {
    if (this.violation) return { kind: "violation", violation: this.violation };
    if (this.result) return { kind: "result", frame: this.result };
    return null;
  }

  /** The stream ended: the terminal state, or `DSH_PROFILE_MISSING_RESULT` when there is none. */
  finish() {
    const terminal = this.terminal();
    if (terminal) return terminal;
    this.violation = {
      code: "DSH_PROFILE_MISSING_RESULT",
      line: null,
      message: "stdout ended without a terminal result; EOF, exit or text alone never mean success (spec 6)",
    };
    return this.terminal();
  }

  /** Check one framer event (`line`, `too_large`, `truncated`). */
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
          return this.#fail("DSH_PROFILE_TRUNCATED_FRAME", event.number, "ends without a newline and is not a complete frame (spec 6)");
        }
        return this.#checkLine(event.number, event.bytes);
      default:
        return this.#checkLine(event.number, event.bytes);
    }
  }

  #checkLine(number, bytes) {
    if (isBlank(bytes)) return { kind: "skipped" };
    let frame;
    try {
      frame = parseFrame(bytes);
    } catch (error) {
      if (error instanceof FrameError) return this.#fail(error.code, number, `${error.message} (spec 6: every frame is valid generation-1 JSON)`);
      throw error;
    }
    return this.#checkFrame(number, frame);
  }

  #checkFrame(number, frame) {
    const forThisRun = frame.request_id === this.requestId || (frame.type === "protocol_error" && frame.request_id == null);
    if (!this.ready) {
      if (frame.type === "protocol_error" && forThisRun) {
        return this.#fail("DSH_PROFILE_PROTOCOL_ERROR", number, `is a protocol_error from the runtime: ${frame.code} (spec 6)`, frame.code);
      }
      if (frame.type !== "ready") return this.#fail("DSH_PROFILE_READY_NOT_FIRST", number, `is a ${frame.type} frame before ready (spec 6)`);
      return this.#checkReady(number, frame);
    }
    if (frame.type === "ready") return this.#fail("DSH_PROFILE_DUPLICATE_READY", number, "is a second ready frame (spec 6)");
    if (!RUN_SCOPED_TYPES.has(frame.type)) {
      return this.#fail("DSH_PROFILE_INVALID_FRAME", number, `is a ${frame.type} frame, which does not belong on the --stdio stream`);
    }
    if (!forThisRun) {
      this.foreignFrames += 1;
      return { kind: "foreign" };
    }
    if (this.result) {
      if (frame.type === "result") return this.#fail("DSH_PROFILE_DUPLICATE_RESULT", number, "is a second terminal result; only one is accepted (spec 6)");
      return this.#fail("DSH_PROFILE_DUPLICATE_RESULT", number, `is a ${frame.type} frame after the terminal result (spec 6)`);
    }
    if (frame.type === "protocol_error") {
      return this.#fail("DSH_PROFILE_PROTOCOL_ERROR", number, `is a protocol_error from the runtime: ${frame.code} (spec 6)`, frame.code);
    }
    if (frame.type === "session") return this.#checkSession(number, frame);
    if (CONTENT_TYPES.has(frame.type)) return this.#checkContent(number, frame);
    return this.#checkResult(number, frame);
  }

  #checkReady(number, ready) {
    if (ready.runtime !== RUNTIME_ID) {
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, `reports runtime ${JSON.stringify(ready.runtime)}, not ${RUNTIME_ID}`);
    }
    if (ready.protocol_version !== PROTOCOL_VERSION) {
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, `reports protocol_version ${ready.protocol_version}, this host speaks 1`);
    }
    const missing = REQUIRED_CAPABILITIES.filter((name) => ready.capabilities[name] !== true);
    if (missing.length > 0) {
      return this.#fail("DSH_PROFILE_INCOMPATIBLE_READY", number, `lacks the required capabilities ${missing.join(", ")}`);
    }
    this.ready = ready;
    return { kind: "accepted", frame: ready };
  }

  #checkSession(number, session) {
    if (this.sessionId !== null) return this.#fail("DSH_PROFILE_DUPLICATE_SESSION", number, "is a second session frame (spec 6)");
    if (this.resumeSessionId !== null) {
      if (session.session_id !== this.resumeSessionId || session.resumed !== true) {
        return this.#fail(
          "DSH_PROFILE_RESUME_MISMATCH",
          number,
          "does not confirm the requested resume: the session id must equal the requested one and resumed must be true (spec 6)",
        );
      }
    } else if (session.resumed) {
      return this.#fail("DSH_PROFILE_UNREQUESTED_RESUME", number, "claims resumed: true although no resume was requested (spec 6)");
    }
    this.sessionId = session.session_id;
    this.resumed = session.resumed;
    return { kind: "accepted", frame: session };
  }

  #checkContent(number, frame) {
    if (this.sessionId === null) {
      return this.#fail("DSH_PROFILE_CONTENT_BEFORE_SESSION", number, `is a ${frame.type} frame before the session frame (spec 6)`);
    }
    if (frame.type === "tool_call") this.toolCallIds.add(frame.call_id);
    if (frame.type === "tool_result" && !this.toolCallIds.has(frame.call_id)) {
      return this.#fail("DSH_PROFILE_UNMATCHED_TOOL_RESULT", number, `is a tool_result for call ${JSON.stringify(frame.call_id)}, which no tool_call announced`);
    }
    return { kind: "accepted", frame };
  }

  #checkResult(number, result) {
    const resuming = this.resumeSessionId;
    if (result.resume_rejected) {
      if (resuming === null) {
        return this.#fail("DSH_PROFILE_UNREQUESTED_RESUME", number, "has resume_rejected: true although no resume was requested (spec 6)");
      }
      if (this.sessionId !== null) {
        return this.#fail("DSH_PROFILE_RESUME_MISMATCH", number, "has resume_rejected: true after the session was confirmed as resumed (spec 6)");
      }
    }
    if (this.sessionId !== null && result.session_id !== this.sessionId) {
      return this.#fail("DSH_PROFILE_SESSION_MISMATCH", number, "names another session than the session frame did (spec 6)");
    }
    if (this.sessionId === null && resuming !== null && result.session_id !== resuming) {
      return this.#fail("DSH_PROFILE_SESSION_MISMATCH", number, "names another session than the requested resume id, and no session frame arrived (spec 6)");
    }
    if (result.status === "completed" && this.sessionId === null) {
      return this.#fail("DSH_PROFILE_UNANNOUNCED_SESSION", number, "is result: completed without a prior session frame (spec 6, 7)");
    }
    if (result.status === "cancelled" && !this.cancelSent) {
      return this.#fail("DSH_PROFILE_UNSOLICITED_CANCELLED", number, "is result: cancelled although the host sent no cancel (spec 6, 10)");
    }
    this.result = result;
    return { kind: "accepted", frame: result };
  }

  /** `runtimeCode`: the runtime's own code, when the violation is its protocol_error. */
  #fail(code, line, what, runtimeCode = null) {
    this.violation = { code, line, message: `line ${line}: ${what}`, runtimeCode };
    return { kind: "violation", violation: this.violation };
  }
}
