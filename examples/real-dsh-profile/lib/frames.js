/**
 * Frame builders of dsh-profile-jsonl generation 1 (the spec's section 6 vocabulary) and the one
 * writer every frame goes through: one JSON object per stdout line, nothing else on stdout.
 * @module @dsh-conformance/open-design-profile/frames
 */

/** The runtime identity the host requires. */
export const RUNTIME = "open-design";
/** The protocol generation this bundle speaks. */
export const PROTOCOL_VERSION = 1;
/** This bundle's version (kept equal to package.json's). */
export const PLUGIN_VERSION = "0.1.0";

const CAPABILITIES = Object.freeze({
  session_resume: true,
  session_cancel: true,
  structured_events: true,
});

/** `probe` or `ready`: the identity members. */
export function identity(type) {
  return {
    v: 1,
    type,
    runtime: RUNTIME,
    protocol_version: PROTOCOL_VERSION,
    plugin_version: PLUGIN_VERSION,
    capabilities: { ...CAPABILITIES },
  };
}

/** A run-scoped frame: `v`, `type`, `request_id`, then `members` in order. */
export function scoped(type, requestId, members) {
  return { v: 1, type, request_id: requestId, ...members };
}

/** A fatal `protocol_error`; `requestId` is omitted when the error concerns the process. */
export function protocolError(requestId, code, message) {
  const frame = { v: 1, type: "protocol_error" };
  if (typeof requestId === "string" && requestId !== "") frame.request_id = requestId;
  return { ...frame, code, message };
}

/** The terminal `result`; optional members are omitted when absent, never null. */
export function result(requestId, status, sessionId, extra = {}) {
  const frame = scoped("result", requestId, {
    status,
    session_id: sessionId,
    resume_rejected: extra.resumeRejected === true,
  });
  if (typeof extra.output === "string" && extra.output !== "") frame.output = extra.output;
  if (typeof extra.stopReason === "string" && extra.stopReason !== "") frame.stop_reason = extra.stopReason;
  if (extra.error !== undefined) frame.error = { code: extra.error.code, message: extra.error.message };
  return frame;
}

/** Writes one frame as one line on `stream` (process.stdout unless a test substitutes one). */
export function writeFrame(frame, stream = process.stdout) {
  stream.write(`${JSON.stringify(frame)}\n`);
}
