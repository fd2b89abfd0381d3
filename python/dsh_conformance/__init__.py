"""dsh-conformance for Python: the kit's native binaries (`fake-dsh`, `dsh-conformance`,
`dsh-host-driver`), installed by the wheel into the environment's scripts directory (on PATH in
an activated venv), and a pytest plugin (`dsh_conformance.pytest_plugin`, loaded through the
`pytest11` entry point) whose `fake_dsh` fixture gives a test a keyless, isolated runtime.

    from dsh_conformance import bin_path
    bin_path("fake-dsh")      # the absolute path of the installed fake-dsh

Standard library only; nothing runs at install time.
"""

import os
import sysconfig
from importlib import metadata

from .fixture import FakeDsh, FixtureError, PERSONAS
from .scenario import ScenarioError, Turn

__all__ = [
    "BINARIES",
    "FakeDsh",
    "FixtureError",
    "PERSONAS",
    "ScenarioError",
    "Turn",
    "bin_dir",
    "bin_path",
]

#: The binaries the wheel installs.
BINARIES = ("dsh-conformance", "fake-dsh", "dsh-host-driver")

_DISTRIBUTION = "dsh-conformance"


def bin_path(name: str) -> str:
    """The absolute path of the installed binary `name` (one of `BINARIES`).

    Found through the files pip recorded for this distribution (its RECORD), so a `--user`,
    `--target` or `--prefix` install is found too; never through PATH, so another `fake-dsh`
    earlier on PATH is never taken for this one.
    """
    if name not in BINARIES:
        raise ValueError(
            f"dsh-conformance ships no binary named {name!r}: one of {', '.join(BINARIES)}"
        )
    for candidate in _recorded(name) + [os.path.join(sysconfig.get_path("scripts"), name)]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise FileNotFoundError(
        f"the dsh-conformance binary {name!r} is not installed: install the dsh-conformance wheel "
        "for this platform (docs/guide-python.md); the module alone carries no binaries"
    )


def bin_dir() -> str:
    """The directory holding the binaries (put it on PATH)."""
    return os.path.dirname(bin_path("fake-dsh"))


def _recorded(name: str) -> list:
    """The installed paths of `name` among the distribution's recorded scripts."""
    try:
        files = metadata.distribution(_DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        return []
    return [str(file.locate()) for file in files if file.name == name]
