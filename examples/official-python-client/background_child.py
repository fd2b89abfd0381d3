#!/usr/bin/env python3
"""The official client's deviation from the client corpus, shown on the real runtime: a prompt
whose turn starts a background subagent (the runtime's `subagent` tool "immediately returns its
id. The runtime notifies you when it finishes.") is settled by `Session.run` on the root's first
`idle`, while the child still runs; the child then finishes and the root wakes for a second turn
that the run's result never holds.

Run it against the real runtime and the kit's model server playing
`background-child.model-script.json` (keyless, loopback only):

    dsh-conformance model-server --script examples/official-python-client/background-child.model-script.json --url-file url &
    DSH_BIN=target/real-dsh-runtime-bin/dsh-0.2.1 DEEPSEEK_BASE_URL=$(cat url) \\
    DEEPSEEK_API_KEY=keyless-dummy DSH_HOME=$(mktemp -d) \\
    PYTHONPATH=target/real-dsh-runtime-bin/deepseek-harness-sdk-0.2.1rc2 \\
    python3 examples/official-python-client/background_child.py

It prints one JSON object: what `Session.run` returned (`text`, `turn_ends`), whether a child
was still running when it returned, and what the root did afterwards (`subagent.finished`, the
root's later `turn/end` kinds and text). `conformance/tests/it/official_python_client.rs` runs it
on both client releases and their runtimes.
"""

import json
import os
import sys
import time

from deepseek_harness import DeepSeekHarness

SESSION_ID = "root-1"
PROMPT = "start a child"
# How long to wait, after the run returned, for the child to finish and the root to wake.
AFTER_SECONDS = 40.0


class Watch:
    """Every notification of the runtime, from before the prompt (a subscription of its own)."""

    def __init__(self, harness):
        self.subscription = harness.client.subscribe_notifications()
        self.seen = []

    def drain(self):
        self.subscription.drain(self.seen.append)
        return len(self.seen)


def root_events(notifications, kind):
    return [
        n.payload.get("event") or {}
        for n in notifications
        if n.method == "session.event"
        and n.payload.get("sessionId") == SESSION_ID
        and (n.payload.get("event") or {}).get("type") == kind
    ]


def text_of(event):
    content = ((event.get("data") or {}).get("message") or {}).get("content") or []
    return "".join(part.get("text") or "" for part in content if part.get("type") == "text")


def main():
    harness = DeepSeekHarness(
        dsh_bin=os.environ["DSH_BIN"],
        cwd=os.getcwd(),
        initialize_timeout_seconds=60,
        request_timeout_seconds=60,
    )
    with harness:
        watch = Watch(harness)
        result = harness.start_session(SESSION_ID).run(PROMPT)
        at_return = watch.drain()
        started = sum(1 for n in watch.seen if n.method == "subagent.started")
        finished = sum(1 for n in watch.seen if n.method == "subagent.finished")
        deadline = time.monotonic() + AFTER_SECONDS
        while time.monotonic() < deadline:
            watch.drain()
            later = watch.seen[at_return:]
            woke = any(n.method == "subagent.finished" for n in watch.seen) and any(
                n.method == "session.status"
                and n.payload.get("sessionId") == SESSION_ID
                and n.payload.get("status") == "idle"
                for n in later
            )
            if woke:
                break
            time.sleep(0.05)
        later = watch.seen[at_return:]
        turn_ends = [(e.get("data") or {}).get("reason", {}).get("kind") for e in root_events(later, "turn/end")]
        texts = [text_of(e) for e in root_events(later, "assistant/message")]
        report = {
            "run": {
                "text": result.final_response,
                "turn_ends": [
                    (e.get("data") or {}).get("reason", {}).get("kind")
                    for e in result.events
                    if e.get("type") == "turn/end"
                ],
            },
            "children_running_when_run_returned": started - finished,
            "after_run": {
                "subagent_finished": any(n.method == "subagent.finished" for n in later),
                "root_turn_ends": turn_ends,
                "root_text": texts[-1] if texts else None,
            },
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
