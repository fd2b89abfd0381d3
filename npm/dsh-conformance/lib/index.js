// Finds the native binaries of dsh-conformance in the platform package installed beside it (the
// esbuild pattern; until the npm names are claimed the user installs the platform tarball
// explicitly, see the README), and runs them with the caller's stdio, exit code and signals.
// Plain CommonJS, Node's standard library only.
//
// Trust: the platform package is looked up only where npm, pnpm and yarn put this package's own
// dependencies (its own node_modules, or the node_modules it sits in), never through Node's module
// search (parent directories, NODE_PATH), and its name and version must be this package's.
"use strict";

const fs = require("fs");
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

/** The variable naming the lifeline descriptor (protocol/src/lifeline.rs reads it). */
const LIFELINE_ENV = "DSH_CONFORMANCE_LIFELINE";

/** This package's directory (symlinks resolved, as pnpm links packages) and manifest. */
function ownPackage() {
  const dir = fs.realpathSync(path.join(__dirname, ".."));
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  return { dir, version: manifest.version };
}

/** The places a package manager puts this package's dependency `pkg`, nearest first. */
function candidateDirs(own, pkg) {
  const candidates = [path.join(own.dir, "node_modules", pkg)];
  const parent = path.dirname(own.dir);
  if (path.basename(parent) === "node_modules") candidates.push(path.join(parent, pkg));
  return candidates;
}

/** The manifest at `dir`, or null when there is none. */
function manifestAt(dir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  } catch (error) {
    return null;
  }
}

/** The directory holding the three binaries (put it on PATH, or point DSH_BIN at fake-dsh in it). */
function binDir() {
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    throw new Error(
      `dsh-conformance has no binaries for ${key} (supported: ${Object.keys(PLATFORMS).join(", ")})`,
    );
  }
  const own = ownPackage();
  for (const dir of candidateDirs(own, pkg)) {
    const manifest = manifestAt(dir);
    if (!manifest) continue;
    if (manifest.name !== pkg || manifest.version !== own.version) {
      throw new Error(
        `dsh-conformance: ${dir} holds ${manifest.name}@${manifest.version}, ` +
          `not ${pkg}@${own.version}: refusing to run it (reinstall dsh-conformance)`,
      );
    }
    return path.join(dir, "bin");
  }
  throw new Error(
    `dsh-conformance: the platform package ${pkg}@${own.version} is not installed beside ` +
      `dsh-conformance: install the release's dsh-conformance-${key}-${own.version}.tgz beside it ` +
      `(README, "npm route")`,
  );
}

/** The absolute path of one binary: `binPath("fake-dsh")`. */
function binPath(name) {
  if (!BINARIES.includes(name)) {
    throw new Error(`dsh-conformance: unknown binary ${name} (one of ${BINARIES.join(", ")})`);
  }
  return path.join(binDir(), name);
}

/**
 * Runs a binary with this process's arguments and stdio; exits with its code or signal.
 *
 * The binary runs in a process group of its own, so a terminal's Ctrl-C (sent to the foreground
 * group) reaches it once, through this shim, not twice; every SIGINT, SIGTERM and SIGHUP this shim
 * gets is forwarded exactly once. The binary also holds one end of a pipe (the lifeline): if this
 * shim dies without forwarding anything (SIGKILL), the binary sees the pipe close and stops.
 */
function run(name) {
  let binary;
  try {
    binary = binPath(name);
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  const child = spawn(binary, process.argv.slice(2), {
    stdio: ["inherit", "inherit", "inherit", "pipe"],
    detached: true,
    env: { ...process.env, [LIFELINE_ENV]: "3" },
  });
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
