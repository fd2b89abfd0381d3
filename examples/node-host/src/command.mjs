/**
 * @file Runs one short-lived dsh command (`--version`, `--probe`, `plugin add`) with a timeout,
 * bounded output, and its whole process group reaped.
 */

import { spawnInOwnGroup, terminateGroup } from "./processes.mjs";
import { StderrCapture, credentialValues } from "./stderr.mjs";

const STDOUT_LIMIT_BYTES = 1024 * 1024;

/**
 * How a short command ended: it could not start (`spawnError`), or its exit and bounded output.
 * @typedef {{ spawnError: NodeJS.ErrnoException } | {
 *   spawnError: null, exitCode: number | null, signal: NodeJS.Signals | null, timedOut: boolean,
 *   stdout: string, stdoutOverflow: boolean, stderr: string
 * }} CommandOutcome
 */

/**
 * Resolves to `{ spawnError, exitCode, signal, timedOut, stdout, stdoutOverflow, stderr }`; never
 * rejects. `stdout` is a string of at most 1 MiB; `stderr` is bounded and redacted.
 * @param {string} command
 * @param {readonly string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, timeoutMs?: number }} [options]
 * @returns {Promise<CommandOutcome>}
 */
export function runCommand(command, args, { cwd = process.cwd(), env = process.env, timeoutMs = 10000 } = {}) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawnInOwnGroup(command, args, { cwd, env });
    } catch (error) {
      resolve({ spawnError: /** @type {NodeJS.ErrnoException} */ (error) });
      return;
    }
    const pid = /** @type {number} */ (child.pid);
    /** @type {Buffer[]} */
    const stdout = [];
    let stdoutBytes = 0;
    let stdoutOverflow = false;
    const stderr = new StderrCapture(child.stderr, { secrets: credentialValues(env) });
    child.stdin.on("error", () => {});
    child.stdin.end();
    child.stdout.on("data", (chunk) => {
      if (stdoutBytes + chunk.length > STDOUT_LIMIT_BYTES) {
        stdoutOverflow = true;
        return;
      }
      stdout.push(chunk);
      stdoutBytes += chunk.length;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      terminateGroup(pid, { termGraceMs: 200 });
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ spawnError: error });
    });
    child.on("exit", async (exitCode, signal) => {
      clearTimeout(timer);
      await terminateGroup(pid, { termGraceMs: 200 });
      await Promise.race([stderr.ended, new Promise((done) => setTimeout(done, 200))]);
      resolve({
        spawnError: null,
        exitCode,
        signal,
        timedOut,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stdoutOverflow,
        stderr: stderr.text(),
      });
    });
  });
}

/**
 * One line describing how a command ended, for diagnostics (no output included).
 * @param {CommandOutcome} outcome
 * @returns {string}
 */
export function describeEnd(outcome) {
  if (outcome.spawnError) return `could not be started (${outcome.spawnError.code ?? outcome.spawnError.message})`;
  if (outcome.timedOut) return "timed out";
  if (outcome.signal) return `was killed by ${outcome.signal}`;
  return `exited with code ${outcome.exitCode}`;
}
