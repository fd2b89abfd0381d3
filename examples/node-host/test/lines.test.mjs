import assert from "node:assert/strict";
import { test } from "node:test";
import { LineFramer } from "../src/lines.mjs";

/** @param {(import("../src/shapes.mjs").LineEvent | null)[]} events */
const text = (events) =>
  events.map((event) => (event && "bytes" in event ? { ...event, bytes: event.bytes.toString("utf8") } : event));

test("splits lines across chunks and strips CRLF", () => {
  const framer = new LineFramer();
  const events = [...framer.push(Buffer.from('{"a":1}\r\n{"b"')), ...framer.push(Buffer.from(":2}\n\n"))];
  assert.deepEqual(text(events), [
    { kind: "line", number: 1, bytes: '{"a":1}' },
    { kind: "line", number: 2, bytes: '{"b":2}' },
    { kind: "line", number: 3, bytes: "" },
  ]);
  assert.equal(framer.finish(), null);
});

test("a tail without newline is truncated", () => {
  const framer = new LineFramer();
  framer.push(Buffer.from('{"a":1}\n{"b":'));
  assert.deepEqual(text([framer.finish()]), [{ kind: "truncated", number: 2, bytes: '{"b":' }]);
});

test("a line past the limit is reported before its newline and never buffered", () => {
  const framer = new LineFramer(16);
  assert.deepEqual(framer.push(Buffer.alloc(10, 0x61)), []);
  assert.deepEqual(framer.push(Buffer.alloc(10, 0x61)), [{ kind: "too_large", number: 1 }]);
  for (let i = 0; i < 100; i += 1) {
    assert.deepEqual(framer.push(Buffer.alloc(1000, 0x61)), []);
    assert.equal(framer.pendingBytes, 0);
  }
  assert.deepEqual(text(framer.push(Buffer.from("tail\nok\n"))), [{ kind: "line", number: 2, bytes: "ok" }]);
  assert.equal(framer.finish(), null);
});

test("a line of exactly the limit is accepted, CR terminator included", () => {
  const framer = new LineFramer(4);
  assert.deepEqual(text(framer.push(Buffer.from("abcd\r\nabcde\n"))), [
    { kind: "line", number: 1, bytes: "abcd" },
    { kind: "too_large", number: 2 },
  ]);
});
