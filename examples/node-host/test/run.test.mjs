import assert from "node:assert/strict";
import { test } from "node:test";
import { Turn } from "../src/run.mjs";
import { SessionStore } from "../src/sessions.mjs";
import { CANARY_KEY, alive, fullTurn, makeWorld } from "../test-support/world.mjs";

const FAST = {
  ready: 5000,
  run: 10000,
  cancelGrace: 300,
  stdinCloseGrace: 200,
  exitGrace: 1000,
  termGrace: 300,
  killWait: 2000,
  stdoutDrain: 300,
};

/**
 * One turn against the world's fake dsh; `cancelOn` cancels at the first event of that type.
 * @param {ReturnType<typeof makeWorld>} world
 * @param {{
 *   conversation?: string, prompt?: string, cwd?: string,
 *   model?: import("../src/shapes.mjs").ModelRoute | null, cancelOn?: string | null
 * }} [options]
 */
function runTurn(
  world,
  {
    conversation = "c1",
    prompt = "Create a landing page",
    cwd = world.project,
    model = { provider: "deepseek-official", id: "deepseek-chat" },
    cancelOn = null,
  } = {},
) {
  /** @type {import("../src/shapes.mjs").HostEvent[]} */
  const events = [];
  const turn = new Turn({
    request: {
      conversation_id: conversation,
      project_id: "p1",
      cwd,
      prompt,
      bootstrap: "You are OD.",
      model,
      reasoning_effort: null,
    },
    store: new SessionStore(world.data),
    emit: (event) => {
      events.push(event);
      if (cancelOn === event.type) turn.cancel();
    },
    bounds: FAST,
    env: world.env(),
  });
  return turn.run().then((outcome) => ({ outcome, events }));
}

/** @param {ReturnType<typeof makeWorld>} world */
const executes = (world) =>
  world
    .journal()
    .filter((entry) => entry.event === "command" && entry.command.type === "execute")
    .map((entry) => entry.command);

test("a full turn, then a cold resume in a new process", async (t) => {
  const world = makeWorld({ stdio: [fullTurn()] });
  t.after(world.cleanup);
  const first = await runTurn(world);
  assert.equal(first.outcome.status, "completed");
  assert.deepEqual(
    first.events.map((event) => event.type),
    ["status", "thinking_start", "thinking_delta", "thinking_end", "text_delta", "tool_use", "tool_result", "usage"],
  );
  assert.deepEqual(first.events[5], { type: "tool_use", id: "c1", name: "write_file", input: { path: "index.html" } });
  const second = await runTurn(world, { prompt: "Make it blue" });
  assert.equal(second.outcome.status, "completed");
  assert.equal(second.outcome.resumed, true);
  assert.equal(second.outcome.session_id, first.outcome.session_id);
  const [newExecute, resumeExecute] = executes(world);
  assert.equal(newExecute.prompt, "You are OD.\n\nCreate a landing page");
  assert.equal(newExecute.resume_session_id, undefined);
  assert.deepEqual(newExecute.mcp_servers, []);
  assert.equal(resumeExecute.prompt, "Make it blue");
  assert.equal(resumeExecute.resume_session_id, first.outcome.session_id);
  assert.ok(world.journal().every((entry) => !entry.has_key_in_argv));
});

test("a changed model route starts a new session with bootstrap", async (t) => {
  const world = makeWorld({ stdio: [fullTurn()] });
  t.after(world.cleanup);
  await runTurn(world);
  const second = await runTurn(world, { model: { provider: "deepseek-official", id: "deepseek-reasoner" } });
  assert.equal(second.outcome.resumed, false);
  assert.equal(executes(world)[1].resume_session_id, undefined);
  assert.ok(executes(world)[1].prompt.startsWith("You are OD."));
});

test("a rejected resume fails and the next run starts a new session", async (t) => {
  const rejected = [
    { ready: {} },
    { read_execute: {} },
    {
      frame: {
        v: 1,
        type: "result",
        request_id: "{{request_id}}",
        status: "failed",
        session_id: "{{session_id}}",
        resume_rejected: true,
        error: { code: "SESSION_NOT_FOUND", message: "no such session" },
      },
    },
  ];
  const world = makeWorld({ stdio: [fullTurn(), rejected, fullTurn()] });
  t.after(world.cleanup);
  await runTurn(world);
  const second = await runTurn(world);
  assert.equal(second.outcome.code, "DSH_PROFILE_RESUME_REJECTED");
  assert.equal(second.events.at(-1)?.type, "error");
  await runTurn(world);
  assert.equal(executes(world)[2].resume_session_id, undefined);
});

test("EOF without a result fails, never succeeds", async (t) => {
  const world = makeWorld({
    stdio: [
      [
        { ready: {} },
        { read_execute: {} },
        { session: {} },
        { frame: { v: 1, type: "text", request_id: "{{request_id}}", content: "done!" } },
      ],
    ],
  });
  t.after(world.cleanup);
  const { outcome } = await runTurn(world);
  assert.equal(outcome.status, "failed");
  assert.equal(outcome.code, "DSH_PROFILE_MISSING_RESULT");
});

test("a cancel ignored by a runtime with a SIGTERM-ignoring grandchild still leaves no process", async (t) => {
  const stubborn = [
    { ready: {} },
    { read_execute: {} },
    { ignore_sigterm: true },
    { spawn_child: {} },
    { session: {} },
    { frame: { v: 1, type: "text", request_id: "{{request_id}}", content: "working" } },
    { hang: {} },
  ];
  const world = makeWorld({ stdio: [stubborn] });
  t.after(world.cleanup);
  const { outcome } = await runTurn(world, { cancelOn: "text_delta" });
  assert.equal(outcome.status, "cancelled");
  assert.ok(outcome.session_id);
  const journal = world.journal();
  const pids = journal
    .filter((entry) => entry.event === "start")
    .map((entry) => entry.pid)
    .concat(journal.filter((entry) => entry.event === "child").map((entry) => entry.child_pid));
  assert.ok(pids.length >= 3);
  assert.deepEqual(pids.filter(alive), []);
  const order = journal.map((entry) => entry.command?.type ?? entry.event);
  assert.ok(order.indexOf("cancel") < order.indexOf("stdin_closed"));
});

test("a cancel honoured with result: cancelled keeps the session for the next run", async (t) => {
  const polite = [
    { ready: {} },
    { read_execute: {} },
    { session: {} },
    { frame: { v: 1, type: "text", request_id: "{{request_id}}", content: "working" } },
    { wait_cancel: {} },
    {
      frame: {
        v: 1,
        type: "result",
        request_id: "{{request_id}}",
        status: "cancelled",
        session_id: "{{session_id}}",
        resume_rejected: false,
      },
    },
  ];
  const world = makeWorld({ stdio: [polite, fullTurn()] });
  t.after(world.cleanup);
  const first = await runTurn(world, { cancelOn: "text_delta" });
  assert.equal(first.outcome.status, "cancelled");
  const second = await runTurn(world);
  assert.equal(second.outcome.resumed, true);
  assert.equal(second.outcome.session_id, first.outcome.session_id);
});

test("a 16 MiB stderr flood is drained, bounded and redacted", async (t) => {
  const noisy = [
    { ready: {} },
    { read_execute: {} },
    { stderr_prompt: {} },
    { stderr_flood: 16 * 1024 * 1024 },
    ...fullTurn().slice(2),
  ];
  const world = makeWorld({ stdio: [noisy] });
  t.after(world.cleanup);
  const { outcome } = await runTurn(world);
  assert.equal(outcome.status, "completed");
  assert.ok(Buffer.byteLength(outcome.stderr) <= 64 * 1024);
  assert.ok(!outcome.stderr.includes(CANARY_KEY));
  assert.ok(!outcome.stderr.includes("Create a landing page"));
  assert.ok(outcome.stderr.includes("[redacted]"));
});

test("a runtime that is not there fails to spawn", async (t) => {
  const world = makeWorld();
  t.after(world.cleanup);
  const { outcome } = await runTurn(world, { cwd: `${world.root}/missing` });
  assert.equal(outcome.code, "DSH_PROFILE_SPAWN_FAILED");
});
