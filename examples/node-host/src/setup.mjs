/**
 * @file Setup (spec 4): verify the pinned bundle tarball's SHA-256 against its manifest, install it
 * into the open-design profile, and probe again.
 */

import crypto from "node:crypto";
import fs from "node:fs";
import { pipeline } from "node:stream/promises";
import { runCommand, describeEnd } from "./command.mjs";
import { DiscoveryError, PROFILE, probe, resolveBinary } from "./discovery.mjs";
import { isPlainObject } from "./frames.mjs";

export const BUNDLE_PACKAGE = "@open-design/dsh-runtime";
const SHA256_HEX = /^[0-9a-f]{64}$/i;

/**
 * SHA-256 of a file, hex, streamed.
 * @param {string} file
 * @returns {Promise<string>}
 */
export async function sha256File(file) {
  const hash = crypto.createHash("sha256");
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest("hex");
}

/**
 * Read and check the manifest `{ package, version, sha256, file }`.
 * @param {string} manifestPath
 * @returns {{ sha256: string, package?: string, version?: string, file?: string }}
 */
export function readManifest(manifestPath) {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  } catch (error) {
    const why = /** @type {NodeJS.ErrnoException} */ (error).code ?? "parse error";
    const diagnostic = `the bundle manifest ${manifestPath} is missing or not JSON (${why}); reinstall OpenDesign.`;
    throw new DiscoveryError("DSH_PROFILE_BUNDLE_MISSING", diagnostic);
  }
  if (!isPlainObject(manifest) || typeof manifest.sha256 !== "string" || !SHA256_HEX.test(manifest.sha256)) {
    const diagnostic = `the bundle manifest ${manifestPath} has no sha256 digest; reinstall OpenDesign.`;
    throw new DiscoveryError("DSH_PROFILE_BUNDLE_MISSING", diagnostic);
  }
  if (manifest.package !== undefined && manifest.package !== BUNDLE_PACKAGE) {
    const describes = `the bundle manifest describes ${JSON.stringify(manifest.package)}, not ${BUNDLE_PACKAGE}`;
    throw new DiscoveryError("DSH_PROFILE_BUNDLE_HASH_MISMATCH", `${describes}; nothing was installed.`);
  }
  return /** @type {{ sha256: string }} */ (manifest);
}

/**
 * Install the bundle: `{ ok, code, message }`. dsh is invoked only after the tarball's digest
 * matched the manifest; then the probe gate must pass.
 * @param {{ tarball: string, manifest: string }} paths
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Promise<{ ok: boolean, code: string | null, message: string | null }>}
 */
export async function installBundle({ tarball, manifest: manifestPath }, env = process.env) {
  try {
    const manifest = readManifest(manifestPath);
    if (!fs.existsSync(tarball) || !fs.statSync(tarball).isFile()) {
      const diagnostic = `the pinned bundle tarball ${tarball} is missing; reinstall OpenDesign.`;
      throw new DiscoveryError("DSH_PROFILE_BUNDLE_MISSING", diagnostic);
    }
    const digest = await sha256File(tarball);
    if (digest.toLowerCase() !== manifest.sha256.toLowerCase()) {
      throw new DiscoveryError(
        "DSH_PROFILE_BUNDLE_HASH_MISMATCH",
        `the bundle tarball's SHA-256 is ${digest}, the manifest pins ${manifest.sha256.toLowerCase()}; ` +
          "nothing was installed. Reinstall OpenDesign.",
      );
    }
    const binary = resolveBinary(env);
    const args = ["plugin", "--profile", PROFILE, "add", tarball];
    const install = await runCommand(binary, args, { env, timeoutMs: 60000 });
    if (install.spawnError || install.timedOut || install.exitCode !== 0) {
      const ended = `\`dsh plugin --profile ${PROFILE} add\` ${describeEnd(install)}`;
      const diagnostic = `${ended}; the profile was not installed.`;
      throw new DiscoveryError("DSH_PROFILE_INSTALL_FAILED", diagnostic);
    }
    await probe(binary, { env });
    return { ok: true, code: null, message: null };
  } catch (error) {
    if (!(error instanceof DiscoveryError)) throw error;
    return { ok: false, code: error.code, message: error.message };
  }
}
