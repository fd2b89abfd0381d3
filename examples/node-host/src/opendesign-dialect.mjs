/**
 * @file OpenDesign's dialect (`node driver.mjs --dialect opendesign`): the same host, reporting
 * events and error codes the way OpenDesign's daemon does (apps/daemon/src/agent-protocol/
 * dsh-profile/session.ts). The kit's calibration test runs the corpus against it: a driver that
 * forwards OpenDesign's real shapes must pass every case whose expectation is a spec sentence.
 *
 * - `status` carries `label: "working"`;
 * - `usage.usage` spells the cache counts `cached_*` and adds `total_tokens`;
 * - `error.error` carries `retryable: false`;
 * - one `thinking_start` per run, one `thinking_end` at the end of the turn, no empty deltas;
 * - every stream violation is `DSH_PROFILE_PROTOCOL_ERROR`, except a completed result without a
 *   session frame, which is `DSH_PROFILE_SESSION_MISMATCH`; a runtime's own error code (a failed
 *   result, a protocol_error frame) is reported as is.
 */

/** @typedef {import("./shapes.mjs").HostEvent} HostEvent */

/** The vocabulary this dialect declares in its handshake. */
export const OPENDESIGN_CODES = {
  "stream-violation": "DSH_PROFILE_PROTOCOL_ERROR",
  "session-mismatch": "DSH_PROFILE_PROTOCOL_ERROR",
  "DSH_PROFILE_UNANNOUNCED_SESSION": "DSH_PROFILE_SESSION_MISMATCH",
  "runtime-protocol-error": "passthrough",
  "runtime-failed": "passthrough",
};

const STREAM_VIOLATIONS = new Set([
  "DSH_PROFILE_FRAME_TOO_LARGE", "DSH_PROFILE_MALFORMED_FRAME", "DSH_PROFILE_INVALID_FRAME",
  "DSH_PROFILE_TRUNCATED_FRAME", "DSH_PROFILE_MISSING_RESULT", "DSH_PROFILE_READY_NOT_FIRST",
  "DSH_PROFILE_DUPLICATE_READY", "DSH_PROFILE_DUPLICATE_SESSION", "DSH_PROFILE_DUPLICATE_RESULT",
  "DSH_PROFILE_CONTENT_BEFORE_SESSION", "DSH_PROFILE_UNSOLICITED_CANCELLED",
  "DSH_PROFILE_UNMATCHED_TOOL_RESULT", "DSH_PROFILE_INCOMPATIBLE_READY",
  "DSH_PROFILE_RESUME_MISMATCH", "DSH_PROFILE_SESSION_MISMATCH", "DSH_PROFILE_UNREQUESTED_RESUME",
]);

/** Per run: rewrites the host's normalized events into OpenDesign's. */
export class OpenDesignEvents {
  constructor() {
    this.thinkingStarted = false;
  }

  /**
   * The events one host event becomes (maybe none).
   * @param {HostEvent} event
   * @returns {HostEvent[]}
   */
  map(event) {
    switch (event.type) {
      case "status":
        return [{ type: "status", label: "working", sessionId: event.sessionId }];
      case "thinking_start":
        if (this.thinkingStarted) return [];
        this.thinkingStarted = true;
        return [event];
      case "thinking_end":
        return [];
      case "thinking_delta":
      case "text_delta":
        return event.delta === "" ? [] : [event];
      case "usage":
        return [{ ...event, usage: openDesignUsage(/** @type {Record<string, number>} */ (event.usage)) }];
      case "error": {
        const error = /** @type {{ code: string, message: string }} */ (event.error);
        return [{ ...event, error: { ...error, code: openDesignCode({ code: error.code }), retryable: false } }];
      }
      default:
        return [event];
    }
  }

  /**
   * What closes the turn.
   * @returns {HostEvent[]}
   */
  finish() {
    return this.thinkingStarted ? [{ type: "thinking_end" }] : [];
  }
}

/**
 * @param {Record<string, number>} usage
 * @returns {Record<string, number>}
 */
function openDesignUsage(usage) {
  const { cache_read_tokens: read = 0, cache_write_tokens: write = 0, ...counts } = usage;
  return {
    ...counts,
    cached_read_tokens: read,
    cached_write_tokens: write,
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/**
 * The outcome's code in OpenDesign's vocabulary.
 * @param {{ code: string | null, runtimeCode?: string | null }} outcome
 * @returns {string | null}
 */
export function openDesignCode(outcome) {
  if (outcome.code === null) return null;
  if (outcome.code === "DSH_PROFILE_UNANNOUNCED_SESSION") return "DSH_PROFILE_SESSION_MISMATCH";
  if (STREAM_VIOLATIONS.has(outcome.code)) return "DSH_PROFILE_PROTOCOL_ERROR";
  const passesThrough = ["DSH_PROFILE_PROTOCOL_ERROR", "DSH_PROFILE_RUN_FAILED"].includes(outcome.code);
  if (passesThrough && outcome.runtimeCode) {
    return outcome.runtimeCode;
  }
  return outcome.code;
}
