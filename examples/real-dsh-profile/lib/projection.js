/**
 * The structured event projection: Harness session events of one turn become generation-1 frames
 * (reasoning deltas -> thinking, text deltas -> text, tool/call -> tool_call, tool/result ->
 * tool_result, an assistant message's usage -> usage), and the turn's end becomes the terminal
 * result's status, stop reason and error.
 * @module @dsh-conformance/open-design-profile/projection
 */

import { scoped } from "./frames.js";

/** The text of a tool result's content blocks (non-text blocks are named, not inlined). */
function blocksText(blocks) {
  if (!Array.isArray(blocks)) return "";
  return blocks.map((block) => (block?.type === "text" ? String(block.text ?? "") : `[${block?.type ?? "block"}]`)).join("");
}

/** Projects the events of one turn of one session onto frames for one request. */
export class Projection {
  /**
   * @param requestId - the active execute's request_id.
   * @param route - `{provider, model}` the turn runs on (usage frames name it).
   * @param write - receives each frame.
   */
  constructor(requestId, route, write) {
    this.requestId = requestId;
    this.route = route;
    this.write = write;
    this.toolNames = new Map();
    this.lastText = "";
    this.streamedText = "";
    this.endReason = undefined;
  }

  /** Feed one Harness session event. */
  accept(event) {
    const data = event?.data ?? {};
    switch (event?.type) {
      case "assistant/chunk":
        return this.chunk(data.chunk ?? {});
      case "assistant/message":
        return this.message(data);
      case "tool/call":
        this.toolNames.set(data.callId, data.name);
        return this.write(scoped("tool_call", this.requestId, { call_id: data.callId, name: data.name, arguments: data.arguments }));
      case "tool/result":
        return this.toolResult(data);
      case "turn/end":
        this.endReason = data.reason;
        return undefined;
      default:
        return undefined;
    }
  }

  chunk(chunk) {
    if (chunk.type === "reasoning-delta" && chunk.text !== "") this.write(scoped("thinking", this.requestId, { content: chunk.text }));
    if (chunk.type === "text-delta" && chunk.text !== "") {
      this.streamedText += chunk.text;
      this.write(scoped("text", this.requestId, { content: chunk.text }));
    }
  }

  message(data) {
    const content = data.message?.content ?? [];
    const text = content.filter((block) => block.type === "text").map((block) => block.text).join("");
    if (text !== "") this.lastText = text;
    const usage = data.usage;
    if (usage === undefined) return;
    const frame = scoped("usage", this.requestId, {
      provider: this.route.provider,
      model: this.route.model,
      input_tokens: usage.inputTokens ?? 0,
      output_tokens: usage.outputTokens ?? 0,
    });
    if (Number.isInteger(usage.cacheReadTokens)) frame.cache_read_tokens = usage.cacheReadTokens;
    if (Number.isInteger(usage.cacheWriteTokens)) frame.cache_write_tokens = usage.cacheWriteTokens;
    this.write(frame);
  }

  /**
   * A tool result in either release's shape: up to 0.1.x a user message holding a `tool-result`
   * block (`toolCallId`, its own `content`, `isError`); from 0.2 the tool's own message
   * (`role: "tool"`, `toolCallId` and `isError` at its top, text blocks as its content).
   */
  toolResult(data) {
    const message = data.message ?? {};
    const block = message.role === "tool"
      ? message
      : (message.content ?? []).find((item) => item?.type === "tool-result") ?? {};
    const callId = block.toolCallId ?? message.source?.callId;
    this.write(scoped("tool_result", this.requestId, {
      call_id: callId,
      name: this.toolNames.get(callId) ?? "tool",
      output: blocksText(block.content),
      is_error: block.isError === true || data.error !== undefined,
    }));
  }

  /**
   * The terminal outcome: `{status, stopReason, output?, error?}`.
   * @param cancelRequested - whether the host cancelled this run.
   */
  outcome(cancelRequested) {
    const reason = this.endReason;
    const output = this.lastText !== "" ? this.lastText : this.streamedText;
    if (reason?.kind === "completed") return { status: "completed", stopReason: "completed", output };
    if (reason?.kind === "aborted" || (reason === undefined && cancelRequested)) return { status: "cancelled", stopReason: "cancelled" };
    if (reason?.kind === "error") {
      return { status: "failed", stopReason: "error", error: { code: String(reason.error?.code ?? "UNKNOWN"), message: String(reason.error?.message ?? "the turn failed") } };
    }
    const kind = reason?.kind ?? "no_turn_end";
    return { status: "failed", stopReason: kind, error: { code: `RUN_${kind.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}`, message: `the turn ended with ${kind}` } };
  }
}
