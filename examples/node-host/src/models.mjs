/**
 * @file Model discovery (spec 12): `dsh --profile open-design --models` read the way OpenDesign's
 * host reads it (exactly one non-empty line, at most 64 KiB, within a bound; a `models` frame for
 * runtime open-design with non-empty provider, provider_name, id, name and option id/name, a
 * boolean `default` when present; repeated routes and efforts dropped, first wins; an empty list
 * is "no models"), and the route a user picks: `provider/id`, or `default` (no model in execute).
 */

import { runCommand, describeEnd } from "./command.mjs";
import { DiscoveryError, PROFILE, resolveBinary } from "./discovery.mjs";
import { RUNTIME_ID, isPlainObject } from "./frames.mjs";

/** @typedef {import("./shapes.mjs").ModelRoute} ModelRoute */

/**
 * One reasoning effort of a model, as the picker shows it.
 * @typedef {{ id: string, name: string, default?: boolean }} ReasoningOption
 */

/**
 * One model of the picker's catalog (spec 12).
 * @typedef {{
 *   provider: string, provider_name: string, id: string, name: string, reasoning_options: ReasoningOption[]
 * }} CatalogModel
 */

export const MODELS_MAX_BYTES = 64 * 1024;
export const DEFAULT_ROUTE = "default";

/** A catalog or route failure: a `DSH_PROFILE_*` code and an actionable diagnostic. */
export class ModelsError extends Error {
  /**
   * @param {string} code
   * @param {string} diagnostic
   */
  constructor(code, diagnostic) {
    super(diagnostic);
    this.code = code;
  }
}

/** @param {string} why */
const invalid = (why) => {
  const diagnostic = `the ${PROFILE} profile's model list ${why}; reinstall or repair the profile (setup)`;
  return new ModelsError("DSH_PROFILE_MODELS_INVALID", diagnostic);
};

/**
 * @param {Record<string, unknown>} object
 * @param {string} member
 * @param {string} where
 * @returns {string}
 */
function nonEmpty(object, member, where) {
  const value = object[member];
  if (typeof value !== "string" || value === "") throw invalid(`has ${where} without a non-empty \`${member}\``);
  return value;
}

/**
 * @param {unknown} option
 * @param {string} where
 * @returns {ReasoningOption}
 */
function parseOption(option, where) {
  if (!isPlainObject(option)) throw invalid(`has ${where} that is not an object`);
  if (option.default !== undefined && typeof option.default !== "boolean") {
    throw invalid(`has ${where} whose \`default\` is not a boolean`);
  }
  /** @type {ReasoningOption} */
  const parsed = { id: nonEmpty(option, "id", where), name: nonEmpty(option, "name", where) };
  if (option.default !== undefined) parsed.default = option.default;
  return parsed;
}

/**
 * @param {unknown} model
 * @param {number} index
 * @returns {CatalogModel}
 */
function parseModel(model, index) {
  const where = `model ${index}`;
  if (!isPlainObject(model)) throw invalid(`has ${where} that is not an object`);
  const options = model.reasoning_options ?? [];
  if (!Array.isArray(options)) throw invalid(`has ${where} whose reasoning_options is not an array`);
  const seen = new Set();
  /** @type {ReasoningOption[]} */
  const reasoning_options = [];
  options.forEach((/** @type {unknown} */ option, /** @type {number} */ at) => {
    const parsed = parseOption(option, `${where} option ${at}`);
    if (seen.has(parsed.id)) return;
    seen.add(parsed.id);
    reasoning_options.push(parsed);
  });
  return {
    provider: nonEmpty(model, "provider", where),
    provider_name: nonEmpty(model, "provider_name", where),
    id: nonEmpty(model, "id", where),
    name: nonEmpty(model, "name", where),
    reasoning_options,
  };
}

/**
 * Parse `--models` stdout into the picker's catalog; throws ModelsError.
 * @param {string} stdout
 * @returns {CatalogModel[]}
 */
export function parseCatalog(stdout) {
  if (Buffer.byteLength(stdout, "utf8") > MODELS_MAX_BYTES) throw invalid(`is larger than ${MODELS_MAX_BYTES} bytes`);
  const lines = stdout.split("\n").filter((line) => line.trim() !== "");
  if (lines.length !== 1) {
    throw invalid(`has ${lines.length} non-empty lines instead of exactly one models frame`);
  }
  let frame;
  try {
    frame = JSON.parse(lines[0]);
  } catch {
    throw invalid("is not JSON");
  }
  if (!isPlainObject(frame) || frame.v !== 1 || frame.type !== "models") {
    throw invalid("is not a generation-1 models frame");
  }
  if (frame.runtime !== RUNTIME_ID) {
    throw invalid(`comes from runtime ${JSON.stringify(frame.runtime)}, not ${RUNTIME_ID}`);
  }
  if (!Array.isArray(frame.models)) throw invalid("has no models array");
  const seen = new Set();
  /** @type {CatalogModel[]} */
  const models = [];
  frame.models.forEach((/** @type {unknown} */ entry, /** @type {number} */ index) => {
    const model = parseModel(entry, index);
    const route = `${model.provider}/${model.id}`;
    if (seen.has(route)) return;
    seen.add(route);
    models.push(model);
  });
  if (models.length === 0) {
    const diagnostic = `the ${PROFILE} profile lists no models: DeepSeek Harness has no model to run; `
      + "check the Harness provider configuration";
    throw new ModelsError("DSH_PROFILE_MODELS_EMPTY", diagnostic);
  }
  return models;
}

/**
 * `{ available, models, code, diagnostic }` for the driver's `models` reply.
 * @param {NodeJS.ProcessEnv} [env]
 * @param {{ timeoutMs?: number }} [options]
 * @returns {Promise<{ available: boolean, models: CatalogModel[], code: string | null, diagnostic: string | null }>}
 */
export async function listModels(env = process.env, { timeoutMs = 5000 } = {}) {
  try {
    const binary = resolveBinary(env);
    const outcome = await runCommand(binary, ["--profile", PROFILE, "--models"], { env, timeoutMs });
    if (outcome.spawnError || outcome.timedOut || outcome.exitCode !== 0) {
      const diagnostic = `\`dsh --profile ${PROFILE} --models\` ${describeEnd(outcome)}; repair the profile (setup)`;
      throw new ModelsError("DSH_PROFILE_MODELS_FAILED", diagnostic);
    }
    if (outcome.stdoutOverflow) throw invalid(`is larger than ${MODELS_MAX_BYTES} bytes`);
    return { available: true, models: parseCatalog(outcome.stdout), code: null, diagnostic: null };
  } catch (error) {
    if (error instanceof DiscoveryError) {
      return { available: false, models: [], code: "DSH_PROFILE_MODELS_FAILED", diagnostic: error.message };
    }
    if (!(error instanceof ModelsError)) throw error;
    return { available: false, models: [], code: error.code, diagnostic: error.message };
  }
}

/**
 * The model a run's request picks: `{provider, id}`, or null for `default`. A `route` is split at
 * the first `/` (both halves non-empty, no whitespace); without one, the request's `model`.
 * Throws ModelsError `DSH_PROFILE_INVALID_ROUTE` before anything is spawned.
 * @param {Record<string, any>} request a checked driver `run` request (a `route`, else a `model`)
 * @returns {ModelRoute | null}
 */
export function pickedModel(request) {
  if (typeof request.route !== "string") {
    // Without a route, the driver checked the request has a model (src/driver.mjs `requestProblem`).
    const { provider, id } = /** @type {ModelRoute} */ (request.model);
    return { provider, id };
  }
  if (request.route === DEFAULT_ROUTE) return null;
  const at = request.route.indexOf("/");
  const provider = at < 0 ? "" : request.route.slice(0, at);
  const id = at < 0 ? "" : request.route.slice(at + 1);
  /** @param {string} part */
  const clean = (part) => part !== "" && !/\s/.test(part);
  if (!clean(provider) || !clean(id)) {
    const route = JSON.stringify(request.route.slice(0, 80));
    const diagnostic = `the model route ${route} is not provider/id or default; pick a model from the list`;
    throw new ModelsError("DSH_PROFILE_INVALID_ROUTE", diagnostic);
  }
  return { provider, id };
}
