import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { CANARY_KEY, fullTurn, makeWorld } from "../test-support/world.mjs";

const DRIVER = fileURLToPath(new URL("../driver.mjs", import.meta.url));

/**
 * Start the driver; `send(request)` writes one request, `next()` resolves to the next reply.
 * @param {ReturnType<typeof makeWorld>} world
 * @param {import("node:test").TestContext} t
 */
function startDriver(world, t) {
  const child = spawn(process.execPath, [DRIVER], {
    cwd: world.root,
    env: world.env(),
    stdio: ["pipe", "pipe", "pipe"],
  });
  /** @type {Buffer[]} */
  const stderr = [];
  child.stderr.on("data", (chunk) => stderr.push(chunk));
  /** @type {any[]} */
  const replies = [];
  /** @type {((reply: any) => void)[]} */
  const waiters = [];
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    const reply = JSON.parse(line);
    const waiter = waiters.shift();
    if (waiter) waiter(reply);
    else replies.push(reply);
  });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  t.after(() => child.kill("SIGKILL"));
  return {
    send: (/** @type {Record<string, unknown>} */ request) => child.stdin.write(`${JSON.stringify(request)}\n`),
    /** @returns {Promise<any>} */
    next: () =>
      replies.length > 0 ? Promise.resolve(replies.shift()) : new Promise((resolve) => waiters.push(resolve)),
    exited,
    stderr: () => Buffer.concat(stderr).toString("utf8"),
  };
}

test("handshake, discover, run, shutdown over the driver protocol", async (t) => {
  const world = makeWorld({ version: "0.1.8\n", stdio: [fullTurn()] });
  t.after(world.cleanup);
  const driver = startDriver(world, t);
  driver.send({ v: 1, type: "handshake", kit: "test", kit_version: "0" });
  assert.deepEqual(await driver.next(), {
    v: 1,
    type: "handshake",
    driver: "node-host",
    version: "0.1.0",
    capabilities: ["discover", "setup", "sessions", "cancel", "restart", "concurrent", "reuse", "models"],
    codes: "kit",
  });
  driver.send({ v: 1, type: "discover", id: "d1" });
  const discovered = await driver.next();
  assert.equal(discovered.available, true);
  assert.equal(discovered.version, "0.1.8");
  assert.ok(discovered.warnings[0].startsWith("DSH_PROFILE_UNTESTED_VERSION"));
  driver.send({
    v: 1,
    type: "run",
    id: "r1",
    turn: 0,
    conversation_id: "c1",
    project_id: "p1",
    cwd: world.project,
    prompt: "Build it",
    bootstrap: "ctx",
    model: { provider: "deepseek-official", id: "deepseek-chat" },
    reasoning_effort: null,
  });
  const replies = [];
  for (let reply = await driver.next(); ; reply = await driver.next()) {
    replies.push(reply);
    if (reply.type === "outcome") break;
  }
  assert.ok(replies.every((reply) => reply.id === "r1" && reply.v === 1));
  assert.equal(replies[0].event.type, "status");
  const outcome = replies.at(-1);
  assert.equal(outcome.status, "completed");
  assert.equal(outcome.foreign_frames, 0);
  driver.send({ v: 1, type: "bogus", id: "x" });
  assert.equal((await driver.next()).type, "error");
  driver.send({ v: 1, type: "shutdown" });
  assert.deepEqual(await driver.next(), { v: 1, type: "bye" });
  assert.equal(await driver.exited, 0);
  assert.ok(!driver.stderr().includes(CANARY_KEY));
  assert.ok(!driver.stderr().includes("Build it"));
});

test("setup installs only a bundle whose hash matches", async (t) => {
  const world = makeWorld();
  t.after(world.cleanup);
  const tarball = path.join(world.root, "open-design-runtime.tgz");
  fs.writeFileSync(tarball, "pretend tarball");
  const sha256 = crypto.createHash("sha256").update("pretend tarball").digest("hex");
  const good = path.join(world.root, "good.json");
  const bad = path.join(world.root, "bad.json");
  fs.writeFileSync(
    good,
    JSON.stringify({ package: "@open-design/dsh-runtime", version: "0.1.0", sha256, file: "open-design-runtime.tgz" }),
  );
  fs.writeFileSync(
    bad,
    JSON.stringify({
      package: "@open-design/dsh-runtime",
      version: "0.1.0",
      sha256: "0".repeat(64),
      file: "open-design-runtime.tgz",
    }),
  );
  const driver = startDriver(world, t);
  driver.send({ v: 1, type: "setup", id: "s1", tarball, manifest: bad });
  const rejected = await driver.next();
  assert.equal(rejected.ok, false);
  assert.equal(rejected.code, "DSH_PROFILE_BUNDLE_HASH_MISMATCH");
  assert.equal(world.journal().filter((entry) => entry.event === "start").length, 0);
  driver.send({ v: 1, type: "setup", id: "s2", tarball: path.join(world.root, "absent.tgz"), manifest: good });
  assert.equal((await driver.next()).code, "DSH_PROFILE_BUNDLE_MISSING");
  driver.send({ v: 1, type: "setup", id: "s3", tarball, manifest: good });
  assert.deepEqual(await driver.next(), { v: 1, type: "setup_done", id: "s3", ok: true, code: null, message: null });
  assert.equal(world.journal().filter((entry) => entry.event === "plugin_add").length, 1);
  driver.send({ v: 1, type: "shutdown" });
  assert.equal((await driver.next()).type, "bye");
});
