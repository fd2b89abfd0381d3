"""An ACP client on the official Python SDK (PyPI `agent-client-protocol` 0.12.1, module `acp`)
that follows the kit's ACP driver contract (docs/surface-acp.md, "The driver contract"), so
`dsh-conformance run --surface acp --host "python3 acp_corpus_client.py"` judges it.

It starts the agent named by DSH_ACP_COMMAND (a JSON array), opens one session in its working
directory (or resumes DSH_ACP_RESUME's), selects the model option named DSH_ACP_MODEL through
`session/set_config_option`, sends each argument as a prompt and prints one JSON line per
prompt: {"stop_reason", "text" (the message chunks, in order), "thought" (the thought chunks),
"tools" (each tool call's last status), "error" (the error response, or null)}. Permission
requests are answered by option kind (DSH_ACP_PERMISSION: allow or reject); in the prompt
DSH_ACP_CANCEL names, the first permission request cancels the turn instead: session/cancel, the
request answered `cancelled`, then it waits for the prompt's answer. A runtime silent for
DSH_SDK_TIMEOUT seconds, or gone with a prompt unanswered, fails the run (exit 1, the reason on
stderr). The key reaches the agent in its environment only.
"""

import asyncio
import json
import os
import sys

from acp import RequestPermissionResponse, spawn_agent_process, text_block
from acp.exceptions import RequestError
from acp.schema import AllowedOutcome, DeniedOutcome


class Turn:
    """What one prompt's updates said."""

    def __init__(self):
        self.text, self.thought, self.tools = [], [], {}

    def report(self, stop_reason=None, error=None):
        return {"stop_reason": stop_reason, "text": "".join(self.text),
                "thought": "".join(self.thought), "tools": list(self.tools.values()),
                "error": error}


class Client:
    """Keeps each update with the prompt in flight; answers permission requests by kind."""

    def __init__(self, answer, cancel_prompt):
        self.answer, self.cancel_prompt = answer, cancel_prompt
        self.turn, self.prompt_number, self.conn = Turn(), 0, None
        self.heard = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.heard.set()
        if self.prompt_number == self.cancel_prompt:
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        kinds = ("allow_once", "allow_always") if self.answer == "allow" else ("reject_once", "reject_always")
        chosen = next((option for option in options if option.kind in kinds), None)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    async def session_update(self, session_id, update, **kwargs):
        self.heard.set()
        kind = getattr(update, "session_update", None)
        content = getattr(update, "content", None)
        if kind == "agent_message_chunk" and getattr(content, "type", None) == "text":
            self.turn.text.append(content.text)
        elif kind == "agent_thought_chunk" and getattr(content, "type", None) == "text":
            self.turn.thought.append(content.text)
        elif kind in ("tool_call", "tool_call_update"):
            status = getattr(update, "status", None)
            if kind == "tool_call" or update.tool_call_id in self.turn.tools:
                self.turn.tools[update.tool_call_id] = status or self.turn.tools.get(update.tool_call_id)


async def bounded(client, call, timeout):
    """Awaits `call`, failing when the agent says nothing for `timeout` seconds."""
    task = asyncio.ensure_future(call)
    while True:
        client.heard.clear()
        heard = asyncio.ensure_future(client.heard.wait())
        done, _ = await asyncio.wait({task, heard}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        heard.cancel()
        if task in done:
            return task.result()
        if not done:
            task.cancel()
            raise TimeoutError(f"the agent was silent for {timeout} s")


async def open_session(conn, client, cwd, timeout):
    resume = os.environ.get("DSH_ACP_RESUME")
    if resume:
        opened = await bounded(client, conn.resume_session(session_id=resume, cwd=cwd, mcp_servers=[]), timeout)
        return resume, opened.config_options
    opened = await bounded(client, conn.new_session(cwd=cwd, mcp_servers=[]), timeout)
    return opened.session_id, opened.config_options


def model_value(config_options, name):
    """The value of the model option called `name`, in grouped or flat option lists."""
    for config in config_options or []:
        if config.id != "model":
            continue
        for entry in config.options:
            for option in getattr(entry, "options", None) or [entry]:
                if option.name == name:
                    return option.value
    raise RuntimeError(f"no model option named {name!r}")


async def run(prompts):
    argv = json.loads(os.environ["DSH_ACP_COMMAND"])
    timeout = float(os.environ.get("DSH_SDK_TIMEOUT", "30"))
    cancel = int(os.environ.get("DSH_ACP_CANCEL", "0"))
    client = Client(os.environ.get("DSH_ACP_PERMISSION", "allow"), cancel)
    cwd = os.getcwd()
    transport = {"stderr": asyncio.subprocess.DEVNULL, "limit": 64 << 20, "shutdown_timeout": timeout / 2}
    # The environment as the client has it (the key with it); no argument of the client's own.
    async with spawn_agent_process(client, argv[0], *argv[1:], env=dict(os.environ), cwd=cwd,
                                   transport_kwargs=transport) as (conn, process):
        client.conn = conn
        await bounded(client, conn.initialize(protocol_version=1), timeout)
        session_id, config_options = await open_session(conn, client, cwd, timeout)
        model = os.environ.get("DSH_ACP_MODEL")
        if model:
            value = model_value(config_options, model)
            await bounded(client, conn.set_config_option(config_id="model", session_id=session_id, value=value), timeout)
        for number, prompt in enumerate(prompts, start=1):
            client.turn, client.prompt_number = Turn(), number
            # A prompt's answer races the agent's exit: watch both.
            answer = asyncio.ensure_future(bounded(client, conn.prompt(session_id=session_id, prompt=[text_block(prompt)]), timeout))
            gone = asyncio.ensure_future(process.wait())
            await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                await asyncio.wait({answer}, timeout=0.5)
            gone.cancel()
            if not answer.done():
                answer.cancel()
                raise RuntimeError(f"the agent exited ({process.returncode}) with prompt {number} unanswered")
            try:
                done = answer.result()
            except RequestError as error:  # an error response: the turn failed, the session lives on
                print(json.dumps(client.turn.report(error=f"{error.code} {error}")), flush=True)
                continue
            print(json.dumps(client.turn.report(stop_reason=done.stop_reason)), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(run(sys.argv[1:]))
    except Exception as error:
        print(f"acp_corpus_client: {error!r}", file=sys.stderr)
        sys.exit(1)
