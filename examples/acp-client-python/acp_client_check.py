"""An ACP client on the official Python SDK (PyPI `agent-client-protocol` 0.12.1, module `acp`)
driving `dsh --profile acp` (fake-dsh, or the real runtime): per release, a new session, a model
switch through `session/set_config_option`, a prompt that writes `index.html`; then a second
process that lists the stored session, resumes it cold and prompts again. Permission requests
are answered by option kind (`allow_once`), never by option id. The SDK's pydantic models check
every frame. Exit 0 when everything held, 1 with the reason otherwise.

Environment: DSH (the agent program), WORK (a scratch directory), PERSONAS (comma-separated
`FAKE_DSH_PERSONA` values, default `0.2.1,0.1.5`; a real runtime ignores them).
"""

import asyncio
import os
import shutil
import sys

from acp import RequestPermissionResponse, spawn_agent_process, text_block
from acp.schema import AllowedOutcome


class Client:
    """Records the updates; answers permission requests by kind; refuses fs and terminal calls
    (dsh never makes them)."""

    def __init__(self):
        self.updates = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        allow = next(option for option in options if option.kind == "allow_once")
        outcome = AllowedOutcome(outcome="selected", option_id=allow.option_id)
        return RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.session_update)

    async def write_text_file(self, *args, **kwargs):
        raise RuntimeError("dsh never calls fs/write_text_file")

    async def read_text_file(self, *args, **kwargs):
        raise RuntimeError("dsh never calls fs/read_text_file")

    async def create_terminal(self, *args, **kwargs):
        raise RuntimeError("dsh never calls terminal/create")


def check(ok, why):
    if not ok:
        raise AssertionError(why)


async def first_process(dsh, env, project):
    client = Client()
    async with spawn_agent_process(client, dsh, "--profile", "acp", env=env, cwd=project) as (conn, _):
        init = await conn.initialize(protocol_version=1)
        check(init.agent_info.name == "deepseek-harness-acp", f"agent {init.agent_info}")
        session = await conn.new_session(cwd=project, mcp_servers=[])
        models = session.config_options[0].options[0].options
        pro = next(option.value for option in models if option.name == "DeepSeek-V4-Pro")
        changed = await conn.set_config_option(config_id="model", session_id=session.session_id, value=pro)
        check(changed.config_options[0].current_value == pro, "the model switch")
        done = await conn.prompt(session_id=session.session_id, prompt=[text_block("Make a landing page")])
        check(done.stop_reason == "end_turn", f"stop reason {done.stop_reason}")
        check("tool_call" in client.updates, f"updates {client.updates}")
        return session.session_id


async def second_process(dsh, env, project, session_id):
    client = Client()
    async with spawn_agent_process(client, dsh, "--profile", "acp", env=env, cwd=project) as (conn, _):
        await conn.initialize(protocol_version=1)
        listed = await conn.list_sessions()
        check([s.session_id for s in listed.sessions] == [session_id], f"listed {listed}")
        await conn.resume_session(session_id=session_id, cwd=project, mcp_servers=[])
        check(client.updates == [], "no history replayed on resume")
        done = await conn.prompt(session_id=session_id, prompt=[text_block("Now make it green")])
        check(done.stop_reason == "end_turn", f"stop reason {done.stop_reason}")


async def main():
    dsh, work = os.environ["DSH"], os.environ["WORK"]
    for persona in os.environ.get("PERSONAS", "0.2.1,0.1.5").split(","):
        root = os.path.join(work, persona)
        shutil.rmtree(root, ignore_errors=True)
        project, home = os.path.join(root, "project"), os.path.join(root, "dsh-home")
        os.makedirs(project)
        os.makedirs(home)
        env = dict(os.environ, DSH_HOME=home, FAKE_DSH_PERSONA=persona)
        env.setdefault("DEEPSEEK_API_KEY", "keyless")
        session_id = await first_process(dsh, env, project)
        check(os.path.isfile(os.path.join(project, "index.html")), "index.html written")
        await second_process(dsh, env, project, session_id)
        print(f"{persona}: ok")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # the reason, for the test that runs this
        print(f"failed: {error!r}", file=sys.stderr)
        sys.exit(1)
