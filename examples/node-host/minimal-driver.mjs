#!/usr/bin/env node
// The smallest driver the kit can judge (docs/host-driver.md): handshake, one turn per `run`,
// outcome after the runtime's process group is gone. A skeleton to grow into an adapter's driver:
// it claims no capability (no discovery, setup, sessions, cancel), forwards only text, reasoning
// and the session, and trusts the runtime's frames. `driver.mjs` beside it is the complete host.
// Usage: dsh-conformance run --host "node minimal-driver.mjs [--supervisor PATH-OF-dsh-conformance]"
import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { createInterface } from "node:readline";

const flag = process.argv.indexOf("--supervisor");
const supervisor = flag > 0 ? process.argv[flag + 1] : null;
const reply = (message) => process.stdout.write(`${JSON.stringify({ v: 1, ...message })}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line);
  if (request.type === "handshake") {
    reply({ type: "handshake", driver: "minimal-node", version: "0.1.0", capabilities: [] });
  }
  else if (request.type === "run") reply(await runTurn(request));
  else if (request.type === "shutdown") { reply({ type: "bye" }); process.exit(0); }
  else reply({ type: "error", id: request.id ?? null, message: `unsupported request ${request.type}` });
}

/** One turn (spec 6-10): spawn in its own group, wait for `ready`, `execute`, stream, reap. */
async function runTurn(request) {
  const argv = [process.env.DSH_BIN, "--profile", "open-design", "--stdio"];
  // Through `dsh-conformance supervise`, daemons that leave the group die with the turn too.
  const [program, ...args] = supervisor ? [supervisor, "supervise", "--", ...argv] : argv;
  const cwd = realpathSync(request.cwd);
  const child = spawn(program, args, { cwd, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise((done) => child.on("exit", done));
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr = (stderr + chunk).slice(-65536); });
  const requestId = `${request.id}-${Date.now()}`;
  let result = null;
  let sessionId = null;
  for await (const text of createInterface({ input: child.stdout })) {
    const frame = JSON.parse(text);
    if (frame.type === "ready") {
      const prompt = `${request.bootstrap}\n\n${request.prompt}`;
      const model = request.model ? { model: { provider: request.model.provider, id: request.model.id } } : {};
      const execute = { v: 1, type: "execute", request_id: requestId, cwd, prompt, ...model, mcp_servers: [] };
      child.stdin.write(`${JSON.stringify(execute)}\n`);
    } else if (frame.request_id !== requestId) continue;
    else if (frame.type === "session") {
      sessionId = frame.session_id;
      emit(request.id, { type: "status", label: "session", sessionId });
    } else if (frame.type === "text") emit(request.id, { type: "text_delta", delta: frame.content });
    else if (frame.type === "result") { result = frame; break; }
  }
  await endGroup(child, exited);
  const outcome = { type: "outcome", id: request.id, resumed: false, foreign_frames: 0, stderr };
  if (result?.status === "completed" || result?.status === "cancelled") {
    return { ...outcome, status: result.status, session_id: result.session_id, code: null, message: null };
  }
  const message = result?.error?.message ?? "the runtime ended without a result";
  return { ...outcome, status: "failed", session_id: sessionId, code: "DSH_PROFILE_RUN_FAILED", message };
}

function emit(id, event) {
  reply({ type: "event", id, event });
}

/** Spec 10 step 5: close stdin, then SIGTERM and SIGKILL the whole group, each after a bound. */
async function endGroup(child, exited) {
  child.stdin.end();
  const signalGroup = (signal) => {
    if (groupAlive(child.pid)) process.kill(-child.pid, signal);
  };
  const within = (ms) => Promise.race([exited, new Promise((done) => setTimeout(done, ms))]);
  await within(2000);
  signalGroup("SIGTERM");
  await within(2000);
  signalGroup("SIGKILL");
  await exited;
  // The outcome goes out only once the group is empty (spec 6: OD reaps the process tree).
  for (let waited = 0; waited < 2000 && groupAlive(child.pid); waited += 20) {
    await new Promise((done) => setTimeout(done, 20));
  }
}

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
