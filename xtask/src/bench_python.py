"""`cargo xtask bench`'s Python fixture row: pairs of (fake-dsh started bare, fake-dsh started
through a `FakeDsh` world: create, the launcher, close with its /proc and canary checks), each a
spawn, `initialize` and its response, stdin closed and the exit waited for. Prints one JSON line:
the medians in milliseconds and the median of the pairs' differences.
argv: fake-dsh's path, a scratch directory, the number of pairs."""

import json
import os
import subprocess
import sys
import time

from dsh_conformance.fixture import FakeDsh

INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"cwd":"."}}\n'


def one_run(program, cwd, env):
    runtime = subprocess.Popen(
        [program, "--profile", "sdk"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        cwd=cwd, env=env, text=True,
    )
    runtime.stdin.write(INITIALIZE)
    runtime.stdin.flush()
    line = runtime.stdout.readline()
    runtime.stdin.close()
    runtime.wait()
    runtime.stdout.close()
    if '"id":1' not in line:
        raise SystemExit(f"not initialize's response: {line!r}")


def bare(fake_dsh, root):
    os.makedirs(os.path.join(root, "dsh-home"))
    env = {"PATH": os.environ["PATH"], "DSH_HOME": os.path.join(root, "dsh-home"), "HOME": root}
    started = time.perf_counter()
    one_run(fake_dsh, root, env)
    return time.perf_counter() - started


def through_fixture(fake_dsh, root):
    started = time.perf_counter()
    world = FakeDsh.create(root, fake_dsh=fake_dsh)
    one_run(world.dsh_bin, world.project, {"PATH": os.environ["PATH"]})
    problems = world.close()
    elapsed = time.perf_counter() - started
    if problems:
        raise SystemExit(f"the fixture found: {problems}")
    return elapsed


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    fake_dsh, scratch, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pairs = [
        (bare(fake_dsh, os.path.join(scratch, f"bare-{i}")),
         through_fixture(fake_dsh, os.path.join(scratch, f"world-{i}")))
        for i in range(rounds)
    ]
    print(json.dumps({
        "bare_ms": median([b for b, _ in pairs]) * 1000,
        "fixture_ms": median([f for _, f in pairs]) * 1000,
        "overhead_ms": median([f - b for b, f in pairs]) * 1000,
    }))


main()
