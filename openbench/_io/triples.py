"""Plain triples files: one ``head, relation, tail`` per line, the format PyKEEN, LibKGE and most
users keep their own graphs in.

Tab- or comma-separated (told from the first line: a tab makes it TSV, else a comma CSV, with
double quotes around fields that hold a comma), with or without a header (a first line naming the
columns as one of :data:`HEADERS` does, any case). A node-type file beside it (``--nodes``) is
``id, type`` read the same way. Every problem is an :class:`~openbench.errors.InputError` naming
the file and line.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import polars as pl

from openbench._io.inputs import iter_lines, read_table
from openbench.errors import InputError

__all__ = ["HEADERS", "NODE_HEADERS", "Layout", "sniff", "is_plain_triples", "read_triples", "read_node_types",
           "read_dated_triples"]

# first lines read as a header: the columns' names, in order (compared in lower case)
HEADERS = (("head", "relation", "tail"), ("h", "r", "t"), ("subject", "predicate", "object"),
           ("source", "relation", "target"), ("head", "rel", "tail"), ("from", "relation", "to"),
           ("src", "rel", "dst"), ("head_id", "relation", "tail_id"), ("x", "relation", "y"))
NODE_HEADERS = (("id", "type"), ("id", "node_type"), ("node", "type"), ("entity", "type"), ("name", "type"))


@dataclass(frozen=True)
class Layout:
    """How a plain file is laid out: its separator, whether its first line is a header, the number
    of fields of that first line and the line's number."""

    separator: str
    header: bool
    fields: int
    first_line: int

    @property
    def quote_char(self) -> Optional[str]:
        return '"' if self.separator == "," else None

    @property
    def described(self) -> str:
        return "tab-separated" if self.separator == "\t" else "comma-separated"


def _fields(line: str, separator: str) -> List[str]:
    if separator == ",":
        return next(csv.reader([line]), [])
    return line.split(separator)


def sniff(path, headers: Tuple[Tuple[str, ...], ...] = HEADERS) -> Optional[Layout]:
    """The layout of ``path`` from its first non-empty line; None for a file without one."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        separator = "\t" if "\t" in line else "," if "," in line else "\t"
        fields = [field.strip().lower() for field in _fields(line, separator)]
        return Layout(separator, tuple(fields) in headers, len(fields), number)
    return None


def is_plain_triples(path) -> bool:
    """Whether ``path`` holds plain triples (three fields a line), not OpenBioLink's five-column edges."""
    layout = sniff(path)
    return layout is not None and layout.fields == 3


def _read(path: Path, layout: Layout, names: Tuple[str, ...], what: str) -> pl.DataFrame:
    if layout.header:
        header = _fields(next(line for number, line in iter_lines(path) if number == layout.first_line),
                         layout.separator)
        selection = {field.strip(): name for field, name in zip(header, names)}
        return read_table(path, selection, separator=layout.separator, header=True, comment_prefixes=(),
                          quote_char=layout.quote_char, required=names)
    if layout.fields != len(names):
        raise InputError(f"expected {len(names)} {layout.described} columns ({what}), found {layout.fields}", path,
                         layout.first_line)
    return read_table(path, dict(enumerate(names)), separator=layout.separator, header=False,
                      widths=(len(names),), comment_prefixes=(), quote_char=layout.quote_char, required=names)


def read_triples(path) -> pl.DataFrame:
    """The triples of ``path`` as string columns h, r, t, one row a line (repeats kept)."""
    path = Path(path)
    layout = sniff(path)
    if layout is None:
        raise InputError("the file holds no triples; expected head, relation, tail lines (tab- or comma-separated)",
                         path)
    frame = _read(path, layout, ("h", "r", "t"), "head, relation, tail")
    if not frame.height:
        raise InputError("the file holds a header and no triples; expected head, relation, tail lines", path)
    return frame


def read_node_types(path) -> pl.DataFrame:
    """``id, type`` rows of a node-type file (any type names) as string columns id, node_type."""
    path = Path(path)
    layout = sniff(path, NODE_HEADERS)
    if layout is None:
        raise InputError("the node file is empty; expected id, type lines (tab- or comma-separated)", path)
    return _read(path, layout, ("id", "node_type"), "id, type")


def read_dated_triples(path, date_column: str = "date") -> Tuple[pl.DataFrame, int]:
    """(string columns h, r, t, date (empty: null), the 1-based line of the first data row) of a
    plain triples file with a date: a header naming head, relation, tail (as :data:`HEADERS`) and
    ``date_column``, or headerless lines of four fields (the fourth the date)."""
    path = Path(path)
    first = next(((number, line) for number, line in iter_lines(path) if line.strip()), None)
    if first is None:
        raise InputError("the file holds no triples; expected head, relation, tail, date lines", path)
    number, line = first
    separator = "\t" if "\t" in line else ","
    quote = '"' if separator == "," else None
    fields = [field.strip() for field in _fields(line, separator)]
    lowered = [field.lower() for field in fields]
    header = next((names for names in HEADERS if all(name in lowered for name in names)), None)
    if header is not None:
        if date_column.lower() not in lowered:
            raise InputError(f"no {date_column!r} column in the header ({', '.join(fields)}); --date-column names "
                             "the column holding each edge's date", path, number)
        selection = {fields[lowered.index(name)]: short for name, short in zip(header, ("h", "r", "t"))}
        selection[fields[lowered.index(date_column.lower())]] = "date"
        frame = read_table(path, selection, separator=separator, header=True, comment_prefixes=(), quote_char=quote,
                           required=("h", "r", "t"))
        return frame, number + 1
    if len(fields) != 4:
        raise InputError(f"expected a header naming head, relation, tail and {date_column!r}, or four "
                         f"{'tab' if separator == chr(9) else 'comma'}-separated fields (head, relation, tail, date); "
                         f"found {len(fields)}", path, number)
    frame = read_table(path, {0: "h", 1: "r", 2: "t", 3: "date"}, separator=separator, header=False,
                       widths=(4,), comment_prefixes=(), quote_char=quote, required=("h", "r", "t"))
    return frame, number
