"""The console scripts' entry points: the command line, imported inside the interrupt handler.

``openbench.cli`` imports click, the registries and their modules; a Ctrl-C while that happens (the
first second of every command) would otherwise end with a traceback, and one during click's own
parsing with a bare ``Aborted!``. Here both end with one line on stderr and status 130.
"""
from __future__ import annotations

import signal
import sys
import time

STARTED = time.perf_counter()  # the command's start, for "the whole command took" lines (cli.common.command_seconds)


def _force_exit() -> None:
    """The last resort: every output is staged and swapped atomically, so ending now leaves the old
    outputs as they were (the next run removes the staging leftovers)."""
    import os

    message = globals().get("INTERRUPTED", "error: interrupted")  # a Ctrl-C may come before the import below
    os.write(2, (message + "\n").encode())
    os._exit(130)


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (a module's top level, perhaps called from a C
    extension's initialisation)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_interrupt(signum, frame) -> None:
    """A Ctrl-C raises KeyboardInterrupt, as Python's own handler does; a second one, or
    :data:`GRACE_S` without the command ending, ends it at once. So does one during an import:
    an exception raised into a C++ extension's initialisation (torch's, through pybind11)
    aborts the process (SIGABRT, a C++ message) instead of unwinding."""
    interrupted = globals().get("_interrupted")
    if interrupted is None or interrupted.is_set() or _importing(frame):
        _force_exit()
    interrupted.set()
    import threading

    timer = threading.Timer(GRACE_S, _force_exit)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def _install() -> None:
    """The interrupt handler, on the main thread (elsewhere ``signal.signal`` refuses), unless
    someone set their own."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _on_interrupt)
        except ValueError:  # not the main thread
            return
        sys.unraisablehook = _on_unraisable


def _on_unraisable(info) -> None:
    """A KeyboardInterrupt raised where it cannot propagate (a finaliser, a generator closed by the
    garbage collector) would be printed as "Exception ignored" with a traceback and lost: the
    command ends now instead, as a second Ctrl-C ends it."""
    if info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt):
        _force_exit()
    sys.__unraisablehook__(info)


# first, before anything else is imported: only signal and sys (loaded with the interpreter) precede
# it, so from here on every instant of the command is under the handler
_install()

import os  # noqa: E402
import threading  # noqa: E402

# Intel MKL (torch's CPU BLAS on x86) chooses its code path by the operands' memory alignment, so
# the same training can round differently from one process to the next (seen: the demo's DistMult
# arrays differed by 2e-5 between two runs, depending on what the process had allocated before).
# Its reproducible mode fixes the path; STRICT also makes it independent of the operands'
# alignment, and a fixed thread count (MKL_DYNAMIC off: MKL may otherwise use fewer threads when the
# machine is busy) keeps the work's split the same from run to run (fast float32 ranks differed in
# 2 of 26 runs under load: benchmarks/stress_fast_ranks.py). MKL reads the settings once, so they
# are set before torch loads. Measured on bench_evaluator: no cost beyond the run-to-run noise.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
os.environ.setdefault("MKL_DYNAMIC", "FALSE")

__all__ = ["main", "metaeval_main", "INTERRUPTED", "GRACE_S"]

GRACE_S = 10.0  # after a Ctrl-C, the command ends within this even if a library swallowed the interrupt
_interrupted = threading.Event()

from openbench.errors import INTERRUPTED  # noqa: E402


RUNNING = False  # True once _run starts a command: command_seconds() measures from STARTED only then


def _run(load) -> None:
    global RUNNING
    RUNNING = True
    _install()
    try:
        import click

        command = load()
        try:
            status = command.main(standalone_mode=False)
        except click.exceptions.Abort:
            raise KeyboardInterrupt from None
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except click.exceptions.Exit as error:
            sys.exit(error.exit_code)
        sys.exit(status if isinstance(status, int) else 0)
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED + "\n")
        sys.exit(130)


def main() -> None:
    """``openbench``."""
    def load():
        from openbench.cli import main as command
        return command

    _run(load)


def metaeval_main() -> None:
    """``meta-eval``: ``openbench text metaeval`` under its original name."""
    def load():
        from openbench.cli import metaeval_command, metaeval_logging
        metaeval_logging()
        return metaeval_command

    _run(load)
