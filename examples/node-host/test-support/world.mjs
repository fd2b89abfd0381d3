/** @file Test helper: a temp world with a scripted fake dsh on DSH_BIN, a project dir, a data dir and a journal. */

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const FAKE = fileURLToPath(new URL("./fake-dsh.mjs", import.meta.url));
export const CANARY_KEY = "sk-canary-0123456789abcdef";

/**
 * The identity frame a compatible runtime prints: `probe` (spec 5) or `ready` (spec 6).
 * @param {"probe" | "ready"} type
 */
export function identityFrame(type) {
  return {
    v: 1,
    type,
    runtime: "open-design",
    protocol_version: 1,
    plugin_version: "0.1.0",
    capabilities: { session_resume: true, session_cancel: true, structured_events: true },
  };
}

/** A fresh temp world; `cleanup()` removes it. */
export function makeWorld(script = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "node-host-test-"));
  const bin = path.join(root, "bin");
  const project = path.join(root, "project");
  const data = path.join(root, "host-data");
  for (const dir of [bin, project, data]) fs.mkdirSync(dir);
  const dsh = path.join(bin, "dsh");
  fs.writeFileSync(dsh, `#!/bin/sh\nexec "${process.execPath}" "${FAKE}" "$@"\n`, { mode: 0o755 });
  const world = {
    root,
    dsh,
    project,
    data,
    journalPath: path.join(root, "journal.jsonl"),
    scriptPath: path.join(root, "script.json"),
    /** @param {unknown} next */
    setScript(next) {
      fs.writeFileSync(world.scriptPath, JSON.stringify(next));
    },
    env() {
      return {
        ...process.env,
        DSH_BIN: dsh,
        PATH: `${bin}${path.delimiter}${process.env.PATH}`,
        RUNTIME_DATA_DIR: data,
        DSH_HOME: path.join(root, "dsh-home"),
        DEEPSEEK_API_KEY: CANARY_KEY,
        FAKE_SCRIPT: world.scriptPath,
        FAKE_JOURNAL: world.journalPath,
      };
    },
    /** @returns {any[]} the journal's entries, in order */
    journal() {
      if (!fs.existsSync(world.journalPath)) return [];
      return fs
        .readFileSync(world.journalPath, "utf8")
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line));
    },
    cleanup() {
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
  world.setScript(script);
  return world;
}

/**
 * Whether a pid still exists.
 * @param {number} pid
 * @returns {boolean}
 */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The scripted actions of a believable full turn. */
export function fullTurn({ text = "Hello" } = {}) {
  return [
    { ready: {} },
    { read_execute: {} },
    { session: {} },
    { frame: { v: 1, type: "thinking", request_id: "{{request_id}}", content: "plan" } },
    { frame: { v: 1, type: "text", request_id: "{{request_id}}", content: text } },
    {
      frame: {
        v: 1,
        type: "tool_call",
        request_id: "{{request_id}}",
        call_id: "c1",
        name: "write_file",
        arguments: '{"path":"index.html"}',
      },
    },
    {
      frame: {
        v: 1,
        type: "tool_result",
        request_id: "{{request_id}}",
        call_id: "c1",
        name: "write_file",
        output: "ok",
        is_error: false,
      },
    },
    {
      frame: {
        v: 1,
        type: "usage",
        request_id: "{{request_id}}",
        provider: "deepseek-official",
        model: "deepseek-chat",
        input_tokens: 10,
        output_tokens: 5,
      },
    },
    {
      frame: {
        v: 1,
        type: "result",
        request_id: "{{request_id}}",
        status: "completed",
        session_id: "{{session_id}}",
        resume_rejected: false,
      },
    },
  ];
}
