#!/usr/bin/env node
// A minimal client of `dsh --profile headless TASK` in plain Node.js (no dependencies), as an
// agent framework drives the one-shot surface (docs/surface-headless.md): it runs the task, reads
// stdout and stderr as they come (either may carry megabytes: reasoning streams to stderr), kills
// a runtime silent on both for DSH_SDK_TIMEOUT seconds, and takes exit 0 as the only success. The answer is stdout without its final newline; on failure
// the error is stderr's last `dsh: <code>: <message>` line.
//
// The driver contract of the kit's client corpus (docs/sdk-clients.md):
//   DSH_HEADLESS_COMMAND='["fake-dsh", "--profile", "headless"]' node dsh-headless-client.mjs TASK
// prints one JSON line {"ok": bool, "text": the answer, "error": the error line or null} and
// exits 0; 2 when the runtime cannot be started. The environment (the API key with it) passes to
// the runtime; nothing secret goes in its argv.

import { spawn } from "node:child_process";

// How long the runtime may stay silent (nothing on either pipe) before it is killed.
const TIMEOUT_MS = Number(process.env.DSH_SDK_TIMEOUT ?? "60") * 1000;

/**
 * Runs one task and reports how it ended.
 * @param {string[]} argv the runtime's command
 * @param {string} task
 * @returns {Promise<{ok: boolean, text: string, error: string | null}>}
 */
function run(argv, task) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], [...argv.slice(1), task], { stdio: ["ignore", "pipe", "pipe"] });
    /** @type {Buffer[]} */
    const stdout = [];
    /** @type {Buffer[]} */
    const stderr = [];
    // A runtime silent on both pipes for TIMEOUT_MS is killed (and reaped: "close" follows).
    let silent = false;
    let timer;
    const quiet = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        silent = true;
        child.kill("SIGKILL");
      }, TIMEOUT_MS);
    };
    quiet();
    // Both pipes are read as data comes: a pipe nobody reads fills and blocks the runtime.
    child.stdout.on("data", (chunk) => {
      stdout.push(chunk);
      quiet();
    });
    child.stderr.on("data", (chunk) => {
      stderr.push(chunk);
      quiet();
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (silent) {
        resolve({ ok: false, text: "", error: `the runtime went silent for ${TIMEOUT_MS / 1000} s` });
        return;
      }
      const ok = code === 0;
      const text = Buffer.concat(stdout).toString("utf8").replace(/\n$/, "");
      const errors = Buffer.concat(stderr)
        .toString("utf8")
        .split("\n")
        .filter((line) => line.startsWith("dsh: "));
      const error = ok ? null : (errors.at(-1) ?? `exit ${code}`);
      resolve({ ok, text: ok ? text : "", error });
    });
  });
}

async function main() {
  let argv;
  try {
    argv = JSON.parse(process.env.DSH_HEADLESS_COMMAND ?? "");
    if (!Array.isArray(argv) || argv.length === 0) throw new Error("not a non-empty array");
  } catch (error) {
    process.stderr.write(`dsh-headless-client: DSH_HEADLESS_COMMAND must be a JSON array: ${error.message}\n`);
    return 2;
  }
  try {
    const report = await run(argv, process.argv.slice(2).join(" "));
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`dsh-headless-client: cannot start the runtime: ${error.message}\n`);
    return 2;
  }
}

process.exitCode = await main();
