"""Exact decisions where float64 cannot decide (:class:`_ExactOrder`: decimal keys, cached), whether a
matrix is crowded enough to run in float64 (:func:`_probe_keys`, :func:`_crowded`), the float64
windows of the pass's float64 step, and the settling of the keys a pass left undecided
(:func:`_settle`)."""
from __future__ import annotations

import ctypes
import decimal
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.key_bounds import float64_key_bound
from openbench.evaluation.counting.rounding import U64, widened
from openbench.evaluation.counting.matrix import c_pass, core
from openbench.evaluation.counting.matrix.blocks import _EmbeddingBlocks
from openbench.evaluation.counting.matrix.passes import _TorchPass
from openbench.evaluation.counting.matrix.windows import _grid, _Windows
from openbench.models.scorers import candidate_scores

__all__ = ["PROBE_KEYS", "CROWDED", "PROBE_COLUMNS"]


class _ExactOrder:
    """Exact keys where float64 cannot decide: Decimal keys cached by pair."""

    def __init__(self, blocks: _EmbeddingBlocks):
        self.blocks = blocks
        self.cache: Dict[Tuple[int, int], decimal.Decimal] = {}
        self.decimal = 0

    def key(self, row: int, col: int) -> decimal.Decimal:
        found = self.cache.get((row, col))
        if found is None:
            self.decimal += 1
            found = self.cache[(row, col)] = self.blocks.decimal_key(row, col)
        return found

    def groups(self, rows: np.ndarray, cols: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Dense exact ranks of the pairs (rows, cols) from their float64 keys and bounds: a run of
        pairs whose intervals overlap is ordered by exact keys (unless all bounds are 0)."""
        if keys.shape[0] == 0:
            return np.zeros(0, np.int64)
        codes = rows.astype(np.int64) * (int(cols.max()) + 1) + cols
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        if first.shape[0] < keys.shape[0]:  # a pair given twice is one pair: decided once
            return self.groups(rows[first], cols[first], keys[first], bounds[first])[inverse.reshape(-1)]
        count = keys.shape[0]
        order = np.lexsort((cols, rows, keys))
        sorted_keys, sorted_bounds = keys[order], bounds[order]
        lows, highs = sorted_keys - sorted_bounds, sorted_keys + sorted_bounds
        reach = np.maximum.accumulate(highs)
        starts = np.r_[True, lows[1:] > reach[:-1]]
        boundaries = np.flatnonzero(np.r_[starts, True])
        sizes = np.diff(boundaries)
        # each cluster's groups within it (a lone pair: one); only clusters of several pairs are ordered one by one
        local = np.zeros(count, np.int64)
        spans = np.ones(sizes.shape[0], np.int64)
        for cluster in np.flatnonzero(sizes > 1).tolist():
            begin, end = int(boundaries[cluster]), int(boundaries[cluster + 1])
            members = order[begin:end]
            if not sorted_bounds[begin:end].any():
                exact = [decimal.Decimal(float(k)) for k in sorted_keys[begin:end]]
            else:
                exact = [self.key(int(rows[i]), int(cols[i])) for i in members]
            ordering = sorted(range(end - begin), key=lambda i: exact[i])
            group, previous = 0, None
            for position in ordering:
                if previous is not None and exact[position] != previous:
                    group += 1
                local[begin + position] = group
                previous = exact[position]
            spans[cluster] = group + 1
        first_group = np.cumsum(spans) - spans  # the clusters' groups follow one another
        ranks = np.repeat(first_group, sizes) + local  # the group of each sorted pair
        out = np.empty(count, np.int64)
        out[order] = ranks
        return out


PROBE_KEYS = 1 << 19  # the probe's keys: whether a matrix is crowded, and the fused pass's first floor
CROWDED = 0.05  # the share of a block's keys inside float32 windows beyond which the pass runs in float64


def _pair_windows(blocks: _EmbeddingBlocks, terms: Optional[np.ndarray], centers: np.ndarray,
                  threshold_width: float) -> Optional[tuple]:
    """The fused pass's own window of each pair (None where the rows have no bound polynomial):
    each row's polynomial in the column's norm (the pair's own fast-key bound), the columns' norm
    bounds, the thresholds' sorted float64 keys (``centers``), and what every window adds: the
    thresholds' own bound and order slack (``threshold_width``) and the centers' evaluation."""
    if terms is None:
        return None
    extra = threshold_width + 4 * U64 * float(np.max(np.abs(centers), initial=0.0))
    return terms, np.ascontiguousarray(blocks.column_norms()), np.ascontiguousarray(centers, np.float64), extra


PROBE_COLUMNS = 64  # columns every row is scored against to find the rows that hold the best pairs


def _probe_keys(blocks: _EmbeddingBlocks, rows: int) -> Tuple[np.ndarray, torch.Tensor]:
    """(rows (B,), keys (B, S)): the fast keys of B rows, at most :data:`PROBE_KEYS` keys (a GEMM):
    half spread evenly over the matrix (the windows' crowd is the whole matrix's), half the rows
    whose best key against :data:`PROBE_COLUMNS` spread columns is highest (the best pairs gather
    in few rows where a row's own term dominates its keys, as L2's -‖q‖²: their keys make a first
    floor near the matrix's own). Any rows give a valid floor; these give a high one."""
    width = max(1, blocks.columns.shape[0])
    count = max(1, min(rows, blocks.fast_queries.shape[0], max(1, min(PROBE_KEYS, core.COUNTER_LIMIT) // width)))
    spread = np.unique(np.linspace(0, rows - 1, max(1, count // 2)).round().astype(np.int64))
    chosen = spread
    if count > spread.shape[0]:

        queries, columns, squared = blocks.fast_tables()
        sampled = torch.from_numpy(np.unique(np.linspace(0, width - 1, min(width, PROBE_COLUMNS)).round()
                                             .astype(np.int64))).to(columns.device)
        best = candidate_scores(blocks.kind, queries[:rows], columns[sampled], None if squared is None
                                else squared[sampled], keys=True).amax(dim=1).double().cpu().numpy()
        best[spread] = -np.inf
        chosen = np.union1d(spread, np.argsort(-best, kind="stable")[:count - spread.shape[0]])
    out = torch.empty((chosen.shape[0], width), dtype=blocks.fast_queries.dtype, device=blocks.device)
    return chosen, blocks.keys_at(torch.from_numpy(chosen), out)


def _crowded(blocks: _EmbeddingBlocks, windows: _Windows, library, keys: torch.Tensor, on_device: bool = False) -> bool:
    """Whether more than :data:`CROWDED` of the fast ``keys`` (the probe's, :func:`_probe_keys`) lie
    inside a window (each would be re-scored from the table, some 80 times a key's share of a
    float64 GEMM)."""
    rows = keys.shape[0]
    if on_device:
        return _TorchPass(windows, True, blocks.device).inside(keys) > CROWDED * keys.numel()
    count = int(windows.lows.shape[0])
    grid = _grid(windows, True)
    beyond, reached = np.zeros(count + 1, np.int64), np.zeros(count + 1, np.int64)
    counts = np.empty(grid.cells + 2, np.int32)
    inside = library.openbench_matrix_count_f32(ctypes.byref(c_pass.MatrixPassArgs(
        keys=keys.data_ptr(), stride=keys.stride(0), rows=rows, width=keys.shape[1], lows=windows.lows.data_ptr(),
        highs=windows.highs.data_ptr(), count=count, **grid.arguments(), cell_counts=counts.ctypes.data,
        beyond=beyond.ctypes.data, reached=reached.ctypes.data, record=1, floor=np.inf)))
    return inside < 0 or inside > CROWDED * keys.numel()


def _float64_windows(blocks: _EmbeddingBlocks, scorer, grid_bits, keys: np.ndarray,
                     threshold_bound: float) -> Tuple[np.ndarray, np.ndarray]:
    """The thresholds' float64 windows for the pass's float64 step: each sorted key widened by the
    largest bound on any matrix pair's float64 key (the largest norms on both sides) plus the
    thresholds' own, rounded outwards (non-decreasing, as the keys)."""

    q2, q1 = (float(n.max(initial=0.0)) for n in blocks.query_norms)
    c2, c1 = (float(n.max()) if n.size else 0.0 for n in blocks.column_norm_bounds())
    worst = {"dot": 0.0, "l2": -(q2 + c2) ** 2, "l1": -(q1 + c1)}[blocks.kind]
    pair_bound = float(float64_key_bound(blocks.kind, scorer, grid_bits, np.array([worst]),
                                         blocks.exact_queries.shape[1], (np.array([q2]), np.array([q1])),
                                         (np.array([c2]), np.array([c1])))[0])
    width = widened(pair_bound + threshold_bound)
    margin = width + 4 * U64 * np.abs(keys) if width > 0 else np.zeros_like(keys)
    lows = np.nextafter(keys - margin, -np.inf) if width > 0 else keys.copy()
    highs = np.nextafter(keys + margin, np.inf) if width > 0 else keys.copy()
    return lows, highs


def _decide(blocks: _EmbeddingBlocks, exact: _ExactOrder, grid_bits, rows: np.ndarray, cols: np.ndarray,
            t_rows: np.ndarray, t_cols: np.ndarray, t_keys: np.ndarray, t_bounds: np.ndarray) -> Tuple[np.ndarray,
                                                                                                         np.ndarray]:
    """(above (n,), tie (n,)) bool: whether pair (rows[i], cols[i]) has an exact key above, or
    equal to, that of pair (t_rows[i], t_cols[i]) (float64 keys ``t_keys`` with bounds
    ``t_bounds``): float64 with bounds first, exact decimal keys where the intervals overlap."""
    keys, bounds = blocks.pair_keys(rows, cols, grid_bits)
    same = (rows == t_rows) & (cols == t_cols)
    above = ~same & (keys - bounds > t_keys + t_bounds)
    below = ~same & (keys + bounds < t_keys - t_bounds)
    both_exact = (bounds == 0) & (t_bounds == 0)
    open_ = ~same & ~above & ~below
    tie = same | (open_ & both_exact & (keys == t_keys))
    above |= open_ & both_exact & (keys > t_keys)
    for index in np.flatnonzero(open_ & ~both_exact):
        difference = exact.key(int(rows[index]), int(cols[index])) - exact.key(int(t_rows[index]), int(t_cols[index]))
        if difference > 0:
            above[index] = True
        elif difference == 0:
            tie[index] = True
    return above, tie


def _settle(blocks: _EmbeddingBlocks, exact: _ExactOrder, grid_bits, codes: np.ndarray, first: np.ndarray,
            last: np.ndarray, t_rows, t_cols, t_keys, t_bounds, width: int) -> Tuple[np.ndarray, np.ndarray]:
    """(greater (T,), equal (T,)) the recorded keys add to the sorted thresholds ``first[i] ..
    last[i] - 1`` each is undecided for (:func:`_decide`)."""
    count = t_keys.shape[0]
    greater, equal = np.zeros(count, np.int64), np.zeros(count, np.int64)
    if codes.size == 0:
        return greater, equal
    spans = last - first
    pair = np.repeat(np.arange(codes.size), spans)
    threshold = (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans)) + np.repeat(first, spans)
    rows, cols = codes // width, codes % width
    above, tie = _decide(blocks, exact, grid_bits, rows[pair], cols[pair], t_rows[threshold], t_cols[threshold],
                         t_keys[threshold], t_bounds[threshold])
    greater += np.bincount(threshold[above], minlength=count).astype(np.int64)
    equal += np.bincount(threshold[tie], minlength=count).astype(np.int64)
    return greater, equal
