"""The C counting kernel and the torch fallback against each other and a plain loop."""
import importlib
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench.errors import ScoreError
from openbench.evaluation.counting import kernels
from tests.helpers import missing_implementation


def _reference(scores, lows, lower, highs=None):
    """(beyond the window [low, high] on the better side, inside it) per row, by a loop."""
    highs = lows if highs is None else highs
    greater = [sum((x < lo) if lower else (x > hi) for x in row) for row, lo, hi in zip(scores, lows, highs)]
    inside = [sum(lo <= x <= hi for x in row) for row, lo, hi in zip(scores, lows, highs)]
    return greater, inside


def _triton_module():
    """openbench's Triton kernel: compiled on a GPU, else in Triton's interpreter (tests/conftest.py)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return None, None
    return importlib.import_module("openbench.evaluation.counting._triton"), "cuda" if torch.cuda.is_available() else "cpu"


TRITON, TRITON_DEVICE = _triton_module()


def _triton_counts(scores, targets, lower, highs=None):
    highs = targets if highs is None else highs
    greater, equal, has_nan = TRITON.row_counts(scores.to(TRITON_DEVICE), targets.to(TRITON_DEVICE),
                                                highs.to(TRITON_DEVICE), lower)
    if bool(has_nan.any()):
        raise kernels.NonFiniteRows(int(has_nan.nonzero()[0, 0]), "NaN score")
    return greater.cpu(), equal.cpu()


def _implementations():
    def torch_counts(s, t, lower, highs=None):
        if highs is None:
            return kernels._row_counts_torch(s.clone(), t, lower, True)
        return kernels._window_counts_torch(s, t, highs, lower, True)

    found = [("torch", torch_counts)]
    if kernels._load_library() is not None:
        found.append(("c", lambda s, t, lower, highs=None: kernels._row_counts_c(s, t, t if highs is None else highs,
                                                                                 lower)))
        # scores proven finite: the two-comparison pass without the NaN count
        found.append(("c-finite", lambda s, t, lower, highs=None: kernels._row_counts_c(
            s, t, t if highs is None else highs, lower, None, False)))
    else:
        missing_implementation("the C counting kernel")
    if TRITON is not None:
        found.append(("triton", _triton_counts))
    else:
        missing_implementation("Triton")
    return found


def test_c_kernel_is_built_where_a_compiler_is():
    import os
    if os.environ.get("CI") != "true":
        pytest.skip("only required in CI, which installs with a compiler")
    assert kernels.kernel_name(torch.zeros(2, 3)) == "c"


@settings(max_examples=80, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_implementations_agree_with_a_loop(data):
    width = data.draw(st.integers(1, 40))
    rows = data.draw(st.integers(1, 5))
    values = st.sampled_from([-math.inf, -2.0, -0.0, 0.0, 1.5, 3.0, math.inf])
    scores = [[data.draw(values) for _ in range(width)] for _ in range(rows)]
    targets = [data.draw(values) for _ in range(rows)]
    lower = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]))
    expected = _reference(scores, targets, lower)
    widths = [data.draw(st.sampled_from([0.0, 0.5, 1.5, 4.0])) for _ in range(rows)]
    highs = [t + w for t, w in zip(targets, widths)]  # windows: [t, t + w] (inf + w stays inf)
    expected_window = _reference(scores, targets, lower, highs)
    for name, count in _implementations():
        greater, equal = count(torch.tensor(scores, dtype=dtype), torch.tensor(targets, dtype=dtype), lower)
        assert (greater.tolist(), equal.tolist()) == expected, name
        greater, inside = count(torch.tensor(scores, dtype=dtype), torch.tensor(targets, dtype=dtype), lower,
                                torch.tensor(highs, dtype=dtype))
        assert (greater.tolist(), inside.tolist()) == expected_window, name


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_blocks_split_over_threads(dtype):
    rng = np.random.default_rng(0)
    scores = torch.tensor(rng.integers(0, 50, size=(300, 2000)), dtype=dtype)  # above the parallel threshold
    targets = scores[:, 5].clone()
    expected = ((scores > targets[:, None]).sum(1), (scores == targets[:, None]).sum(1))
    for name, count in _implementations():
        # threads are the C kernel's; Triton (here in its slow CPU interpreter) runs one program
        # per row and span, so a few rows of the same width test all it does with this block
        rows = 8 if name.startswith("triton") else scores.shape[0]
        greater, equal = count(scores[:rows], targets[:rows], False)
        assert torch.equal(greater, expected[0][:rows]) and torch.equal(equal, expected[1][:rows]), name


def test_strided_rows_are_counted_in_place():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    view = base[:, 1:4]  # row stride 6, width 3
    greater, equal = kernels.row_counts(view, torch.tensor([2.0, 8.0, 13.0, 0.0]))
    assert greater.tolist() == [1, 1, 2, 3] and equal.tolist() == [1, 1, 1, 0]


def test_nan_rows_are_reported_by_every_implementation():
    scores = torch.tensor([[1.0, 2.0], [3.0, math.nan], [math.nan, 1.0]])
    for name, count in _implementations():
        if name == "c-finite":  # told the scores are finite: it looks for no NaN
            continue
        with pytest.raises(ScoreError, match="NaN score") as info:
            count(scores, torch.tensor([1.0, 3.0, 1.0]), False)
        assert info.value.row == 1, name


def test_a_triton_kernel_that_cannot_run_falls_back_to_torch(monkeypatch, caplog):
    class Broken:
        @staticmethod
        def row_counts(scores, lows, highs, lower):
            raise RuntimeError("no C compiler for Triton's launcher")

    monkeypatch.setattr(kernels, "_triton", Broken)
    scores = torch.tensor([[1.0, 2.0, 3.0], [3.0, 3.0, 0.0]])
    targets = torch.tensor([2.0, 3.0])
    greater, equal = kernels._row_counts_triton(scores, targets, targets, False)
    assert greater.tolist() == [1, 0] and equal.tolist() == [1, 2]
    assert kernels._triton is None and "using the torch implementation from now on" in caplog.text
