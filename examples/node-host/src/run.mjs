/**
 * @file One turn (spec 6-10): spawn `dsh --profile open-design --stdio` in its own process group,
 * validate ready, send execute (new session or resume), stream stdout through the strict checker,
 * normalize events, cancel in five bounded steps, and reap the whole tree before the outcome.
 */

import crypto from "node:crypto";
import fs from "node:fs";
import { StreamChecker } from "./checker.mjs";
import { DiscoveryError, PROFILE, readVersion, resolveBinary } from "./discovery.mjs";
import { LineFramer } from "./lines.mjs";
import { EventNormalizer } from "./normalize.mjs";
import { groupAlive, signalGroup, sleep, spawnRuntime, terminateGroup } from "./processes.mjs";
import { compatibilityKey, sameKey } from "./sessions.mjs";
import { StderrCapture, credentialValues } from "./stderr.mjs";

/** Time bounds of a turn, in milliseconds. Each can be set with `NODE_HOST_<NAME>_MS`. */
export const DEFAULT_BOUNDS = Object.freeze({
  ready: 10000,
  run: 15000,
  cancelGrace: 1000,
  stdinCloseGrace: 500,
  exitGrace: 2000,
  termGrace: 1000,
  killWait: 2000,
  stdoutDrain: 500,
});

export function boundsFromEnv(env = process.env) {
  const bounds = { ...DEFAULT_BOUNDS };
  for (const name of Object.keys(bounds)) {
    const variable = `NODE_HOST_${name.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}_MS`;
    const value = Number(env[variable]);
    if (env[variable] !== undefined && Number.isFinite(value) && value >= 0) bounds[name] = value;
  }
  return bounds;
}

let turnCounter = 0;

/** Joins the bootstrap context and the turn for a new session. */
export function newSessionPrompt(bootstrap, prompt) {
  return typeof bootstrap === "string" && bootstrap.length > 0 ? `${bootstrap}\n\n${prompt}` : prompt;
}

/**
 * One run of one conversation. `emit(event)` receives normalized events as they happen;
 * `run()` resolves to the outcome `{ status, session_id, resumed, code, message, foreign_frames, stderr }`
 * once the runtime's process group is gone. `cancel()` may be called at any time.
 */
export class Turn {
  constructor({ request, store, emit, bounds = boundsFromEnv(), env = process.env, log = () => {}, supervisor = null }) {
    this.request = request;
    this.supervisor = supervisor;
    this.store = store;
    this.emit = emit;
    this.bounds = bounds;
    this.env = env;
    this.log = log;
    this.requestId = `od-run-${++turnCounter}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
    this.checker = new StreamChecker({ requestId: this.requestId });
    this.framer = new LineFramer();
    this.normalizer = new EventNormalizer();
    this.child = null;
    this.executeSent = false;
    this.cancelRequested = false;
    this.violationAfterCancel = false;
    this.hostFailure = null;
    this.ending = null;
    this.exited = new Promise((resolve) => {
      this.markExited = resolve;
    });
    this.stdoutClosed = new Promise((resolve) => {
      this.markStdoutClosed = resolve;
    });
    this.streamOver = new Promise((resolve) => {
      this.markStreamOver = resolve;
    });
    this.timers = [];
  }

  async run() {
    const { request } = this;
    let binary;
    let cwd;
    try {
      binary = resolveBinary(this.env);
      cwd = fs.realpathSync(request.cwd);
    } catch (error) {
      return this.#spawnFailed(error instanceof DiscoveryError ? error.message : `project cwd ${request.cwd} is not usable (${error.code})`);
    }
    let family = "unknown";
    try {
      family = (await readVersion(binary, { env: this.env })).family;
    } catch (error) {
      if (!(error instanceof DiscoveryError)) throw error;
      this.log(`dsh version unknown for this run (${error.code}); a resume needs a known version`);
    }
    this.dsh = { binary, family };
    this.cwd = cwd;
    const secrets = [...credentialValues(this.env), request.prompt, request.bootstrap, newSessionPrompt(request.bootstrap, request.prompt)];

    try {
      this.child = spawnRuntime(binary, ["--profile", PROFILE, "--stdio"], { cwd, env: this.env, supervisor: this.supervisor });
    } catch (error) {
      return this.#spawnFailed(`could not start ${binary}: ${error.code ?? error.message}`);
    }
    const spawned = await new Promise((resolve) => {
      this.child.once("spawn", () => resolve(null));
      this.child.once("error", (error) => resolve(error));
    });
    if (spawned) return this.#spawnFailed(`could not start ${binary}: ${spawned.code ?? spawned.message}`);

    this.groupId = this.child.pid;
    this.stderr = new StderrCapture(this.child.stderr, { secrets });
    this.child.stdin.on("error", () => {});
    this.child.stdout.on("data", (chunk) => this.#onStdout(chunk));
    this.child.stdout.on("close", () => {
      this.markStdoutClosed();
      this.#end("eof");
    });
    this.child.on("exit", () => {
      this.markExited();
      this.#end("exit");
    });
    this.timers.push(setTimeout(() => this.#timeout("DSH_PROFILE_READY_TIMEOUT", "the runtime sent no ready frame in time"), this.bounds.ready));
    this.timers.push(setTimeout(() => this.#timeout("DSH_PROFILE_RUN_TIMEOUT", "the run did not finish in time"), this.bounds.run));

    await this.streamOver;
    return this.ending;
  }

  /** Cancel this run (spec 10): protocol cancel, bounded grace, then close stdin and escalate. */
  async cancel() {
    if (this.cancelRequested || this.ending) return;
    this.cancelRequested = true;
    if (!this.child) return;
    if (this.executeSent && !this.checker.terminal()) {
      this.checker.noteCancelSent();
      this.#write({ v: 1, type: "cancel", request_id: this.requestId });
      await Promise.race([this.exited, this.#terminalReached(), sleep(this.bounds.cancelGrace)]);
    }
    this.#end("cancel");
  }

  #terminalReached() {
    return new Promise((resolve) => {
      this.onTerminal = resolve;
    });
  }

  #write(command) {
    if (this.child.stdin.writable) this.child.stdin.write(`${JSON.stringify(command)}\n`);
  }

  #onStdout(chunk) {
    for (const event of this.framer.push(chunk)) this.#onLineEvent(event);
  }

  #onLineEvent(event) {
    const step = this.checker.check(event);
    if (step.kind === "violation") {
      this.violationAfterCancel = this.cancelRequested;
      this.log(`runtime stream violation: ${step.violation.code} ${step.violation.message}`);
      this.onTerminal?.();
      this.#end("violation");
      return;
    }
    if (step.kind !== "accepted") return;
    const { frame } = step;
    if (frame.type === "ready") {
      this.#onReady(frame);
      return;
    }
    if (frame.type === "session") this.#remember(frame.session_id);
    if (frame.type === "result") {
      for (const closing of this.normalizer.close()) this.emit(closing);
      if (frame.status === "failed" && frame.resume_rejected) this.#forget();
      this.onTerminal?.();
      this.#end("result");
      return;
    }
    for (const normalized of this.normalizer.events(frame)) this.emit(normalized);
  }

  #onReady(ready) {
    clearTimeout(this.timers[0]);
    if (this.cancelRequested || this.ending) return;
    const { request } = this;
    const key = compatibilityKey({
      conversationId: request.conversation_id,
      projectId: request.project_id,
      cwd: this.cwd,
      model: request.model,
      dsh: this.dsh,
      ready,
    });
    this.key = key;
    const mapping = this.dsh.family === "unknown" ? null : this.store.get(request.conversation_id);
    const resume = mapping && sameKey(mapping.key, key) ? mapping.sessionId : null;
    if (mapping && !resume) this.log("session mapping incompatible with this run; starting a new session");
    this.checker.setResumeSessionId(resume);
    const execute = {
      v: 1,
      type: "execute",
      request_id: this.requestId,
      cwd: this.cwd,
      prompt: resume ? request.prompt : newSessionPrompt(request.bootstrap, request.prompt),
      ...(resume ? { resume_session_id: resume } : {}),
      ...(request.model ? { model: { provider: request.model.provider, id: request.model.id } } : {}),
      ...(typeof request.reasoning_effort === "string" ? { reasoning_effort: request.reasoning_effort } : {}),
      mcp_servers: [],
    };
    this.#write(execute);
    this.executeSent = true;
  }

  #remember(sessionId) {
    try {
      this.store.put(this.request.conversation_id, sessionId, this.key);
    } catch (error) {
      this.log(`could not store the session mapping: ${error.code ?? error.message}`);
    }
  }

  #forget() {
    try {
      this.store.delete(this.request.conversation_id);
    } catch (error) {
      this.log(`could not remove the session mapping: ${error.code ?? error.message}`);
    }
  }

  #timeout(code, message) {
    if (this.ending || this.checker.terminal()) return;
    this.hostFailure = { code, message };
    this.#end("timeout");
  }

  /** Start the teardown exactly once; `streamOver` resolves with the outcome when it is done. */
  #end(reason) {
    if (this.ending) return;
    this.ending = this.#teardown(reason).then((outcome) => {
      this.markStreamOver();
      return outcome;
    });
  }

  async #teardown(reason) {
    for (const timer of this.timers) clearTimeout(timer);
    const { bounds } = this;
    const resultAccepted = this.checker.terminal()?.kind === "result";
    const exitWait = reason === "result" || (reason === "exit" && resultAccepted) ? bounds.exitGrace : bounds.stdinCloseGrace;
    this.child.stdin.end();
    let exited = await settlesWithin(this.exited, exitWait);
    if (!exited) {
      signalGroup(this.groupId, "SIGTERM");
      exited = await settlesWithin(this.exited, bounds.termGrace);
    }
    if (!exited) {
      signalGroup(this.groupId, "SIGKILL");
      exited = await settlesWithin(this.exited, bounds.killWait);
    }
    const groupGone = await terminateGroup(this.groupId, { termGraceMs: bounds.termGrace, killWaitMs: bounds.killWait });
    if (!exited || !groupGone || groupAlive(this.groupId)) {
      this.log(`process group ${this.groupId} could not be verified gone`);
    }
    await settlesWithin(this.stdoutClosed, bounds.stdoutDrain);
    const tail = this.framer.finish();
    if (tail) this.#onLineEvent(tail);
    await settlesWithin(this.stderr.ended, bounds.stdoutDrain);
    return this.#outcome();
  }

  #outcome() {
    const terminal = this.hostFailure ? null : this.checker.finish();
    const base = {
      session_id: this.checker.sessionId,
      resumed: this.checker.sessionId !== null && this.checker.resumed,
      foreign_frames: this.checker.foreignFrames,
      stderr: this.stderr.text(),
    };
    for (const closing of this.normalizer.close()) this.emit(closing);
    if (terminal?.kind === "result") {
      const result = terminal.frame;
      if (result.status !== "failed") return { status: result.status, ...base, code: null, message: null };
      if (result.resume_rejected) {
        return this.#failed(base, "DSH_PROFILE_RESUME_REJECTED", `the runtime could not resume the session (${result.error.code}: ${result.error.message}); the next run starts a new session`, result.error.code);
      }
      return this.#failed(base, "DSH_PROFILE_RUN_FAILED", `the run failed: ${result.error.code}: ${result.error.message}`, result.error.code);
    }
    const cancelledByUs = this.cancelRequested && (this.hostFailure !== null || terminal.violation.code === "DSH_PROFILE_MISSING_RESULT" || this.violationAfterCancel);
    if (cancelledByUs) return { status: "cancelled", ...base, code: null, message: null };
    if (this.hostFailure) return this.#failed(base, this.hostFailure.code, this.hostFailure.message);
    return this.#failed(base, terminal.violation.code, terminal.violation.message, terminal.violation.runtimeCode);
  }

  /** A failed outcome; `runtimeCode` (the runtime's own error code, when it gave one) rides along
   * for a dialect that reports it, and is not part of the driver reply. */
  #failed(base, code, message, runtimeCode = null) {
    this.emit({ type: "error", message, error: { code, message } });
    return { status: "failed", ...base, code, message, runtimeCode };
  }

  #spawnFailed(message) {
    const code = "DSH_PROFILE_SPAWN_FAILED";
    this.emit({ type: "error", message, error: { code, message } });
    return { status: "failed", session_id: null, resumed: false, code, message, foreign_frames: 0, stderr: "" };
  }
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise, ms) {
  let timer;
  const settled = await Promise.race([promise.then(() => true), new Promise((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  clearTimeout(timer);
  return settled;
}
