"""The pytest plugin (entry point `pytest11`, loaded whenever the wheel is installed): a keyless
DeepSeek Harness runtime per test.

    def test_answer(fake_dsh):
        fake_dsh.script(Turn.text("Hello"))
        with DeepSeekHarness(dsh_bin=fake_dsh.dsh_bin, dsh_home=fake_dsh.dsh_home,
                             cwd=fake_dsh.project, api_key=fake_dsh.api_key) as client:
            assert client.run("Hi").final_response == "Hello"

Fixtures: `fake_dsh` (a `FakeDsh` under the test's `tmp_path`) and `fake_dsh_factory` (more of
them, `fake_dsh_factory(persona="0.1.5", root=...)`, each root inside pytest's temporary
directories). The persona: `@pytest.mark.dsh_persona("0.1.5")`, else `--dsh-persona`, else the
ini option `dsh_persona`, else 0.2.1. `--dsh-runtime PATH` runs a real runtime instead of
fake-dsh (keylessly, through the kit's model server); tests marked `dsh_fake_only` are skipped
then. Teardown fails the test (an error at teardown) when a process the runtime started is still
alive or the canary key (`fake_dsh.api_key`) reached a file under the world.

Setup and teardown are synchronous and cheap (no network, one small script written): they work
the same for asyncio tests and under pytest-xdist, where every test's `tmp_path` is its own.
"""

import os
import subprocess

import pytest

from . import bin_path
from .fixture import PERSONAS, FakeDsh, FixtureError

_DEFAULT_PERSONA = PERSONAS[0]


def pytest_addoption(parser):
    group = parser.getgroup("dsh-conformance", "keyless DeepSeek Harness runtime (fake_dsh)")
    group.addoption(
        "--dsh-persona",
        choices=PERSONAS,
        default=None,
        help="the runtime release fake-dsh plays for every fake_dsh fixture (default 0.2.1)",
    )
    group.addoption(
        "--dsh-runtime",
        metavar="PATH",
        default=None,
        help="run this real runtime (e.g. the deepseek-harness-runtime-bin `dsh`) instead of "
        "fake-dsh, keylessly against the kit's model server on 127.0.0.1",
    )
    parser.addini("dsh_persona", "the fake_dsh fixture's persona (default 0.2.1)", default="")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "dsh_persona(version): the fake_dsh persona for this test (0.2.1, 0.1.5, 0.1.1)"
    )
    config.addinivalue_line(
        "markers", "dsh_fake_only: the test scripts what only fake-dsh plays (skipped on --dsh-runtime)"
    )
    ini = config.getini("dsh_persona")
    if ini and ini not in PERSONAS:
        raise pytest.UsageError(
            f"ini option dsh_persona = {ini!r}: fake-dsh plays {', '.join(PERSONAS)}"
        )


def _persona(request, asked=None):
    """The persona for `request`'s test: `asked`, its marker, the option, the ini, 0.2.1."""
    marker = request.node.get_closest_marker("dsh_persona")
    if asked is None and marker is not None:
        if len(marker.args) != 1:
            raise FixtureError(f"{request.node.nodeid}: dsh_persona takes one version, {marker}")
        asked = marker.args[0]
    persona = (
        asked
        or request.config.getoption("--dsh-persona")
        or request.config.getini("dsh_persona")
        or _DEFAULT_PERSONA
    )
    if persona not in PERSONAS:
        raise FixtureError(
            f"{request.node.nodeid}: unknown dsh persona {persona!r}: fake-dsh plays "
            f"{', '.join(PERSONAS)}"
        )
    return persona


def _runtime_release(config, runtime):
    """The persona naming the real runtime's release (its `--version`), asked once a session."""
    cached = getattr(config, "_dsh_runtime_release", None)
    if cached is None:
        try:
            answer = subprocess.run(
                [runtime, "--version"], capture_output=True, text=True, timeout=60
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            raise FixtureError(f"--dsh-runtime {runtime}: cannot run it: {error}") from None
        found = [p for p in PERSONAS if answer.startswith(p)]
        if not found:
            raise FixtureError(
                f"--dsh-runtime {runtime}: --version says {answer!r}, not a release the fixture "
                f"knows ({', '.join(PERSONAS[:2])})"
            )
        cached = config._dsh_runtime_release = found[0]
    return cached


def _inside(path, directory):
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


class _Worlds:
    """The worlds one test made; all closed at its teardown, their problems failing it."""

    def __init__(self, request, tmp_path_factory):
        self.request = request
        self.base = tmp_path_factory.getbasetemp()
        self.worlds = []
        runtime = request.config.getoption("--dsh-runtime")
        self.runtime = os.path.abspath(runtime) if runtime else None

    def make(self, root, persona=None):
        if not _inside(root, self.base):
            raise FixtureError(
                f"fake_dsh root {root} is outside pytest's temporary directories ({self.base}): "
                "the fixture lays out a Harness home there and scans it for the canary key at "
                "teardown; use a directory under tmp_path"
            )
        if self.runtime and self.request.node.get_closest_marker("dsh_fake_only"):
            pytest.skip(f"fake-dsh only (dsh_fake_only), skipped on --dsh-runtime {self.runtime}")
        world = FakeDsh.create(
            str(root),
            fake_dsh=bin_path("fake-dsh"),
            persona=_runtime_release(self.request.config, self.runtime)
            if self.runtime
            else _persona(self.request, persona),
            runtime=self.runtime,
            conformance=bin_path("dsh-conformance") if self.runtime else None,
        )
        self.worlds.append(world)
        return world

    def close(self):
        problems = []
        for world in self.worlds:
            problems += world.close()
        if problems:
            pytest.fail("fake_dsh teardown:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def fake_dsh_factory(request, tmp_path, tmp_path_factory):
    """`make(persona=None, root=None)`: another world (root: a fresh dir under tmp_path)."""
    worlds = _Worlds(request, tmp_path_factory)
    made = []

    def make(persona=None, root=None):
        root = root if root is not None else tmp_path / f"fake-dsh-{len(made) + 1}"
        made.append(root)
        return worlds.make(root, persona)

    yield make
    worlds.close()


@pytest.fixture
def fake_dsh(fake_dsh_factory):
    """A keyless runtime for this test: pass `fake_dsh.dsh_bin` as the client's `dsh_bin`."""
    return fake_dsh_factory()
