"""Reading delimited source files into string-typed polars frames, with errors that name the line.

Sources come with a header line (selected by column name, case- and quote-insensitive), or
without one (selected by position, with the expected width). Comment lines are recognised by
their first character (``#`` or ``!`` per source), never by a hard-coded count of lines to skip.
Reading is polars' fast path; only when it finds a problem is the file scanned line by line to
name the first bad line.
"""
from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence, Tuple, Union

import polars as pl

from openbench.errors import InputError

Selection = Union[Dict[str, str], Dict[int, str]]


def open_text(path: Path) -> io.TextIOBase:
    """A text stream over a plain, gzip or single-member zip file."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
    if path.suffix == ".zip":
        archive = zipfile.ZipFile(path)
        return io.TextIOWrapper(archive.open(archive.namelist()[0]), encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _source_bytes(path: Path):
    """What polars should read: the path itself, or the decompressed bytes of a zip member."""
    if path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if not n.endswith("/")]
                if len(names) != 1:
                    raise InputError(f"expected one file in the zip archive, found {len(names)}", path)
                return archive.read(names[0])
        except zipfile.BadZipFile as error:
            raise InputError(f"unreadable zip archive ({error})", path) from error
    return path


def iter_lines(path: Path, comment_prefixes: Tuple[str, ...]) -> Iterator[Tuple[int, str]]:
    """(1-based line number, line) of the non-comment, non-empty lines."""
    with open_text(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if line.strip() and not line.startswith(comment_prefixes):
                yield number, line


def read_table(path, selection: Selection, *, separator: str = "\t", header: bool = True,
               header_prefix: Optional[str] = None, width: Optional[int] = None,
               comment_prefixes: Sequence[str] = ("#",), quote_char: Optional[str] = None,
               required: Sequence[str] = ()) -> pl.DataFrame:
    """Selected columns of a delimited file as string columns named by ``selection``'s values.

    :param selection: {header name: new name} when ``header``, else {0-based position: new name}.
    :param header_prefix: the header is the first line starting with this (for headers that
        look like comments, e.g. ``#DatabaseID``); default: the first non-comment line.
    :param width: headerless files: the number of fields every line has at least.
    :param required: new names of columns that must not be empty.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("source file does not exist", path)
    comments = tuple(comment_prefixes)
    header_line = _find_header(path, comments, header_prefix) if header else None
    skip = header_line[0] if header_line else _leading_lines(path, comments)
    expected = len(header_line[1].split(separator)) if header_line else width
    try:
        frame = pl.read_csv(_source_bytes(path), separator=separator, has_header=False, quote_char=quote_char,
                            infer_schema=False, skip_rows=skip, truncate_ragged_lines=False)
    except pl.exceptions.NoDataError:
        frame = pl.DataFrame()
    except (pl.exceptions.ComputeError, OSError, EOFError) as error:
        _raise_first_bad_line(path, comments, separator, skip, expected, exact=header_line is not None)
        raise InputError(f"unreadable as {_describe(separator)}-separated text ({error})", path) from error
    if frame.width:
        first = frame.columns[0]
        frame = frame.filter(~pl.all_horizontal(pl.all().is_null())
                             & ~pl.col(first).fill_null("").str.starts_with(comments[0] if comments else "\0"))
    if frame.height and expected is not None and (frame.width != expected if header_line else frame.width < expected):
        _raise_first_bad_line(path, comments, separator, skip, expected, exact=header_line is not None)
        raise InputError(f"expected {expected} {_describe(separator)}-separated columns, found {frame.width}", path)
    positions = _positions(path, selection, header_line, separator, quote_char)
    if frame.height == 0:
        return pl.DataFrame({name: [] for name in selection.values()}, schema={n: pl.String for n in selection.values()})
    if max(positions) >= frame.width:
        raise InputError(f"expected at least {max(positions) + 1} columns, found {frame.width}", path)
    columns = frame.columns
    result = frame.select([pl.col(columns[p]).alias(name) for p, name in zip(positions, selection.values())])
    if quote_char:
        result = result.with_columns(pl.all().str.strip_chars(quote_char))
    missing = result.select(pl.any_horizontal([pl.col(c).is_null() for c in required]).arg_true()).to_series()
    if len(missing):
        _raise_first_bad_line(path, comments, separator, skip, expected, exact=header_line is not None)
        row = int(missing[0])
        empty = [c for c in required if result[c][row] is None]
        raise InputError(f"column(s) {', '.join(empty)} empty or missing; expected a value", path,
                         _line_of_data_row(path, comments, skip, row))
    return result


def _find_header(path: Path, comments, header_prefix: Optional[str]):
    for number, line in iter_lines(path, () if header_prefix else comments):
        if header_prefix is None or line.startswith(header_prefix):
            return number, line
    raise InputError("no header line found" + (f" starting with {header_prefix!r}" if header_prefix else ""), path)


def _leading_lines(path: Path, comments) -> int:
    """How many raw lines precede the first data line (comments and blank lines)."""
    for number, _ in iter_lines(path, comments):
        return number - 1
    return 0


def _describe(separator: str) -> str:
    return {"\t": "tab", " ": "space", ",": "comma", ";": "semicolon"}.get(separator, repr(separator))


def _positions(path: Path, selection: Selection, header_line, separator: str, quote_char) -> list:
    if not header_line:
        return list(selection.keys())
    number, line = header_line
    names = [name.strip().strip(quote_char or "").lower() for name in line.split(separator)]
    positions = []
    for wanted in selection:
        key = str(wanted).lower()
        if key not in names:
            raise InputError(f"header has no column {wanted!r}; found {', '.join(names)}", path, number)
        positions.append(names.index(key))
    return positions


def _raise_first_bad_line(path: Path, comments, separator: str, skip: int, expected: Optional[int],
                          exact: bool) -> None:
    for number, line in iter_lines(path, comments):
        if number <= skip:
            continue
        fields = line.split(separator)
        if expected is None:
            expected = len(fields)
        elif len(fields) != expected if exact else len(fields) < expected:
            wording = f"expected {expected}" if exact else f"expected at least {expected}"
            raise InputError(f"{wording} {_describe(separator)}-separated columns, found {len(fields)}", path, number)


def _line_of_data_row(path: Path, comments, skip: int, row: int) -> int:
    seen = -1
    for number, _ in iter_lines(path, comments):
        if number <= skip:
            continue
        seen += 1
        if seen == row:
            return number
    return row + 1
