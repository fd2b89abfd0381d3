/**
 * @file A tiny scripted dsh for the unit tests: `--version`, `--probe`, `plugin add` and `--stdio`
 * driven by the JSON file in FAKE_SCRIPT, journaling what it saw to FAKE_JOURNAL.
 */

import { spawn } from "node:child_process";
import fs from "node:fs";
import readline from "node:readline";
import { identityFrame } from "./world.mjs";

const script = JSON.parse(fs.readFileSync(String(process.env.FAKE_SCRIPT), "utf8"));
/** @param {Record<string, unknown>} entry */
const journal = (entry) =>
  fs.appendFileSync(String(process.env.FAKE_JOURNAL), `${JSON.stringify({ pid: process.pid, ...entry })}\n`);
const args = process.argv.slice(2);
/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));


journal({
  event: "start",
  argv: args,
  cwd: process.cwd(),
  has_key_in_argv: args.some((arg) => arg === process.env.DEEPSEEK_API_KEY),
});

if (args[0] === "--version") {
  process.stdout.write(script.version ?? "0.1.7\n");
} else if (args.includes("--probe")) {
  process.stdout.write(script.probe ?? `${JSON.stringify(identityFrame("probe"))}\n`);
  process.exitCode = script.probe_exit ?? 0;
} else if (args[0] === "plugin") {
  journal({ event: "plugin_add", tarball: args.at(-1) });
} else if (args.includes("--stdio")) {
  await stdio();
}

async function stdio() {
  const counter = `${process.env.FAKE_JOURNAL}.stdio-count`;
  const invocation = fs.existsSync(counter) ? Number(fs.readFileSync(counter, "utf8")) : 0;
  fs.writeFileSync(counter, String(invocation + 1));
  const actions = script.stdio?.[invocation] ?? script.stdio?.at(-1) ?? [];
  /** @type {Record<string, any> | null} */
  let execute = null;
  /** @type {(command: Record<string, any>) => void} */
  let executeArrived = () => {};
  const executeReady = new Promise((resolve) => (executeArrived = resolve));
  /** @type {(value?: unknown) => void} */
  let cancelArrived = () => {};
  const cancelled = new Promise((resolve) => (cancelArrived = resolve));
  /** @type {(value?: unknown) => void} */
  let stdinClosed = () => {};
  const closed = new Promise((resolve) => (stdinClosed = resolve));
  const input = readline.createInterface({ input: process.stdin });
  input.on("line", (line) => {
    const command = JSON.parse(line);
    journal({ event: "command", command });
    if (command.type === "execute") executeArrived(command);
    if (command.type === "cancel") cancelArrived();
  });
  input.on("close", () => {
    journal({ event: "stdin_closed" });
    stdinClosed();
  });
  /** @param {unknown} value */
  const fill = (value) =>
    JSON.parse(
      JSON.stringify(value)
        .replaceAll("{{request_id}}", execute?.request_id ?? "")
        .replaceAll("{{session_id}}", execute?.resume_session_id ?? `od-${process.pid}`),
    );
  /** @param {unknown} frame */
  const write = (frame) =>
    new Promise((resolve) =>
      process.stdout.write(typeof frame === "string" ? frame : `${JSON.stringify(fill(frame))}\n`, resolve),
    );
  for (const action of actions) {
    const [name, value] = Object.entries(action)[0];
    switch (name) {
      case "ready":
        await write({ ...identityFrame("ready"), ...value });
        break;
      case "read_execute":
        execute = await executeReady;
        break;
      case "session":
        await write({
          v: 1,
          type: "session",
          request_id: "{{request_id}}",
          session_id: "{{session_id}}",
          resumed: Boolean(execute?.resume_session_id),
          ...value,
        });
        break;
      case "frame":
        await write(value);
        break;
      case "raw":
        await write(value);
        break;
      case "wait_cancel":
        await Promise.race([cancelled, closed]);
        break;
      case "wait_stdin_close":
        await closed;
        break;
      case "hang":
        await new Promise(() => setInterval(() => {}, 1000));
        break;
      case "ignore_sigterm":
        process.on("SIGTERM", () => journal({ event: "signal", signal: "SIGTERM", ignored: true }));
        break;
      case "spawn_child": {
        const child = spawn(
          process.execPath,
          ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);"],
          { stdio: "ignore" },
        );
        journal({ event: "child", child_pid: child.pid });
        break;
      }
      case "stderr":
        process.stderr.write(value);
        break;
      case "stderr_flood":
        await new Promise((resolve) => process.stderr.write(Buffer.alloc(value, 0x78), resolve));
        break;
      case "stderr_prompt":
        process.stderr.write(`prompt was: ${execute?.prompt}\nkey is ${process.env.DEEPSEEK_API_KEY}\n`);
        break;
      case "sleep_ms":
        await sleep(value);
        break;
      case "exit":
        process.exit(value);
    }
  }
  journal({ event: "exit" });
  process.exit(0);
}
