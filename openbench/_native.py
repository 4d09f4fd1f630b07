"""Loading the optional plain-C helpers (built at install time, no Python headers) with ctypes."""
from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import Callable, Optional

logger = logging.getLogger(__name__)


def load_library(folder: Path, stem: str, configure: Callable[[ctypes.CDLL], None]) -> Optional[ctypes.CDLL]:
    """The first loadable ``<stem>*.so``/``.pyd`` in ``folder`` after ``configure`` set its
    signatures, or None when none is built (callers then use their pure-Python path)."""
    for candidate in sorted(folder.glob(f"{stem}*.so")) + sorted(folder.glob(f"{stem}*.pyd")):
        try:
            library = ctypes.CDLL(str(candidate))
        except OSError as error:  # pragma: no cover - a broken build
            logger.debug("cannot load %s: %s", candidate, error)
            continue
        configure(library)
        return library
    logger.debug("%s is not built in %s", stem, folder)
    return None
