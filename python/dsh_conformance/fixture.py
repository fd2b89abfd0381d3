"""One keyless runtime for one test: `FakeDsh` lays out a private world under a directory (a
Harness home, a project, a HOME for the runtime), writes `bin/dsh`, a launcher that `exec`s
fake-dsh configured for it (persona, scenario, journal, the world's token), and at `close()`
checks what the test left: no process carrying the world's token still alive (Linux, through
/proc), and no canary key in any file under the world. The pytest plugin wraps it; it works
without pytest too (the bench does that):

    world = FakeDsh.create("/tmp/x", fake_dsh="/path/to/fake-dsh", persona="0.1.5")
    DeepSeekHarness(dsh_bin=world.dsh_bin, dsh_home=world.dsh_home, cwd=world.project, ...)
    problems = world.close()    # [] when the test left nothing behind

With `runtime=` (a real runtime's executable) and `conformance=` (the `dsh-conformance` binary)
the launcher runs that real runtime instead, keylessly, against the kit's model server on
127.0.0.1 playing the scripted turns.
"""

import base64
import json
import os
import secrets
import signal
import subprocess
import time

from .scenario import ScenarioError, model_script, scenario_document

__all__ = ["FakeDsh", "FixtureError", "PERSONAS"]

#: fake-dsh's SDK personas: the runtime releases it plays (docs/surface-sdk.md).
PERSONAS = ("0.2.1", "0.1.5", "0.1.1")

#: The variable the launcher gives the runtime (and so everything it starts): the world's token.
TOKEN_ENV = "DSH_CONFORMANCE_FIXTURE_TOKEN"

#: A file larger than this is scanned for the canary in its first bytes only.
_SCAN_BYTES = 8 << 20
#: How long teardown waits for a process carrying the token to end by itself before killing it.
_GRACE_SECONDS = 2.0
#: How many times a scan is repeated while a process shows an empty environment (inside exec).
_EXEC_RESCANS = 5
#: How long a fake-dsh left running on its own lives at most (its watchdog).
_WATCHDOG_SECONDS = "600"


class FixtureError(RuntimeError):
    """The fixture cannot be set up as asked: the message names what and why."""


def _quote(value):
    """`value` single-quoted for /bin/sh, byte for byte."""
    return "'" + str(value).replace("'", "'\\''") + "'"


class FakeDsh:
    """A world with a launcher; see the module's doc."""

    def __init__(self, root, fake_dsh, persona, runtime=None, conformance=None):
        self.root = os.path.abspath(root)
        self.persona = persona
        self.real_runtime = runtime
        self._fake_dsh = fake_dsh
        self._conformance = conformance
        self._model_server = None
        self.token = secrets.token_hex(16)
        #: The canary key: give it to your client as its API key; teardown fails if it is on disk.
        self.api_key = "sk-dshc-canary-" + secrets.token_hex(16)
        self.dsh_home = os.path.join(self.root, "dsh-home")
        self.project = os.path.join(self.root, "project")
        self.home = os.path.join(self.root, "home")
        self.journal = os.path.join(self.root, "journal.jsonl")
        self.scenario_path = os.path.join(self.root, "scenario.json")
        self.dsh_bin = os.path.join(self.root, "bin", "dsh")
        self._url_file = os.path.join(self.root, "model-url")

    @classmethod
    def create(cls, root, *, fake_dsh, persona="0.2.1", runtime=None, conformance=None):
        """Lays out the world under `root` (created; an existing one must be empty)."""
        if persona not in PERSONAS:
            raise FixtureError(
                f"unknown dsh persona {persona!r}: fake-dsh plays {', '.join(PERSONAS)}"
            )
        for binary, what in ((fake_dsh, "fake-dsh"), (runtime, "runtime")):
            if binary is not None and not os.access(binary, os.X_OK):
                raise FixtureError(f"the {what} {binary!r} is not an executable file")
        if runtime is not None and conformance is None:
            raise FixtureError("a real runtime needs the dsh-conformance binary (its model server)")
        if os.path.exists(root) and os.listdir(root):
            raise FixtureError(f"{root} is not empty: a world is laid out in a directory of its own")
        world = cls(root, fake_dsh, persona, runtime, conformance)
        for directory in (world.dsh_home, world.project, world.home, os.path.dirname(world.dsh_bin)):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        world._write_launcher()
        if runtime is not None:
            world._start_model_server(None)
        return world

    @property
    def env(self):
        """What a client passes its runtime besides `dsh_bin`: the home and the canary key."""
        return {"DSH_HOME": self.dsh_home, "DEEPSEEK_API_KEY": self.api_key}

    def _write_launcher(self):
        exports = {
            TOKEN_ENV: self.token,
            "FAKE_DSH_PERSONA": self.persona,
            "FAKE_DSH_JOURNAL": self.journal,
            "FAKE_DSH_WATCHDOG_SECS": _WATCHDOG_SECONDS,
        }
        if self.real_runtime is None:
            # The real runtime keeps its HOME: it unpacks itself into ~/.cache (hundreds of MB),
            # once per machine rather than once per test.
            exports["HOME"] = self.home
        program = self._fake_dsh
        lines = ["#!/bin/sh", "# dsh-conformance pytest fixture: the runtime for one test."]
        for name, value in exports.items():
            lines.append(f"{name}={_quote(value)}; export {name}")
        if self.real_runtime is not None:
            program = self.real_runtime
            lines.append(
                f"DEEPSEEK_BASE_URL=$(cat {_quote(self._url_file)}) || exit 2; export DEEPSEEK_BASE_URL"
            )
            # Keyless: any key does for the model server; a client that passes none gets a dummy.
            lines.append(': "${DEEPSEEK_API_KEY:=keyless-dummy}"; export DEEPSEEK_API_KEY')
        lines += [
            f'if [ -z "${{DSH_HOME-}}" ]; then DSH_HOME={_quote(self.dsh_home)}; export DSH_HOME; fi',
            f"if [ -f {_quote(self.scenario_path)} ]; then",
            f"  FAKE_DSH_SCENARIO={_quote(self.scenario_path)}; export FAKE_DSH_SCENARIO",
            "fi",
            f'exec {_quote(program)} "$@"',
            "",
        ]
        tmp = self.dsh_bin + ".tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700), "w") as out:
            out.write("\n".join(lines))
        os.replace(tmp, self.dsh_bin)

    def require(self, persona, what):
        """Skips the (pytest) test unless the world plays `persona` (a real runtime: is that
        release): `what` needs it."""
        if self.persona != persona:
            import pytest

            pytest.skip(f"{what} needs persona {persona} (this run: {self.persona})")

    # -- scripting -------------------------------------------------------------------------------

    def script(self, *turns, **members):
        """Each runtime process started from now on plays `turns` (then the default agent);
        `members` are further scenario members (`initialize_delay_ms=...`). Script before
        starting a client: on a real runtime this restarts the model server on a new port."""
        document = scenario_document(turns, **members)
        if self.real_runtime is not None:
            if members:
                raise ScenarioError(
                    f"scenario members {sorted(members)} are fake-dsh's only: the real runtime "
                    "plays the model server's replies"
                )
            self._start_model_server(model_script(turns))
        self._install_scenario(json.dumps(document, indent=1), "the scripted turns")

    def use_scenario(self, path):
        """Each runtime process started from now on plays the scenario file `path` (its `sdk`
        member), checked by fake-dsh first: a file it would refuse raises `ScenarioError`."""
        if self.real_runtime is not None:
            raise ScenarioError(f"{path}: a scenario file is fake-dsh's; the real runtime plays turns")
        try:
            with open(path, encoding="utf-8") as source:
                text = source.read()
        except OSError as error:
            raise ScenarioError(f"cannot read scenario {path}: {error}") from None
        self._install_scenario(text, path)

    def _install_scenario(self, text, named):
        """Writes the scenario beside the launcher once fake-dsh has read it without complaint."""
        named = str(named)
        candidate = self.scenario_path + ".check"
        with open(candidate, "w", encoding="utf-8") as out:
            out.write(text)
        check = subprocess.run(
            [self._fake_dsh, "--profile", "sdk"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": self.home,
                "DSH_HOME": self.dsh_home,
                "FAKE_DSH_PERSONA": self.persona,
                "FAKE_DSH_SCENARIO": candidate,
            },
            timeout=30,
        )
        if check.returncode != 0:
            os.unlink(candidate)
            said = check.stderr.decode("utf-8", "replace").strip().replace(candidate, named)
            raise ScenarioError(f"fake-dsh refuses {named}: {said}")
        os.replace(candidate, self.scenario_path)

    # -- the real runtime's model server ---------------------------------------------------------

    def _start_model_server(self, script):
        """Starts the kit's model server on 127.0.0.1 playing `script` (None: its default
        script, fake-dsh's default agent's conversation); it writes its URL to the file the
        launcher reads at each start."""
        self._stop_model_server()
        command = [self._conformance, "model-server", "--url-file", self._url_file]
        if script is not None:
            script_file = os.path.join(self.root, "model-script.json")
            with open(script_file, "w", encoding="utf-8") as out:
                json.dump(script, out)
            command += ["--script", script_file]
        if os.path.exists(self._url_file):
            os.unlink(self._url_file)
        server = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._model_server = server
        deadline = time.monotonic() + 30
        while not os.path.exists(self._url_file):
            if server.poll() is not None or time.monotonic() > deadline:
                self._stop_model_server()
                raise FixtureError("the model server did not start (dsh-conformance model-server)")
            time.sleep(0.005)

    def _stop_model_server(self):
        server, self._model_server = self._model_server, None
        if server is None:
            return
        if server.poll() is None:
            server.kill()
        server.wait()
        server.stderr.close()

    # -- teardown --------------------------------------------------------------------------------

    def close(self):
        """Ends the world: returns what the test left behind (empty when nothing), having killed
        every process still carrying the token."""
        self._stop_model_server()
        problems = self._leftover_processes()
        problems += self._canary_on_disk()
        return problems

    def _leftover_processes(self):
        if not os.path.isdir("/proc"):
            return []
        token = f"{TOKEN_ENV}={self.token}".encode()
        launcher = self.dsh_bin.encode()
        alive = _ours(token, launcher)
        deadline = time.monotonic() + _GRACE_SECONDS
        while alive and time.monotonic() < deadline:
            time.sleep(0.02)
            alive = _ours(token, launcher)
        problems = []
        for pid, command in alive.items():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            problems.append(
                f"process {pid} ({command}) started by this test's runtime outlived the test "
                f"(killed now): close your client (its context manager) before the test ends"
            )
        return problems

    def _canary_on_disk(self):
        forms = {
            self.api_key.encode(),
            base64.b64encode(self.api_key.encode()).rstrip(b"="),
            base64.urlsafe_b64encode(self.api_key.encode()).rstrip(b"="),
        }
        found = []
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                path = os.path.join(directory, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as source:
                    head = source.read(_SCAN_BYTES)
                if any(form in head for form in forms):
                    found.append(
                        f"the API key reached disk: {os.path.relpath(path, self.root)} under "
                        f"{self.root} holds the fixture's canary key"
                    )
        return found


def _ours(token, launcher):
    """pid -> command line of every live process whose environment holds `token` (the runtime
    and what it started) or whose arguments name `launcher` (the launcher before its `exec`).
    A process caught inside an `exec` shows an empty environment for a moment: the scan is
    repeated a few times, briefly, while one does."""
    for _ in range(_EXEC_RESCANS):
        found, unsure = _scan(token, launcher)
        if not unsure:
            break
        time.sleep(0.005)
    return found


def _just_started(pid):
    """Whether the process started less than a second ago (an exec may still be under way)."""
    with open(f"/proc/{pid}/stat", "rb") as source:
        fields = source.read().rsplit(b")", 1)[1].split()
    with open("/proc/uptime", "rb") as source:
        uptime = float(source.read().split()[0])
    return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK") < 1.0


def _scan(token, launcher):
    found = {}
    unsure = False
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as source:
                argv = source.read().split(b"\0")
            if launcher not in argv:
                with open(f"/proc/{entry}/environ", "rb") as source:
                    environ = source.read()
                if token not in environ.split(b"\0"):
                    # Empty: a kernel thread, a zombie, one that cleared it, or one inside exec.
                    unsure = unsure or (not environ and _just_started(entry))
                    continue
        except OSError:
            continue  # gone, or not ours to read
        found[int(entry)] = b" ".join(argv).decode("utf-8", "replace").strip() or "?"
    return found, unsure
