"""The console scripts' entry points: the command line, imported inside the interrupt handler.

``openbench.cli`` imports click, the registries and their modules; a Ctrl-C while that happens (the
first second of every command) would otherwise end with a traceback, and one during click's own
parsing with a bare ``Aborted!``. Here both end with one line on stderr and status 130.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

from openbench.errors import INTERRUPTED

__all__ = ["main", "metaeval_main", "INTERRUPTED", "GRACE_S"]

GRACE_S = 10.0  # after a Ctrl-C, the command ends within this even if a library swallowed the interrupt
_interrupted = threading.Event()


def _force_exit() -> None:
    """The last resort: every output is staged and swapped atomically, so ending now leaves the old
    outputs as they were (the next run removes the staging leftovers)."""
    os.write(2, (INTERRUPTED + "\n").encode())
    os._exit(130)


def _on_interrupt(signum, frame) -> None:
    """A Ctrl-C raises KeyboardInterrupt, as Python's own handler does; a second one, or
    :data:`GRACE_S` without the command ending, ends it at once."""
    if _interrupted.is_set():
        _force_exit()
    _interrupted.set()
    timer = threading.Timer(GRACE_S, _force_exit)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def _run(load) -> None:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)
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
