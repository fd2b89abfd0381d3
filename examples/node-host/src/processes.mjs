/**
 * @file The platform part: spawning a runtime in its own process group, signalling that group,
 * and telling whether any member remains. POSIX process groups; a Windows job object would
 * replace this one module.
 */

import { spawn } from "node:child_process";

/**
 * Spawn `command` as the leader of a new process group (`detached: true` on POSIX).
 * @param {string} command
 * @param {readonly string[]} args
 * @param {{ cwd: string, env?: NodeJS.ProcessEnv }} options
 * @returns {import("node:child_process").ChildProcessWithoutNullStreams}
 */
export function spawnInOwnGroup(command, args, { cwd, env = process.env }) {
  return spawn(command, args, { cwd, env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
}

/**
 * Spawn the runtime in a new process group; with `supervisor` (the path of `dsh-conformance`),
 * through `dsh-conformance supervise`, which leads that group as a child subreaper. Node.js cannot
 * make itself a subreaper, so without it a daemon the runtime detached (`setsid`, `setpgid`, a
 * cleared environment) is re-parented to init where this host cannot find it; with it, the
 * supervisor adopts such a daemon and kills it once the runtime has exited, before it exits
 * itself, so the child's `exit` means the runtime's whole tree is gone (spec 6 and 10 step 5).
 * @param {string} command
 * @param {readonly string[]} args
 * @param {{ cwd: string, env?: NodeJS.ProcessEnv, supervisor?: string | null }} options
 * @returns {import("node:child_process").ChildProcessWithoutNullStreams}
 */
export function spawnRuntime(command, args, { cwd, env = process.env, supervisor = null }) {
  if (!supervisor) return spawnInOwnGroup(command, args, { cwd, env });
  return spawnInOwnGroup(supervisor, ["supervise", "--", command, ...args], { cwd, env });
}

/**
 * Send `signal` to every process of the group led by `groupId`; false when the group is gone.
 * @param {number} groupId
 * @param {NodeJS.Signals | 0} signal 0 only asks whether the group exists
 * @returns {boolean}
 */
export function signalGroup(groupId, signal) {
  try {
    process.kill(-groupId, signal);
    return true;
  } catch (error) {
    const { code } = /** @type {NodeJS.ErrnoException} */ (error);
    if (code === "ESRCH") return false;
    if (code === "EPERM") return true;
    throw error;
  }
}

/**
 * Whether any process (zombies included) of the group still exists.
 * @param {number} groupId
 * @returns {boolean}
 */
export function groupAlive(groupId) {
  return signalGroup(groupId, 0);
}

/**
 * Resolves after `ms` milliseconds.
 * @param {number} ms
 * @returns {Promise<void>}
 */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Poll until the group is gone or `timeoutMs` passed; true when it is gone.
 * @param {number} groupId
 * @param {number} timeoutMs
 * @returns {Promise<boolean>}
 */
export async function waitGroupGone(groupId, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (groupAlive(groupId)) {
    if (Date.now() >= deadline) return false;
    await sleep(10);
  }
  return true;
}

/**
 * Make sure no process of the group remains: SIGTERM, wait `termGraceMs`, SIGKILL, then wait
 * (bounded) for the kernel to report the group empty. Returns true when it is verified gone.
 * @param {number} groupId
 * @param {{ termGraceMs?: number, killWaitMs?: number }} [bounds]
 * @returns {Promise<boolean>}
 */
export async function terminateGroup(groupId, { termGraceMs = 1000, killWaitMs = 2000 } = {}) {
  if (!groupAlive(groupId)) return true;
  signalGroup(groupId, "SIGTERM");
  if (await waitGroupGone(groupId, termGraceMs)) return true;
  signalGroup(groupId, "SIGKILL");
  return waitGroupGone(groupId, killWaitMs);
}
