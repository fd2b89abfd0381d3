/** @file The session mapping (spec 7): one conversation -> one Harness session id plus its full compatibility key, stored atomically under RUNTIME_DATA_DIR. */

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export const RUNTIME_ID = "deepseek-harness";
/** Bumped when this host changes how it composes the open-design profile's behaviour. */
export const COMPOSITION_GENERATION = "od-node-host-1";
const STORE_VERSION = 1;

/** The data directory the host resolves itself: `RUNTIME_DATA_DIR`, else a per-user default. */
export function dataDir(env = process.env) {
  if (env.RUNTIME_DATA_DIR && path.isAbsolute(env.RUNTIME_DATA_DIR)) return env.RUNTIME_DATA_DIR;
  const base = env.XDG_DATA_HOME && path.isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : path.join(os.homedir(), ".local", "share");
  return path.join(base, "od-node-host");
}

/**
 * Everything that must be equal for a later run to resume the session. `ready` is the validated
 * ready frame of the run deciding; `dsh` is `{ binary, family }`.
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

export function sameKey(a, b) {
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...names].every((name) => a[name] === b[name]);
}

/** One file per conversation under `<dataDir>/sessions/`, each written by temp file + fsync + rename. */
export class SessionStore {
  constructor(root = dataDir(), { warn = (message) => process.stderr.write(`node-host: ${message}\n`) } = {}) {
    this.dir = path.join(root, "sessions");
    this.warn = warn;
  }

  #file(conversationId) {
    const name = crypto.createHash("sha256").update(conversationId).digest("hex").slice(0, 32);
    return path.join(this.dir, `${name}.json`);
  }

  /** `{ sessionId, key }`, or null when there is none (a corrupt file counts as none, with a warning). */
  get(conversationId) {
    const file = this.#file(conversationId);
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (error) {
      if (error.code !== "ENOENT") this.warn(`cannot read session mapping ${file}: ${error.code}`);
      return null;
    }
    try {
      const record = JSON.parse(text);
      if (record.v !== STORE_VERSION || record.conversation_id !== conversationId || typeof record.session_id !== "string" || typeof record.key !== "object" || record.key === null) {
        throw new Error("unexpected shape");
      }
      return { sessionId: record.session_id, key: record.key };
    } catch {
      this.warn(`session mapping ${file} is corrupt; starting a new session`);
      return null;
    }
  }

  put(conversationId, sessionId, key) {
    fs.mkdirSync(this.dir, { recursive: true });
    const file = this.#file(conversationId);
    const record = { v: STORE_VERSION, conversation_id: conversationId, session_id: sessionId, key, written_at: new Date().toISOString() };
    const temp = `${file}.${process.pid}.${crypto.randomUUID()}.tmp`;
    const handle = fs.openSync(temp, "wx", 0o600);
    try {
      fs.writeSync(handle, `${JSON.stringify(record, null, 2)}\n`);
      fs.fsyncSync(handle);
    } finally {
      fs.closeSync(handle);
    }
    try {
      fs.renameSync(temp, file);
    } catch (error) {
      fs.rmSync(temp, { force: true });
      throw error;
    }
    syncDirectory(this.dir);
  }

  delete(conversationId) {
    fs.rmSync(this.#file(conversationId), { force: true });
    syncDirectory(this.dir);
  }
}

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
