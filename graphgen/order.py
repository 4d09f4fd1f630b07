"""The output order of an edge table: rows sorted by (rank of id1, edge type, rank of id2).

Node ranks are positions in the node table sorted by (node type, id), so this is OpenBioLink's
order (node1 type, id1, edge type, node2 type, id2). Two implementations of one contract:

* a stable radix sort in C (``_order.c``, built at install time, loaded with ctypes) over one
  packed 64-bit key: the top 8 bits split the rows into 256 buckets, which threads then sort;
* numpy and polars (a stable ``arg_sort`` of the same key), used when the C sort is not built or
  with ``OPENBENCH_SORT=polars``; tests compare the two.

Both return the decoded key of every output position as well as the order, and a passenger
column (the score and source codes) in output order, so that the writer reads its columns
sequentially rather than gathering them through the order (a random gather of 46 million rows
costs about as much as formatting them).
"""
from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import polars as pl

from openbench._native import OptionalLibrary

__all__ = ["SORT_LIBRARY", "EdgeOrder", "sort_name", "sort_edges"]


def _configure(library) -> None:
    library.openbench_partition_edges.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 5 + [ctypes.c_int32] * 3 + \
        [ctypes.c_void_p] * 5
    library.openbench_partition_edges.restype = None
    library.openbench_sort_bucket.argtypes = [ctypes.c_int64, ctypes.c_int64] + [ctypes.c_int32] * 3 + \
        [ctypes.c_void_p] * 8
    library.openbench_sort_bucket.restype = None


# OPENBENCH_SORT=polars forces the numpy/polars path
SORT_LIBRARY = OptionalLibrary(Path(__file__).resolve().parent, "_order", _configure, "OPENBENCH_SORT", "polars")


@dataclass
class EdgeOrder:
    """``order``: (n,) uint32 rows in output order (equal keys keep their row order);
    ``rank1``/``type_code``/``rank2``: (n,) uint32/uint8/uint32 key of output position i;
    ``passenger``: (n,) uint32 passenger code of output position i (None when none was given)."""

    order: np.ndarray
    rank1: np.ndarray
    type_code: np.ndarray
    rank2: np.ndarray
    passenger: Optional[np.ndarray] = None


def sort_name() -> str:
    """Which implementation :func:`sort_edges` uses: ``"c"`` or ``"polars"``."""
    return "c" if SORT_LIBRARY.get() is not None else "polars"


def sort_edges(code1: np.ndarray, code2: np.ndarray, rank_of: np.ndarray, type_code: np.ndarray,
               passenger: Optional[np.ndarray] = None, threads: Optional[int] = None) -> EdgeOrder:
    """Sort rows by (rank_of[code1], type_code, rank_of[code2]), stably.

    :param code1: (n,) uint32 codes of id1; ``code2`` likewise for id2.
    :param rank_of: (k,) uint32 node rank of each code (k > every code).
    :param type_code: (n,) uint8 edge-type code of each row.
    :param passenger: (n,) uint32 codes to return in output order (not sorted on); they travel in
        the key's spare bits where they fit, and are gathered through the order where not.
    :param threads: threads sorting the buckets of the C sort (default: one per core).
    """
    code1, code2 = (np.ascontiguousarray(c, dtype=np.uint32) for c in (code1, code2))
    rank_of = np.ascontiguousarray(rank_of, dtype=np.uint32)
    type_code = np.ascontiguousarray(type_code, dtype=np.uint8)
    rows = len(code1)
    if len(code2) != rows or len(type_code) != rows or (passenger is not None and len(passenger) != rows):
        raise ValueError("code1, code2, type_code and passenger differ in length")
    if rows >= 2 ** 32:
        raise ValueError(f"{rows} rows exceed the 32-bit row order")
    rank_bits = max(1, int(rank_of.max(initial=0)).bit_length())
    type_bits = max(1, int(type_code.max(initial=0)).bit_length())
    if 2 * rank_bits + type_bits > 64:
        raise ValueError(f"node ranks of {rank_bits} bits do not fit the 64-bit sort key")
    if passenger is not None:
        passenger = np.ascontiguousarray(passenger, dtype=np.uint32)
    library = SORT_LIBRARY.get()
    if library is None:
        return _sort_polars(code1, code2, rank_of, type_code, passenger, rank_bits, type_bits)
    room = 64 - 2 * rank_bits - type_bits
    rides = passenger is not None and int(passenger.max(initial=0)).bit_length() <= room
    result = _sort_c(library, code1, code2, rank_of, type_code, passenger if rides else None, rank_bits, type_bits,
                     threads)
    if passenger is not None and not rides:  # no room beside the key: gathered through the order
        result.passenger = passenger[result.order]
    return result


def _sort_c(library, code1, code2, rank_of, type_code, passenger, rank_bits: int, type_bits: int,
            threads: Optional[int]) -> EdgeOrder:
    rows = len(code1)
    bits = (rank_bits, type_bits, 0 if passenger is None else int(passenger.max(initial=0)).bit_length())
    result = EdgeOrder(np.empty(rows, np.uint32), np.empty(rows, np.uint32), np.empty(rows, np.uint8),
                       np.empty(rows, np.uint32), None if passenger is None else np.empty(rows, np.uint32))
    keys, scratch_keys = np.empty(rows, np.uint64), np.empty(rows, np.uint64)
    scratch_rows = np.empty(rows, np.uint32)
    bounds = np.zeros(257, np.int64)

    def pointer(array):
        return None if array is None else array.ctypes.data

    library.openbench_partition_edges(rows, pointer(code1), pointer(code2), pointer(rank_of), pointer(type_code),
                                      pointer(passenger), *bits, pointer(keys), pointer(result.order),
                                      pointer(scratch_keys), pointer(scratch_rows), pointer(bounds))
    outputs = [pointer(a) for a in (keys, result.order, scratch_keys, scratch_rows, result.rank1, result.type_code,
                                    result.rank2, result.passenger)]
    buckets = [(int(b), int(e)) for b, e in zip(bounds[:-1], bounds[1:]) if e > b]
    buckets.sort(key=lambda bucket: bucket[0] - bucket[1])  # largest first: threads finish together
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        list(pool.map(lambda bucket: library.openbench_sort_bucket(*bucket, *bits, *outputs), buckets))
    return result


def _sort_polars(code1, code2, rank_of, type_code, passenger, rank_bits: int, type_bits: int) -> EdgeOrder:
    key = rank_of[code1].astype(np.uint64)
    key <<= np.uint64(rank_bits + type_bits)
    key |= type_code.astype(np.uint64) << np.uint64(rank_bits)
    key |= rank_of[code2]
    order = pl.DataFrame({"key": key}).select(pl.arg_sort_by("key", maintain_order=True)).to_series().to_numpy()
    order = order.astype(np.uint32)
    key = key[order]
    rank_mask = np.uint64((1 << rank_bits) - 1)
    return EdgeOrder(order, (key >> np.uint64(rank_bits + type_bits)).astype(np.uint32),
                     ((key >> np.uint64(rank_bits)) & np.uint64((1 << type_bits) - 1)).astype(np.uint8),
                     (key & rank_mask).astype(np.uint32), None if passenger is None else passenger[order])
