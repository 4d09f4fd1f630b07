"""Typed errors. The CLI prints them without a traceback and exits non-zero."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union


class OpenbenchError(Exception):
    """Base class of every error openbench raises on purpose."""


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


class ScoreError(OpenbenchError):
    """A model produced scores that cannot be ranked (NaN, wrong shape)."""
