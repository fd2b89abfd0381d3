/**
 * @file The session mapping (spec 7): one conversation -> one Harness session id plus its full
 * compatibility key, stored atomically under RUNTIME_DATA_DIR.
 */

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** @typedef {import("./shapes.mjs").CompatibilityKey} CompatibilityKey */
/** @typedef {import("./shapes.mjs").ModelRoute} ModelRoute */
/** @typedef {import("./shapes.mjs").ReadyFrame} ReadyFrame */

/**
 * A stored mapping: the conversation's session and the key it was made under.
 * @typedef {{ sessionId: string, key: CompatibilityKey }} SessionMapping
 */

export const RUNTIME_ID = "deepseek-harness";
/** Bumped when this host changes how it composes the open-design profile's behaviour. */
export const COMPOSITION_GENERATION = "od-node-host-1";
const STORE_VERSION = 1;

/**
 * The data directory the host resolves itself: `RUNTIME_DATA_DIR`, else a per-user default.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {string}
 */
export function dataDir(env = process.env) {
  if (env.RUNTIME_DATA_DIR && path.isAbsolute(env.RUNTIME_DATA_DIR)) return env.RUNTIME_DATA_DIR;
  const xdg = env.XDG_DATA_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".local", "share");
  return path.join(base, "od-node-host");
}

/**
 * Everything that must be equal for a later run to resume the session. `ready` is the validated
 * ready frame of the run deciding; `dsh` is `{ binary, family }`.
 * @param {{
 *   conversationId: string, projectId: string, cwd: string, model: ModelRoute | null,
 *   dsh: { binary: string, family: string },
 *   ready: Pick<ReadyFrame, "protocol_version" | "plugin_version" | "compatibility_generation">
 * }} run
 * @returns {CompatibilityKey}
 */
export function compatibilityKey({ conversationId, projectId, cwd, model, dsh, ready }) {
  return {
    conversation_id: conversationId,
    project_id: projectId,
    cwd,
    runtime_id: RUNTIME_ID,
    provider: model ? model.provider : "default",
    model: model ? model.id : "default",
    dsh_executable: dsh.binary,
    dsh_family: dsh.family,
    profile: "open-design",
    protocol_version: ready.protocol_version,
    plugin_version: ready.plugin_version,
    compatibility_generation: ready.compatibility_generation ?? null,
    composition_generation: COMPOSITION_GENERATION,
  };
}

/**
 * Whether two keys are equal in every field (a field only one of them has counts as different).
 * @param {CompatibilityKey} a
 * @param {CompatibilityKey} b
 * @returns {boolean}
 */
export function sameKey(a, b) {
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...names].every((name) => a[name] === b[name]);
}

/** One file per conversation under `<dataDir>/sessions/`, each written by temp file + fsync + rename. */
export class SessionStore {
  /**
   * @param {string} [root] the data directory
   * @param {{ warn?: (message: string) => void }} [options]
   */
  constructor(root = dataDir(), { warn = (message) => void process.stderr.write(`node-host: ${message}\n`) } = {}) {
    this.dir = path.join(root, "sessions");
    this.warn = warn;
  }

  /** @param {string} conversationId */
  #file(conversationId) {
    const name = crypto.createHash("sha256").update(conversationId).digest("hex").slice(0, 32);
    return path.join(this.dir, `${name}.json`);
  }

  /**
   * `{ sessionId, key }`, or null when there is none (a corrupt file counts as none, with a warning).
   * @param {string} conversationId
   * @returns {SessionMapping | null}
   */
  get(conversationId) {
    const file = this.#file(conversationId);
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (error) {
      const { code } = /** @type {NodeJS.ErrnoException} */ (error);
      if (code !== "ENOENT") this.warn(`cannot read session mapping ${file}: ${code}`);
      return null;
    }
    try {
      const record = JSON.parse(text);
      const ours = record.v === STORE_VERSION && record.conversation_id === conversationId;
      if (!ours || typeof record.session_id !== "string" || typeof record.key !== "object" || record.key === null) {
        throw new Error("unexpected shape");
      }
      return { sessionId: record.session_id, key: record.key };
    } catch {
      this.warn(`session mapping ${file} is corrupt; starting a new session`);
      return null;
    }
  }

  /**
   * Store the mapping atomically (temp file, fsync, rename, directory fsync); throws on failure.
   * @param {string} conversationId
   * @param {string} sessionId
   * @param {CompatibilityKey} key
   */
  put(conversationId, sessionId, key) {
    fs.mkdirSync(this.dir, { recursive: true });
    const file = this.#file(conversationId);
    const written_at = new Date().toISOString();
    const record = { v: STORE_VERSION, conversation_id: conversationId, session_id: sessionId, key, written_at };
    const temp = `${file}.${process.pid}.${crypto.randomUUID()}.tmp`;
    const bytes = Buffer.from(`${JSON.stringify(record, null, 2)}\n`);
    const handle = fs.openSync(temp, "wx", 0o600);
    try {
      try {
        // One writeSync may write part of the bytes (a full disk, a file-size limit) and return
        // the count: write the rest until done or an error, never rename a short file over the
        // mapping.
        for (let done = 0; done < bytes.length; ) {
          const wrote = fs.writeSync(handle, bytes, done, bytes.length - done);
          if (wrote <= 0) throw new Error(`short write of ${temp}`);
          done += wrote;
        }
        fs.fsyncSync(handle);
      } finally {
        fs.closeSync(handle);
      }
      fs.renameSync(temp, file);
    } catch (error) {
      fs.rmSync(temp, { force: true });
      throw error;
    }
    syncDirectory(this.dir);
  }

  /**
   * Forget the conversation's mapping (none is fine).
   * @param {string} conversationId
   */
  delete(conversationId) {
    fs.rmSync(this.#file(conversationId), { force: true });
    syncDirectory(this.dir);
  }
}

/** @param {string} dir */
function syncDirectory(dir) {
  let handle;
  try {
    handle = fs.openSync(dir, "r");
    fs.fsyncSync(handle);
  } catch {
    // Directory fsync is best effort: not every filesystem supports it.
  } finally {
    if (handle !== undefined) fs.closeSync(handle);
  }
}
