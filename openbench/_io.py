"""Atomic writes: a file or a whole folder is filled under a temporary name beside it, then renamed."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Union


@contextmanager
def atomic_path(path: Union[str, Path]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: Union[str, Path], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def line_of_row(path: Union[str, Path], row: int) -> int:
    """1-based line number of the ``row``-th (0-based) non-empty line of a text file."""
    seen = -1
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    return number
    return row + 1


def replace_folder(final: Path, fill: Callable[[Path], None]) -> Path:
    """Run ``fill`` on a temporary folder beside ``final``, then rename it onto ``final`` (replacing
    a previous one); on failure nothing is left behind."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill(staging)
        if final.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
            final.rename(retired / final.name)
            staging.rename(final)
            shutil.rmtree(retired)
        else:
            staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return final
