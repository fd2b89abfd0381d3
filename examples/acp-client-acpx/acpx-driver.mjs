// A driver that runs the `acpx` CLI (npm `acpx` 0.19.1, pinned in package.json: an unpinned
// install on Node 20 picks a years-old release) under dsh-conformance's ACP driver contract
// (docs/surface-acp.md, "The driver contract"), so that
// `dsh-conformance run --surface acp --host "node examples/acp-client-acpx/acpx-driver.mjs"`
// judges acpx itself: every ACP frame is acpx's, this driver only runs its commands and reads
// their `--format json` output (the ACP frames acpx exchanged) into the contract's reports.
//
// Per run: `acpx sessions new` (a fresh acpx session for the working directory) unless
// DSH_ACP_RESUME says the session is stored (acpx's own record in $HOME/.acpx names it, and
// its next prompt resumes it), `acpx set model VALUE` for DSH_ACP_MODEL (the value read from
// `acpx sessions show`), then `acpx prompt TEXT` per prompt; permission requests are acpx's
// `--approve-all` or `--deny-all` (DSH_ACP_PERMISSION). acpx keeps the agent in a queue-owner
// process between commands (`--ttl 60`, so that one agent process serves the whole run, as a
// user's terminal session does); at the end the driver stops it (SIGTERM to the pid in its
// lock under $HOME/.acpx/queues, which ends the agent too) and waits until it is gone. acpx cannot cancel at a permission request (it answers each
// from its policy at once): the case that asks it is in corpus-expectations.json.

import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const env = process.env;
const agent = JSON.parse(env.DSH_ACP_COMMAND);
const timeoutMs = Number(env.DSH_SDK_TIMEOUT ?? "30") * 1000;
const cli = join(createRequire(import.meta.url).resolve("acpx/package.json"), "..", "dist", "cli.js");
const permission = env.DSH_ACP_PERMISSION === "reject" ? "--deny-all" : "--approve-all";
// acpx splits the agent command like a shell: each word double-quoted.
const agentCommand = agent.map((word) => JSON.stringify(word)).join(" ");

/// Runs `acpx ARGS` to its end (bounded): its exit code, stdout lines, stderr.
function acpx(args) {
  const all = ["--agent", agentCommand, "--format", "json", "--ttl", "60", permission, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...all], { stdio: ["ignore", "pipe", "pipe"], env });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    // A whole acpx command (a Node CLI that may start its queue owner and the agent): three
    // silence bounds.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`acpx ${args[0]} did not end within ${(timeoutMs * 3) / 1000} s`));
    }, timeoutMs * 3);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, lines: out.split("\n").filter((line) => line.trim()), err });
    });
  });
}

function frames(lines) {
  return lines.flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return [];
    }
  });
}

/// The contract's report of one `acpx prompt`'s frames; null when its prompt got no answer.
function report(all) {
  // The last prompt request acpx sent (its output may begin with the agent's start), and what
  // came after it.
  const at = all.findLastIndex((frame) => frame.method === "session/prompt");
  if (at < 0) return null;
  const request = all[at];
  const after = all.slice(at + 1);
  // acpx prints both directions: a response to one of the agent's own requests (a permission
  // request, whose id may equal the prompt's: F2.6) is acpx's answer, not the prompt's.
  const asked = new Set();
  const answer = after.find((frame) => {
    if (frame.method && frame.id !== undefined) {
      asked.add(JSON.stringify(frame.id));
      return false;
    }
    if (frame.method || !(frame.result || frame.error)) return false;
    if (asked.delete(JSON.stringify(frame.id))) return false;
    return frame.id === request.id;
  });
  if (!answer) return null;
  const turn = { text: [], thought: [], tools: new Map() };
  for (const frame of after) {
    if (frame.method !== "session/update") continue;
    const update = frame.params.update;
    const text = update.content?.type === "text" ? update.content.text : null;
    if (update.sessionUpdate === "agent_message_chunk" && text !== null) turn.text.push(text);
    if (update.sessionUpdate === "agent_thought_chunk" && text !== null) turn.thought.push(text);
    if (update.sessionUpdate === "tool_call") turn.tools.set(update.toolCallId, update.status ?? "pending");
    if (update.sessionUpdate === "tool_call_update" && turn.tools.has(update.toolCallId) && update.status) {
      turn.tools.set(update.toolCallId, update.status);
    }
  }
  return {
    stop_reason: answer.result?.stopReason ?? null,
    text: turn.text.join(""),
    thought: turn.thought.join(""),
    tools: [...turn.tools.values()],
    error: answer.error ? `${answer.error.code} ${answer.error.message}` : null,
  };
}

async function selectModel(name) {
  const shown = await acpx(["sessions", "show"]);
  const record = frames(shown.lines).find((frame) => frame.schema === "acpx.session.v1");
  const names = record?.acpx?.available_model_names ?? {};
  const value = Object.keys(names).find((key) => names[key] === name);
  if (!value) throw new Error(`no model named ${JSON.stringify(name)} among ${JSON.stringify(names)}`);
  const set = await acpx(["set", "model", value]);
  if (set.code !== 0) throw new Error(`acpx set model ${value}: exit ${set.code}: ${set.err.trim()}`);
}

/// The pids of acpx's live queue owners (each holds its agent), from their locks.
function queueOwners() {
  const queues = join(env.HOME ?? "", ".acpx", "queues");
  if (!existsSync(queues)) return [];
  return readdirSync(queues)
    .filter((name) => name.endsWith(".lock"))
    .flatMap((name) => {
      try {
        return [JSON.parse(readFileSync(join(queues, name), "utf8")).pid];
      } catch {
        return [];
      }
    });
}

function signal(pid, name) {
  try {
    process.kill(pid, name);
  } catch {
    // gone already
  }
}

/// Stops acpx's queue owners (SIGTERM: each closes its agent) and waits until they are gone;
/// one still there after the timeout is killed.
async function queueStopped() {
  for (const pid of queueOwners()) signal(pid, "SIGTERM");
  const deadline = Date.now() + timeoutMs;
  while (queueOwners().length > 0) {
    if (Date.now() > deadline) {
      for (const pid of queueOwners()) signal(pid, "SIGKILL");
      throw new Error("acpx's queue owner did not stop on SIGTERM (killed)");
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function main() {
  if (!env.DSH_ACP_RESUME) {
    const created = await acpx(["sessions", "new"]);
    if (created.code !== 0) throw new Error(`acpx sessions new: exit ${created.code}: ${created.err.trim()}`);
  }
  if (env.DSH_ACP_MODEL) await selectModel(env.DSH_ACP_MODEL);
  for (const [index, text] of process.argv.slice(2).entries()) {
    const ran = await acpx(["prompt", text]);
    const line = report(frames(ran.lines));
    if (!line) {
      throw new Error(`prompt ${index + 1} got no answer (acpx exit ${ran.code}): ${ran.err.trim().split("\n").pop()}`);
    }
    console.log(JSON.stringify(line));
  }
}

main()
  .then(queueStopped)
  .then(
    () => process.exit(0),
    async (error) => {
      console.error(`acpx-driver: ${error?.message ?? error}`);
      await queueStopped().catch(() => {});
      process.exit(1);
    },
  );
