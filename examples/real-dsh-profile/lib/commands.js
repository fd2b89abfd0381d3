/**
 * Host commands (`execute`, `cancel`): one line in, a classified command out. A line that is not
 * a JSON object, or an object that is not a valid generation-1 command, is classified as such so
 * the caller answers it with a fatal `protocol_error` instead of ignoring it.
 * @module @dsh-conformance/open-design-profile/commands
 */

const ABSOLUTE = /^(\/|[A-Za-z]:[\\/]|\\\\)/;

/** Why an execute is not valid, or undefined when it is. */
function executeProblem(command) {
  if (typeof command.request_id !== "string" || command.request_id === "") return "execute needs a non-empty request_id";
  if (typeof command.cwd !== "string" || !ABSOLUTE.test(command.cwd)) return "execute needs an absolute cwd";
  if (typeof command.prompt !== "string") return "execute needs a prompt string";
  if (!Array.isArray(command.mcp_servers)) return "execute needs an mcp_servers array";
  const resume = command.resume_session_id;
  if (resume !== undefined && resume !== null && (typeof resume !== "string" || resume === "")) return "resume_session_id must be a non-empty string or null";
  const model = command.model;
  if (model !== undefined && (typeof model !== "object" || model === null || typeof model.provider !== "string" || typeof model.id !== "string")) return "model must be {provider, id}";
  return undefined;
}

/**
 * Classify one stdin line (without its newline).
 * @returns {{kind: "blank"} | {kind: "malformed", message: string} | {kind: "invalid", requestId?: string, message: string} | {kind: "execute", command: object} | {kind: "cancel", requestId: string}}
 */
export function classify(line) {
  if (line.trim() === "") return { kind: "blank" };
  let command;
  try {
    command = JSON.parse(line);
  } catch {
    return { kind: "malformed", message: "command is not JSON" };
  }
  if (typeof command !== "object" || command === null || Array.isArray(command)) return { kind: "malformed", message: "command is not a JSON object" };
  const requestId = typeof command.request_id === "string" && command.request_id !== "" ? command.request_id : undefined;
  if (command.v !== 1) return { kind: "invalid", requestId, message: `unsupported protocol generation ${JSON.stringify(command.v)}` };
  if (command.type === "cancel") {
    return requestId === undefined ? { kind: "invalid", message: "cancel needs a non-empty request_id" } : { kind: "cancel", requestId };
  }
  if (command.type === "execute") {
    const problem = executeProblem(command);
    return problem === undefined ? { kind: "execute", command } : { kind: "invalid", requestId, message: problem };
  }
  return { kind: "invalid", requestId, message: `unknown command type ${JSON.stringify(command.type)}` };
}
