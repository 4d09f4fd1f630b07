"""Run a command as a child and report its own peak memory.

Linux carries a process's memory high-water mark across exec from the memory it was forked with:
a command forked from a benchmark that has already held gigabytes (in-process runs, a peer's
tables) reports the benchmark's peak as its own. A small launcher process forks the command
instead, so the peak read with wait4 is the command's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Tuple

__all__ = ["run_measured"]

_LAUNCHER = ("import json, os, sys\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    os.execvp(sys.argv[2], sys.argv[2:])\n"
             "_, status, usage = os.wait4(pid, 0)\n"
             "open(sys.argv[1], 'w').write(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_maxrss]))\n")


def run_measured(command: list, env: Optional[dict] = None, capture: bool = True) -> Tuple[float, float, str, str, int]:
    """(wall seconds, the command's own peak RSS in GB, stdout, stderr, exit status) of ``command``
    (stdout and stderr pass through when ``capture`` is false)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "usage.json"
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(report), *map(str, command)],
                              capture_output=capture, text=True, env=env, check=False)
        seconds = time.perf_counter() - started
        status, peak_kb = json.loads(report.read_text()) if report.is_file() else (done.returncode or -1, 0)
    return seconds, peak_kb / 1024 ** 2, done.stdout or "", done.stderr or "", status
