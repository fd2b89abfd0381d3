/**
 * @file Discovery (spec 5): find the user's dsh, read its version under the version policy, and run
 * the profile probe gate.
 */

import fs from "node:fs";
import path from "node:path";
import { runCommand, describeEnd } from "./command.mjs";
import {
  FrameError, PROTOCOL_VERSION, REQUIRED_CAPABILITIES, RUNTIME_ID, isPlainObject, parseFrame,
} from "./frames.mjs";

/** @typedef {import("./shapes.mjs").Frame} Frame */

/**
 * A parsed `dsh --version`: the version, its `major.minor` family, and whether it is a tested one.
 * @typedef {{ version: string, family: string, tested: boolean }} DshVersion
 */

/**
 * What `discover` found (the driver's `discover` reply, less its envelope).
 * @typedef {{
 *   available: boolean, version: string | null, warnings: string[], diagnostic: string | null,
 *   code: string | null, binary: string | null, probe: Frame | null
 * }} Discovery
 */

export const PROFILE = "open-design";
export const TESTED_VERSIONS = new Set(["0.1.7-rc.1", "0.1.7"]);
const IDENTIFIER = String.raw`(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)`;
const SEMVER = new RegExp(
  String.raw`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
    String.raw`(?:-(${IDENTIFIER}(?:\.${IDENTIFIER})*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`,
);

/** A discovery failure: a `DSH_PROFILE_*` code and an actionable diagnostic. */
export class DiscoveryError extends Error {
  /**
   * @param {string} code
   * @param {string} diagnostic
   */
  constructor(code, diagnostic) {
    super(diagnostic);
    this.code = code;
  }
}

/** @param {string} candidate */
function isExecutableFile(candidate) {
  try {
    if (!fs.statSync(candidate).isFile()) return false;
    fs.accessSync(candidate, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The dsh to launch: `DSH_BIN` when it is an absolute path to an executable file, else the first
 * executable `dsh` on `PATH`. Throws `DSH_PROFILE_BINARY_NOT_FOUND`.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {string}
 */
export function resolveBinary(env = process.env) {
  const override = env.DSH_BIN;
  if (override && path.isAbsolute(override) && isExecutableFile(override)) return override;
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, "dsh");
    if (isExecutableFile(candidate)) return candidate;
  }
  const why = override
    ? `DSH_BIN=${JSON.stringify(override)} is not an absolute path to an executable file, and no dsh is on PATH`
    : "no dsh executable on PATH";
  const fix = "Install the official @deepseek-ai/dsh package or set DSH_BIN.";
  throw new DiscoveryError("DSH_PROFILE_BINARY_NOT_FOUND", `DeepSeek Harness not found: ${why}. ${fix}`);
}

/**
 * Parse the first line of `dsh --version` output: `{ version, family }`, or null when it is not a semver.
 * @param {string} stdout
 * @returns {DshVersion | null}
 */
export function parseVersion(stdout) {
  const firstLine = stdout.split("\n", 1)[0].trim();
  const match = SEMVER.exec(firstLine);
  if (!match) return null;
  const version = firstLine.replace(/^v/, "");
  return { version, family: `${match[1]}.${match[2]}`, tested: TESTED_VERSIONS.has(version.split("+", 1)[0]) };
}

/** @type {Map<string, { identity: string, version: DshVersion }>} */
const versionCache = new Map();

/** @param {string} binary */
function fileIdentity(binary) {
  const stat = fs.statSync(binary);
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
}

/**
 * `dsh --version` under the version policy: failed or empty -> `DSH_PROFILE_VERSION_FAILED`,
 * unparseable -> `DSH_PROFILE_VERSION_UNPARSEABLE`. Cached per executable file identity, so a
 * replaced or rewritten dsh is asked again.
 * @param {string} binary
 * @param {{ env?: NodeJS.ProcessEnv, timeoutMs?: number }} [options]
 * @returns {Promise<DshVersion>}
 */
export async function readVersion(binary, { env = process.env, timeoutMs = 10000 } = {}) {
  let identity = null;
  try {
    identity = fileIdentity(binary);
  } catch {
    identity = null;
  }
  const cached = identity && versionCache.get(binary);
  if (cached && cached.identity === identity) return cached.version;
  const outcome = await runCommand(binary, ["--version"], { env, timeoutMs });
  if (outcome.spawnError || outcome.timedOut || outcome.exitCode !== 0) {
    const ended = `\`${binary} --version\` ${describeEnd(outcome)}`;
    const diagnostic = `${ended}; check that the official dsh installation works.`;
    throw new DiscoveryError("DSH_PROFILE_VERSION_FAILED", diagnostic);
  }
  if (outcome.stdout.trim() === "") {
    const diagnostic = `\`${binary} --version\` printed nothing; reinstall the official @deepseek-ai/dsh package.`;
    throw new DiscoveryError("DSH_PROFILE_VERSION_FAILED", diagnostic);
  }
  const version = parseVersion(outcome.stdout);
  if (!version) {
    throw new DiscoveryError(
      "DSH_PROFILE_VERSION_UNPARSEABLE",
      `\`${binary} --version\` did not start with a semantic version; ` +
        "this is not a usable DeepSeek Harness identity.",
    );
  }
  if (identity) versionCache.set(binary, { identity, version });
  return version;
}

/**
 * Check a probe frame's text (the gate of spec 5): exactly one frame, type probe, runtime
 * open-design, protocol_version 1, the required capabilities true. Returns the probe frame.
 * @param {string} stdout
 * @returns {Frame}
 */
export function checkProbeOutput(stdout) {
  const repair = `Repair the ${PROFILE} profile.`;
  const update = "Update the profile from OpenDesign's setup.";
  const lines = stdout.split("\n").filter((line) => line.trim() !== "");
  if (lines.length !== 1) {
    const printed = `the profile probe printed ${lines.length} lines; it must print exactly one probe frame.`;
    throw new DiscoveryError("DSH_PROFILE_PROBE_INVALID", `${printed} ${repair}`);
  }
  let probe;
  try {
    probe = JSON.parse(lines[0]);
  } catch {
    throw new DiscoveryError("DSH_PROFILE_PROBE_INVALID", `the profile probe did not print JSON. ${repair}`);
  }
  if (isPlainObject(probe) && probe.v === PROTOCOL_VERSION && probe.type === "probe") {
    if (typeof probe.runtime === "string" && probe.runtime !== RUNTIME_ID) {
      const reports = `the profile probe reports runtime ${JSON.stringify(probe.runtime)}, not ${RUNTIME_ID}`;
      const diagnostic = `${reports}: another profile answers as ${PROFILE}. Reinstall the OpenDesign profile.`;
      throw new DiscoveryError("DSH_PROFILE_RUNTIME_MISMATCH", diagnostic);
    }
    if (Number.isInteger(probe.protocol_version) && probe.protocol_version !== PROTOCOL_VERSION) {
      const speaks = `the ${PROFILE} profile speaks protocol ${probe.protocol_version}; `
        + `this OpenDesign build speaks protocol ${PROTOCOL_VERSION}.`;
      throw new DiscoveryError("DSH_PROFILE_PROTOCOL_UNSUPPORTED", `${speaks} ${update}`);
    }
    if (probe.capabilities === undefined || isPlainObject(probe.capabilities)) {
      const capabilities = probe.capabilities ?? {};
      const lacking = (/** @type {string} */ name) => capabilities[name] === undefined || capabilities[name] === false;
      const missing = REQUIRED_CAPABILITIES.filter(lacking);
      if (missing.length > 0) {
        const lacks = `the ${PROFILE} profile lacks ${missing.join(", ")}, which OpenDesign requires `
          + "(session resume, cancel and structured events).";
        throw new DiscoveryError("DSH_PROFILE_CAPABILITY_MISSING", `${lacks} ${update}`);
      }
    }
  }
  try {
    parseFrame(Buffer.from(lines[0], "utf8"));
  } catch (error) {
    if (!(error instanceof FrameError)) throw error;
    throw new DiscoveryError("DSH_PROFILE_PROBE_INVALID", `the profile probe frame ${error.message}. ${repair}`);
  }
  if (probe.type !== "probe") {
    const printed = `the profile probe printed a ${probe.type} frame, not a probe frame.`;
    throw new DiscoveryError("DSH_PROFILE_PROBE_INVALID", `${printed} ${repair}`);
  }
  return probe;
}

/**
 * `dsh --profile open-design --probe`: exit 0 and a compatible probe frame, or a DiscoveryError.
 * @param {string} binary
 * @param {{ env?: NodeJS.ProcessEnv, timeoutMs?: number }} [options]
 * @returns {Promise<Frame>}
 */
export async function probe(binary, { env = process.env, timeoutMs = 10000 } = {}) {
  const outcome = await runCommand(binary, ["--profile", PROFILE, "--probe"], { env, timeoutMs });
  if (outcome.spawnError || outcome.timedOut || outcome.exitCode !== 0) {
    throw new DiscoveryError(
      "DSH_PROFILE_PROBE_FAILED",
      `\`dsh --profile ${PROFILE} --probe\` ${describeEnd(outcome)}: the ${PROFILE} profile is missing or broken. ` +
        "Install it from OpenDesign's DeepSeek Harness setup.",
    );
  }
  if (outcome.stdoutOverflow) {
    const diagnostic = `the profile probe printed more than 1 MiB. Repair the ${PROFILE} profile.`;
    throw new DiscoveryError("DSH_PROFILE_PROBE_INVALID", diagnostic);
  }
  return checkProbeOutput(outcome.stdout);
}

/**
 * The whole discovery: `{ available, version, warnings, diagnostic, code, binary, probe }`.
 * The version is reported whenever it parsed, even when the probe gate then fails.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Promise<Discovery>}
 */
export async function discover(env = process.env) {
  /** @type {Discovery} */
  const found = {
    available: false, version: null, warnings: [], diagnostic: null, code: null, binary: null, probe: null,
  };
  try {
    const binary = resolveBinary(env);
    found.binary = binary;
    const version = await readVersion(binary, { env });
    found.version = version.version;
    if (!version.tested) {
      const tested = [...TESTED_VERSIONS].join(", ");
      found.warnings.push(
        `DSH_PROFILE_UNTESTED_VERSION: dsh ${version.version} is outside the tested set (${tested}); ` +
          "it stays available, but report problems with this version.",
      );
    }
    found.probe = await probe(binary, { env });
    found.available = true;
  } catch (error) {
    if (!(error instanceof DiscoveryError)) throw error;
    found.code = error.code;
    found.diagnostic = error.message;
  }
  return found;
}
