import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { SessionStore, compatibilityKey, sameKey } from "../src/sessions.mjs";

function tempStore() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "node-host-sessions-"));
  /** @type {string[]} */
  const warnings = [];
  return {
    root,
    warnings,
    store: new SessionStore(root, { warn: (message) => void warnings.push(message) }),
    cleanup: () => fs.rmSync(root, { recursive: true, force: true }),
  };
}

const ready = { protocol_version: 1, plugin_version: "0.1.0", compatibility_generation: "g1" };
const base = {
  conversationId: "c1",
  projectId: "p1",
  cwd: "/p",
  model: { provider: "deepseek-official", id: "deepseek-chat" },
  dsh: { binary: "/bin/dsh", family: "0.1" },
  ready,
};

test("a mapping round-trips and leaves no temp file", (t) => {
  const { root, store, cleanup } = tempStore();
  t.after(cleanup);
  const key = compatibilityKey(base);
  store.put("c1", "od-1", key);
  store.put("c1", "od-2", key);
  assert.deepEqual(store.get("c1"), { sessionId: "od-2", key });
  assert.deepEqual(
    fs.readdirSync(path.join(root, "sessions")).filter((name) => name.endsWith(".tmp")),
    [],
  );
  store.delete("c1");
  assert.equal(store.get("c1"), null);
});

test("a save cut short (a full disk, a file-size limit) keeps the old mapping", (t) => {
  const { root, store, cleanup } = tempStore();
  t.after(cleanup);
  const key = compatibilityKey(base);
  store.put("c1", "od-1", key);
  // The first write takes half the bytes, as write(2) does at a file-size limit; the next fails.
  const writeSync = fs.writeSync;
  let calls = 0;
  /** @type {(handle: number, buffer: Uint8Array, offset: number, length: number) => number} */
  const halfThenFail = (handle, buffer, offset, length) => {
    calls += 1;
    if (calls > 1) throw Object.assign(new Error("EFBIG: file too large"), { code: "EFBIG" });
    return writeSync(handle, buffer, offset, Math.ceil(length / 2));
  };
  fs.writeSync = /** @type {typeof fs.writeSync} */ (/** @type {unknown} */ (halfThenFail));
  try {
    assert.throws(() => store.put("c1", "od-2", key), { code: "EFBIG" });
  } finally {
    fs.writeSync = writeSync;
  }
  assert.equal(calls, 2);
  assert.deepEqual(store.get("c1"), { sessionId: "od-1", key });
  assert.deepEqual(
    fs.readdirSync(path.join(root, "sessions")).filter((name) => name.endsWith(".tmp")),
    [],
  );
});

test("a corrupt mapping reads as none, with a warning", (t) => {
  const { root, store, warnings, cleanup } = tempStore();
  t.after(cleanup);
  store.put("c1", "od-1", compatibilityKey(base));
  const [file] = fs.readdirSync(path.join(root, "sessions"));
  fs.writeFileSync(path.join(root, "sessions", file), '{"v":1,"conv');
  assert.equal(store.get("c1"), null);
  assert.equal(warnings.length, 1);
});

test("every part of the key matters", () => {
  const key = compatibilityKey(base);
  assert.ok(sameKey(key, compatibilityKey(base)));
  const variants = [
    { cwd: "/other" },
    { projectId: "p2" },
    { model: { provider: "deepseek-official", id: "deepseek-reasoner" } },
    { dsh: { binary: "/bin/dsh", family: "0.2" } },
    { dsh: { binary: "/usr/bin/dsh", family: "0.1" } },
    { ready: { ...ready, plugin_version: "0.2.0" } },
    { ready: { ...ready, compatibility_generation: "g2" } },
  ];
  for (const variant of variants)
    assert.ok(!sameKey(key, compatibilityKey({ ...base, ...variant })), JSON.stringify(variant));
});
