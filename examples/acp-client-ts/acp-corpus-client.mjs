// An ACP client on the official TypeScript SDK (npm `@agentclientprotocol/sdk`, pinned in
// package.json, `npm ci` here first) following dsh-conformance's ACP driver contract
// (docs/surface-acp.md, "The driver contract"), so that
// `dsh-conformance run --surface acp --host "node examples/acp-client-ts/acp-corpus-client.mjs"`
// judges it.
//
// It starts the agent DSH_ACP_COMMAND names (a JSON array), opens one session in its working
// directory (or resumes DSH_ACP_RESUME's), selects the model option named DSH_ACP_MODEL through
// `session/set_config_option`, sends each argument as a prompt and prints one JSON line per
// prompt: {stop_reason, text (the message chunks in order), thought, tools (each call's last
// status), error (an error response's code and message, or null)}. Permission requests are
// answered by option kind (DSH_ACP_PERMISSION: allow or reject); in the prompt DSH_ACP_CANCEL
// names, the first permission request cancels the turn: session/cancel, the request answered
// `cancelled`, then it waits for the prompt's answer. An agent silent for DSH_SDK_TIMEOUT
// seconds, or gone with a prompt unanswered, fails the run (exit 1, the reason on stderr). The
// key reaches the agent in its environment only.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, RequestError } from "@agentclientprotocol/sdk";

const env = process.env;
const argv = JSON.parse(env.DSH_ACP_COMMAND);
const timeoutMs = Number(env.DSH_SDK_TIMEOUT ?? "30") * 1000;
const answer = env.DSH_ACP_PERMISSION ?? "allow";
const cancelPrompt = Number(env.DSH_ACP_CANCEL ?? "0");
const prompts = process.argv.slice(2);

let turn = newTurn();
let promptNumber = 0;
let heard = () => {};

// One report line, written before the next step: a pipe takes a line of megabytes in several
// writes, and process.exit() drops what is still queued.
function say(line) {
  return new Promise((resolve) => process.stdout.write(`${line}\n`, resolve));
}

function newTurn() {
  return { text: [], thought: [], tools: new Map() };
}

function report(stopReason, error) {
  const { text, thought, tools } = turn;
  return JSON.stringify({
    stop_reason: stopReason ?? null,
    text: text.join(""),
    thought: thought.join(""),
    tools: [...tools.values()],
    error: error ?? null,
  });
}

function onUpdate(update) {
  const content = update.content;
  switch (update.sessionUpdate) {
    case "agent_message_chunk":
      if (content?.type === "text") turn.text.push(content.text);
      break;
    case "agent_thought_chunk":
      if (content?.type === "text") turn.thought.push(content.text);
      break;
    case "tool_call":
      turn.tools.set(update.toolCallId, update.status ?? "pending");
      break;
    case "tool_call_update":
      if (turn.tools.has(update.toolCallId) && update.status) {
        turn.tools.set(update.toolCallId, update.status);
      }
      break;
    default: // a kind this client does not know: skipped
  }
}

const kinds = answer === "allow" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];

const app = client({ name: "dsh-acp-client-ts" })
  .onNotification(methods.client.session.update, ({ params }) => {
    heard();
    onUpdate(params.update);
  })
  .onRequest(methods.client.session.requestPermission, async ({ params, agent }) => {
    heard();
    if (promptNumber === cancelPrompt) {
      await agent.notify(methods.agent.session.cancel, { sessionId: params.sessionId });
      return { outcome: { outcome: "cancelled" } };
    }
    const chosen = params.options.find((option) => kinds.includes(option.kind));
    if (!chosen) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: chosen.optionId } };
  });

// The agent, its stderr discarded; the environment as this client has it.
const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"], env, cwd: process.cwd() });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

// `call`, failing when the agent says nothing for the timeout, or exits first.
function bounded(call, what) {
  return new Promise((resolve, reject) => {
    let timer;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => reject(new Error(`the agent was silent for ${timeoutMs / 1000} s (${what})`)), timeoutMs);
    };
    heard = arm;
    arm();
    exited.then((code) => setTimeout(() => reject(new Error(`the agent exited (${code}) with ${what} unanswered`)), 500));
    call.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

function modelValue(configOptions, name) {
  for (const config of configOptions ?? []) {
    if (config.id !== "model") continue;
    for (const entry of config.options) {
      for (const option of entry.options ?? [entry]) {
        if (option.name === name) return option.value;
      }
    }
  }
  throw new Error(`no model option named ${JSON.stringify(name)}`);
}

async function work(ctx) {
  const cwd = process.cwd();
  await bounded(ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} }), "initialize");
  let sessionId = env.DSH_ACP_RESUME;
  let configOptions;
  if (sessionId) {
    ({ configOptions } = await bounded(
      ctx.request(methods.agent.session.resume, { sessionId, cwd, mcpServers: [] }),
      "session/resume",
    ));
  } else {
    ({ sessionId, configOptions } = await bounded(
      ctx.request(methods.agent.session.new, { cwd, mcpServers: [] }),
      "session/new",
    ));
  }
  if (env.DSH_ACP_MODEL) {
    const value = modelValue(configOptions, env.DSH_ACP_MODEL);
    await bounded(
      ctx.request(methods.agent.session.setConfigOption, { sessionId, configId: "model", value }),
      "session/set_config_option",
    );
  }
  for (const [index, text] of prompts.entries()) {
    turn = newTurn();
    promptNumber = index + 1;
    const prompt = ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    let done;
    try {
      done = await bounded(prompt, `prompt ${promptNumber}`);
    } catch (error) {
      if (!(error instanceof RequestError)) throw error;
      // An error response: the turn failed, the session lives on.
      await say(report(null, `${error.code} ${error.message}`));
      continue;
    }
    await say(report(done.stopReason));
  }
}

async function main() {
  try {
    await app.connectWith(stream, work);
  } finally {
    // Close: stdin's end stops the agent (dsh exits on EOF); a stuck one is killed.
    child.stdin.end();
    const stopped = await Promise.race([exited, new Promise((r) => setTimeout(() => r("stuck"), timeoutMs / 2))]);
    if (stopped === "stuck") {
      child.kill("SIGKILL");
      await exited;
    }
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`acp-corpus-client: ${error?.message ?? error}`);
    child.kill("SIGKILL");
    process.exit(1);
  },
);
