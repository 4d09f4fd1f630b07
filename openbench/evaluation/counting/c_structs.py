"""The structs the ranking kernels' C entry points take, declared once on this side, and the check
that a struct here lays out as the compiled library's (its size and every field's offset, from the
library's own ``openbench_*_layout``): a stale build is one clear error, never arguments read
askew. :class:`ChunkCountArgs` mirrors ``ob_chunk_count`` (``csrc/counting.h``,
``openbench_count_chunk_*``: :class:`~openbench.evaluation.counting.kernels.ChunkTally`),
:class:`CountWindowArgs` ``ob_count_window`` (``openbench_count_window_*``: ``kernels.row_counts``),
:class:`PairKeysArgs` ``ob_pair_keys`` and :class:`QueryRowsArgs` ``ob_query_rows``
(:func:`~openbench.evaluation.counting.exact_keys.pair_keys`, ``query_rows``); the repurposing matrix's struct is
:mod:`openbench.evaluation.counting.matrix.c_pass`'s. Fields typed ``void *`` hold float or double
values as the entry point's suffix says."""
from __future__ import annotations

import ctypes

from openbench._native import StaleLibrary

__all__ = ["ChunkCountArgs", "CountWindowArgs", "PairKeysArgs", "QueryRowsArgs", "check_layout", "declare"]

_pointer, _count = ctypes.c_void_p, ctypes.c_int64


class ChunkCountArgs(ctypes.Structure):
    """``ob_chunk_count``: one block's ``scores`` (rows, ``width``) with row ``stride``, candidates
    ``start ..``, rows ``row_begin .. row_end - 1`` counted; per row (B,): the windows ``lows`` and
    ``highs``, ``true_ids`` and ``true_scores``, the known answers (``known_offsets`` (B + 1,),
    ``known_cols``), the counts ``better``, ``inside``, ``nans`` (NULL: unchecked),
    ``true_differs``; ``positions`` (B, capacity) and ``fill`` (B,) the window columns recorded."""

    _fields_ = [
        ("scores", _pointer), ("stride", _count), ("width", _count), ("start", _count), ("row_begin", _count),
        ("row_end", _count), ("lows", _pointer), ("highs", _pointer), ("lower_is_better", _count),
        ("window", _count), ("true_ids", _pointer), ("true_scores", _pointer), ("known_offsets", _pointer),
        ("known_cols", _pointer), ("better", _pointer), ("inside", _pointer), ("nans", _pointer),
        ("true_differs", _pointer), ("positions", _pointer), ("fill", _pointer), ("capacity", _count),
    ]


class CountWindowArgs(ctypes.Structure):
    """``ob_count_window``: rows ``row_begin .. row_end - 1`` of ``scores`` (rows, ``width``), row
    ``stride``, against per-row windows ``lows``/``highs``; per row the counts ``better``,
    ``inside``, ``nans`` (NULL: unchecked) and up to ``capacity`` inside ``positions``."""

    _fields_ = [
        ("scores", _pointer), ("stride", _count), ("width", _count), ("row_begin", _count), ("row_end", _count),
        ("lows", _pointer), ("highs", _pointer), ("lower_is_better", _count), ("better", _pointer),
        ("inside", _pointer), ("nans", _pointer), ("positions", _pointer), ("capacity", _count),
    ]


class PairKeysArgs(ctypes.Structure):
    """``ob_pair_keys``: ``count`` pairs (``rows``, ``cols``) of float64 ``queries`` (B, ``width``)
    and ``table`` rows (``stride`` apart), their ``kind`` keys, norm bounds ``norm2``/``norm1`` and,
    with ``truths`` (B, width), whether each candidate is ``identical`` to its row's truth."""

    _fields_ = [
        ("kind", _count), ("queries", _pointer), ("truths", _pointer), ("width", _count), ("table", _pointer),
        ("stride", _count), ("rows", _pointer), ("cols", _pointer), ("count", _count), ("keys", _pointer),
        ("norm2", _pointer), ("norm1", _pointer), ("identical", _pointer),
    ]


class QueryRowsArgs(ctypes.Structure):
    """``ob_query_rows``: ``count`` queries of formula ``code`` from the ``entities`` and
    ``relations`` rows (``anchors``, ``relation_ids`` (count,)), each ``width`` wide, into
    ``queries`` (count, width') float64 with bounds ``norm2``/``norm1`` (count,); with ``truths``
    (count, width'), their ``kind`` keys ``true_keys`` and norms ``true_norm2``/``true_norm1``."""

    _fields_ = [
        ("code", _count), ("entities", _pointer), ("entity_stride", _count), ("relations", _pointer),
        ("relation_stride", _count), ("anchors", _pointer), ("relation_ids", _pointer), ("count", _count),
        ("width", _count), ("queries", _pointer), ("norm2", _pointer), ("norm1", _pointer), ("kind", _count),
        ("truths", _pointer), ("true_keys", _pointer), ("true_norm2", _pointer), ("true_norm1", _pointer),
    ]


def check_layout(library, struct, layout_function: str) -> None:
    """Raises :class:`~openbench._native.StaleLibrary` unless ``struct`` (a ctypes.Structure) has
    the size and field offsets the library's ``layout_function`` reports, naming the first field
    that differs (the library is then used as none, with a warning, until rebuilt)."""
    names = [field[0] for field in struct._fields_]
    offsets = (ctypes.c_int64 * len(names))()
    layout = getattr(library, layout_function)
    layout.argtypes, layout.restype = [ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64
    size = int(layout(ctypes.addressof(offsets), len(names)))
    for index, name in enumerate(names):
        if offsets[index] != getattr(struct, name).offset:
            raise StaleLibrary(f"the compiled counting library's layout of {struct.__name__} differs at field {name!r} "
                               f"(offset {offsets[index]} in C, {getattr(struct, name).offset} here): rebuild it "
                               "(pip install -e .)")
    if size != ctypes.sizeof(struct):
        raise StaleLibrary(f"the compiled counting library's {struct.__name__} is {size} bytes, this one "
                           f"{ctypes.sizeof(struct)}: rebuild it (pip install -e .)")


def declare(library, names, struct, restype=ctypes.c_int64) -> None:
    """Each of ``names`` (entry points of ``library``, where present) takes one pointer to ``struct``
    and returns ``restype`` (None: void)."""
    for name in names:
        if hasattr(library, name):
            function = getattr(library, name)
            function.argtypes, function.restype = [ctypes.POINTER(struct)], restype
