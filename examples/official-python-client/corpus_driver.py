#!/usr/bin/env python3
"""The official Python client `deepseek-harness-sdk` under the kit's client corpus: a thin
driver of the corpus's contract (docs/sdk-clients.md, "The driver contract") that does what an
application does with the client and nothing of its own. It starts the runtime it is given (the
one path in DSH_SDK_COMMAND, the case's launcher) as the client's `dsh_bin`, sends each prompt
argument to one session with `Session.run` (the contract's optional variables: DSH_SDK_SESSION
names it, else the client picks a fresh one; DSH_SDK_RESUME=1 resumes it with `resume_session` and asks
where it is with `get_working_directory`,
DSH_SDK_CWD moves it with `set_working_directory`, both 0.2.1), and prints one JSON line per
prompt from the client's `RunResult`:

    {"turn_ends": the turn/end kinds among its events, "text": final_response,
     "children": the background children started for the session,
     "tools": [{"name", "ok"} per tool/result among its events], "finish_reason": ...}

Any exception the client raises (an error response, the runtime's stdout ending, a timeout) is
said on stderr and exits 2; closing is the client's own (`shutdown`, stdin closed, bounded waits,
then a kill). DSH_HOME (the client refuses to start without it), DSH_SDK_TIMEOUT (the client's
initialize and request timeouts) and the key come from the environment, which the client
passes down to the runtime as it always does.

    dsh-conformance run --surface sdk --persona 0.2.1 \\
        --host "python3 examples/official-python-client/corpus_driver.py" \\
        --pass-env PYTHONPATH   # PYTHONPATH naming the client's unpacked wheel
"""

import json
import os
import sys

from deepseek_harness import DeepSeekHarness

# The corpus's session when it names one; else None: the client's own fresh `session-<uuid>`
# (a home keeps every session a process stored, and refuses to open one again).
SESSION_ID = os.environ.get("DSH_SDK_SESSION") or None


def tools(events):
    """Each tool/result among `events`: the tool's name (from the tool/call its callId names) and
    whether it succeeded (`isError` on 0.2.1's tool message, on 0.1.5's `tool-result` block)."""
    names, outcomes = {}, []
    for event in events:
        data = event.get("data") or {}
        if event.get("type") == "tool/call":
            names[data.get("callId")] = data.get("name")
        elif event.get("type") == "tool/result":
            message = data.get("message") or {}
            if "isError" in message:
                failed = bool(message["isError"])
            else:
                blocks = message.get("content") or []
                failed = any(b.get("isError") for b in blocks if b.get("type") == "tool-result")
            call_id = (message.get("source") or {}).get("callId")
            outcomes.append({"name": names.get(call_id), "ok": not failed})
    return outcomes


def report(result, session_id):
    """What the corpus compares, from the client's own result of one prompt."""
    turn_ends = [
        ((event.get("data") or {}).get("reason") or {}).get("kind")
        for event in result.events
        if event.get("type") == "turn/end"
    ]
    children = sum(
        1
        for notification in result.notifications
        if notification.method == "subagent.started"
        and notification.payload.get("parentSessionId") == session_id
    )
    return {
        "turn_ends": turn_ends,
        "text": result.final_response,
        "children": children,
        "tools": tools(result.events),
        "finish_reason": result.finish_reason,
    }


def moved_to(events, cwd):
    """The session's directory after `events`: the last `working-directory/change`'s, else `cwd`."""
    for event in events:
        if event.get("type") == "working-directory/change":
            cwd = (event.get("data") or {}).get("cwd", cwd)
    return cwd


def main():
    try:
        argv = json.loads(os.environ["DSH_SDK_COMMAND"])
        dsh_bin = argv[0]
    except (KeyError, ValueError, IndexError, TypeError) as error:
        print(f"corpus_driver: DSH_SDK_COMMAND must be a JSON array: {error!r}", file=sys.stderr)
        return 2
    timeout = float(os.environ.get("DSH_SDK_TIMEOUT", "60"))
    harness = DeepSeekHarness(
        dsh_bin=dsh_bin,
        cwd=os.getcwd(),
        initialize_timeout_seconds=timeout,
        request_timeout_seconds=timeout,
    )
    try:
        with harness:
            cwd = None
            if os.environ.get("DSH_SDK_RESUME") == "1":
                session = harness.resume_session(SESSION_ID)  # 0.2.1
                cwd = session.get_working_directory()  # where it was last moved
            else:
                session = harness.start_session(SESSION_ID)
            if os.environ.get("DSH_SDK_CWD"):
                cwd = session.set_working_directory(os.environ["DSH_SDK_CWD"])  # 0.2.1
            for prompt in sys.argv[1:]:
                result = session.run(prompt)
                line = report(result, session.id)
                if cwd is not None:
                    cwd = moved_to(result.events, cwd)
                    line["cwd"] = cwd
                print(json.dumps(line), flush=True)
    except Exception as error:  # the client's failure, whatever its class: said, exit 2
        first = str(error).splitlines()[0] if str(error) else ""
        print(f"corpus_driver: {type(error).__name__}: {first}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
