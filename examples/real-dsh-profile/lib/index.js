/**
 * @dsh-conformance/open-design-profile: the plugin the bundle patch mounts. It reads the app
 * arguments the launcher passes (`dsh --profile open-design --probe | --models | --stdio`), and
 * answers exactly one surface: the probe frame, the models frame, or a `--stdio` turn. Any other
 * argument list is a usage error (stderr, exit 2), never a silent hang.
 * @module @dsh-conformance/open-design-profile
 */

import { RUNTIME, identity, writeFrame } from "./frames.js";
import { serveStdio } from "./stdio.js";

/** Stable Cordis plugin name. */
export const name = "open-design-stdio";
/** Core services a turn needs, and the launcher's arguments. */
export const inject = ["cmdlineArgs", "agentDefaultModel", "agents", "sessions"];

const MODES = ["--probe", "--models", "--stdio"];
const USAGE = "usage: dsh --profile open-design (--probe | --models | --stdio)";

/** The `models` frame: the Harness default selection, the one route this bundle runs. */
function modelsFrame(ctx) {
  const selection = ctx.get("agentDefaultModel").currentSelection();
  return {
    v: 1,
    type: "models",
    runtime: RUNTIME,
    models: [{ provider: selection.provider, provider_name: selection.provider, id: selection.model, name: selection.model }],
  };
}

/** Mount: dispatch on the app arguments, then ask the launcher to exit with the surface's code. */
export function apply(ctx) {
  const exit = ctx.get("appExit");
  if (exit === undefined) throw new Error("open-design-stdio: the launcher must provide ctx.appExit");
  const args = ctx.get("cmdlineArgs").get();
  const modes = args.filter((arg) => MODES.includes(arg));
  const unknown = args.filter((arg) => !MODES.includes(arg));
  if (modes.length !== 1 || unknown.length > 0) {
    const why = unknown.length > 0 ? `unknown argument ${JSON.stringify(unknown[0])}` : "a profile mode needs exactly one of --models, --probe, --stdio";
    process.stderr.write(`dsh: error: ${why}\n${USAGE}\n`);
    exit(2);
    return;
  }
  if (modes[0] === "--probe") {
    writeFrame(identity("probe"));
    exit(0);
  } else if (modes[0] === "--models") {
    writeFrame(modelsFrame(ctx));
    exit(0);
  } else {
    serveStdio(ctx, exit);
  }
}
