"""Progress of long steps: a tqdm bar on a terminal, a log line every ``PERIOD_S`` seconds elsewhere.

Piped to a file or run in CI, a bar would be noise and silence would look like a hang: there the
bar logs its status line through the ``openbench.progress`` logger instead (the command line
shows it at the default verbosity, ``--quiet`` hides it). ``enabled=False`` turns both off.
"""
from __future__ import annotations

import io
import logging
import sys
from typing import Any, Iterable, Optional

from tqdm.auto import tqdm

__all__ = ["PERIOD_S", "progress", "LoggedProgress", "stage"]

PERIOD_S = 10.0
logger = logging.getLogger("openbench.progress")


class LoggedProgress(tqdm):
    """A tqdm bar that logs its status line, at most every ``PERIOD_S`` seconds, instead of drawing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(file=io.StringIO(), mininterval=PERIOD_S, disable=False, leave=False, dynamic_ncols=False)
        self._logged: Optional[str] = None
        super().__init__(*args, **kwargs)

    def display(self, msg: Optional[str] = None, pos: Optional[int] = None) -> bool:
        if self.n == 0 or (getattr(self, "_closing", False) and self._logged is None):
            return True  # nothing done yet, or a step that ended before its first line was due
        line = self.format_meter(**self.format_dict)
        if line != self._logged:
            logger.info("%s", line)
            self._logged = line
        return True

    def close(self) -> None:
        self._closing = True
        super().close()


def progress(iterable: Optional[Iterable] = None, *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A progress bar over ``iterable`` (tqdm's keyword arguments: ``total``, ``desc``, ``unit``, …)."""
    if not enabled:
        return tqdm(iterable, disable=True, **kwargs)
    if sys.stderr.isatty():
        kwargs.setdefault("leave", False)
        return tqdm(iterable, **kwargs)
    return LoggedProgress(iterable, **kwargs)


def stage(message: str, *args: Any) -> None:
    """Announce a step of a long command on stderr (shown at the default verbosity, hidden by
    ``--quiet``): what runs now, so that a bar or a silence has a name."""
    logger.info(message, *args)
