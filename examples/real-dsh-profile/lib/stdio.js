/**
 * `--stdio`: one process, one turn. Writes `ready`, reads host commands line by line, runs the
 * first `execute` on a new (`od-<uuid>`) or resumed Harness session through `ctx.agents`, streams
 * the projected frames, answers `cancel`, refuses a second `execute` and fatal bad input with
 * `protocol_error`, flushes the session, writes one terminal `result` and asks the launcher to exit.
 * @module @dsh-conformance/open-design-profile/stdio
 */

import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { createInterface } from "node:readline";
import { installModelSelection } from "@deepseek-ai/dsh-agent";
import { createUserMessage } from "@deepseek-ai/dsh-llm";
import { SessionId } from "@deepseek-ai/dsh-session";
import { classify } from "./commands.js";
import { identity, protocolError, result, scoped, writeFrame } from "./frames.js";
import { Projection } from "./projection.js";

/** How long the launcher's graceful exit may take before the process ends anyway. */
const EXIT_FALLBACK_MS = 500;

/** The route a turn runs on: the execute's model when it names the default provider, else the default. */
function routeFor(selection, execute) {
  const asked = execute.model;
  if (asked !== undefined && asked.provider === selection.provider) return { ...selection, model: asked.id };
  return selection;
}

/** One `--stdio` process's state. */
class StdioSession {
  constructor(ctx, exit) {
    this.ctx = ctx;
    this.exit = exit;
    this.execute = undefined;
    this.agent = undefined;
    this.sessionId = undefined;
    this.cancelRequested = false;
    this.finished = false;
  }

  start() {
    writeFrame(identity("ready"));
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    lines.on("line", (line) => this.onLine(line));
    lines.on("close", () => {
      if (this.execute === undefined) this.finish(1, "dsh: stdin closed before an execute command");
    });
  }

  onLine(line) {
    if (this.finished) return;
    const command = classify(line);
    switch (command.kind) {
      case "blank":
        return;
      case "execute":
        if (this.execute === undefined) return this.begin(command.command);
        return writeFrame(protocolError(command.command.request_id, "DUPLICATE_EXECUTE", "an execute is already active in this process"));
      case "cancel":
        if (command.requestId === this.execute?.request_id) this.cancel();
        return;
      default:
        return this.fatal(command);
    }
  }

  /** A malformed or invalid command: a protocol_error, then the process ends (fatal, spec 6). */
  fatal(command) {
    const code = command.kind === "malformed" ? "MALFORMED_COMMAND" : "INVALID_COMMAND";
    const foreign = command.requestId !== undefined && this.execute !== undefined && command.requestId !== this.execute.request_id;
    writeFrame(protocolError(command.requestId, code, command.message));
    if (foreign) return;
    this.agent?.cancel({ kind: "user" });
    this.finish(1);
  }

  cancel() {
    this.cancelRequested = true;
    this.agent?.cancel({ kind: "user" });
  }

  begin(execute) {
    this.execute = execute;
    const resume = typeof execute.resume_session_id === "string" ? execute.resume_session_id : undefined;
    this.sessionId = resume ?? `od-${randomUUID()}`;
    this.run(resume).catch((error) => {
      const message = error instanceof Error ? error.message : String(error);
      this.terminal(result(execute.request_id, "failed", this.sessionId, { stopReason: "error", error: { code: "RUN_FAILED", message } }), 1);
    });
  }

  /** Creates or resumes the agent; a resume that cannot load is a structured rejection. */
  async open(resume, route) {
    const agents = this.ctx.get("agents");
    const setup = (agentCtx) => {
      installModelSelection(agentCtx, { current: route, assembled: undefined });
    };
    const agentOptions = { provider: route.provider, model: route.model };
    if (resume === undefined) {
      const created = await agents.create({ sessionId: SessionId(this.sessionId), meta: { cwd: this.execute.cwd }, agentOptions, setup });
      return created.agent;
    }
    try {
      return (await agents.resume({ resumeSessionId: SessionId(resume), agentOptions, setup })).agent;
    } catch (error) {
      const message = `session ${JSON.stringify(resume)} cannot be resumed: ${error instanceof Error ? error.message : String(error)}`;
      this.terminal(result(this.execute.request_id, "failed", resume, { resumeRejected: true, stopReason: "error", error: { code: "SESSION_NOT_FOUND", message } }), 1);
      return undefined;
    }
  }

  async run(resume) {
    const requestId = this.execute.request_id;
    if (!statSync(this.execute.cwd, { throwIfNoEntry: false })?.isDirectory()) {
      return this.terminal(result(requestId, "failed", this.sessionId, { stopReason: "error", error: { code: "CWD_INVALID", message: "the execute's cwd is not a directory" } }), 1);
    }
    await this.ctx.get("loader")?.await();
    const route = routeFor(this.ctx.get("agentDefaultModel").currentSelection(), this.execute);
    if (this.cancelRequested) return this.terminal(result(requestId, "cancelled", this.sessionId, { stopReason: "cancelled" }), 0);
    const agent = await this.open(resume, route);
    if (agent === undefined) return undefined;
    this.agent = agent;
    writeFrame(scoped("session", requestId, { session_id: this.sessionId, resumed: resume !== undefined }));
    const projection = new Projection(requestId, route, (frame) => writeFrame(frame));
    const stop = this.ctx.on("session/event", (session, event) => {
      if (session?.id === this.sessionId) projection.accept(event);
    });
    await agent.whenIdle();
    if (this.cancelRequested) agent.cancel({ kind: "user" });
    else agent.followup(createUserMessage({ content: [{ type: "text", text: this.execute.prompt }], source: { kind: "user" } }));
    await agent.whenIdle();
    await this.ctx.get("sessions").flush(agent.session);
    stop();
    const outcome = projection.outcome(this.cancelRequested);
    return this.terminal(result(requestId, outcome.status, this.sessionId, outcome), outcome.status === "failed" ? 1 : 0);
  }

  terminal(frame, code) {
    if (this.finished) return;
    writeFrame(frame);
    this.finish(code);
  }

  finish(code, diagnostic) {
    if (this.finished) return;
    this.finished = true;
    if (diagnostic !== undefined) process.stderr.write(`${diagnostic}\n`);
    process.stdin.pause();
    this.exit(code);
    // The launcher disposes the app before the process ends. After a failed `agents.resume` that
    // disposal never settles in dsh 0.1.0-rc.8 (observed: its file watchers stay open), so a
    // bounded fallback ends the process: a runtime exits after its terminal result (spec 6).
    setTimeout(() => process.exit(code), EXIT_FALLBACK_MS).unref();
  }
}

/** Runs the `--stdio` surface until its one turn ends. */
export function serveStdio(ctx, exit) {
  new StdioSession(ctx, exit).start();
}
