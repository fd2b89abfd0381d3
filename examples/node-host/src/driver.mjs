/**
 * @file The dsh-conformance driver protocol (docs/host-driver.md): reads requests as NDJSON on
 * stdin, drives the host, writes replies on stdout.
 */

import readline from "node:readline";
import { discover } from "./discovery.mjs";
import { isPlainObject } from "./frames.mjs";
import { Turn, boundsFromEnv } from "./run.mjs";
import { SessionStore, dataDir } from "./sessions.mjs";
import { installBundle } from "./setup.mjs";
import { OPENDESIGN_CODES, OpenDesignEvents, openDesignCode } from "./opendesign-dialect.mjs";
import { ModelsError, listModels, pickedModel } from "./models.mjs";

/** @typedef {import("./shapes.mjs").HostEvent} HostEvent */

/**
 * A driver request (docs/host-driver.md) once `requestProblem` found nothing wrong with it: `type`
 * says which members it has.
 * @typedef {{ v: 1, type: string, id?: string, [member: string]: any }} DriverRequest
 */

/**
 * A driver reply, one line of stdout.
 * @typedef {{ v: 1, type: string, id?: string | null, [member: string]: unknown }} DriverReply
 */

/**
 * A run in flight: its turn (once started) and the promise of its outcome written.
 * @typedef {{ turn: Turn | null, done: Promise<void> | null }} RunEntry
 */

export const DRIVER_NAME = "node-host";
export const DRIVER_VERSION = "0.1.0";
export const CAPABILITIES = ["discover", "setup", "sessions", "cancel", "restart", "concurrent", "reuse", "models"];

/**
 * Checks a request's shape; returns an error message or null.
 * @param {unknown} request a parsed request line
 * @returns {string | null}
 */
export function requestProblem(request) {
  if (!isPlainObject(request)) return "a request must be a JSON object";
  if (request.v !== 1) return "unsupported driver protocol version (v must be 1)";
  const needsId = !["handshake", "shutdown"].includes(request.type);
  if (needsId && (typeof request.id !== "string" || request.id.length === 0)) {
    return `${request.type} needs a string id`;
  }
  switch (request.type) {
    case "handshake":
    case "shutdown":
    case "discover":
    case "cancel":
    case "models":
      return null;
    case "case":
      if (!isPlainObject(request.env) || Object.values(request.env).some((value) => typeof value !== "string")) {
        return "case needs env, an object of strings";
      }
      return typeof request.cwd === "string" ? null : "case needs a string cwd";
    case "setup":
      if (typeof request.tarball === "string" && typeof request.manifest === "string") return null;
      return "setup needs string tarball and manifest paths";
    case "run": {
      const fields = ["conversation_id", "project_id", "cwd", "prompt"];
      const strings = fields.filter((name) => typeof request[name] !== "string");
      if (strings.length > 0) return `run needs string ${strings.join(", ")}`;
      const { bootstrap, model } = request;
      if (bootstrap !== undefined && bootstrap !== null && typeof bootstrap !== "string") {
        return "run bootstrap must be a string or null";
      }
      if (typeof request.route === "string" && request.route !== "") return null;
      if (!isPlainObject(model) || typeof model.provider !== "string" || typeof model.id !== "string") {
        return "run needs model {provider, id} or a route";
      }
      return null;
    }
    default:
      return `unknown request type ${JSON.stringify(request.type)}`;
  }
}

/**
 * The driver: handshake, discover, setup and shutdown handled in order; each run starts at once
 * and goes on alongside the others (OpenDesign's daemon runs several conversations at a time);
 * `cancel` reaches only the run it names. `write(reply)` sends one reply line.
 */
export class Driver {
  /**
   * `dialect`: `"kit"` (the kit's event shapes and codes) or `"opendesign"` (OpenDesign's).
   * `supervisor`: the path of `dsh-conformance`, whose `supervise` runs each runtime under a child
   * subreaper (escaped daemons, see src/processes.mjs), or null to spawn the runtime directly.
   * @param {{
   *   write: (reply: DriverReply) => void, env?: NodeJS.ProcessEnv, log?: (message: string) => void,
   *   dialect?: string, supervisor?: string | null
   * }} options
   */
  constructor({ write, env = process.env, log = logToStderr, dialect = "kit", supervisor = null }) {
    this.write = write;
    this.dialect = dialect;
    this.supervisor = supervisor;
    this.env = env;
    this.log = log;
    this.store = new SessionStore(dataDir(env), { warn: log });
    /** @type {Promise<void>} */
    this.queue = Promise.resolve();
    /** @type {Map<string, RunEntry>} Runs in flight: request id -> { turn, done }. */
    this.runs = new Map();
    this.shuttingDown = false;
  }

  /**
   * Handle one raw request line. Resolves once the driver has finished when it was `shutdown`.
   * @param {string} line
   * @returns {Promise<void> | undefined}
   */
  handleLine(line) {
    if (line.trim() === "") return;
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      const reply = { v: /** @type {const} */ (1), type: "error", id: null, message: "request is not JSON" };
      return this.#enqueue(async () => this.write(reply));
    }
    const problem = requestProblem(request);
    if (problem) {
      const id = typeof request?.id === "string" ? request.id : null;
      return this.#enqueue(async () => this.write({ v: 1, type: "error", id, message: problem }));
    }
    if (request.type === "cancel") {
      this.runs.get(request.id)?.turn?.cancel();
      return;
    }
    if (request.type === "run") return this.#startRun(request);
    if (request.type === "shutdown") {
      this.#cancelAll();
      this.shuttingDown = true;
    }
    return this.#enqueue(() => this.#handle(request), request);
  }

  /**
   * @param {() => Promise<void>} task
   * @param {DriverRequest | null} [request]
   * @returns {Promise<void>}
   */
  #enqueue(task, request = null) {
    this.queue = this.queue.then(task).catch((error) => {
      this.log(`internal error handling ${request?.type ?? "a request"}: ${error.stack ?? error}`);
      this.write({ v: 1, type: "error", id: request?.id ?? null, message: `internal error: ${error.message}` });
    });
    return this.queue;
  }

  #cancelAll() {
    for (const { turn } of this.runs.values()) turn?.cancel();
  }

  /** Every run in flight has written its outcome. */
  async #runsDone() {
    await Promise.allSettled([...this.runs.values()].map(({ done }) => done));
  }

  /** The input ended or the driver was told to stop: cancel the runs, wait for them and the queue. */
  async stop() {
    this.shuttingDown = true;
    this.#cancelAll();
    await this.#runsDone();
    await this.queue;
  }

  /** @param {DriverRequest} request */
  async #handle(request) {
    switch (request.type) {
      case "handshake": {
        const codes = this.dialect === "opendesign" ? OPENDESIGN_CODES : "kit";
        const driver = { driver: DRIVER_NAME, version: DRIVER_VERSION, capabilities: CAPABILITIES, codes };
        this.write({ v: 1, type: "handshake", ...driver });
        break;
      }
      case "discover": {
        const { available, version, warnings, diagnostic, code } = await discover(this.env);
        this.write({ v: 1, type: "discovered", id: request.id, available, version, warnings, diagnostic, code });
        break;
      }
      case "setup": {
        const done = await installBundle({ tarball: request.tarball, manifest: request.manifest }, this.env);
        this.write({ v: 1, type: "setup_done", id: request.id, ok: done.ok, code: done.code, message: done.message });
        break;
      }
      case "case":
        // Serve another case's world (capability `reuse`): its variables replace ours.
        await this.#runsDone();
        this.env = { ...process.env, ...request.env };
        this.store = new SessionStore(dataDir(this.env), { warn: this.log });
        this.write({ v: 1, type: "case_ready", id: request.id });
        break;
      case "models": {
        const found = await listModels(this.env, { timeoutMs: modelsBound(this.env) });
        this.write({ v: 1, type: "models", id: request.id, ...found });
        break;
      }
      case "shutdown":
        await this.#runsDone();
        this.write({ v: 1, type: "bye" });
        break;
    }
  }

  /**
   * Start a run beside the others; resolves when its outcome is written.
   * @param {DriverRequest} request
   * @returns {Promise<void>}
   */
  #startRun(request) {
    /** @type {RunEntry} */
    const entry = { turn: null, done: null };
    entry.done = this.#run(request, entry)
      .catch((error) => {
        this.log(`internal error in run ${request.id}: ${error.stack ?? error}`);
        this.write({ v: 1, type: "error", id: request.id, message: `internal error: ${error.message}` });
      })
      .finally(() => this.runs.delete(/** @type {string} */ (request.id)));
    return entry.done;
  }

  /**
   * @param {DriverRequest} request
   * @param {RunEntry} entry
   */
  async #run(request, entry) {
    const id = /** @type {string} */ (request.id);
    /** @param {HostEvent} event */
    const send = (event) => this.write({ v: 1, type: "event", id, event });
    const dialect = this.dialect === "opendesign" ? new OpenDesignEvents() : null;
    let model;
    try {
      model = pickedModel(request);
    } catch (error) {
      if (!(error instanceof ModelsError)) throw error;
      this.#refuseRoute(request, error, dialect, send);
      return;
    }
    const turn = new Turn({
      request: /** @type {import("./shapes.mjs").RunRequest} */ (/** @type {unknown} */ ({ ...request, model })),
      store: this.store,
      emit: (event) => (dialect ? dialect.map(event) : [event]).forEach(send),
      bounds: boundsFromEnv(this.env),
      env: this.env,
      log: this.log,
      supervisor: this.supervisor,
    });
    entry.turn = turn;
    this.runs.set(id, entry);
    if (this.shuttingDown) turn.cancel();
    const { runtimeCode, ...outcome } = await turn.run();
    if (dialect) {
      dialect.finish().forEach(send);
      outcome.code = openDesignCode({ ...outcome, runtimeCode });
    }
    this.write({ v: 1, type: "outcome", id: request.id, ...outcome });
  }

  /**
   * A route that is not provider/id: the run fails before anything is spawned (I-16f).
   * @param {DriverRequest} request
   * @param {ModelsError} error
   * @param {OpenDesignEvents | null} dialect
   * @param {(event: HostEvent) => void} send
   */
  #refuseRoute(request, error, dialect, send) {
    const { code, message } = error;
    const event = { type: "error", message, error: { code, message } };
    (dialect ? dialect.map(event) : [event]).forEach(send);
    const sessionId = this.store.get(request.conversation_id)?.sessionId ?? null;
    const outcome = { status: "failed", session_id: sessionId, resumed: false, code, message };
    this.write({ v: 1, type: "outcome", id: request.id, ...outcome, foreign_frames: 0, stderr: "" });
  }
}

/** @param {string} message */
function logToStderr(message) {
  process.stderr.write(`node-host: ${message}\n`);
}

/**
 * The `--models` bound in ms: `NODE_HOST_MODELS_MS`, default 5000 (I-16d).
 * @param {NodeJS.ProcessEnv} env
 * @returns {number}
 */
function modelsBound(env) {
  const value = Number.parseInt(env.NODE_HOST_MODELS_MS ?? "", 10);
  return Number.isFinite(value) && value > 0 ? value : 5000;
}

/** Run the driver on this process's stdin/stdout until `shutdown` or end of input. */
export function main() {
  /** @param {DriverReply} reply */
  const write = (reply) => process.stdout.write(`${JSON.stringify(reply)}\n`);
  /** @param {string} name */
  const flag = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
  const dialect = flag("--dialect") ?? "kit";
  if (!["kit", "opendesign"].includes(dialect)) {
    process.stderr.write(`node-host: unknown --dialect ${JSON.stringify(dialect)} (kit or opendesign)\n`);
    process.exit(2);
  }
  const supervisor = flag("--supervisor") ?? null;
  if (process.argv.includes("--supervisor") && !supervisor) {
    process.stderr.write("node-host: --supervisor needs the path of dsh-conformance\n");
    process.exit(2);
  }
  const driver = new Driver({ write, dialect, supervisor });
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  let finished = false;
  const finish = async () => {
    if (finished) return;
    finished = true;
    input.close();
    await driver.stop();
    process.stdout.write("", () => process.exit(0));
  };
  input.on("line", (line) => {
    if (finished) return;
    const handled = driver.handleLine(line);
    if (driver.shuttingDown) handled?.then(finish);
  });
  input.on("close", finish);
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, finish);
}
