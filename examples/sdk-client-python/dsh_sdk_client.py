#!/usr/bin/env python3
"""A minimal DeepSeek Harness SDK client in Python (standard library only), on the wire the
official SDK clients speak (docs/sdk-surfaces.md): it starts the runtime as a subprocess, sends
`initialize`, then each prompt with `session/prompt`, and settles a prompt when it has seen the
prompt's receipt (the `agent/inbox/spliced` event carrying its `messageId`) and then the session
`idle` with no background child still running. Notifications that arrive before a response are
kept, responses are matched by id (they may come out of order), lines that are not JSON and
unknown notifications are skipped. At the end it sends `shutdown` and reaps the process.

The driver contract of the kit's client corpus (docs/sdk-clients.md):
    DSH_SDK_COMMAND='["fake-dsh", "--profile", "sdk"]' dsh_sdk_client.py PROMPT [PROMPT...]
prints one JSON line per prompt: {"messageId", "turn_ends": [kinds], "text": last assistant
text, "children": background children seen, "tools": [{"name", "ok"} per tool result]}, and
exits 0; when the runtime fails (an error
response, its stdout ends, it goes silent for DSH_SDK_TIMEOUT seconds) it says why on stderr and
exits 2. Closing is bounded: `shutdown`, stdin closed, DSH_SDK_TIMEOUT seconds, then a kill. The
environment (the API key with it) passes to the runtime; nothing secret goes in its argv. The
session is DSH_SDK_SESSION when set (else a fresh id); with DSH_SDK_RESUME=1 it is stored in the
home by an earlier process and resumed first (`session/resume`, 0.2.1), then asked where it is
(`session/working-directory/get`). With DSH_SDK_CWD the session is moved there before the
prompts (`session/working-directory/set`, 0.2.1). After either, each report carries "cwd": its
directory as the runtime last said it.
"""

import json
import os
import queue
import subprocess
import sys
import threading
import uuid

# How long to wait on a silent runtime, and on its exit when closing.
TIMEOUT_SECONDS = float(os.environ.get("DSH_SDK_TIMEOUT", "60"))
# A fresh id per process: a Harness home keeps every session an earlier process stored, and the
# runtime refuses to open one of those again ("session ... already exists").
SESSION_ID = os.environ.get("DSH_SDK_SESSION") or f"client-{uuid.uuid4()}"


class Runtime:
    """The runtime subprocess and its stdout lines, read on a thread."""

    def __init__(self, argv):
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.lines = queue.Queue()
        self.next_id = 1
        self.cwd = None  # the session's directory as the runtime last said it (0.2.1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.process.stdout.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            try:
                frame = json.loads(text)
            except ValueError:
                continue  # not JSON: tolerated, like the official clients
            if isinstance(frame, dict):
                self.lines.put(frame)
        self.lines.put(None)

    def send(self, method, params):
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        return request_id

    def frame(self):
        try:
            value = self.lines.get(timeout=TIMEOUT_SECONDS)
        except queue.Empty:
            raise RuntimeError("the runtime went silent")
        if value is None:
            raise RuntimeError("the runtime closed stdout")
        return value

    def close(self):
        try:
            self.send("shutdown", {})
            self.process.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            self.process.wait(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def call(runtime, method, params, on_notification):
    """Sends one request and returns its result, handing notifications to `on_notification`."""
    request_id = runtime.send(method, params)
    while True:
        frame = runtime.frame()
        if "method" in frame:
            on_notification(frame)
        elif frame.get("id") == request_id:
            if "error" in frame:
                raise RuntimeError(f"{method}: {frame['error'].get('message')}")
            return frame.get("result")


class Turn:
    """What one prompt settles on."""

    def __init__(self):
        self.message_id = None
        self.receipt = False
        self.turn_ends = []
        self.text = ""
        self.children = 0
        self.running_children = set()
        self.idle_after_receipt = False
        self.cwd = None
        self.tools = []  # {"name", "ok"} per tool result of the prompt's turns
        self.tool_names = {}  # callId -> the tool's name, from its tool/call
        self.pending = []  # notifications seen before the messageId was known

    def observe(self, frame):
        if self.message_id is None:
            self.pending.append(frame)
            return
        method, params = frame.get("method"), frame.get("params") or {}
        if method == "subagent.started" and params.get("parentSessionId") == SESSION_ID:
            self.children += 1
            self.running_children.add(params.get("childSessionId"))
        elif method == "subagent.finished" and params.get("parentSessionId") == SESSION_ID:
            # The root wakes for another turn with the child's result: wait for its idle.
            self.running_children.discard(params.get("childSessionId"))
            self.idle_after_receipt = False
        elif params.get("sessionId") != SESSION_ID:
            return
        elif method == "session.event":
            self.event(params.get("event") or {})
        elif method == "session.status" and self.receipt:
            self.idle_after_receipt = params.get("status") == "idle"

    def event(self, event):
        data = event.get("data") or {}
        kind = event.get("type")
        if kind == "agent/inbox/spliced":
            if any(m.get("id") == self.message_id for m in data.get("inserted") or []):
                self.receipt = True
        elif kind == "assistant/message":
            for part in (data.get("message") or {}).get("content") or []:
                if part.get("type") == "text" and part.get("text"):
                    self.text = part["text"]
        elif kind == "turn/end" and self.receipt:
            self.turn_ends.append((data.get("reason") or {}).get("kind"))
        elif kind == "tool/call":
            self.tool_names[data.get("callId")] = data.get("name")
        elif kind == "tool/result" and self.receipt:
            call_id = ((data.get("message") or {}).get("source") or {}).get("callId")
            self.tools.append({"name": self.tool_names.get(call_id), "ok": not tool_failed(data)})
        elif kind == "working-directory/change":
            self.cwd = data.get("cwd")

    def known(self, message_id):
        self.message_id = message_id
        pending, self.pending = self.pending, []
        for frame in pending:
            self.observe(frame)

    def settled(self):
        return self.receipt and self.idle_after_receipt and not self.running_children


def tool_failed(data):
    """Whether a tool/result says its tool failed: `isError` on 0.2.1's tool message, on the
    `tool-result` block of 0.1.x's user message."""
    message = data.get("message") or {}
    if "isError" in message:
        return bool(message["isError"])
    blocks = message.get("content") or []
    return any(b.get("isError") for b in blocks if b.get("type") == "tool-result")


def where(runtime):
    """Asks the runtime where the session is (0.2.1's session/working-directory/get)."""
    params = {"sessionId": SESSION_ID}
    result = call(runtime, "session/working-directory/get", params, lambda frame: None)
    runtime.cwd = result.get("cwd")


def move(runtime, path):
    """Moves the session to `path` (0.2.1's session/working-directory/set); the runtime answers
    the directory it is in now."""
    params = {"sessionId": SESSION_ID, "path": path}
    result = call(runtime, "session/working-directory/set", params, lambda frame: None)
    runtime.cwd = result.get("cwd")


def prompt(runtime, text):
    turn = Turn()
    turn.cwd = runtime.cwd
    result = call(
        runtime,
        "session/prompt",
        {"sessionId": SESSION_ID, "contentBlocks": [{"type": "text", "text": text}]},
        turn.observe,
    )
    turn.known(result["messageId"])
    while not turn.settled():
        turn.observe(runtime.frame())
    report = {
        "messageId": turn.message_id,
        "turn_ends": turn.turn_ends,
        "text": turn.text,
        "children": turn.children,
        "tools": turn.tools,
    }
    if runtime.cwd is not None:
        runtime.cwd = turn.cwd
        report["cwd"] = turn.cwd
    return report


def main():
    try:
        argv = json.loads(os.environ["DSH_SDK_COMMAND"])
    except (KeyError, ValueError) as error:
        print(f"dsh_sdk_client: DSH_SDK_COMMAND must be a JSON array: {error}", file=sys.stderr)
        return 2
    runtime = Runtime(argv)
    try:
        call(
            runtime,
            "initialize",
            {"cwd": os.getcwd(), "provider": "deepseek-official", "model": "deepseek-flash"},
            lambda frame: None,
        )
        if os.environ.get("DSH_SDK_RESUME") == "1":
            # The session is stored in this home by an earlier process: resume it (0.2.1).
            call(runtime, "session/resume", {"sessionId": SESSION_ID}, lambda frame: None)
            # It is where that process last moved it: the runtime says where (0.2.1).
            where(runtime)
        if os.environ.get("DSH_SDK_CWD"):
            move(runtime, os.environ["DSH_SDK_CWD"])
        for text in sys.argv[1:]:
            print(json.dumps(prompt(runtime, text)), flush=True)
    except RuntimeError as error:
        print(f"dsh_sdk_client: {error}", file=sys.stderr)
        return 2
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
