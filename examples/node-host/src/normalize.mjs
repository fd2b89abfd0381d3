/** @file Event normalization (spec 9): accepted runtime frames -> OpenDesign events. */

/** @typedef {import("./shapes.mjs").Frame} Frame */
/** @typedef {import("./shapes.mjs").HostEvent} HostEvent */

/** Stateful per run: it opens and closes reasoning blocks. */
export class EventNormalizer {
  constructor() {
    this.thinking = false;
  }

  /**
   * The events one accepted frame produces, in order.
   * @param {Frame} frame
   * @returns {HostEvent[]}
   */
  events(frame) {
    /** @type {HostEvent[]} */
    const events = [];
    if (frame.type !== "thinking" && this.thinking && frame.type !== "ready") {
      events.push({ type: "thinking_end" });
      this.thinking = false;
    }
    switch (frame.type) {
      case "session":
        events.push({ type: "status", label: "session", sessionId: frame.session_id });
        break;
      case "thinking":
        if (!this.thinking) {
          events.push({ type: "thinking_start" });
          this.thinking = true;
        }
        events.push({ type: "thinking_delta", delta: frame.content });
        break;
      case "text":
        events.push({ type: "text_delta", delta: frame.content });
        break;
      case "tool_call":
        events.push({ type: "tool_use", id: frame.call_id, name: frame.name, input: JSON.parse(frame.arguments) });
        break;
      case "tool_result": {
        const { call_id: toolUseId, output: content, is_error: isError } = frame;
        events.push({ type: "tool_result", toolUseId, content, isError });
        break;
      }
      case "usage":
        events.push({ type: "usage", provider: frame.provider, model: frame.model, usage: usageOf(frame) });
        break;
      default:
        break;
    }
    return events;
  }

  /**
   * Close an open reasoning block when the run ends.
   * @returns {HostEvent[]}
   */
  close() {
    if (!this.thinking) return [];
    this.thinking = false;
    return [{ type: "thinking_end" }];
  }
}

/**
 * @param {Frame} frame a usage frame
 * @returns {Record<string, number>}
 */
function usageOf(frame) {
  /** @type {Record<string, number>} */
  const usage = { input_tokens: frame.input_tokens, output_tokens: frame.output_tokens };
  if (frame.cache_read_tokens !== undefined) usage.cache_read_tokens = frame.cache_read_tokens;
  if (frame.cache_write_tokens !== undefined) usage.cache_write_tokens = frame.cache_write_tokens;
  return usage;
}
