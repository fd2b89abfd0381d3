"""What the plugin promises the app's tests, shown by running small test files with pytester:
teardown fails a test that leaves a runtime process alive or puts the key on disk, and bad input
(a persona, a scenario, a root outside pytest's temporary directories) is named, never a hang."""

import json

import pytest
from dsh_conformance import FixtureError, ScenarioError

pytestmark = pytest.mark.dsh_fake_only


def test_teardown_fails_a_test_that_leaves_its_runtime_running(pytester):
    pytester.makepyfile(
        """
        import json, subprocess

        KEPT = []  # its stdin stays open: the runtime waits for more requests

        def test_forgets_to_close(fake_dsh):
            runtime = subprocess.Popen(
                [fake_dsh.dsh_bin, "--profile", "sdk"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            KEPT.append(runtime)
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"cwd": fake_dsh.project}}
            runtime.stdin.write(json.dumps(request) + "\\n")
            runtime.stdin.flush()
            assert json.loads(runtime.stdout.readline())["id"] == 1
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*outlived the test (killed now)*"])


def test_teardown_fails_a_test_that_writes_the_key_to_disk(pytester):
    pytester.makepyfile(
        """
        from pathlib import Path

        def test_saves_its_config(fake_dsh):
            Path(fake_dsh.project, "settings.txt").write_text("key=" + fake_dsh.api_key)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*the API key reached disk: project/settings.txt*"])


def test_an_unknown_persona_is_named(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_persona("9.9.9")
        def test_x(fake_dsh):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unknown dsh persona '9.9.9': fake-dsh plays 0.2.1, 0.1.5, 0.1.1*"])
    usage = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--dsh-persona", "0.3")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR
    usage.stderr.fnmatch_lines(["*--dsh-persona: invalid choice: '0.3'*"])


def test_a_scenario_fake_dsh_refuses_is_named(fake_dsh, tmp_path):
    bad = tmp_path / "bad-scenario.json"
    bad.write_text(json.dumps({"sdk": {"turns": [{"end": "bored"}]}}))
    with pytest.raises(ScenarioError, match=r"bad-scenario\.json.*unknown variant `bored`"):
        fake_dsh.use_scenario(bad)
    junk = tmp_path / "junk.json"
    junk.write_text("{\n  nope")
    with pytest.raises(ScenarioError, match=r"junk\.json.*line 2"):
        fake_dsh.use_scenario(junk)
    with pytest.raises(ScenarioError, match=r"turn 1 is 'hello', not a Turn"):
        fake_dsh.script("hello")


def test_a_root_outside_pytests_temporary_directories_is_refused(fake_dsh_factory, tmp_path_factory):
    outside = tmp_path_factory.getbasetemp().parent.parent / "not-a-pytest-dir"
    with pytest.raises(FixtureError, match="outside pytest's temporary directories"):
        fake_dsh_factory(root=outside)
    assert not outside.exists()
