"""Loading the optional plain-C helpers (built at install time, no Python headers) with ctypes."""
from __future__ import annotations

import ctypes
import os
import logging
from pathlib import Path
from typing import Callable, Optional

__all__ = ["load_library", "OptionalLibrary", "StaleLibrary"]

logger = logging.getLogger(__name__)


class StaleLibrary(RuntimeError):
    """A built helper whose argument structs differ from this code's (built from other sources):
    used as no helper at all, with a warning, until it is rebuilt."""


def load_library(folder: Path, stem: str, configure: Callable[[ctypes.CDLL], None]) -> Optional[ctypes.CDLL]:
    """The first loadable ``<stem>*.so``/``.pyd`` in ``folder`` after ``configure`` set its
    signatures, or None when none is built (callers then use their pure-Python path)."""
    for candidate in sorted(folder.glob(f"{stem}*.so")) + sorted(folder.glob(f"{stem}*.pyd")):
        try:
            library = ctypes.CDLL(str(candidate))
        except OSError as error:  # pragma: no cover - a broken build
            logger.debug("cannot load %s: %s", candidate, error)
            continue
        try:
            configure(library)
        except (AttributeError, StaleLibrary) as error:  # built from other sources: rebuild with pip install -e .
            logger.warning("%s is stale (%s); using the pure-Python path until it is rebuilt", candidate, error)
            continue
        return library
    logger.debug("%s is not built in %s", stem, folder)
    return None


class OptionalLibrary:
    """A C helper loaded on first use: ``get()`` is the library, or None when it is not built or
    when the environment variable ``switch`` equals ``fallback`` (forcing the pure-Python path)."""

    def __init__(self, folder: Path, stem: str, configure: Callable[[ctypes.CDLL], None], switch: str,
                 fallback: str):
        self.folder, self.stem, self.configure = folder, stem, configure
        self.switch, self.fallback = switch, fallback
        self.reset()

    def reset(self) -> None:
        """Forget the loaded state: the next ``get()`` looks at the environment again (tests)."""
        self._loaded, self._library = False, None

    def get(self) -> Optional[ctypes.CDLL]:
        if not self._loaded:
            self._loaded = True
            if os.environ.get(self.switch, "").lower() != self.fallback:
                self._library = load_library(self.folder, self.stem, self.configure)
        return self._library
