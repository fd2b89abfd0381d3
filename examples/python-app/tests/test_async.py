"""The fixture in asyncio tests (pytest-asyncio): setup and teardown are synchronous and cheap,
and the official client is synchronous, so an async app runs it in a thread."""

import asyncio

import pytest
from dsh_conformance import Turn

from site_assistant import SiteAssistant


def ask_once(world, prompt):
    with SiteAssistant(
        dsh_bin=world.dsh_bin,
        dsh_home=world.dsh_home,
        project=world.project,
        api_key=world.api_key,
    ) as app:
        return app.ask(prompt)


@pytest.mark.asyncio
async def test_two_conversations_at_once_each_on_its_own_runtime(fake_dsh_factory):
    first, second = fake_dsh_factory(), fake_dsh_factory()
    first.script(Turn.text("One."))
    second.script(Turn.text("Two.", delay_ms=50))
    replies = await asyncio.gather(
        asyncio.to_thread(ask_once, first, "first"),
        asyncio.to_thread(ask_once, second, "second"),
    )
    assert [reply.text for reply in replies] == ["One.", "Two."]
    assert first.dsh_home != second.dsh_home
