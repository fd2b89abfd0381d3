"""The app's own tests, each on a keyless runtime from the dsh-conformance pytest plugin.

The critical ones (a turn and its text, a file written, cold resume, working directory, an error
turn, cancel) pass unchanged on the real runtime too: `pytest --dsh-runtime PATH` plays the same
scripted turns through the kit's model server. The rest script what only fake-dsh plays
(`dsh_fake_only`).
"""

import threading
from pathlib import Path

import pytest
from dsh_conformance import Turn

from site_assistant import ConversationNotFound, SiteAssistant


def assistant(fake_dsh):
    return SiteAssistant(
        dsh_bin=fake_dsh.dsh_bin,
        dsh_home=fake_dsh.dsh_home,
        project=fake_dsh.project,
        api_key=fake_dsh.api_key,
    )


def test_a_turn_and_its_text(fake_dsh):
    fake_dsh.script(Turn.text("Hello from the model."))
    with assistant(fake_dsh) as app:
        reply = app.ask("Say hello")
    assert reply.text == "Hello from the model."
    assert reply.ended == "completed"


def test_a_written_file_lands_in_the_project(fake_dsh):
    fake_dsh.script(Turn.write("notes.md", "# Notes\n", then="Saved notes.md."))
    with assistant(fake_dsh) as app:
        reply = app.ask("Start my notes")
    assert reply.text == "Saved notes.md."
    assert (Path(fake_dsh.project) / "notes.md").read_text() == "# Notes\n"


def test_a_conversation_resumes_cold_in_a_new_client(fake_dsh):
    fake_dsh.require("0.2.1", "cold resume (session/resume)")
    # fake-dsh plays the script from its first turn in each process, the real runtime's model
    # server once per test: two turns script the second process's prompt either way.
    fake_dsh.script(Turn.text("Noted."), Turn.text("Noted."))
    with assistant(fake_dsh) as app:
        first = app.ask("Remember the colour blue", conversation="site-1")
    assert first.turn == 1
    with assistant(fake_dsh) as app:
        with pytest.raises(ConversationNotFound):
            app.resume("never-stored")
        app.resume("site-1")
        second = app.ask("Which colour?", conversation="site-1")
    assert (second.ended, second.text) == ("completed", "Noted.")
    assert second.turn == 2


def test_the_working_directory_moves_and_the_next_write_lands_there(fake_dsh):
    fake_dsh.require("0.2.1", "the working directory (session/set_working_directory)")
    (Path(fake_dsh.project) / "blog").mkdir()
    fake_dsh.script(Turn.write("post.md", "# Hello\n", then="Posted."))
    with assistant(fake_dsh) as app:
        moved = app.move("site-2", "blog")
        reply = app.ask("Write a post", conversation="site-2")
    assert Path(moved) == Path(fake_dsh.project, "blog").resolve()
    assert reply.text == "Posted."
    assert (Path(fake_dsh.project) / "blog" / "post.md").is_file()
    assert not (Path(fake_dsh.project) / "post.md").exists()


def test_an_error_turn_is_reported(fake_dsh):
    fake_dsh.script(Turn.error(), Turn.text("Back again."))
    with assistant(fake_dsh) as app:
        failed = app.ask("This one fails")
        again = app.ask("And this one works", conversation=failed.conversation)
    assert failed.ended == "error"
    assert failed.error
    assert (again.ended, again.text) == ("completed", "Back again.")


def test_cancel_stops_a_slow_turn(fake_dsh):
    fake_dsh.script(Turn.slow("Too late.", delay_ms=60_000))
    started = threading.Event()
    replies = []
    app = assistant(fake_dsh).__enter__()

    def ask():
        on_event = lambda event: event["type"] == "turn/start" and started.set()  # noqa: E731
        replies.append(app.ask("Take your time", on_event=on_event))

    asking = threading.Thread(target=ask)
    asking.start()
    assert started.wait(60), "the turn never started"
    app.cancel()
    asking.join(60)
    assert not asking.is_alive()
    assert [r.ended for r in replies] == ["cancelled"]


@pytest.mark.dsh_fake_only
def test_scripted_ends_a_cancelled_turn_and_the_token_limit(fake_dsh):
    fake_dsh.script(Turn.aborted("Stopping."), Turn.max_tokens("A very long an"))
    with assistant(fake_dsh) as app:
        aborted = app.ask("First")
        cut = app.ask("Second", conversation=aborted.conversation)
    assert (aborted.ended, aborted.text) == ("aborted", "Stopping.")
    assert (cut.ended, cut.text) == ("max-tokens", "A very long an")


@pytest.mark.dsh_fake_only
@pytest.mark.dsh_persona("0.1.5")
def test_a_test_can_pin_its_persona(fake_dsh):
    assert fake_dsh.persona == "0.1.5"
    with assistant(fake_dsh) as app:
        reply = app.ask("Make a landing page")
    # fake-dsh's default agent when nothing is scripted.
    assert reply.text == "I wrote index.html."
    assert (Path(fake_dsh.project) / "index.html").is_file()
