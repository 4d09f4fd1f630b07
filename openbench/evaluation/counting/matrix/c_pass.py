"""The C matrix passes' one argument, declared once on this side: :class:`MatrixPassArgs` mirrors
``ob_matrix_pass`` (``csrc/matrix.h``) field for field, and :func:`configure` checks it against the
library's own layout (``openbench_matrix_pass_layout``: its size and every field's offset) and
the bound-widening factor against :data:`~openbench.evaluation.counting.rounding.BOUND_WIDENING`
when the library loads, so a stale build is one clear error, never arguments read askew.

``openbench_matrix_count_f32/_f64`` (the plain pass over a block of keys), ``openbench_matrix_
fused_f32`` (keys computed and counted a tile at a time) and ``openbench_matrix_fused_keys_f32``
(those keys alone, for the tests) each take a pointer to one :class:`MatrixPassArgs`; fields a pass
does not read stay 0 (NULL)."""
from __future__ import annotations

import ctypes

from openbench._native import StaleLibrary
from openbench.evaluation.counting.c_structs import check_layout, declare
from openbench.evaluation.counting.rounding import BOUND_WIDENING

__all__ = ["MatrixPassArgs", "configure", "ENTRY_POINTS"]

_pointer, _count, _real = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double

ENTRY_POINTS = ("openbench_matrix_count_f32", "openbench_matrix_count_f64", "openbench_matrix_fused_f32",
                "openbench_matrix_fused_keys_f32")


class MatrixPassArgs(ctypes.Structure):
    """``ob_matrix_pass``: shapes as :mod:`~openbench.evaluation.counting.matrix.passes` and
    :mod:`~openbench.evaluation.counting.matrix.fused` give them. ``keys`` (rows, width) with row
    ``stride``; ``lows``/``highs`` (count,) the windows, in the keys' precision; ``codes`` (cells +
    2,), ``impure`` (k, 4), ``ab`` (cells + 2, 4) the cells (``windows._grid``); ``cell_counts`` its
    int32 counters; ``beyond``/``reached`` (count + 1,) int64 histograms; ``pairs`` (capacity, 3)
    the undecided keys; ``tops`` (top_capacity,) the best pairs' positions, ``top_keys`` their keys
    (fused); ``queries64`` (rows, dims) float64, ``columns`` (width, dims) and ``keys64_lo/hi``
    (count,) the float64 step; ``queries`` (rows, dims) float32, ``packed`` the columns in panels,
    ``row_terms``/``col_terms`` the L2 terms, ``pair_terms`` (rows, 3), ``pair_norms`` (width,),
    ``centers`` (count,) and ``pair_extra`` the pairs' own windows; ``out`` (rows, width) float32
    the fused keys alone."""

    _fields_ = [
        ("keys", _pointer), ("stride", _count), ("rows", _count), ("width", _count),
        ("lows", _pointer), ("highs", _pointer), ("count", _count),
        ("codes", _pointer), ("impure", _pointer), ("ab", _pointer), ("cells", _count),
        ("base", _real), ("scale", _real), ("cell_counts", _pointer),
        ("beyond", _pointer), ("reached", _pointer), ("record", _count), ("pairs", _pointer), ("capacity", _count),
        ("floor", _real), ("tops", _pointer), ("top_keys", _pointer), ("top_capacity", _count),
        ("top_count", _pointer),
        ("kind", _count), ("queries64", _pointer), ("dims", _count), ("columns", _pointer),
        ("keys64_lo", _pointer), ("keys64_hi", _pointer),
        ("queries", _pointer), ("packed", _pointer), ("chunk", _count), ("row_terms", _pointer),
        ("col_terms", _pointer), ("pair_terms", _pointer), ("pair_norms", _pointer), ("centers", _pointer),
        ("pair_extra", _real), ("out", _pointer),
    ]


def configure(library) -> None:
    """Declares the matrix entry points of ``library`` (each takes one ``MatrixPassArgs *``) and
    checks the struct's layout and the widening factor against the library's own; a mismatch
    (a build older or newer than this code) raises :class:`~openbench._native.StaleLibrary` naming
    what differs (the matrix passes then count in numpy, with a warning)."""
    check_layout(library, MatrixPassArgs, "openbench_matrix_pass_layout")
    widening = library.openbench_bound_widening
    widening.argtypes, widening.restype = [], ctypes.c_double
    if float(widening()) != BOUND_WIDENING:
        raise StaleLibrary(f"the compiled counting library widens bounds by {float(widening())!r}, "
                           f"rounding.BOUND_WIDENING is {BOUND_WIDENING!r}: rebuild it (pip install -e .)")
    declare(library, ENTRY_POINTS, MatrixPassArgs)
