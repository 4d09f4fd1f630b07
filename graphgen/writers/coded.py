"""Writing delimited text from dictionary-coded columns, in a given row order.

The big edge tables hold ids as small integer codes into a dictionary of distinct strings and
are written in sorted order. Moving 46 million rows into that order and then turning codes back
into text costs two full passes; here one pass does both: each output line is assembled from
the dictionary entries its codes point at. Two implementations of one contract:

* a small C loop (``_rows.c``, built at install time, loaded with ctypes) that copies the
  pre-quoted entries, chunks of rows formatted on a thread per core while the main thread writes
  them (past the page cache where the filesystem allows: :class:`openbench._io.SequentialWriter`);
* a polars fallback (gather the strings, ``write_csv``) used when the loop is not built, or with
  ``OPENBENCH_WRITER=polars`` (tests compare the two byte for byte).

Quoting follows polars' ``quote_style="necessary"``: an entry holding the separator, a double
quote, CR or LF, and the empty string, are quoted (quotes doubled); missing values (None) are
written as empty fields.
"""
from __future__ import annotations

import ctypes
import logging
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from openbench._io import SequentialWriter
from openbench._native import OptionalLibrary

__all__ = ["CHUNK_BYTES", "ROWS_LIBRARY", "writer_name", "quote_entry", "write_coded", "write_coded_parts"]

logger = logging.getLogger(__name__)

CHUNK_BYTES = 8 << 20        # formatted bytes per chunk, about
Column = Tuple[np.ndarray, Sequence[Optional[str]]]  # (codes (n,) uint32, dictionary)


def _configure(library) -> None:
    function = library.openbench_format_rows
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p,
                         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char, ctypes.c_void_p]
    function.restype = ctypes.c_int64


# OPENBENCH_WRITER=polars forces the polars fallback
ROWS_LIBRARY = OptionalLibrary(Path(__file__).resolve().parent, "_rows", _configure, "OPENBENCH_WRITER", "polars")


def writer_name() -> str:
    """Which implementation :func:`write_coded` uses: ``"c"`` or ``"polars"``."""
    return "c" if ROWS_LIBRARY.get() is not None else "polars"


def quote_entry(value: Optional[str], separator: str) -> str:
    """``value`` as one field of a ``separator``-delimited line (polars' "necessary" quoting)."""
    if value is None:
        return ""
    if value == "" or separator in value or '"' in value or "\n" in value or "\r" in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def write_coded(path, columns: Sequence[Column], order: Optional[np.ndarray] = None, separator: str = "\t",
                threads: Optional[int] = None) -> int:
    """Write one line per row of ``order`` (default: every row in code order); returns the row count.

    :param columns: per output column, (codes, dictionary): ``codes`` a (n,) integer array of
        indices into ``dictionary`` (a sequence of str or None); all columns have the same n.
    :param order: (m,) indices of the rows to write, in writing order.
    """
    return write_coded_parts([(path, order)], columns, separator, threads)[0]


def write_coded_parts(parts: Sequence[Tuple[object, Optional[np.ndarray]]], columns: Sequence[Column],
                      separator: str = "\t", threads: Optional[int] = None) -> List[int]:
    """:func:`write_coded` for several files from the same columns (one per edge type, say): the
    columns are checked and their dictionaries encoded once. ``parts``: (path, order) per file;
    returns the row count of each."""
    if len(separator.encode("utf-8")) != 1:
        raise ValueError(f"the separator must be one ASCII character, not {separator!r}")
    if not columns:
        raise ValueError("no columns to write")
    rows = len(columns[0][0])
    codes = [np.ascontiguousarray(c, dtype=np.uint32) for c, _ in columns]
    if any(len(c) != rows for c in codes):
        raise ValueError("columns differ in length")
    for (column_codes, dictionary), number in zip(zip(codes, (d for _, d in columns)), range(len(columns))):
        if rows and len(column_codes) and int(column_codes.max()) >= len(dictionary):
            raise ValueError(f"column {number}: a code exceeds its dictionary of {len(dictionary)} entries")
    orders = [None if order is None else np.ascontiguousarray(order, dtype=np.uint32) for _, order in parts]
    if any(order is not None and len(order) and int(order.max()) >= rows for order in orders):
        raise ValueError("the row order points past the last row")
    dictionaries = [d for _, d in columns]
    if ROWS_LIBRARY.get() is None:
        lists = [list(d) for d in dictionaries]
        return [_write_polars(Path(path), codes, lists, order, separator) for (path, _), order in zip(parts, orders)]
    formatter = _Formatter(codes, dictionaries, separator)
    return [formatter.write(Path(path), order, threads or os.cpu_count() or 1)
            for (path, _), order in zip(parts, orders)]


def _write_polars(path: Path, codes, dictionaries, order, separator: str) -> int:
    picked = [c if order is None else c[order] for c in codes]
    # categorical: the gather moves 4-byte codes, and each distinct string is stored once
    frame = pl.DataFrame({f"c{i}": pl.Series(d, dtype=pl.String).cast(pl.Categorical).gather(p)
                          for i, (d, p) in enumerate(zip(dictionaries, picked))})
    frame.write_csv(path, include_header=False, separator=separator, quote_style="necessary",
                    line_terminator="\n", null_value="")
    return frame.height


def _encoded(dictionary: List[Optional[str]], separator: str):
    """(blob, offsets (k + 1,) int64, longest entry in bytes) of the quoted entries."""
    entries = [quote_entry(value, separator).encode("utf-8") for value in dictionary]
    offsets = np.zeros(len(entries) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in entries], out=offsets[1:])
    return b"".join(entries), offsets, max((len(e) for e in entries), default=0)


class _Formatter:
    """The C loop's view of the columns: encoded dictionaries and pointer arrays, made once."""

    def __init__(self, codes, dictionaries, separator: str):
        shared: Dict[int, tuple] = {}  # a dictionary that several columns use (node ids) is encoded once
        for dictionary in dictionaries:
            if id(dictionary) not in shared:
                blob, offsets, longest = _encoded(dictionary, separator)
                shared[id(dictionary)] = (ctypes.create_string_buffer(blob, max(1, len(blob))), offsets, longest)
        self._encoded = [shared[id(dictionary)] for dictionary in dictionaries]  # keeps the buffers alive
        self._codes, self._separator = codes, separator.encode("utf-8")
        pointer_array = ctypes.c_void_p * len(codes)
        self._code_pointers = pointer_array(*(c.ctypes.data for c in codes))
        self._offset_pointers = pointer_array(*(offsets.ctypes.data for _, offsets, _ in self._encoded))
        self._blob_pointers = pointer_array(*(ctypes.addressof(blob) for blob, _, _ in self._encoded))
        self._longest_row = sum(longest for _, _, longest in self._encoded) + len(codes)

    def write(self, path: Path, order: Optional[np.ndarray], threads: int) -> int:
        total = len(self._codes[0]) if order is None else len(order)
        chunk_rows = max(1, CHUNK_BYTES // self._longest_row)
        order_pointer = order.ctypes.data if order is not None else None
        function = ROWS_LIBRARY.get().openbench_format_rows

        def format_chunk(begin: int) -> memoryview:
            end = min(begin + chunk_rows, total)
            buffer = np.empty((end - begin) * self._longest_row, dtype=np.uint8)
            written = function(order_pointer, begin, end, len(self._codes), self._code_pointers,
                               self._offset_pointers, self._blob_pointers, self._separator, buffer.ctypes.data)
            return memoryview(buffer)[:written]

        with SequentialWriter(path) as handle, ThreadPoolExecutor(max(1, threads)) as pool:
            pending = deque()
            for begin in range(0, total, chunk_rows):  # keep a few chunks in flight; write them in order
                pending.append(pool.submit(format_chunk, begin))
                if len(pending) > 2 * threads:
                    handle.write(pending.popleft().result())
            while pending:
                handle.write(pending.popleft().result())
        return total
