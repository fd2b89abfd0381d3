"""An application's own tests: the official Python client `deepseek-harness-sdk` 0.2.1 driving
fake-dsh, the keyless stand-in runtime, instead of the real one. No API key, no network.

Needs: python3 with pydantic 2, the client on PYTHONPATH (`cargo xtask real-dsh --runtime-bin`
unpacks it as target/real-dsh-runtime-bin/deepseek-harness-sdk-0.2.1rc2), and FAKE_DSH naming the
fake-dsh binary (else `fake-dsh` on PATH). Run with pytest, or as a plain script:

    FAKE_DSH=target/debug/fake-dsh \
    PYTHONPATH=target/real-dsh-runtime-bin/deepseek-harness-sdk-0.2.1rc2 \
    python3 examples/official-python-client/test_official_client.py
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from deepseek_harness import DeepSeekHarness
from deepseek_harness.errors import JsonRpcError


def fake_dsh() -> str:
    found = os.environ.get("FAKE_DSH") or shutil.which("fake-dsh")
    if not found:
        raise RuntimeError("set FAKE_DSH to the fake-dsh binary (or put fake-dsh on PATH)")
    return found


def harness(root: Path) -> DeepSeekHarness:
    """The client as an application configures it; only `dsh_bin` points at fake-dsh (whose
    default persona is 0.2.1, the client's own release)."""
    return DeepSeekHarness(
        dsh_bin=fake_dsh(),
        dsh_home=str(root / "dsh-home"),
        cwd=str(root / "project"),
        env={"FAKE_DSH_PERSONA": "0.2.1"},
        initialize_timeout_seconds=30,
        request_timeout_seconds=30,
    )


def world(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "dsh-home").mkdir()
    return tmp_path


def test_a_prompt_writes_the_page_and_completes(tmp_path):
    root = world(tmp_path)
    with harness(root) as sdk:
        result = sdk.run("Make a landing page", session_id="app-session-1")
    assert result.final_response == "I wrote index.html."
    assert result.finish_reason == "completed"
    types = [event["type"] for event in result.events]
    assert types.count("session-log-deepseek/delivery-accepted") == types.count("assistant/message")
    results = [event for event in result.events if event["type"] == "tool/result"]
    assert [r["data"]["message"]["role"] for r in results] == ["tool"]
    assert "<html" in (root / "project" / "index.html").read_text()


def test_the_working_directory_moves_and_the_next_turn_writes_there(tmp_path):
    root = world(tmp_path)
    (root / "project" / "site").mkdir()
    with harness(root) as sdk:
        session = sdk.start_session("app-session-2")
        assert session.get_working_directory() == str(root / "project")
        assert session.set_working_directory("site") == str(root / "project" / "site")
        assert session.get_working_directory() == str(root / "project" / "site")
        try:
            session.set_working_directory("no-such-dir")
            raise AssertionError("a missing directory was accepted")
        except JsonRpcError as error:
            assert error.code == -32603
            assert error.message == 'working-directory: directory does not exist: "no-such-dir"'
        result = session.run("Make a landing page")
    assert result.finish_reason == "completed"
    assert (root / "project" / "site" / "index.html").is_file()
    assert not (root / "project" / "index.html").exists()


def test_a_stored_session_resumes_in_a_new_process(tmp_path):
    root = world(tmp_path)
    with harness(root) as sdk:
        first = sdk.run("Make a landing page", session_id="app-session-3")
    last_seq = max(event["seq"] for event in first.events)
    with harness(root) as sdk:
        try:
            sdk.resume_session("never-stored")
            raise AssertionError("an unknown session was resumed")
        except JsonRpcError as error:
            assert error.message == 'session "never-stored" not found'
        session = sdk.resume_session("app-session-3")
        assert session.get_working_directory() == str(root / "project")
        second = session.run("Now make it green")
    assert second.finish_reason == "completed", second.finish_reason
    # fake-dsh's default agent reads the page the first process wrote, then rewrites it.
    assert second.final_response == "I made index.html green.", second.final_response
    first_seq = min(event["seq"] for event in second.events)
    assert first_seq > last_seq, (first_seq, last_seq)
    turns = [e["data"]["turn"] for e in second.events if e["type"] == "turn/start"]
    assert turns == [2], turns


def main() -> int:
    tests = [value for name, value in sorted(globals().items()) if name.startswith("test_")]
    failed = 0
    for test in tests:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                test(Path(tmp))
                print(f"ok {test.__name__}")
            except Exception as error:  # report every test, then fail
                failed += 1
                print(f"FAILED {test.__name__}: {error!r}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
