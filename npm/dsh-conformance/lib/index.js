// Finds the native binaries of dsh-conformance in the platform package npm installed through
// optionalDependencies (the esbuild pattern), and runs them with the caller's stdio, exit code
// and signals. Plain CommonJS, Node's standard library only.
"use strict";

const path = require("path");
const { spawn } = require("child_process");

/** `process.platform-process.arch` -> the platform package that holds the binaries. */
const PLATFORMS = {
  "linux-x64": "@dsh-conformance/linux-x64",
  "linux-arm64": "@dsh-conformance/linux-arm64",
  "darwin-x64": "@dsh-conformance/darwin-x64",
  "darwin-arm64": "@dsh-conformance/darwin-arm64",
};

/** The names of the binaries every platform package ships. */
const BINARIES = ["dsh-conformance", "fake-dsh", "dsh-host-driver"];

/** The directory holding the three binaries (put it on PATH, or point DSH_BIN at fake-dsh in it). */
function binDir() {
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    throw new Error(
      `dsh-conformance has no binaries for ${key} (supported: ${Object.keys(PLATFORMS).join(", ")})`,
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch (error) {
    throw new Error(
      `dsh-conformance: the platform package ${pkg} is not installed ` +
        `(was it skipped by --no-optional / --omit=optional? reinstall without it)`,
    );
  }
  return path.join(path.dirname(manifest), "bin");
}

/** The absolute path of one binary: `binPath("fake-dsh")`. */
function binPath(name) {
  if (!BINARIES.includes(name)) {
    throw new Error(`dsh-conformance: unknown binary ${name} (one of ${BINARIES.join(", ")})`);
  }
  return path.join(binDir(), name);
}

/** Runs a binary with this process's arguments and stdio; exits with its code or signal. */
function run(name) {
  let binary;
  try {
    binary = binPath(name);
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
  const forward = (signal) => () => child.kill(signal);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, forward(signal));
  child.on("error", (error) => {
    process.stderr.write(`dsh-conformance: cannot start ${binary}: ${error.message}\n`);
    process.exit(2);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code);
    }
  });
}

module.exports = { PLATFORMS, BINARIES, binDir, binPath, run };
