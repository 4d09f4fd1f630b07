"""The C matrix passes take one struct, declared once on each side (``ob_matrix_pass`` in
``csrc/matrix.h``, :class:`~openbench.evaluation.counting.matrix.c_pass.MatrixPassArgs` in Python)
and checked against each other when the library loads: a build whose struct differs (a field
moved, added or resized) or whose bound widening differs from ``rounding.BOUND_WIDENING`` is
refused in one line naming what differs, never read askew."""
from __future__ import annotations

import ctypes

import pytest

from openbench.evaluation.counting.matrix import c_pass
from openbench.evaluation.counting.rounding import BOUND_WIDENING

FIELDS = [name for name, _ in c_pass.MatrixPassArgs._fields_]


class _Function:
    """A stand-in for a ctypes function: callable, with settable argtypes and restype."""

    def __init__(self, call):
        self.call, self.argtypes, self.restype = call, None, None

    def __call__(self, *args):
        return self.call(*args)


class _Library:
    """A library whose layout is MatrixPassArgs' own, with one thing changed: ``moved`` (a field
    whose C offset differs), ``size`` (the C struct's size) or ``widening``."""

    def __init__(self, moved=None, size=None, widening=BOUND_WIDENING):
        def layout(address, count):
            offsets = (ctypes.c_int64 * count).from_address(address)
            for index, name in enumerate(FIELDS[:count]):
                offsets[index] = getattr(c_pass.MatrixPassArgs, name).offset + (8 if name == moved else 0)
            return ctypes.sizeof(c_pass.MatrixPassArgs) if size is None else size

        self.openbench_matrix_pass_layout = _Function(layout)
        self.openbench_bound_widening = _Function(lambda: widening)


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
        c_pass.configure(_Library(moved=field))


def test_a_struct_of_another_size_is_refused():
    """A C struct with a field past the last one Python declares (same offsets, larger size)."""
    with pytest.raises(RuntimeError, match=r"is \d+ bytes, MatrixPassArgs \d+: rebuild it"):
        c_pass.configure(_Library(size=ctypes.sizeof(c_pass.MatrixPassArgs) + 8))


def test_another_bound_widening_is_refused():
    """The C windows widen each pair's bound by the factor Python's bounds use; a build with
    another factor would decide keys the Python bounds leave open."""
    with pytest.raises(RuntimeError, match="widens bounds by"):
        c_pass.configure(_Library(widening=1 + 2.0 ** -40))


def test_the_layout_check_passes_on_the_declared_layout():
    """The stand-in with nothing changed is accepted (the refusals above come from the change)."""
    library = _Library()
    c_pass.configure(library)  # no entry points on the stand-in: only the layout and widening are checked
