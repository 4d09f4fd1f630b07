"""The repurposing matrix pass's grid (matrix.windows._built_grid): a key is counted among the windows
where it lies, whatever cell the pass's float arithmetic puts it in."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from openbench.evaluation.counting import matrix
from openbench.evaluation.counting.kernels import chunk_scan

needs_library = pytest.mark.skipif(matrix.passes._library() is None, reason="the matrix pass needs the C helper")


def _steps_around(values: np.ndarray, steps: int) -> np.ndarray:
    """Every float of ``values``' dtype within ``steps`` floats of each (positive) value."""
    integer = np.int32 if values.dtype == np.float32 else np.int64
    bits = values.view(integer)[:, None] + np.arange(-steps, steps + 1, dtype=integer)[None, :]
    return bits.reshape(-1).view(values.dtype)


def _edge_windows(dtype: type, cells: int, stride: int) -> tuple:
    """(lows, highs, base, scale): windows over [1, 3], each three cells wide, whose lows and highs
    lie on the edges of the grid's cells (every ``stride``-th edge), rounded to ``dtype`` as the
    windows are, sorted as windows are."""
    base, top = dtype(1.0), dtype(3.0)
    scale = dtype((cells - 2) / float(top - base))  # the grid's own: (cells - 2) / span in the keys' precision
    starts = np.arange(0, cells - 4, stride)
    lows = np.array([float(base) + c / float(scale) for c in starts], dtype=dtype)
    highs = np.array([float(base) + (c + 3) / float(scale) for c in starts], dtype=dtype)
    lows[0], highs[-1] = base, top
    return lows, highs, base, scale


def _assert_counted_as_defined(windows, keys: np.ndarray) -> None:
    """The C pass over ``keys`` (B, S) counts each key's a (windows whose high is below it) and b
    (windows whose low is at most it) as the definition does, and records the keys inside a window
    (a < b) by position with their a and b."""
    lows, highs = windows.lows.numpy(), windows.highs.numpy()
    beyond, reached, recorded, _ = matrix.passes._BlockPass(windows, True, matrix.passes._library())(torch.from_numpy(keys), None)
    flat = keys.reshape(-1)
    a, b = np.searchsorted(highs, flat, side="left"), np.searchsorted(lows, flat, side="right")
    assert np.array_equal(beyond, np.bincount(a, minlength=lows.size + 1))
    assert np.array_equal(reached, np.bincount(b, minlength=lows.size + 1))
    inside = np.flatnonzero(a < b)
    assert np.array_equal(recorded, np.stack([inside, a[inside], b[inside]], axis=1))


@needs_library
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scan", ["avx512", "avx2", "portable"])
def test_keys_beside_every_cell_edge_are_counted_where_they_lie(scan, dtype):
    """Windows with their lows and highs on cell edges (every 13th of 65,536), and keys on every
    float within 24 floats of each edge: each key's a (windows whose high is below it) and b
    (windows whose low is at most it), counted by the C pass through its grid, are the
    definition's, as are the keys recorded inside a window. A grid whose cells assumed the pass's
    cell arithmetic exact would place some of these keys one cell off, beside an edge it holds
    pure."""
    before = chunk_scan()
    if chunk_scan(scan) != scan:
        chunk_scan(before)
        pytest.skip(f"this CPU has no {scan} scan")
    try:
        lows, highs, base, scale = _edge_windows(dtype, matrix.MAX_GRID_CELLS, 13)
        assert (np.diff(lows) >= 0).all() and (np.diff(highs) >= 0).all() and (lows <= highs).all()
        windows = matrix.windows._Windows(torch.from_numpy(lows), torch.from_numpy(highs), False)
        grid = matrix.windows._grid(windows, True)
        assert grid.cells == matrix.MAX_GRID_CELLS and grid.base == base and grid.scale == scale
        keys = _steps_around(np.unique(np.concatenate([lows, highs])), 24)
        keys = keys[: keys.size - keys.size % 64].reshape(-1, 64)
        _assert_counted_as_defined(windows, keys)
    finally:
        chunk_scan(before)


@needs_library
def test_windows_too_close_for_a_float32_grid_are_still_counted_where_they_lie():
    """Windows spanning 1e-40 around 1e-36 (embeddings some 1e-18 in size): (cells - 2) / span is
    beyond float32's range, and a grid scaled by infinity would put a key equal to the lowest edge
    (0 * inf: NaN) above every window. The grid falls back to a scale it can hold; every key is
    counted as the definition counts it."""
    lows = np.array([1e-36, 1e-36 + 2e-41, 1e-36 + 5e-41], dtype=np.float32)
    highs = np.array([1e-36 + 1e-41, 1e-36 + 4e-41, 1e-36 + 1e-40], dtype=np.float32)
    assert (np.diff(lows) > 0).all() and (np.diff(highs) > 0).all() and (lows <= highs).all()
    windows = matrix.windows._Windows(torch.from_numpy(lows), torch.from_numpy(highs), False)
    assert np.isfinite(np.float32(matrix.windows._grid(windows, True).scale))
    keys = np.concatenate([_steps_around(np.unique(np.concatenate([lows, highs])), 6), [0.0, 1.0, -1.0]])
    _assert_counted_as_defined(windows, keys.astype(np.float32)[None, :])
