"""Typed errors. The CLI prints them on one line without a traceback and exits with their ``exit_code``."""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator, Optional, Union

__all__ = ["OpenbenchError", "InputError", "UsageError", "ScoreError", "INTERRUPTED", "FLAGS", "option",
           "command_line_spelling"]

# what a Ctrl-C ends every command with (status 130): outputs are staged and swapped atomically
INTERRUPTED = "error: interrupted; nothing was left half-written (an output being written is as it was before)"


class OpenbenchError(Exception):
    """Base class of every error openbench raises on purpose; ``exit_code`` is the command's status."""

    exit_code = 1


class InputError(OpenbenchError):
    """A file or value the user gave does not have the expected form.

    The message names the file, the 1-based line (when there is one) and what was expected.
    """

    def __init__(self, message: str, path: Optional[Union[str, Path]] = None, line: Optional[int] = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = message
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}, line {line}"
            where += ": "
        super().__init__(where + message)


class UsageError(OpenbenchError):
    """Options that do not fit together (the command line's usage errors): exit status 2."""

    exit_code = 2


class ScoreError(OpenbenchError):
    """A model produced scores that cannot be ranked (NaN, wrong shape)."""


# -- naming an option in a message: the Python keyword or the command line's flag ---------------

# keyword of the Python API -> the flag of the command line where it is not ``--`` + the keyword
# with dashes (``filter_sets`` is ``--filter``, ``shard`` is ``--distributed --shard``)
FLAGS = {"filter_sets": "--filter", "shard": "--distributed", "predictions": "--predictions",
         "model": "--model", "negatives": "--eval-negatives"}

_COMMAND_LINE: ContextVar[bool] = ContextVar("openbench_command_line", default=False)


def option(keyword: str, value: object = None) -> str:
    """How the caller spells an option: ``relations=`` (with the value: ``protocol='sampled'``) from
    Python, ``--relations`` (``--protocol sampled``) while a command runs
    (:func:`command_line_spelling`)."""
    if _COMMAND_LINE.get():
        flag = FLAGS.get(keyword, "--" + keyword.replace("_", "-"))
        return flag if value is None else f"{flag} {value}"
    return f"{keyword}=" if value is None else f"{keyword}={value!r}"


@contextlib.contextmanager
def command_line_spelling() -> Iterator[None]:
    """Within it, :func:`option` names the command line's flags (the CLI runs every command so)."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)
