import assert from "node:assert/strict";
import { test } from "node:test";
import { DiscoveryError, checkProbeOutput, parseVersion, resolveBinary } from "../src/discovery.mjs";
import { identityFrame } from "../test-support/world.mjs";

/** @param {Record<string, unknown>} [patch] */
const probe = (patch = {}) => JSON.stringify({ ...identityFrame("probe"), ...patch });

/** @param {() => unknown} fn */
const codeOf = (fn) => {
  try {
    fn();
    return null;
  } catch (error) {
    assert.ok(error instanceof DiscoveryError);
    return error.code;
  }
};

test("version policy", () => {
  assert.deepEqual(parseVersion("0.1.7\n"), { version: "0.1.7", family: "0.1", tested: true });
  assert.deepEqual(parseVersion("v0.1.7-rc.1\nbuilt today"), { version: "0.1.7-rc.1", family: "0.1", tested: true });
  assert.equal(parseVersion("0.1.8")?.tested, false);
  assert.equal(parseVersion("dsh 0.1.7"), null);
  assert.equal(parseVersion("0.1"), null);
  assert.equal(parseVersion(""), null);
});

test("the probe gate", () => {
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe()}\n`)),
    null,
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ runtime: "multica" })}\n`)),
    "DSH_PROFILE_RUNTIME_MISMATCH",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ protocol_version: 2 })}\n`)),
    "DSH_PROFILE_PROTOCOL_UNSUPPORTED",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ capabilities: { session_cancel: true, structured_events: true } })}\n`)),
    "DSH_PROFILE_CAPABILITY_MISSING",
  );
  assert.equal(
    codeOf(() =>
      checkProbeOutput(
        `${probe({ capabilities: { session_resume: false, session_cancel: true, structured_events: true } })}\n`,
      ),
    ),
    "DSH_PROFILE_CAPABILITY_MISSING",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ capabilities: undefined })}\n`)),
    "DSH_PROFILE_CAPABILITY_MISSING",
  );
  assert.equal(
    codeOf(() => checkProbeOutput("starting dsh...\n")),
    "DSH_PROFILE_PROBE_INVALID",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe()}\n${probe()}\n`)),
    "DSH_PROFILE_PROBE_INVALID",
  );
  assert.equal(
    codeOf(() => checkProbeOutput("")),
    "DSH_PROFILE_PROBE_INVALID",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ type: "ready" })}\n`)),
    "DSH_PROFILE_PROBE_INVALID",
  );
  assert.equal(
    codeOf(() => checkProbeOutput(`${probe({ plugin_version: 7 })}\n`)),
    "DSH_PROFILE_PROBE_INVALID",
  );
});

test("DSH_BIN counts only as an absolute path to an executable", () => {
  assert.equal(
    codeOf(() => resolveBinary({ DSH_BIN: "relative/dsh", PATH: "" })),
    "DSH_PROFILE_BINARY_NOT_FOUND",
  );
  assert.equal(resolveBinary({ DSH_BIN: process.execPath, PATH: "" }), process.execPath);
});
