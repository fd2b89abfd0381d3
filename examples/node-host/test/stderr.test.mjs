import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { REDACTED, StderrCapture, credentialValues, cutToBytes, redact } from "../src/stderr.mjs";

test("credential-looking env values are collected", () => {
  const values = credentialValues({
    DEEPSEEK_API_KEY: "sk-secret-1",
    GITHUB_TOKEN: "ghp-2222",
    HOME: "/home/me",
    SHORT_KEY: "ab",
  });
  assert.deepEqual(values.sort(), ["ghp-2222", "sk-secret-1"]);
});

test("redaction covers raw, JSON-escaped and per-line forms", () => {
  const prompt = 'Make "it"\nblue please';
  const out = redact(`echo: Make "it"\nblue please / {"prompt":"Make \\"it\\"\\nblue please"} / key sk-1234`, [
    prompt,
    "sk-1234",
  ]);
  assert.ok(!out.includes("blue please"));
  assert.ok(!out.includes("sk-1234"));
  assert.ok(out.includes(REDACTED));
});

test("the capture is bounded and never keeps a secret cut at the boundary", async () => {
  const stream = new PassThrough();
  const secret = "sk-canary-abcdefghijklmnop";
  const capture = new StderrCapture(stream, { secrets: [secret], limit: 1024 });
  stream.write("x".repeat(1020));
  stream.write(secret);
  for (let i = 0; i < 100; i += 1) stream.write(`${secret}${"y".repeat(1000)}`);
  stream.end();
  await capture.ended;
  const text = capture.text();
  assert.ok(Buffer.byteLength(text) <= 1024);
  assert.ok(!text.includes(secret));
  assert.ok(!text.includes("sk-canary"));
  assert.ok(text.endsWith("[stderr truncated]"));
});

test("cutting never splits a UTF-8 character", () => {
  assert.equal(cutToBytes("aé", 2), "a");
  assert.equal(cutToBytes("aé", 3), "aé");
});
