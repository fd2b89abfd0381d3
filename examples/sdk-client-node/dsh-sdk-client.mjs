#!/usr/bin/env node
// A minimal DeepSeek Harness SDK client in plain Node.js (no dependencies), on the wire the
// official TypeScript SDK speaks (docs/sdk-surfaces.md): it starts the runtime as a subprocess,
// sends `initialize`, then each prompt with `session/prompt`, and settles a prompt when it has
// seen the prompt's receipt (the `agent/inbox/spliced` event carrying its `messageId`) and then
// the session `idle` with no background child still running. Notifications that arrive before a
// response are kept, responses are matched by id (they may come out of order), lines that are not
// JSON and unknown notifications are skipped. At the end it sends `shutdown` and reaps the process.
//
// The driver contract of the kit's client corpus (docs/sdk-clients.md):
//   DSH_SDK_COMMAND='["fake-dsh", "--profile", "sdk"]' node dsh-sdk-client.mjs PROMPT [PROMPT...]
// prints one JSON line per prompt: {"messageId", "turn_ends": [kinds], "text": last assistant
// text, "children": background children seen, "tools": [{"name", "ok"} per tool result]}, and
// exits 0; when the runtime fails (an error
// response, its stdout ends, it goes silent for DSH_SDK_TIMEOUT seconds) it says why on stderr and
// exits 2. Closing is bounded: `shutdown`, stdin closed, DSH_SDK_TIMEOUT seconds, then a kill. The
// environment (the API key with it) passes to the runtime; nothing secret goes in its argv. The
// session is DSH_SDK_SESSION when set (else a fresh id); with DSH_SDK_RESUME=1 it is stored in the
// home by an earlier process and resumed first (`session/resume`, 0.2.1), then asked where it is
// (`session/working-directory/get`). With DSH_SDK_CWD the session is moved there before the
// prompts (`session/working-directory/set`, 0.2.1). After either, each report carries "cwd": its
// directory as the runtime last said it.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";

// How long to wait on a silent runtime, and on its exit when closing.
const TIMEOUT_MS = Number(process.env.DSH_SDK_TIMEOUT ?? "60") * 1000;
// A fresh id per process: a Harness home keeps every session an earlier process stored, and the
// runtime refuses to open one of those again ("session ... already exists").
const SESSION_ID = process.env.DSH_SDK_SESSION || `client-${randomUUID()}`;

/** The runtime subprocess: frames in arrival order, requests by id. */
class Runtime {
  constructor(argv) {
    this.child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
    this.nextId = 1;
    this.cwd = null; // the session's directory as the runtime last said it (0.2.1)
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    // readline splits at LF and CRLF only; a raw U+2028 inside a string (JSON.stringify leaves it
    // raw) stays in its line.
    const lines = createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => this.accept(line));
    lines.on("close", () => {
      this.closed = true;
      this.wake();
    });
    this.child.stdin.on("error", () => {});
  }

  /** One line from the runtime: a frame, or skipped when it is not JSON. */
  accept(line) {
    let frame;
    try {
      frame = JSON.parse(line);
    } catch {
      return; // not JSON: tolerated, like the official clients
    }
    if (frame === null || typeof frame !== "object" || Array.isArray(frame)) return;
    this.frames.push(frame);
    this.wake();
  }

  wake() {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  send(method, params) {
    const id = this.nextId++;
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    return id;
  }

  /** The next frame, in order. */
  async frame() {
    const deadline = Date.now() + TIMEOUT_MS;
    while (this.frames.length === 0) {
      if (this.closed) throw new Error("the runtime closed stdout");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("the runtime went silent");
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.frames.shift();
  }

  async close() {
    if (!this.closed) {
      this.send("shutdown", {});
      this.child.stdin.end();
    }
    const exited = new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) resolve();
      else this.child.on("exit", resolve);
    });
    const timer = setTimeout(() => this.child.kill("SIGKILL"), TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
}

/** Sends one request and returns its result, handing notifications to `onNotification`. */
async function call(runtime, method, params, onNotification) {
  const id = runtime.send(method, params);
  for (;;) {
    const frame = await runtime.frame();
    if ("method" in frame) onNotification(frame);
    else if (frame.id === id) {
      if (frame.error) throw new Error(`${method}: ${frame.error.message}`);
      return frame.result;
    }
  }
}

/** What one prompt settles on. */
class Turn {
  constructor() {
    this.messageId = null;
    this.receipt = false;
    this.turnEnds = [];
    this.text = "";
    this.children = 0;
    this.runningChildren = new Set();
    this.idleAfterReceipt = false;
    this.cwd = null;
    this.tools = []; // {name, ok} per tool result of the prompt's turns
    this.toolNames = new Map(); // callId -> the tool's name, from its tool/call
    this.pending = [];
  }

  observe(frame) {
    if (this.messageId === null) {
      this.pending.push(frame);
      return;
    }
    const params = frame.params ?? {};
    if (frame.method === "subagent.started" && params.parentSessionId === SESSION_ID) {
      this.children += 1;
      this.runningChildren.add(params.childSessionId);
    } else if (frame.method === "subagent.finished" && params.parentSessionId === SESSION_ID) {
      // The root wakes for another turn with the child's result: wait for its idle.
      this.runningChildren.delete(params.childSessionId);
      this.idleAfterReceipt = false;
    } else if (params.sessionId !== SESSION_ID) {
      return;
    } else if (frame.method === "session.event") {
      this.event(params.event ?? {});
    } else if (frame.method === "session.status" && this.receipt) {
      this.idleAfterReceipt = params.status === "idle";
    }
  }

  event(event) {
    const data = event.data ?? {};
    if (event.type === "agent/inbox/spliced") {
      if ((data.inserted ?? []).some((m) => m.id === this.messageId)) this.receipt = true;
    } else if (event.type === "assistant/message") {
      for (const part of data.message?.content ?? []) {
        if (part.type === "text" && part.text) this.text = part.text;
      }
    } else if (event.type === "turn/end" && this.receipt) {
      this.turnEnds.push(data.reason?.kind);
    } else if (event.type === "tool/call") {
      this.toolNames.set(data.callId, data.name);
    } else if (event.type === "tool/result" && this.receipt) {
      const name = this.toolNames.get(data.message?.source?.callId) ?? null;
      this.tools.push({ name, ok: !toolFailed(data) });
    } else if (event.type === "working-directory/change") {
      this.cwd = data.cwd ?? null;
    }
  }

  known(messageId) {
    this.messageId = messageId;
    for (const frame of this.pending.splice(0)) this.observe(frame);
  }

  settled() {
    return this.receipt && this.idleAfterReceipt && this.runningChildren.size === 0;
  }
}

/**
 * Whether a tool/result says its tool failed: `isError` on 0.2.1's tool message, on the
 * `tool-result` block of 0.1.x's user message.
 */
function toolFailed(data) {
  const message = data.message ?? {};
  if ("isError" in message) return Boolean(message.isError);
  return (message.content ?? []).some((block) => block.type === "tool-result" && block.isError);
}

/** Asks the runtime where the session is (0.2.1's session/working-directory/get). */
async function where(runtime) {
  const result = await call(runtime, "session/working-directory/get", { sessionId: SESSION_ID }, () => {});
  runtime.cwd = result.cwd ?? null;
}

/** Moves the session (0.2.1's session/working-directory/set); the runtime answers its directory. */
async function move(runtime, path) {
  const params = { sessionId: SESSION_ID, path };
  const result = await call(runtime, "session/working-directory/set", params, () => {});
  runtime.cwd = result.cwd ?? null;
}

async function prompt(runtime, text) {
  const turn = new Turn();
  turn.cwd = runtime.cwd;
  const result = await call(
    runtime,
    "session/prompt",
    { sessionId: SESSION_ID, contentBlocks: [{ type: "text", text }] },
    (frame) => turn.observe(frame),
  );
  turn.known(result.messageId);
  while (!turn.settled()) turn.observe(await runtime.frame());
  const report = {
    messageId: turn.messageId,
    turn_ends: turn.turnEnds,
    text: turn.text,
    children: turn.children,
    tools: turn.tools,
  };
  if (runtime.cwd !== null) {
    runtime.cwd = turn.cwd;
    report.cwd = turn.cwd;
  }
  return report;
}

async function main() {
  let argv;
  try {
    argv = JSON.parse(process.env.DSH_SDK_COMMAND ?? "");
    if (!Array.isArray(argv) || argv.length === 0) throw new Error("not a non-empty array");
  } catch (error) {
    process.stderr.write(`dsh-sdk-client: DSH_SDK_COMMAND must be a JSON array: ${error.message}\n`);
    return 2;
  }
  const runtime = new Runtime(argv);
  try {
    await call(
      runtime,
      "initialize",
      { cwd: process.cwd(), provider: "deepseek-official", model: "deepseek-flash" },
      () => {},
    );
    if (process.env.DSH_SDK_RESUME === "1") {
      // The session is stored in this home by an earlier process: resume it (0.2.1).
      await call(runtime, "session/resume", { sessionId: SESSION_ID }, () => {});
      // It is where that process last moved it: the runtime says where (0.2.1).
      await where(runtime);
    }
    if (process.env.DSH_SDK_CWD) await move(runtime, process.env.DSH_SDK_CWD);
    for (const text of process.argv.slice(2)) {
      process.stdout.write(`${JSON.stringify(await prompt(runtime, text))}\n`);
    }
    return 0;
  } catch (error) {
    process.stderr.write(`dsh-sdk-client: ${error.message}\n`);
    return 2;
  } finally {
    await runtime.close();
  }
}

process.exitCode = await main();
