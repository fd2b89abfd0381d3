#!/usr/bin/env python3
"""A minimal client of `dsh --profile headless TASK` in Python (standard library only), as an agent
framework drives the one-shot surface (docs/surface-headless.md): it runs the task, reads stdout
and stderr at the same time (either may carry megabytes: reasoning streams to stderr), kills a
runtime silent on both for DSH_SDK_TIMEOUT seconds, and takes exit 0 as the only success. The answer is stdout without its final newline; on failure the error
is stderr's last `dsh: <code>: <message>` line.

The driver contract of the kit's client corpus (docs/sdk-clients.md):
    DSH_HEADLESS_COMMAND='["fake-dsh", "--profile", "headless"]' dsh_headless_client.py TASK
prints one JSON line {"ok": bool, "text": the answer, "error": the error line or null} and exits
0; 2 when the runtime cannot be started. The environment (the API key with it) passes to the
runtime; nothing secret goes in its argv.
"""

import json
import os
import subprocess
import sys
import threading
import time

# How long the runtime may stay silent (nothing on either pipe) before it is killed.
TIMEOUT_SECONDS = float(os.environ.get("DSH_SDK_TIMEOUT", "60"))


def drain(pipe, chunks, activity):
    """Reads `pipe` to its end into `chunks`, stamping `activity[0]` at each read."""
    for chunk in iter(lambda: pipe.read1(65536), b""):
        chunks.append(chunk)
        activity[0] = time.monotonic()


def communicate(process):
    """Both pipes read as they come (reading one to its end first would block the runtime on the
    other one's full pipe); the runtime killed after TIMEOUT_SECONDS of silence. Returns stdout,
    stderr and whether it went silent."""
    out, err, activity = [], [], [time.monotonic()]
    readers = [
        threading.Thread(target=drain, args=(pipe, chunks, activity), daemon=True)
        for pipe, chunks in ((process.stdout, out), (process.stderr, err))
    ]
    for reader in readers:
        reader.start()
    silent = False
    while process.poll() is None:
        if time.monotonic() - activity[0] > TIMEOUT_SECONDS:
            silent = True
            process.kill()
            break
        time.sleep(0.05)
    process.wait()
    for reader in readers:
        reader.join(TIMEOUT_SECONDS)
    return b"".join(out), b"".join(err), silent


def run(argv, task):
    process = subprocess.Popen(
        argv + [task], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    stdout, stderr, silent = communicate(process)
    if silent:
        return {"ok": False, "text": "", "error": f"the runtime went silent for {TIMEOUT_SECONDS:g} s"}
    ok = process.returncode == 0
    text = stdout.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-1]
    errors = [
        line for line in stderr.decode("utf-8", "replace").splitlines() if line.startswith("dsh: ")
    ]
    error = None if ok else (errors[-1] if errors else f"exit {process.returncode}")
    return {"ok": ok, "text": text if ok else "", "error": error}


def main():
    try:
        argv = json.loads(os.environ["DSH_HEADLESS_COMMAND"])
    except (KeyError, ValueError) as error:
        print(f"dsh_headless_client: DSH_HEADLESS_COMMAND must be a JSON array: {error}",
              file=sys.stderr)
        return 2
    try:
        report = run(argv, " ".join(sys.argv[1:]))
    except OSError as error:
        print(f"dsh_headless_client: cannot start the runtime: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
