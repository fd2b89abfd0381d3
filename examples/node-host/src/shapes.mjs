/**
 * @file The shapes the host passes around, as JSDoc types for `tsc --checkJs` (no runtime code):
 * the runtime's frames and the host's commands (spec 6), the framer's line events, the checker's
 * steps, a run's request, events and outcome (docs/host-driver.md). Import them with
 * `@typedef {import("./shapes.mjs").Frame} Frame`.
 */

/**
 * A line of the runtime's stdout, as the framer cuts it (src/lines.mjs).
 * @typedef {{ kind: "line", number: number, bytes: Buffer }
 *   | { kind: "too_large", number: number }
 *   | { kind: "truncated", number: number, bytes: Buffer }} LineEvent
 */

/**
 * A runtime frame that passed the frame checks (src/frames.mjs). Its fields depend on `type`;
 * the named shapes below are the ones the run steps read.
 * @typedef {{ v: number, type: string, request_id?: string, [field: string]: any }} Frame
 */

/**
 * The first frame of a run (spec 6): who the runtime is and what it supports.
 * @typedef {Frame & {
 *   type: "ready", runtime: string, protocol_version: number, plugin_version: string,
 *   capabilities: Record<string, boolean>, compatibility_generation?: string | null
 * }} ReadyFrame
 */

/**
 * The session of a run, new or resumed (spec 6, 7).
 * @typedef {Frame & { type: "session", request_id: string, session_id: string, resumed: boolean }} SessionFrame
 */

/**
 * The terminal frame of a run (spec 6).
 * @typedef {Frame & {
 *   type: "result", request_id: string, status: "completed" | "cancelled" | "failed", session_id?: string,
 *   resume_rejected?: boolean, error?: { code: string, message: string }
 * }} ResultFrame
 */

/**
 * A command the host writes to the runtime's stdin (spec 6 `execute`, spec 10 `cancel`).
 * @typedef {{
 *   v: 1, type: "execute", request_id: string, cwd: string, prompt: string, resume_session_id?: string,
 *   model?: ModelRoute, reasoning_effort?: string, mcp_servers: never[]
 * } | { v: 1, type: "cancel", request_id: string }} Command
 */

/**
 * A picked model (spec 12); none means the runtime's default.
 * @typedef {{ provider: string, id: string }} ModelRoute
 */

/**
 * A strictness rule broken by the runtime's stream: the host's code, the stdout line (null at EOF),
 * and, when the runtime named one, its own error code.
 * @typedef {{ code: string, line: number | null, message: string, runtimeCode?: string | null }} Violation
 */

/**
 * The checker's verdict on one line (src/checker.mjs).
 * @typedef {{ kind: "skipped" } | { kind: "foreign" } | { kind: "accepted", frame: Frame }
 *   | { kind: "violation", violation: Violation }} Step
 */

/**
 * How a stream ended: its result frame, or the violation that ended it.
 * @typedef {{ kind: "result", frame: ResultFrame } | { kind: "violation", violation: Violation }} Terminal
 */

/**
 * One OpenDesign event (spec 9), as the normalizer makes it (src/normalize.mjs).
 * @typedef {{ type: string, [field: string]: unknown }} HostEvent
 */

/**
 * One turn of a conversation: the `run` request of docs/host-driver.md, its route resolved.
 * @typedef {{
 *   conversation_id: string, project_id: string, cwd: string, prompt: string,
 *   bootstrap?: string | null, model: ModelRoute | null, reasoning_effort?: string | null
 * }} RunRequest
 */

/**
 * How a run ended (the driver's `outcome` reply). `runtimeCode`, the runtime's own error code when
 * it gave one, is for a dialect that reports it and is not part of the reply.
 * @typedef {{
 *   status: "completed" | "cancelled" | "failed", session_id: string | null, resumed: boolean,
 *   code: string | null, message: string | null, foreign_frames: number, stderr: string,
 *   runtimeCode?: string | null
 * }} Outcome
 */

/**
 * The compatibility key of a session (spec 7; src/sessions.mjs): every field must be equal to resume.
 * @typedef {Record<string, string | number | null>} CompatibilityKey
 */

export {};
