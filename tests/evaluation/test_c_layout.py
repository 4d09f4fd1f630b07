"""The C entry points with many arguments take one struct, declared once on each side and checked
against each other when the library loads: the matrix passes' ``ob_matrix_pass`` (``csrc/matrix.h``,
:class:`~openbench.evaluation.counting.matrix.c_pass.MatrixPassArgs`), the chunk count's
``ob_chunk_count`` and exact ranks' queries' ``ob_query_rows`` (``csrc/counting.h``,
:mod:`openbench.evaluation.counting.c_structs`). A build whose struct differs (a field moved, added
or resized) or whose bound widening differs from ``rounding.BOUND_WIDENING`` is refused in one line
naming what differs, never read askew."""
from __future__ import annotations

import ctypes

import pytest

from openbench.evaluation.counting import c_structs
from openbench.evaluation.counting.matrix import c_pass
from openbench.evaluation.counting.rounding import BOUND_WIDENING

FIELDS = [name for name, _ in c_pass.MatrixPassArgs._fields_]


class _Function:
    """A stand-in for a ctypes function: callable, with settable argtypes and restype."""

    def __init__(self, call):
        self.call, self.argtypes, self.restype = call, None, None

    def __call__(self, *args):
        return self.call(*args)


class _StructLibrary:
    """A library reporting ``struct``'s own layout through its function ``layout``, with one thing
    changed: ``moved`` (a field whose C offset differs), ``size`` (the C struct's size) or
    ``widening`` (the factor the C widens bounds by)."""

    def __init__(self, struct, layout, moved=None, size=None, widening=BOUND_WIDENING):
        names = [field[0] for field in struct._fields_]

        def report(address, count):
            offsets = (ctypes.c_int64 * count).from_address(address)
            for index, name in enumerate(names[:count]):
                offsets[index] = getattr(struct, name).offset + (8 if name == moved else 0)
            return ctypes.sizeof(struct) if size is None else size

        setattr(self, layout, _Function(report))
        self.openbench_bound_widening = _Function(lambda: widening)


def _matrix_library(**changed):
    """:class:`_StructLibrary` of the matrix passes' struct."""
    return _StructLibrary(c_pass.MatrixPassArgs, "openbench_matrix_pass_layout", **changed)


def test_the_built_library_lays_the_struct_out_as_python_declares_it():
    """The compiled library's own offsets and size equal MatrixPassArgs' field for field, and its
    widening factor is rounding.BOUND_WIDENING; every matrix entry point takes one struct pointer."""
    from openbench.evaluation.counting.kernels import COUNTING_LIBRARY

    library = COUNTING_LIBRARY.get()
    if library is None:
        pytest.skip("the C counting helper is not built, or OPENBENCH_KERNEL=torch switched it off")
    c_pass.configure(library)
    offsets = (ctypes.c_int64 * len(FIELDS))()
    size = library.openbench_matrix_pass_layout(ctypes.addressof(offsets), len(FIELDS))
    assert list(offsets) == [getattr(c_pass.MatrixPassArgs, name).offset for name in FIELDS]
    assert size == ctypes.sizeof(c_pass.MatrixPassArgs)
    assert library.openbench_bound_widening() == BOUND_WIDENING
    for name in c_pass.ENTRY_POINTS:
        assert getattr(library, name).argtypes == [ctypes.POINTER(c_pass.MatrixPassArgs)]


@pytest.mark.parametrize("field", ["keys", "cells", "base", "floor", "kind", "pair_extra", "out"])
def test_a_field_at_another_offset_is_refused_by_name(field):
    with pytest.raises(RuntimeError, match=f"at field '{field}'.*rebuild it"):
        c_pass.configure(_matrix_library(moved=field))


def test_a_struct_of_another_size_is_refused():
    """A C struct with a field past the last one Python declares (same offsets, larger size)."""
    with pytest.raises(RuntimeError, match=r"MatrixPassArgs is \d+ bytes, this one \d+: rebuild it"):
        c_pass.configure(_matrix_library(size=ctypes.sizeof(c_pass.MatrixPassArgs) + 8))


def test_another_bound_widening_is_refused():
    """The C windows widen each pair's bound by the factor Python's bounds use; a build with
    another factor would decide keys the Python bounds leave open. The stand-in with nothing changed
    is accepted: the refusals come from the change alone."""
    with pytest.raises(RuntimeError, match="widens bounds by"):
        c_pass.configure(_matrix_library(widening=1 + 2.0 ** -40))
    unchanged = _matrix_library()  # the same stand-in, nothing changed: accepted
    c_pass.configure(unchanged)
    assert unchanged.openbench_matrix_pass_layout.argtypes == [ctypes.c_void_p, ctypes.c_int64]


STRUCTS = [(c_structs.ChunkCountArgs, "openbench_chunk_count_layout",
            ("openbench_count_chunk_f32", "openbench_count_chunk_f64")),
           (c_structs.QueryRowsArgs, "openbench_query_rows_layout",
            ("openbench_query_rows_f32", "openbench_query_rows_f64")),
           (c_structs.CountWindowArgs, "openbench_count_window_layout",
            ("openbench_count_window_f32", "openbench_count_window_f64")),
           (c_structs.PairKeysArgs, "openbench_pair_keys_layout", ("openbench_pair_keys_f32", "openbench_pair_keys_f64"))]
IDS = ["chunk count", "query rows", "window count", "pair keys"]


@pytest.mark.parametrize("struct, layout, entries", STRUCTS, ids=IDS)
def test_the_ranking_kernels_structs_are_the_built_library_s(struct, layout, entries):
    """The chunk count's and the queries' structs lay out as the compiled library's, and their
    entry points take one pointer to them (kernels.py declares them when the library loads)."""
    from openbench.evaluation.counting.kernels import COUNTING_LIBRARY

    library = COUNTING_LIBRARY.get()
    if library is None:
        pytest.skip("the C counting helper is not built, or OPENBENCH_KERNEL=torch switched it off")
    names = [field[0] for field in struct._fields_]
    offsets = (ctypes.c_int64 * len(names))()
    size = getattr(library, layout)(ctypes.addressof(offsets), len(names))
    assert list(offsets) == [getattr(struct, name).offset for name in names]
    assert size == ctypes.sizeof(struct)
    for entry in entries:
        assert getattr(library, entry).argtypes == [ctypes.POINTER(struct)]


@pytest.mark.parametrize("struct, layout, entries", STRUCTS, ids=IDS)
def test_a_ranking_struct_that_differs_from_the_build_is_refused(struct, layout, entries):
    """Every field of the struct at another offset is named; another size is refused; the
    declared layout passes."""
    for field in (name for name, _ in struct._fields_):
        with pytest.raises(RuntimeError, match=f"{struct.__name__} differs at field '{field}'.*rebuild it"):
            c_structs.check_layout(_StructLibrary(struct, layout, moved=field), struct, layout)
    with pytest.raises(RuntimeError, match=rf"{struct.__name__} is \d+ bytes, this one \d+: rebuild it"):
        c_structs.check_layout(_StructLibrary(struct, layout, size=ctypes.sizeof(struct) + 8), struct, layout)
    c_structs.check_layout(_StructLibrary(struct, layout), struct, layout)


def test_a_library_built_from_other_sources_is_used_as_none_with_a_warning(caplog, monkeypatch):
    """A build whose struct layout differs is stale, as one missing an entry point is: the ranking
    kernels load no library (the torch path) and the matrix passes count in numpy, each with a
    warning that says to rebuild; nothing reads arguments askew, nothing stops."""
    from openbench._native import StaleLibrary, load_library
    from openbench.evaluation.counting import kernels
    from openbench.evaluation.counting.matrix import passes

    if kernels.COUNTING_LIBRARY.get() is None:
        pytest.skip("the C counting helper is not built, or OPENBENCH_KERNEL=torch switched it off")

    def differing(library):
        c_structs.check_layout(_StructLibrary(c_structs.ChunkCountArgs, "layout", moved="width"),
                               c_structs.ChunkCountArgs, "layout")

    with caplog.at_level("WARNING"):
        assert load_library(kernels.COUNTING_LIBRARY.folder, kernels.COUNTING_LIBRARY.stem, differing) is None
    assert "is stale" in caplog.text and "differs at field 'width'" in caplog.text

    def stale(library):
        raise StaleLibrary("MatrixPassArgs differs at field 'rows'")

    monkeypatch.setattr(passes, "_configure", stale)
    monkeypatch.setattr(passes, "_CONFIGURED", set())
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert passes._library() is None
    assert "counting in numpy until it is rebuilt" in caplog.text
