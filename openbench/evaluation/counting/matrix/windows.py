"""The thresholds' windows and the grid that places a key among them: :class:`_Windows` (T sorted
[low, high] in the keys' dtype), :func:`_built_grid` (cells over their span, each pure or impure,
and how far the pass's own arithmetic may move a key past a cell's edge: :func:`grid_margin`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np
import torch

from openbench.evaluation.counting.rounding import U64, round_outwards, widened

__all__ = ["MAX_GRID_CELLS", "grid_margin"]


MAX_GRID_CELLS = 1 << 16  # the cells' counters stay in L2


@dataclass
class _Windows:
    """T windows sorted ascending in the blocks' dtype (lows and highs non-decreasing)."""

    lows: torch.Tensor
    highs: torch.Tensor
    point: bool  # lows == highs: a key inside is a tie, decided in the pass
    grids: Dict[bool, "_Grid"] = field(default_factory=dict)  # :func:`_grid`'s, built once per record flag


@dataclass
class _Grid:
    """The cells that place a key among the windows (``openbench_matrix_count_*``): per cell
    c = -1 .. cells (stored at c + 1), the ranges of highs and lows a key the pass puts in cell c
    can fall between (:func:`grid_margin`), and its code: 0 when it is pure (one a and one b),
    else -1 - k, k its row in ``impure`` (the impure cells' ranges, few and contiguous: the pass
    reads them, never ``ranges``); keys map to cells by (key - base) * scale."""

    codes: np.ndarray  # (cells + 2,) int32: the pass's counters start from them
    impure: np.ndarray  # (I, 4) int64
    ranges: np.ndarray  # (cells + 2, 4) int64
    cells: int
    base: float
    scale: float

    def arguments(self) -> dict:
        """The grid's fields of a C pass's :class:`~openbench.evaluation.counting.matrix.c_pass.MatrixPassArgs`."""
        return dict(codes=self.codes.ctypes.data, impure=self.impure.ctypes.data, ab=self.ranges.ctypes.data,
                    cells=self.cells, base=self.base, scale=self.scale)


def _grid(windows: _Windows, record: bool) -> _Grid:
    """:func:`_built_grid` of ``windows``, built once (the probe and the pass share it)."""
    if record not in windows.grids:
        windows.grids[record] = _built_grid(windows, record)
    return windows.grids[record]


def _built_grid(windows: _Windows, record: bool) -> _Grid:
    """The grid of ``windows``: ``cells - 2`` equal cells over [lows[0], highs[-1]] and two more above
    (a key whose cell rounds to ``cells`` or beyond is above every window; to -1 or below, below
    every one); a cell's ranges are those of its keys wherever the pass's arithmetic may put them
    (the cell widened by :func:`grid_margin` on both sides), and it is pure when they are one value
    for highs and for lows (and, where keys inside a window are recorded, no window covers it)."""
    lows, highs = windows.lows.double().numpy(), windows.highs.double().numpy()
    count = lows.shape[0]
    dtype = np.float32 if windows.lows.dtype == torch.float32 else np.float64
    if count == 0:
        return _Grid(np.zeros(3, np.int32), np.zeros((0, 4), np.int64), np.zeros((3, 4), np.int64), 1, 0.0, 0.0)
    bottom, top = lows[0], highs[-1]
    cells = MAX_GRID_CELLS  # fine enough that a window covers few cells, whatever the thresholds
    span = float(top - bottom)
    # at most a quarter of the dtype's largest value: a key within the span keeps (x - base)·scale finite (a scale
    # of infinity would make 0·inf, NaN, of the lowest edge); fewer cells then cover a span too narrow for them all
    finest = float(np.finfo(dtype).max) / 4
    with np.errstate(over="ignore", divide="ignore"):
        scale = float(dtype(min((cells - 2) / span, finest))) if span > 0 and np.isfinite(span) else 1.0
    base = float(dtype(bottom))
    index = np.arange(-1, cells + 1, dtype=np.float64)  # c of each slot
    margin = grid_margin(cells)
    with np.errstate(over="ignore", invalid="ignore"):
        left = base + (index - margin) / scale
        right = base + (index + 1 + margin) / scale
    # cell 0 holds the keys the pass truncates from (-1, 0) too: below base, the lowest edge, as its ranges (from 0) say
    left[0], right[0] = -np.inf, base  # slot 0: below every window
    left[-1], right[-1] = top, np.inf  # slot cells + 1: above every window
    ranges = np.stack([np.searchsorted(highs, left, "left"), np.searchsorted(highs, right, "right"),
                       np.searchsorted(lows, left, "left"), np.searchsorted(lows, right, "right")], axis=1)
    ranges[0] = (0, 0, 0, 0)
    ranges[-1] = (count, count, count, count)
    pure = (ranges[:, 0] == ranges[:, 1]) & (ranges[:, 2] == ranges[:, 3])
    if record:
        pure &= ranges[:, 0] == ranges[:, 2]
    impure = np.flatnonzero(~pure)
    codes = np.zeros(cells + 2, np.int32)
    codes[impure] = -1 - np.arange(impure.size, dtype=np.int32)
    ranges = np.ascontiguousarray(ranges.astype(np.int64))
    return _Grid(codes, np.ascontiguousarray(ranges[impure]), ranges, cells, base, scale)


def grid_margin(cells: int) -> float:
    """How far past its own edges, in cells, a cell's keys can lie: the pass computes a key's cell
    as fl(fl(x - base) * scale) in the keys' precision (float32 at worst, u = 2^-24), off by at most
    2u|t| + u² ≤ cells·2^-23 cells for |t| ≤ cells (beyond, the cell is clamped either way); the
    margin is 8 times that (1/16 of a cell at 65,536 cells), and at most one cell. A cell is pure
    when no window edge lies within it and its margins."""
    return min(1.0, cells * 2.0 ** -20)


def _windows(keys: np.ndarray, half_width: float, dtype: torch.dtype) -> _Windows:
    """Windows [key - w, key + w] of the sorted float64 ``keys``, w the half-width plus the
    bound's own evaluation, rounded outwards to ``dtype`` (non-decreasing, as the keys)."""
    # a width of 0: keys and blocks exact (the grid criterion), the windows the keys themselves
    margin = widened(half_width) + 4 * U64 * np.abs(keys) if half_width > 0 else np.zeros_like(keys)
    lows, highs = round_outwards(keys - margin, keys + margin, dtype)
    lows, highs = lows.contiguous(), highs.contiguous()
    return _Windows(lows, highs, bool(torch.equal(lows, highs)))


def _floor_in(dtype: torch.dtype, floor: Optional[float]) -> Optional[float]:
    """The best pairs' floor in the keys' precision, rounded down: every key at the floor stays."""
    if floor is None or dtype != torch.float32:
        return floor
    rounded = np.float32(floor)
    return float(np.nextafter(rounded, np.float32(-np.inf)) if rounded > floor else rounded)
