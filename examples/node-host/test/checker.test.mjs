import assert from "node:assert/strict";
import { test } from "node:test";
import { StreamChecker } from "../src/checker.mjs";
import { findDuplicateKey, parseFrame } from "../src/frames.mjs";
import { identityFrame } from "../test-support/world.mjs";

const RID = "od-run-1";
const ready = identityFrame("ready");
const session = (extra = {}) => ({
  v: 1,
  type: "session",
  request_id: RID,
  session_id: "s-1",
  resumed: false,
  ...extra,
});
const text = (extra = {}) => ({ v: 1, type: "text", request_id: RID, content: "hi", ...extra });
const result = (extra = {}) => ({
  v: 1,
  type: "result",
  request_id: RID,
  status: "completed",
  session_id: "s-1",
  resume_rejected: false,
  ...extra,
});

/** @typedef {import("../src/shapes.mjs").Step} Step */
/** @typedef {import("../src/shapes.mjs").Terminal} Terminal */

/**
 * Feed frames (objects or raw strings) as lines; returns the checker and the last step.
 * @param {(object | string)[]} frames
 * @param {{ resume?: string | null, cancel?: boolean }} [options]
 */
function feed(frames, { resume = null, cancel = false } = {}) {
  const checker = new StreamChecker({ requestId: RID });
  /** @type {Step | null} */
  let step = null;
  frames.forEach((frame, index) => {
    if (index === 1) checker.setResumeSessionId(resume);
    if (cancel && index === 2) checker.noteCancelSent();
    const line = typeof frame === "string" ? frame : JSON.stringify(frame);
    step = checker.check({ kind: "line", number: index + 1, bytes: Buffer.from(line) });
  });
  return { checker, step, terminal: checker.finish() };
}

/**
 * The violation of a step or a terminal state, or null.
 * @param {Step | Terminal} step
 */
const violationOf = (step) => (step.kind === "violation" ? step.violation : null);

/** @param {{ terminal: Terminal }} outcome */
const codeOf = (outcome) =>
  outcome.terminal.kind === "violation" ? outcome.terminal.violation.code : `result:${outcome.terminal.frame.status}`;

test("a clean run ends in its result", () => {
  assert.equal(codeOf(feed([ready, session(), text(), result()])), "result:completed");
});

test("each strictness rule has its code", () => {
  const cases = [
    [[ready, session(), "not json"], "DSH_PROFILE_MALFORMED_FRAME"],
    [[ready, session(), "\ufeff" + JSON.stringify(text())], "DSH_PROFILE_MALFORMED_FRAME"],
    [[ready, session(), "[1,2]"], "DSH_PROFILE_INVALID_FRAME"],
    [
      [ready, session(), '{"v":1,"type":"text","request_id":"od-run-1","content":"a","content":"b"}'],
      "DSH_PROFILE_INVALID_FRAME",
    ],
    [[ready, session(), text({ v: 2 })], "DSH_PROFILE_INVALID_FRAME"],
    [[ready, session(), { v: 1, type: "todo", request_id: RID }], "DSH_PROFILE_INVALID_FRAME"],
    [[ready, session(), text({ content: 5 })], "DSH_PROFILE_INVALID_FRAME"],
    [
      [ready, session(), { v: 1, type: "tool_call", request_id: RID, call_id: "c", name: "n", arguments: "{oops" }],
      "DSH_PROFILE_INVALID_FRAME",
    ],
    [[session(), ready], "DSH_PROFILE_READY_NOT_FIRST"],
    [[ready, ready], "DSH_PROFILE_DUPLICATE_READY"],
    [[{ ...ready, runtime: "multica" }], "DSH_PROFILE_INCOMPATIBLE_READY"],
    [[{ ...ready, capabilities: { session_resume: true, session_cancel: true } }], "DSH_PROFILE_INCOMPATIBLE_READY"],
    [[ready, text()], "DSH_PROFILE_CONTENT_BEFORE_SESSION"],
    [[ready, session(), session()], "DSH_PROFILE_DUPLICATE_SESSION"],
    [[ready, session(), result(), result()], "DSH_PROFILE_DUPLICATE_RESULT"],
    [[ready, session(), result(), text()], "DSH_PROFILE_DUPLICATE_RESULT"],
    [[ready, session(), result({ status: "cancelled" })], "DSH_PROFILE_UNSOLICITED_CANCELLED"],
    [
      [
        ready,
        session(),
        { v: 1, type: "tool_result", request_id: RID, call_id: "c9", name: "n", output: "", is_error: false },
      ],
      "DSH_PROFILE_UNMATCHED_TOOL_RESULT",
    ],
    [[ready, session(), { v: 1, type: "protocol_error", code: "X", message: "bad" }], "DSH_PROFILE_PROTOCOL_ERROR"],
    [[ready, session({ resumed: true })], "DSH_PROFILE_UNREQUESTED_RESUME"],
    [[ready, session(), result({ session_id: "other" })], "DSH_PROFILE_SESSION_MISMATCH"],
    [[ready, result()], "DSH_PROFILE_UNANNOUNCED_SESSION"],
    [[ready, session(), text()], "DSH_PROFILE_MISSING_RESULT"],
  ];
  for (const [frames, code] of cases) {
    assert.equal(codeOf(feed(/** @type {object[]} */ (frames))), code, JSON.stringify(frames));
  }
});

test("resume: the session must be the requested one, resumed", () => {
  assert.equal(
    codeOf(feed([ready, session({ session_id: "s-1", resumed: true }), result()], { resume: "s-1" })),
    "result:completed",
  );
  assert.equal(
    codeOf(feed([ready, session({ session_id: "s-2", resumed: true })], { resume: "s-1" })),
    "DSH_PROFILE_RESUME_MISMATCH",
  );
  assert.equal(
    codeOf(feed([ready, session({ session_id: "s-1", resumed: false })], { resume: "s-1" })),
    "DSH_PROFILE_RESUME_MISMATCH",
  );
  const rejected = result({
    status: "failed",
    session_id: "s-1",
    resume_rejected: true,
    error: { code: "SESSION_NOT_FOUND", message: "gone" },
  });
  assert.equal(codeOf(feed([ready, rejected], { resume: "s-1" })), "result:failed");
  assert.equal(codeOf(feed([ready, rejected])), "DSH_PROFILE_UNREQUESTED_RESUME");
  assert.equal(codeOf(feed([ready, rejected], { resume: "s-2" })), "DSH_PROFILE_SESSION_MISMATCH");
});

test("a result names its session and omits optional members, never null", () => {
  const failed = { status: "failed", error: { code: "PROVIDER_DOWN", message: "503" } };
  assert.equal(codeOf(feed([ready, result({ ...failed, session_id: "od-fresh" })])), "result:failed");
  const nulls = [
    { ...failed, session_id: null },
    { session_id: "" },
    { output: null },
    { stop_reason: null },
    { error: null },
    { output: "" },
  ];
  for (const extra of nulls) {
    assert.equal(codeOf(feed([ready, session(), result(extra)])), "DSH_PROFILE_INVALID_FRAME", JSON.stringify(extra));
  }
});

test("foreign frames are counted and ignored", () => {
  const outcome = feed([ready, session(), text({ request_id: "other" }), result({ request_id: "other" }), result()]);
  assert.equal(codeOf(outcome), "result:completed");
  assert.equal(outcome.checker.foreignFrames, 2);
});

test("a solicited cancel is a legitimate terminal", () => {
  assert.equal(
    codeOf(feed([ready, session(), result({ status: "cancelled" })], { cancel: true })),
    "result:cancelled",
  );
});

test("after a violation later lines are skipped and the first violation stays", () => {
  const checker = new StreamChecker({ requestId: RID });
  checker.check({ kind: "line", number: 1, bytes: Buffer.from("garbage") });
  assert.deepEqual(checker.check({ kind: "line", number: 2, bytes: Buffer.from(JSON.stringify(ready)) }), {
    kind: "skipped",
  });
  assert.equal(violationOf(checker.finish())?.message.startsWith("line 1:"), true);
});

test("too large and truncated lines", () => {
  const checker = new StreamChecker({ requestId: RID });
  assert.equal(violationOf(checker.check({ kind: "too_large", number: 1 }))?.code, "DSH_PROFILE_FRAME_TOO_LARGE");
  const tail = new StreamChecker({ requestId: RID });
  assert.equal(
    violationOf(tail.check({ kind: "truncated", number: 1, bytes: Buffer.from('{"v":1,') }))?.code,
    "DSH_PROFILE_TRUNCATED_FRAME",
  );
  const complete = new StreamChecker({ requestId: RID });
  assert.equal(
    complete.check({ kind: "truncated", number: 1, bytes: Buffer.from(JSON.stringify(ready)) }).kind,
    "accepted",
  );
});

test("non-UTF-8 bytes are malformed; blank lines are skipped", () => {
  const checker = new StreamChecker({ requestId: RID });
  assert.equal(checker.check({ kind: "line", number: 1, bytes: Buffer.from(" \t\r") }).kind, "skipped");
  assert.equal(
    violationOf(checker.check({ kind: "line", number: 2, bytes: Buffer.from([0x7b, 0xff, 0x7d]) }))?.code,
    "DSH_PROFILE_MALFORMED_FRAME",
  );
});

test("duplicate keys are found in nested objects only within one object", () => {
  assert.equal(findDuplicateKey('{"a":{"b":1},"c":{"b":2}}'), null);
  assert.equal(findDuplicateKey('{"a":{"b":1,"b":2}}'), "b");
  assert.equal(findDuplicateKey('{"a":"\\"a\\"","b":["a","a"]}'), null);
  assert.equal(findDuplicateKey('{"\\u0061":1,"a":2}'), "a");
  assert.equal(
    parseFrame(Buffer.from(JSON.stringify(text({ content: "line\u2028sep", extra: { future: true } })))).content,
    "line\u2028sep",
  );
});
