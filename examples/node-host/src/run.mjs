/**
 * @file One turn (spec 6-10), written as the spec's steps, with the same names as the Rust
 * reference host's run loop (`host/src/run.rs`), so that an adapter author can follow either:
 *
 * 0. **Prepare** (`prepare`): resolve dsh, canonicalize the project cwd, read dsh's version family.
 * 1. **Spawn** (`spawnRuntime`): `dsh --profile open-design --stdio` in its own process group,
 *    stderr drained from the start.
 * 2. **Ready** (`awaitReady`): the `ready` frame first, within a bound.
 * 3. **Execute** (`decideSession`, `executeCommand`, `sendExecute`): a new session or a resume from
 *    the compatibility key, then `execute`.
 * 4. **Stream** (`stream`, `takeLine`): stdout through the strict checker, accepted frames
 *    normalized into events; a cancel runs spec 10's steps 1-2 here (`sendCancel`).
 * 5. **Terminal result** (`afterResult`, `readToEof`): stdin closed, stdout read to EOF within the
 *    exit grace (a second result, or anything after the result, still fails the run).
 * 6. **Reap** (`reap`, `stopTree`): spec 10's steps 3-5 on the process group, then what stdout
 *    and stderr still hold.
 * 7. **Outcome** (`conclude`, `classify`): the outcome, reported only once the group is gone.
 */

import crypto from "node:crypto";
import fs from "node:fs";
import { StreamChecker } from "./checker.mjs";
import { DiscoveryError, PROFILE, readVersion, resolveBinary } from "./discovery.mjs";
import { EventNormalizer } from "./normalize.mjs";
import { FrameReader, settlesWithin } from "./pipes.mjs";
import { groupAlive, signalGroup, spawnRuntime, terminateGroup } from "./processes.mjs";
import { compatibilityKey, sameKey } from "./sessions.mjs";
import { StderrCapture, credentialValues } from "./stderr.mjs";

/** @typedef {import("./shapes.mjs").Command} Command */
/** @typedef {import("./shapes.mjs").CompatibilityKey} CompatibilityKey */
/** @typedef {import("./shapes.mjs").HostEvent} HostEvent */
/** @typedef {import("./shapes.mjs").LineEvent} LineEvent */
/** @typedef {import("./shapes.mjs").Outcome} Outcome */
/** @typedef {import("./shapes.mjs").ReadyFrame} ReadyFrame */
/** @typedef {import("./shapes.mjs").ResultFrame} ResultFrame */
/** @typedef {import("./shapes.mjs").RunRequest} RunRequest */
/** @typedef {import("./shapes.mjs").Violation} Violation */
/** @typedef {import("./sessions.mjs").SessionStore} SessionStore */

/**
 * Time bounds of a turn, in milliseconds.
 * @typedef {{
 *   ready: number, run: number, cancelGrace: number, stdinCloseGrace: number, exitGrace: number,
 *   termGrace: number, killWait: number, stdoutDrain: number
 * }} Bounds
 */

/**
 * What the run needs to know before spawning (step 0).
 * @typedef {{ binary: string, cwd: string, family: string }} Prepared
 */

/**
 * The session decision of step 3: the run's compatibility key and the session to resume, if any.
 * @typedef {{ key: CompatibilityKey, resume: string | null }} SessionPlan
 */

/**
 * How the stream part of a run ended (the `End` of the Rust host).
 * @typedef {{ kind: "result", frame: ResultFrame } | { kind: "violation", violation: Violation }
 *   | { kind: "cancelledBeforeExecute" } | { kind: "cancelGraceExpired" }
 *   | { kind: "readyTimeout" } | { kind: "runTimeout" }} End
 */

/**
 * What a step waits for next: a stdout line, its end, a cancel request, or a deadline.
 * @typedef {{ kind: "line", event: LineEvent } | { kind: "eof" } | { kind: "cancel" }
 *   | { kind: "deadline", name: string }} Input
 */

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

/**
 * The bounds, each overridden by its `NODE_HOST_<NAME>_MS` variable when that is a number >= 0.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Bounds}
 */
export function boundsFromEnv(env = process.env) {
  /** @type {Bounds} */
  const bounds = { ...DEFAULT_BOUNDS };
  for (const name of /** @type {(keyof Bounds)[]} */ (Object.keys(bounds))) {
    const variable = `NODE_HOST_${name.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}_MS`;
    const value = Number(env[variable]);
    if (env[variable] !== undefined && Number.isFinite(value) && value >= 0) bounds[name] = value;
  }
  return bounds;
}

let turnCounter = 0;

/**
 * Joins the bootstrap context and the turn for a new session.
 * @param {string | null | undefined} bootstrap
 * @param {string} prompt
 * @returns {string}
 */
export function newSessionPrompt(bootstrap, prompt) {
  return typeof bootstrap === "string" && bootstrap.length > 0 ? `${bootstrap}\n\n${prompt}` : prompt;
}

/**
 * The `execute` command of a run (spec 6): everything OpenDesign sends the runtime for a turn.
 * @param {RunRequest} request
 * @param {string} requestId
 * @param {string} cwd the canonical project directory
 * @param {string | null} resume the session to resume, or null for a new one
 * @returns {Command}
 */
export function executeCommand(request, requestId, cwd, resume) {
  return {
    v: 1,
    type: "execute",
    request_id: requestId,
    cwd,
    prompt: resume ? request.prompt : newSessionPrompt(request.bootstrap, request.prompt),
    ...(resume ? { resume_session_id: resume } : {}),
    ...(request.model ? { model: { provider: request.model.provider, id: request.model.id } } : {}),
    ...(typeof request.reasoning_effort === "string" ? { reasoning_effort: request.reasoning_effort } : {}),
    mcp_servers: [],
  };
}

/**
 * One run of one conversation. `emit(event)` receives normalized events as they happen; `run()`
 * resolves to the outcome once the runtime's process group is gone. `cancel()` may be called at
 * any time.
 */
export class Turn {
  /**
   * `supervisor`: the path of `dsh-conformance` to run the runtime under (src/processes.mjs), or null.
   * @param {{
   *   request: RunRequest, store: SessionStore, emit: (event: HostEvent) => void, bounds?: Bounds,
   *   env?: NodeJS.ProcessEnv, log?: (message: string) => void, supervisor?: string | null
   * }} options
   */
  constructor({
    request, store, emit, bounds = boundsFromEnv(), env = process.env, log = () => {}, supervisor = null,
  }) {
    this.request = request;
    this.supervisor = supervisor;
    this.store = store;
    this.emit = emit;
    this.bounds = bounds;
    this.env = env;
    this.log = log;
    this.requestId = `od-run-${++turnCounter}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
    this.checker = new StreamChecker({ requestId: this.requestId });
    this.normalizer = new EventNormalizer();
    /** Set by `cancel()` until the stream part ended; read by the steps. */
    this.cancelRequested = false;
    /** @type {() => void} */
    this.wakeOnCancel = () => {};
    this.cancelSent = false;
    /** A violation found after a cancel was requested still ends the run as cancelled. */
    this.violationAfterCancel = false;
    this.streamEnded = false;
  }

  /**
   * The whole turn, step by step (see the file's documentation).
   * @returns {Promise<Outcome>}
   */
  async run() {
    const prepared = await this.prepare();
    if (typeof prepared === "string") return this.spawnFailure(prepared);
    const spawnError = await this.spawnRuntime(prepared);
    if (spawnError !== null) return this.spawnFailure(spawnError);
    let end = await this.awaitReady();
    if (end.kind === "ready") {
      const plan = this.decideSession(prepared, end.frame);
      this.sendExecute(prepared, plan);
      end = await this.stream();
    }
    this.streamEnded = true;
    end = await this.afterResult(end);
    end = await this.reap(end);
    return this.conclude(end);
  }

  /** Cancel this run (spec 10): the stream step sends `cancel`, then the grace, then the reap. */
  cancel() {
    if (this.cancelRequested || this.streamEnded) return;
    this.cancelRequested = true;
    this.wakeOnCancel();
  }

  /**
   * Step 0: resolve the executable, canonicalize the cwd, read the version family.
   * @returns {Promise<Prepared | string>} what the run needs, or why it cannot start
   */
  async prepare() {
    let binary;
    let cwd;
    try {
      binary = resolveBinary(this.env);
      cwd = fs.realpathSync(this.request.cwd);
    } catch (error) {
      if (error instanceof DiscoveryError) return error.message;
      return `project cwd ${this.request.cwd} is not usable (${errorCode(error)})`;
    }
    let family = "unknown";
    try {
      family = (await readVersion(binary, { env: this.env })).family;
    } catch (error) {
      if (!(error instanceof DiscoveryError)) throw error;
      this.log(`dsh version unknown for this run (${error.code}); a resume needs a known version`);
    }
    return { binary, cwd, family };
  }

  /**
   * Step 1, spawn: the runtime in its own process group, stdout framed and stderr drained at once.
   * @param {Prepared} prepared
   * @returns {Promise<string | null>} null once started, else why it could not start
   */
  async spawnRuntime({ binary, cwd }) {
    const { request } = this;
    const prompts = [request.prompt, request.bootstrap, newSessionPrompt(request.bootstrap, request.prompt)];
    let child;
    try {
      const args = ["--profile", PROFILE, "--stdio"];
      child = spawnRuntime(binary, args, { cwd, env: this.env, supervisor: this.supervisor });
    } catch (error) {
      return `could not start ${binary}: ${errorCode(error)}`;
    }
    /** @type {Error | null} */
    const failed = await new Promise((resolve) => {
      child.once("spawn", () => resolve(null));
      child.once("error", (error) => resolve(error));
    });
    if (failed) return `could not start ${binary}: ${errorCode(failed)}`;
    const started = Date.now();
    this.child = child;
    this.groupId = /** @type {number} */ (child.pid);
    this.stderr = new StderrCapture(child.stderr, { secrets: [...credentialValues(this.env), ...prompts] });
    this.reader = new FrameReader(child.stdout);
    child.stdin.on("error", () => {});
    this.exited = new Promise((resolve) => child.once("exit", resolve));
    // An exit is the end of the stream once stdout had a moment to deliver what it still holds.
    this.exited.then(() => setTimeout(() => this.reader?.end(), this.bounds.stdoutDrain));
    this.readyDeadline = started + this.bounds.ready;
    this.runDeadline = started + this.bounds.run;
    return null;
  }

  /**
   * Step 2, ready (spec 6, 7): the first frame, within a bound, through the checker.
   * @returns {Promise<{ kind: "ready", frame: ReadyFrame } | End>}
   */
  async awaitReady() {
    for (;;) {
      const input = await this.nextInput({ ready: this.readyDeadline, run: this.runDeadline }, true);
      switch (input.kind) {
        case "cancel":
          return { kind: "cancelledBeforeExecute" };
        case "deadline":
          return { kind: input.name === "ready" ? "readyTimeout" : "runTimeout" };
        case "eof":
          return this.checker.finish();
        case "line": {
          const step = this.checker.check(input.event);
          if (step.kind === "violation") return this.violationEnd(step.violation);
          if (step.kind === "accepted" && step.frame.type === "ready") {
            return { kind: "ready", frame: /** @type {ReadyFrame} */ (step.frame) };
          }
        }
      }
    }
  }

  /**
   * Step 3a: new session or resume, from the compatibility key (spec 7). A run whose dsh version
   * is unknown never resumes.
   * @param {Prepared} prepared
   * @param {ReadyFrame} ready
   * @returns {SessionPlan}
   */
  decideSession(prepared, ready) {
    const { request } = this;
    const key = compatibilityKey({
      conversationId: request.conversation_id,
      projectId: request.project_id,
      cwd: prepared.cwd,
      model: request.model,
      dsh: { binary: prepared.binary, family: prepared.family },
      ready,
    });
    const mapping = prepared.family === "unknown" ? null : this.store.get(request.conversation_id);
    const resume = mapping && sameKey(mapping.key, key) ? mapping.sessionId : null;
    if (mapping && !resume) this.log("session mapping incompatible with this run; starting a new session");
    return { key, resume };
  }

  /**
   * Step 3b: the checker told which session to expect, and `execute` written.
   * @param {Prepared} prepared
   * @param {SessionPlan} plan
   */
  sendExecute(prepared, plan) {
    this.key = plan.key;
    this.checker.setResumeSessionId(plan.resume);
    this.write(executeCommand(this.request, this.requestId, prepared.cwd, plan.resume));
  }

  /**
   * Step 4, stream: every stdout line through the checker until the terminal result, a violation,
   * a timeout, or the end of a cancel's grace.
   * @returns {Promise<End>}
   */
  async stream() {
    for (;;) {
      const deadlines = { run: this.runDeadline, cancelGrace: this.cancelDeadline };
      const input = await this.nextInput(deadlines, !this.cancelSent);
      switch (input.kind) {
        case "cancel":
          this.sendCancel();
          break;
        case "deadline":
          return { kind: input.name === "run" ? "runTimeout" : "cancelGraceExpired" };
        case "eof":
          return this.checker.finish();
        case "line": {
          const end = this.takeLine(input.event);
          if (end) return end;
        }
      }
    }
  }

  /** Spec 10 steps 1-2: the protocol `cancel` for the active request, then up to `cancelGrace` for
   * `result: cancelled` (the stream goes on meanwhile). */
  sendCancel() {
    this.cancelSent = true;
    this.checker.noteCancelSent();
    this.write({ v: 1, type: "cancel", request_id: this.requestId });
    this.cancelDeadline = Date.now() + this.bounds.cancelGrace;
  }

  /**
   * One stdout line of step 4: checked, then emitted as events; an `End` when it ends the stream.
   * A validated session is stored at once; a rejected resume forgets the stored one (spec 7).
   * @param {LineEvent} event
   * @returns {End | null}
   */
  takeLine(event) {
    const step = this.checker.check(event);
    if (step.kind === "violation") return this.violationEnd(step.violation);
    if (step.kind !== "accepted") return null;
    const { frame } = step;
    if (frame.type === "session") this.rememberSession(frame.session_id);
    if (frame.type === "result") {
      const result = /** @type {ResultFrame} */ (frame);
      for (const closing of this.normalizer.close()) this.emit(closing);
      if (result.status === "failed" && result.resume_rejected) this.forgetSession();
      return { kind: "result", frame: result };
    }
    for (const normalized of this.normalizer.events(frame)) this.emit(normalized);
    return null;
  }

  /**
   * Step 5, after the terminal result: close stdin and read to EOF within the exit grace, so a
   * second result or anything after the terminal one still fails the run.
   * @param {End} end
   * @returns {Promise<End>}
   */
  async afterResult(end) {
    if (end.kind !== "result") return end;
    this.child?.stdin.end();
    this.exitDeadline = Date.now() + this.bounds.exitGrace;
    return this.readToEof(end, this.exitDeadline);
  }

  /**
   * Every line after the result through the checker until EOF or `deadline`; a line it does not
   * skip (a second result, say) ends the run with its violation.
   * @param {End} end
   * @param {number} deadline
   * @returns {Promise<End>}
   */
  async readToEof(end, deadline) {
    for (;;) {
      const input = await this.nextInput({ exit: deadline }, false);
      if (input.kind !== "line") return end;
      const step = this.checker.check(input.event);
      if (step.kind === "violation") return this.violationEnd(step.violation);
    }
  }

  /**
   * Step 6, reap: stdin closed, spec 10's steps 3-5 on the group (the exit grace already running
   * after a result), then the lines stdout still held (checked after a result) and stderr's end.
   * @param {End} end
   * @returns {Promise<End>}
   */
  async reap(end) {
    const { bounds } = this;
    this.child?.stdin.end();
    const firstBound = this.exitDeadline === undefined ? bounds.stdinCloseGrace : this.exitDeadline - Date.now();
    await this.stopTree(Math.max(0, firstBound));
    const reader = /** @type {FrameReader} */ (this.reader);
    await settlesWithin(reader.closed, bounds.stdoutDrain);
    reader.end();
    await settlesWithin(this.stderr?.ended ?? Promise.resolve(), bounds.stdoutDrain);
    return end.kind === "result" ? this.checkRest(end) : end;
  }

  /**
   * The lines stdout still held after the reap, checked after a result like step 5's.
   * @param {End} end
   * @returns {End}
   */
  checkRest(end) {
    const reader = /** @type {FrameReader} */ (this.reader);
    for (let event = reader.take(); event; event = reader.take()) {
      const step = this.checker.check(event);
      if (step.kind === "violation") return this.violationEnd(step.violation);
    }
    return end;
  }

  /**
   * Spec 10 steps 3-5 (and the end of every run): stdin is already closed; wait `firstBound`,
   * SIGTERM the group, wait, SIGKILL it, and verify that no member is left.
   * @param {number} firstBound
   */
  async stopTree(firstBound) {
    const { bounds, groupId } = this;
    const exited = this.exited ?? Promise.resolve();
    if (groupId === undefined) return;
    let gone = await settlesWithin(exited, firstBound);
    if (!gone) {
      signalGroup(groupId, "SIGTERM");
      gone = await settlesWithin(exited, bounds.termGrace);
    }
    if (!gone) {
      signalGroup(groupId, "SIGKILL");
      gone = await settlesWithin(exited, bounds.killWait);
    }
    const groupGone = await terminateGroup(groupId, { termGraceMs: bounds.termGrace, killWaitMs: bounds.killWait });
    if (!gone || !groupGone || groupAlive(groupId)) this.log(`process group ${groupId} could not be verified gone`);
  }

  /**
   * Step 7, outcome: the status from how the stream ended, the session the checker validated.
   * @param {End} end
   * @returns {Outcome}
   */
  conclude(end) {
    const base = {
      session_id: this.checker.sessionId,
      resumed: this.checker.sessionId !== null && this.checker.resumed,
      foreign_frames: this.checker.foreignFrames,
      stderr: this.stderr?.text() ?? "",
    };
    for (const closing of this.normalizer.close()) this.emit(closing);
    const { status, code, message, runtimeCode } = this.classify(end);
    if (status === "failed" && code !== null && message !== null) this.emitFailure(code, message);
    return { status, ...base, code, message, ...(status === "failed" ? { runtimeCode } : {}) };
  }

  /**
   * The status, code and message of an end. A cancel requested before the stream ended turns
   * a missing result, a timeout, or a violation after the cancel into `cancelled`.
   * @param {End} end
   * @returns {{ status: Outcome["status"], code: string | null, message: string | null, runtimeCode: string | null }}
   */
  classify(end) {
    /** @param {string} code @param {string} message @param {string | null} [runtimeCode] */
    const failed = (code, message, runtimeCode = null) => {
      return { status: /** @type {const} */ ("failed"), code, message, runtimeCode };
    };
    const cancelled = { status: /** @type {const} */ ("cancelled"), code: null, message: null, runtimeCode: null };
    switch (end.kind) {
      case "result": {
        const result = end.frame;
        if (result.status !== "failed") return { status: result.status, code: null, message: null, runtimeCode: null };
        const error = result.error ?? { code: "unknown", message: "" };
        if (result.resume_rejected) {
          const message = `the runtime could not resume the session (${error.code}: ${error.message}); `
            + "the next run starts a new session";
          return failed("DSH_PROFILE_RESUME_REJECTED", message, error.code);
        }
        return failed("DSH_PROFILE_RUN_FAILED", `the run failed: ${error.code}: ${error.message}`, error.code);
      }
      case "violation": {
        const { violation } = end;
        const byOurCancel = violation.code === "DSH_PROFILE_MISSING_RESULT" || this.violationAfterCancel;
        if (this.cancelRequested && byOurCancel) return cancelled;
        return failed(violation.code, violation.message, violation.runtimeCode ?? null);
      }
      case "cancelledBeforeExecute":
      case "cancelGraceExpired":
        return cancelled;
      case "readyTimeout":
        if (this.cancelRequested) return cancelled;
        return failed("DSH_PROFILE_READY_TIMEOUT", "the runtime sent no ready frame in time");
      case "runTimeout":
        if (this.cancelRequested) return cancelled;
        return failed("DSH_PROFILE_RUN_TIMEOUT", "the run did not finish in time");
    }
  }

  /**
   * The failed outcome of a run that never started.
   * @param {string} message
   * @returns {Outcome}
   */
  spawnFailure(message) {
    const code = "DSH_PROFILE_SPAWN_FAILED";
    this.emitFailure(code, message);
    return { status: "failed", session_id: null, resumed: false, code, message, foreign_frames: 0, stderr: "" };
  }

  /**
   * A failed run's outcome is also an event (the last of the run).
   * @param {string} code
   * @param {string} message
   */
  emitFailure(code, message) {
    this.emit({ type: "error", message, error: { code, message } });
  }

  /**
   * The next thing a step waits for: a cancel request first (when `watchCancel`), then a passed
   * deadline, then a stdout line or its end.
   * @param {Record<string, number | undefined>} deadlines absolute times (`Date.now()` ms)
   * @param {boolean} watchCancel
   * @returns {Promise<Input>}
   */
  async nextInput(deadlines, watchCancel) {
    const reader = /** @type {FrameReader} */ (this.reader);
    const pending = Object.entries(deadlines).filter(([, at]) => at !== undefined);
    for (;;) {
      if (watchCancel && this.cancelRequested) return { kind: "cancel" };
      const passed = pending.find(([, at]) => Date.now() >= /** @type {number} */ (at));
      if (passed) return { kind: "deadline", name: passed[0] };
      const event = reader.take();
      if (event === null) return { kind: "eof" };
      if (event !== undefined) return { kind: "line", event };
      const soonest = Math.min(...pending.map(([, at]) => /** @type {number} */ (at)));
      /** @type {NodeJS.Timeout | undefined} */
      let timer;
      /** @type {Promise<unknown>[]} */
      const woken = [reader.arrival()];
      if (Number.isFinite(soonest)) {
        woken.push(new Promise((resolve) => (timer = setTimeout(resolve, soonest - Date.now()))));
      }
      if (watchCancel) woken.push(new Promise((resolve) => (this.wakeOnCancel = () => resolve(undefined))));
      await Promise.race(woken);
      clearTimeout(timer);
    }
  }

  /**
   * A violation ends the stream; one found after a cancel request still counts as the cancel's.
   * @param {Violation} violation
   * @returns {End}
   */
  violationEnd(violation) {
    this.violationAfterCancel = this.cancelRequested;
    this.log(`runtime stream violation: ${violation.code} ${violation.message}`);
    return { kind: "violation", violation };
  }

  /** @param {Command} command */
  write(command) {
    const stdin = this.child?.stdin;
    if (stdin?.writable) stdin.write(`${JSON.stringify(command)}\n`);
  }

  /** @param {string} sessionId */
  rememberSession(sessionId) {
    try {
      this.store.put(this.request.conversation_id, sessionId, /** @type {CompatibilityKey} */ (this.key));
    } catch (error) {
      this.log(`could not store the session mapping: ${errorCode(error)}`);
    }
  }

  forgetSession() {
    try {
      this.store.delete(this.request.conversation_id);
    } catch (error) {
      this.log(`could not remove the session mapping: ${errorCode(error)}`);
    }
  }
}

/**
 * An error's `code` (a system error's errno name), else its message.
 * @param {unknown} error
 * @returns {string}
 */
function errorCode(error) {
  const { code, message } = /** @type {{ code?: string, message?: string }} */ (error ?? {});
  return code ?? message ?? String(error);
}
