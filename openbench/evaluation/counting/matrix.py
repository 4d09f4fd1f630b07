"""A whole score matrix counted against thresholds: the drug × disease matrix of the repurposing task.

The ranking engine counts, per query row, the candidates that score above that row's own answer.
The repurposing task asks a global question instead: for each of T threshold pairs of the matrix
(a test indication, a known negative, a pair of a ground-truth file), how many of the matrix's
D × S pairs score above it, and how many tie with it; and which pairs are the matrix's best.
Ranking every pair of the matrix against T scores by a Python loop, or holding a float64 copy of
the matrix, does not scale to PrimeKG's 1.36e8 pairs; this module counts it in one pass:

1. **Blocks.** Rows (drugs) are taken a block at a time, about :data:`BLOCK_KEYS` keys: each
   block's keys are one GEMM on every core (:func:`~openbench.models.scorers.candidate_scores`:
   the ranking pass's own arithmetic on the matrix's columns), then counted by every core, a share
   of its rows each. Narrow per-thread GEMMs stream the column table once per block and ran at half
   the machine's speed.
2. **One C pass per block** (``openbench_matrix_count_*`` in ``_counting.c``): every key is
   placed among the T sorted thresholds' windows [low, high] by a grid of cells over their span
   and a short binary search, two histograms of T + 1 counters record how many keys lie beyond
   each threshold and how many reach it, and the keys inside a window are recorded by position;
   so are the keys at or above the floor of the best pairs found so far.
3. **Exact decisions** (``exact`` mode, embedding scorers): as the ranking engine decides them
   (:mod:`openbench.evaluation.counting.exact`): the thresholds' keys are computed in float64
   from the stored values with a rounding bound (:func:`~openbench.evaluation.counting.exact.
   float64_key_bound`), every window is as wide as the largest bound on a fast key's rounding over
   the matrix's rows (:func:`~openbench.evaluation.counting.exact.fast_key_bound`) plus the
   thresholds' own, and only the keys inside a window are re-scored: in float64 with a bound, then
   in exact decimal arithmetic where the intervals still overlap. When the tables lie on a grid
   coarse enough that the fast pass computes every key exactly (integer embeddings), the windows
   are the thresholds' keys themselves and ties are counted in the pass.
4. **Scores as computed** (``as computed`` mode: any other scorer, or fast ranks): the blocks'
   values are compared as they are; the thresholds' values are read from the same blocks in a
   first pass, so that a threshold pair ties with itself whatever the scorer's arithmetic.

5. **The fused pass** (:class:`_FusedPass`, ``openbench_matrix_fused_f32``; exact mode, float32 dot
   or L2 keys, on a CPU with AVX-512): steps 1 and 2 in one: each thread computes its rows' keys
   a 6 × 32 tile at a time in registers and counts the tile while it is in L1, so no block of
   keys is written to memory and read again. The sums' order is its own (chunks of ⌊√d⌋ fused
   multiply-adds, then the chunks' sums: :func:`fused_chain` roundings a term, 28 at d = 200
   where a GEMM of unknown order allows 200), so its windows, and the keys re-scored in float64,
   are some seven times fewer. The first floor of the best pairs comes from a probe's GEMM keys,
   widened by both bounds. ``OPENBENCH_MATRIX_PASS=plain`` runs the GEMM and the plain pass.

On a GPU (``device``), the exact mode's blocks are computed and counted there by
:class:`_TorchPass` (the C pass's contract in torch: binary searches among the windows, the
float64 step on the device, histograms by ``bincount``); what stays undecided is settled on the
host as on the CPU. ``OPENBENCH_MATRIX_PASS=torch`` runs that pass on the CPU (the tests compare
it with the C pass).

The special pairs (thresholds, and the pairs each view removes: known positives) are also put in
their exact order (:attr:`MatrixCounts.groups`), so that a view subtracts what it removes with the
same decisions. Counts are int64 sums over blocks: the order the workers finish in changes nothing.
"""
from __future__ import annotations

import ctypes
import decimal
import logging
import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact import ExactRanks, UnboundedKeys
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY
from openbench.models.finite import refuse_nonfinite

__all__ = ["BLOCK_KEYS", "MatrixSpec", "MatrixCounts", "Shard", "count_matrix", "count_rows", "RowCounts", "exact_mode_applies"]

logger = logging.getLogger(__name__)

BLOCK_KEYS = 1 << 24  # keys per block: 64 MB of float32, a GEMM at the machine's speed, few blocks to merge
BLOCK_VARIABLE = "OPENBENCH_MATRIX_BLOCK_KEYS"  # another block size (tests deal small blocks over ranks)
MAX_GRID_CELLS = 1 << 16  # the cells' counters stay in L2
COUNTER_LIMIT = (1 << 31) - 1  # the keys one C pass counts (its cells' counters are int32)
PASS_VARIABLE = "OPENBENCH_MATRIX_PASS"  # "torch": the device pass on the CPU too; "plain": GEMM + C pass, never fused
DEVICE_STEP_KEYS = 1 << 16  # keys per float64 step of the device pass (their rows and columns gathered)
TOP_SLACK = 4  # the best pairs kept at most this many times the asked number (ties at the cut)


@dataclass(frozen=True)
class MatrixSpec:
    """The matrix: ``rows`` (D,) and ``cols`` (S,) int64 entity ids (drugs and diseases), scored
    under relation id ``relation`` as (row, relation, col) when ``rows_are_heads``, else as (col,
    relation, row)."""

    rows: torch.Tensor
    cols: torch.Tensor
    relation: int
    rows_are_heads: bool

    @property
    def side(self) -> str:
        """The side the columns are candidates of: a row's query is (row, r, ?) or (?, r, row)."""
        return "tail" if self.rows_are_heads else "head"

    @property
    def shape(self) -> Tuple[int, int]:
        return int(self.rows.shape[0]), int(self.cols.shape[0])

    def triples(self, row_index: torch.Tensor, col_index: torch.Tensor) -> torch.Tensor:
        """(n, 3) the triples of the pairs (rows[row_index], cols[col_index]), in the relation's
        orientation."""
        row_ids, col_ids = self.rows[row_index], self.cols[col_index]
        relation = torch.full_like(row_ids, self.relation)
        heads, tails = (row_ids, col_ids) if self.rows_are_heads else (col_ids, row_ids)
        return torch.stack([heads, relation, tails], dim=1)

    def queries(self, first: int, last: int) -> torch.Tensor:
        """(B, 3) the triples whose ``side`` queries are rows ``first .. last - 1`` (the
        candidate's slot holds the first column: it is not read)."""
        return self.triples(torch.arange(first, last), torch.zeros(last - first, dtype=torch.long))


@dataclass
class MatrixCounts:
    """What :func:`count_matrix` found.

    ``greater`` and ``equal`` (P,) int64: for each special pair flagged as a threshold, how many
    pairs of the whole matrix score above it and how many tie with it (itself included); 0 for the
    others. ``groups`` (P,) int64: the special pairs' exact order, a dense rank from the lowest
    key (equal keys, one group). ``keys`` (P,) float64: their keys (float64 values; the order is
    ``groups``'). ``top`` (K', 2) int64 row and column indexes of the matrix's best pairs, best
    first, without the excluded special pairs, through the end of the tie group at the K-th place
    (at most ``TOP_SLACK`` · K); ``top_groups`` (K',) their tie groups (equal: tied), ``top_keys``.
    ``stats``: the mode, blocks, keys re-scored and decided in exact decimal arithmetic."""

    greater: np.ndarray
    equal: np.ndarray
    groups: np.ndarray
    keys: np.ndarray
    top: np.ndarray
    top_groups: np.ndarray
    top_keys: np.ndarray
    stats: Dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Shard:
    """This process's share of the matrix under torch.distributed (every rank one ``Shard`` with
    its rank): blocks dealt round-robin, and the reductions that make every rank hold the counts of
    the whole matrix. Histograms and counts are int64 sums, exact in any order: the record is the
    one process's, byte for byte."""

    rank: int
    world: int

    def mine(self, items: list) -> list:
        return items[self.rank::self.world]

    def sum(self, values: np.ndarray) -> np.ndarray:
        """The element-wise sum over the ranks (int64 or float64; float64 only where one rank holds
        each value and the others 0, so that the sum is exact)."""
        import torch.distributed as dist

        tensor = torch.from_numpy(np.ascontiguousarray(values)).clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.numpy()

    def gather(self, value) -> list:
        """Every rank's ``value``, in rank order."""
        import torch.distributed as dist

        gathered: list = [None] * self.world
        dist.all_gather_object(gathered, value)
        return gathered


def _stored_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``table[ids]`` (N, ...) for (N,) int64 ids: a view where the ids are one ascending run (the
    matrix's columns often are: no 14 MB copy at PrimeKG's size), else a gathered copy."""
    count = int(ids.shape[0])
    if count and int(ids[-1]) - int(ids[0]) == count - 1 and bool((ids[1:] - ids[:-1] == 1).all()):
        return table[int(ids[0]):int(ids[0]) + count]
    return table[ids]


def exact_mode_applies(scorer) -> bool:
    """Whether ``scorer``'s keys can be decided exactly here: an embedding scorer of dot, L2 or L1
    keys whose candidate vectors are stored values (no rounding formula), on the CPU."""
    from openbench.models.scorers import EmbeddingScorer

    return (isinstance(scorer, EmbeddingScorer) and scorer.kind in ("dot", "l2", "l1") and scorer.exact_keys
            and not scorer.candidate_rounding and scorer.entities.device.type == "cpu"
            and scorer.entities.dtype in (torch.float32, torch.float64)
            and scorer.relations.dtype == scorer.entities.dtype)


# -- the C pass -------------------------------------------------------------------------------

def _configure(library) -> None:
    for name in ("openbench_matrix_count_f32", "openbench_matrix_count_f64"):
        function = getattr(library, name)
        real = ctypes.c_float if name.endswith("f32") else ctypes.c_double
        pointer, count = ctypes.c_void_p, ctypes.c_int64
        function.argtypes = [pointer, count, count, count, pointer, pointer, count, pointer, pointer, pointer, count,
                             real, real, pointer, pointer, pointer, ctypes.c_int, pointer, count, real, pointer,
                             count, pointer, ctypes.c_int, pointer, count, pointer, pointer, pointer]
        function.restype = ctypes.c_int64
    if hasattr(library, "openbench_matrix_fused_f32"):
        pointer, count = ctypes.c_void_p, ctypes.c_int64
        library.openbench_matrix_fused_f32.argtypes = [
            pointer, count, pointer, pointer, count, count, count, pointer, pointer, pointer, pointer, count, pointer,
            pointer, pointer, count, ctypes.c_float, ctypes.c_float, pointer, pointer, pointer, ctypes.c_int, pointer,
            count, ctypes.c_float, pointer, pointer, count, pointer, ctypes.c_int, pointer, pointer, pointer,
            pointer, pointer, pointer, ctypes.c_double]
        library.openbench_matrix_fused_f32.restype = ctypes.c_int64
        library.openbench_matrix_fused_keys_f32.argtypes = [pointer, count, pointer, count, count, count, pointer,
                                                             pointer, ctypes.c_int, pointer]
        library.openbench_matrix_fused_keys_f32.restype = ctypes.c_int64
        library.openbench_matrix_fused_available.argtypes = []
        library.openbench_matrix_fused_available.restype = ctypes.c_int


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
    from openbench.evaluation.counting.exact import U64, round_outwards

    # a width of 0: keys and blocks exact (the grid criterion), the windows the keys themselves
    margin = half_width * (1 + 2.0 ** -30) + 4 * U64 * np.abs(keys) if half_width > 0 else np.zeros_like(keys)
    lows, highs = round_outwards(keys - margin, keys + margin, dtype)
    lows, highs = lows.contiguous(), highs.contiguous()
    return _Windows(lows, highs, bool(torch.equal(lows, highs)))


class _BlockPass:
    """One block's C pass (``openbench_matrix_count_*``), capacities grown and the pass repeated
    where a block records more; with float64 windows, exact ranks' float64 step inside it: a key
    inside a fast window is recomputed in float64 from the block's float64 query rows and the stored
    columns and placed among the float64 windows, and only what stays undecided is recorded, with
    its range of thresholds."""

    KINDS = {"dot": 0, "l2": 1, "l1": 2}

    def __init__(self, windows: _Windows, record: bool, library, kind: str = "dot",
                 queries64: Optional[torch.Tensor] = None, columns: Optional[torch.Tensor] = None,
                 lows64: Optional[np.ndarray] = None, highs64: Optional[np.ndarray] = None):
        self.windows, self.record, self.library = windows, record, library
        self.count = int(windows.lows.shape[0])
        self.grid = _grid(windows, record)
        self.kind = self.KINDS.get(kind, 0)
        self.queries64 = None if queries64 is None else queries64.contiguous()
        self.columns = None if columns is None else columns.contiguous()
        self.lows64 = None if lows64 is None else np.ascontiguousarray(lows64)
        self.highs64 = None if highs64 is None else np.ascontiguousarray(highs64)

    def __call__(self, keys: torch.Tensor, floor: Optional[float], first: int = 0):
        """(beyond (T + 1,), reached (T + 1,), undecided (n, 3): position, first and last undecided
        threshold, top positions) of the rows ``keys`` (B, S) of the block, its first row ``first``."""
        windows, grid = self.windows, self.grid
        rows, width = keys.shape
        most = max(1, COUNTER_LIMIT // max(1, width))  # the pass's int32 counters hold rows * width keys
        if rows > most:
            return self._in_parts(keys, floor, first, most)
        capacity, top_capacity = 1 << 16, 1 << 16  # untouched pages cost nothing; a pass repeated costs a pass
        f32 = keys.dtype == torch.float32
        function = self.library.openbench_matrix_count_f32 if f32 else self.library.openbench_matrix_count_f64
        real = ctypes.c_float if f32 else ctypes.c_double
        floor = _floor_in(keys.dtype, floor)
        refine: tuple = (None, 0, None, None, None)  # the float64 step's queries, width, columns, windows
        if self.queries64 is not None and self.columns is not None and self.lows64 is not None \
                and self.highs64 is not None:
            refine = (self.queries64[first:first + rows].data_ptr(), self.queries64.shape[1], self.columns.data_ptr(),
                      self.lows64.ctypes.data, self.highs64.ctypes.data)
        counts = np.empty(grid.cells + 2, np.int32)  # this call's own counters (calls run on several threads)
        while True:
            beyond, reached = np.zeros(self.count + 1, np.int64), np.zeros(self.count + 1, np.int64)
            pairs, tops = np.empty(3 * capacity, np.int64), np.empty(top_capacity, np.int64)
            top_count = np.zeros(1, np.int64)
            found = function(keys.data_ptr(), keys.stride(0), rows, width, windows.lows.data_ptr(),
                             windows.highs.data_ptr(), self.count, grid.codes.ctypes.data, grid.impure.ctypes.data,
                             grid.ranges.ctypes.data,
                             grid.cells, real(grid.base), real(grid.scale), counts.ctypes.data, beyond.ctypes.data,
                             reached.ctypes.data, int(self.record), pairs.ctypes.data, capacity,
                             real(-np.inf if floor is None else floor),
                             tops.ctypes.data if floor is not None else None, top_capacity, top_count.ctypes.data,
                             self.kind, *refine)
            if found < 0:
                position = -1 - found
                raise ScoreError(f"the model gave a NaN score to pair (row {position // width} of a block, column "
                                 f"{position % width}); a repurposing matrix ranks finite scores")
            kept = int(top_count[0]) if floor is not None else 0
            if found <= capacity and kept <= top_capacity:
                recorded = pairs[:3 * found].reshape(-1, 3)
                # row order, whatever order the pass visits the keys in (column spans)
                return beyond, reached, recorded[np.argsort(recorded[:, 0], kind="stable")], np.sort(tops[:kept])
            capacity, top_capacity = max(capacity, int(found)), max(top_capacity, kept)

    def _in_parts(self, keys: torch.Tensor, floor: Optional[float], first: int, most: int):
        """The pass over ``most`` rows at a time, its results merged (positions within ``keys``)."""
        width = keys.shape[1]
        return _merged_parts([self(keys[r0:r0 + most], floor, first + r0) for r0 in range(0, keys.shape[0], most)],
                             [r0 * width for r0 in range(0, keys.shape[0], most)])


def _merged_parts(parts: list, offsets: List[int]) -> tuple:
    """One pass's result from its parts' (beyond, reached, recorded (n, 3), top positions[, their
    keys]), each part's positions moved by its offset: histograms summed, the rest concatenated."""
    merged = (sum(part[0] for part in parts), sum(part[1] for part in parts),
              np.concatenate([part[2] + np.array([offset, 0, 0]) for part, offset in zip(parts, offsets)]),
              np.concatenate([part[3] + offset for part, offset in zip(parts, offsets)]))
    return merged + tuple(np.concatenate([part[k] for part in parts]) for k in range(4, len(parts[0])))


def _floor_in(dtype: torch.dtype, floor: Optional[float]) -> Optional[float]:
    """The best pairs' floor in the keys' precision, rounded down: every key at the floor stays."""
    if floor is None or dtype != torch.float32:
        return floor
    rounded = np.float32(floor)
    return float(np.nextafter(rounded, np.float32(-np.inf)) if rounded > floor else rounded)


def _numpy_pass(windows: _Windows, record: bool):
    """The C pass's contract in numpy (no compiled helper, or ``OPENBENCH_KERNEL=torch``): no
    float64 step, every key inside a window recorded with its range of thresholds."""
    lows, highs = windows.lows.double().numpy(), windows.highs.double().numpy()
    count = lows.shape[0]

    def run(keys: torch.Tensor, floor: Optional[float], first: int = 0):
        flat = keys.double().reshape(-1).numpy()
        if np.isnan(flat).any():
            position = int(np.flatnonzero(np.isnan(flat))[0])
            raise ScoreError(f"the model gave a NaN score to pair (row {position // keys.shape[1]} of a block, "
                             f"column {position % keys.shape[1]}); a repurposing matrix ranks finite scores")
        a = np.searchsorted(highs, flat, "left")
        b = np.searchsorted(lows, flat, "right")
        beyond = np.bincount(a, minlength=count + 1).astype(np.int64)
        reached = np.bincount(b, minlength=count + 1).astype(np.int64)
        inside = np.flatnonzero(a < b) if record else np.zeros(0, np.int64)
        triples = np.stack([inside, a[inside], b[inside]], axis=1) if inside.size else np.zeros((0, 3), np.int64)
        tops = np.flatnonzero(flat >= floor) if floor is not None else np.zeros(0, np.int64)
        return beyond, reached, triples, tops

    return run


class _TorchPass:
    """The C pass's contract in torch, on the keys' device (a GPU): each key placed among the
    windows by binary search (``a``: the highs below it, ``b``: the lows at or below it, as
    ``count_below_*``), a key inside a window (a < b) recomputed in float64 from the float64 query
    rows and the stored columns (``DEVICE_STEP_KEYS`` at a time) and placed among the float64
    windows within its [a, b] (the windows are non-decreasing: a clamp of the whole search), what
    stays undecided recorded with its range, the histograms by ``bincount``."""

    def __init__(self, windows: _Windows, record: bool, device: torch.device, kind: str = "dot",
                 queries64: Optional[torch.Tensor] = None, columns: Optional[torch.Tensor] = None,
                 lows64: Optional[np.ndarray] = None, highs64: Optional[np.ndarray] = None):
        self.record, self.kind, self.device = record, kind, device
        self.count = int(windows.lows.shape[0])
        self.lows, self.highs = windows.lows.to(device), windows.highs.to(device)
        self.refine = queries64 is not None and columns is not None and lows64 is not None and highs64 is not None
        if self.refine:
            assert queries64 is not None and columns is not None and lows64 is not None and highs64 is not None
            self.queries64 = queries64.to(device=device, dtype=torch.float64)
            self.columns64 = columns.to(device=device, dtype=torch.float64)  # float32 values: exact
            self.lows64 = torch.from_numpy(np.ascontiguousarray(lows64, np.float64)).to(device)
            self.highs64 = torch.from_numpy(np.ascontiguousarray(highs64, np.float64)).to(device)

    def inside(self, keys: torch.Tensor) -> int:
        """How many of ``keys`` lie inside a window (the probe of :func:`_crowded`)."""
        flat = keys.reshape(-1)
        return int((torch.searchsorted(self.highs, flat) < torch.searchsorted(self.lows, flat, right=True)).sum())

    def __call__(self, keys: torch.Tensor, floor: Optional[float], first: int = 0):
        """As :meth:`_BlockPass.__call__`: (beyond (T + 1,), reached (T + 1,), undecided (n, 3), top
        positions), numpy arrays on the host, positions within ``keys`` (B, S)."""
        rows, width = keys.shape
        flat = keys.reshape(-1)
        floor = _floor_in(keys.dtype, floor)
        nan = torch.isnan(flat)
        if bool(nan.any()):
            position = int(torch.nonzero(nan)[0, 0])
            raise ScoreError(f"the model gave a NaN score to pair (row {position // width} of a block, column "
                             f"{position % width}); a repurposing matrix ranks finite scores")
        a = torch.searchsorted(self.highs, flat)
        b = torch.searchsorted(self.lows, flat, right=True)
        undecided = torch.zeros((0, 3), dtype=torch.int64, device=flat.device)
        if self.record:
            inside = torch.nonzero(a < b)[:, 0]
            if self.refine and inside.numel():
                for start in range(0, inside.numel(), DEVICE_STEP_KEYS):
                    part = inside[start:start + DEVICE_STEP_KEYS]
                    key = self._float64_keys(first + part // width, part % width)
                    low, high = a[part], b[part]
                    narrowed = torch.maximum(torch.minimum(torch.searchsorted(self.highs64, key), high), low)
                    b[part] = torch.maximum(torch.minimum(torch.searchsorted(self.lows64, key, right=True), high),
                                            narrowed)
                    a[part] = narrowed
                inside = inside[a[inside] < b[inside]]
            undecided = torch.stack([inside, a[inside], b[inside]], dim=1)
        beyond = torch.bincount(a, minlength=self.count + 1)
        reached = torch.bincount(b, minlength=self.count + 1)
        tops = torch.nonzero(flat >= floor)[:, 0] if floor is not None else torch.zeros(0, dtype=torch.int64)
        return (beyond.cpu().numpy().astype(np.int64), reached.cpu().numpy().astype(np.int64),
                undecided.cpu().numpy(), tops.cpu().numpy())

    def _float64_keys(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """(n,) float64 keys of the pairs (rows, cols) (matrix indexes): the C pass's float64 step
        (any order of the sum is within the float64 windows' bound)."""
        queries, columns = self.queries64[rows], self.columns64[cols]
        if self.kind == "dot":
            return (queries * columns).sum(dim=1)
        if self.kind == "l2":
            return -((queries - columns) ** 2).sum(dim=1)
        return -(queries - columns).abs().sum(dim=1)


FUSED_BLOCKS = 4  # the fused pass's blocks hold this many times BLOCK_KEYS keys (fewer rounds of the threads)
FUSED_COLS = 32  # the fused pass's tile width (``_counting.c``'s FUSED_COLS): the columns are packed in panels of it


def fused_chunk(dims: int) -> int:
    """The fused pass's chunk of dimensions (summed by fused multiply-adds from 0; the chunks'
    sums then added in order): ⌊√d⌋, which about minimises :func:`fused_chain`."""
    return max(1, math.isqrt(max(1, dims)))


def fused_chain(dims: int) -> int:
    """The most roundings a term of the fused pass's dot products goes through: within its chunk
    (``chunk``, the first product's included), then the ⌈d / chunk⌉ - 1 additions of the chunks'
    sums (Higham's blocked summation: |error| <= γ_chain Σ|q_k c_k|; 28 at d = 200, where a sum in
    any order allows 200)."""
    chunk = fused_chunk(dims)
    return chunk + -(-max(1, dims) // chunk) - 1


def fused_applies(blocks: "_EmbeddingBlocks", library) -> bool:
    """Whether the fused pass counts these blocks: the C helper has it and the CPU runs it
    (AVX-512, the scan chosen), float32 dot or L2 keys, on the CPU (``OPENBENCH_MATRIX_PASS=plain``:
    the GEMM and the plain pass instead)."""
    return blocks.fast_queries.dtype == torch.float32 and _fused_columns(blocks.kind, blocks.columns, library) and \
        blocks.device.type == "cpu"


def _fused_columns(kind: str, columns: torch.Tensor, library) -> bool:
    """:func:`fused_applies` as far as the keys' kind and the columns (S, d') tell, before the queries
    are computed (the columns' packing starts then)."""
    import os

    if library is None or not hasattr(library, "openbench_matrix_fused_f32"):
        return False
    if os.environ.get(PASS_VARIABLE, "").lower() in ("plain", "torch"):
        return False
    return (kind in ("dot", "l2") and columns.device.type == "cpu" and columns.dtype == torch.float32
            and bool(library.openbench_matrix_fused_available()))


def _packed_columns(columns: np.ndarray) -> np.ndarray:
    """(⌈S / 32⌉, d, 32) float32 the columns (S, d) in the fused pass's panels, zero past S: written
    once into one array (fresh pages are the cost here, not the copy)."""
    width, dims = columns.shape
    whole, rest = divmod(width, FUSED_COLS)
    packed = np.empty((whole + (rest > 0), dims, FUSED_COLS), np.float32)
    packed[:whole] = columns[:whole * FUSED_COLS].reshape(whole, FUSED_COLS, dims).transpose(0, 2, 1)
    if rest:
        packed[whole] = 0.0
        packed[whole, :, :rest] = columns[whole * FUSED_COLS:].T
    return packed


CENTRING_CHUNK = 1 << 16  # float64 values at a time while the fused pass's L2 inputs are centred


@dataclass
class _FusedInputs:
    """What the fused pass multiplies and adds, and the bound its keys carry: ``queries`` (D, d')
    float32, the columns' and rows' terms of L2 keys ((S,) and (D,) float32, or None), ``terms``
    (D, 3) each row's bound as a polynomial in the column's norm (None: no pair's own window) and
    ``delta``, the largest over the matrix."""

    queries: torch.Tensor
    col_terms: Optional[torch.Tensor]
    row_terms: Optional[torch.Tensor]
    terms: Optional[np.ndarray]
    delta: float
    centred: bool = False


def _fused_inputs(blocks: "_EmbeddingBlocks", grid_bits) -> _FusedInputs:
    """The fused pass's inputs. Dot keys, and keys the fast pass computes exactly: the fast queries
    and their bound (:meth:`_EmbeddingBlocks.fast_bound` with :func:`fused_chain`). L2 keys:
    centred on m, the float32 mean of the float64 queries, which every row shares: the pass
    multiplies ŝ = fl(Q̃ - m) by the columns and adds T = fl(2 m·c - ‖c‖²) and R = -fl(‖Q̃‖²)
    (:func:`~openbench.evaluation.counting.exact.centred_l2_bound_terms`). TransE's queries h + r
    all carry r, so its bound scales with ‖h‖ instead of ‖h + r‖."""
    from openbench.evaluation.counting.exact import (U64, SUBNORMAL_SPACING, centred_l2_bound_terms, gamma,
                                                     norm_bounds, unit_roundoff)
    from openbench.models.scorers import squared_norms

    chain = fused_chain(blocks.fast_queries.shape[1])
    queries, columns, squared = blocks.fast_tables()
    inputs = blocks._bound_inputs(grid_bits)
    if blocks.kind != "l2" or inputs is None:
        col_terms = row_terms = None
        if blocks.kind == "l2":
            assert squared is not None
            col_terms, row_terms = squared.neg().contiguous(), squared_norms(queries).neg_().contiguous()
        return _FusedInputs(queries.contiguous(), col_terms, row_terms, blocks.pair_bound_terms(grid_bits, chain),
                            blocks.fast_bound(grid_bits, chain))
    exact = blocks.exact_queries.to(torch.float64)
    shifted, col_terms, centre = _centred_l2_terms(exact.numpy(), columns.numpy())
    row_terms = squared_norms(exact).neg_().to(torch.float32)  # -‖Q̃‖²: summed in float64, rounded once
    u, width = unit_roundoff(torch.float32), shifted.shape[1]
    error = gamma(blocks.scorer.query_rounding, U64) * blocks.query_norms[0]
    quadratic, linear, constant = centred_l2_bound_terms(
        u, width, chain, norm_bounds(shifted)[0].numpy(), float(norm_bounds(centre[None])[0][0]),
        norm_bounds(exact)[0].numpy(), error)
    tiny = 4 * (width + blocks.scorer.query_rounding + 8) * SUBNORMAL_SPACING[torch.float32]
    terms = np.ascontiguousarray(np.stack([quadratic, linear, constant + tiny], axis=1))
    c2 = float(blocks.column_norms().max(initial=0.0))
    delta = float((((terms[:, 0] * c2 + terms[:, 1]) * c2 + terms[:, 2])).max(initial=0.0))
    return _FusedInputs(shifted, col_terms.contiguous(), row_terms.contiguous(), terms, delta, True)


def _centred_l2_terms(exact: np.ndarray, columns: np.ndarray) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ŝ (D, d') float32, T (S,) float32, m (d',) float32) of :func:`_fused_inputs`'s centred L2
    keys from the float64 queries ``exact`` (D, d') and the float32 columns (S, d'): m the float32
    mean of the queries, ŝ = fl(Q̃ - m) (one float64 and one float32 rounding), T = fl(2 m·c - ‖c‖²)
    summed in float64 and rounded once. In numpy, a chunk at a time through one float64 buffer:
    this runs on a setup thread beside others, where torch's intra-op threads would wait on a busy
    core."""
    centre = exact.mean(axis=0).astype(np.float32)
    centre64 = centre.astype(np.float64)
    shifted = np.empty(exact.shape, np.float32)
    col_terms = np.empty(columns.shape[0], np.float32)
    step = max(1, CENTRING_CHUNK // max(1, exact.shape[1]))
    buffer = np.empty((step, exact.shape[1]), np.float64)
    for start in range(0, exact.shape[0], step):
        rows = buffer[:min(step, exact.shape[0] - start)]
        np.subtract(exact[start:start + rows.shape[0]], centre64, out=rows)
        shifted[start:start + rows.shape[0]] = rows
    for start in range(0, columns.shape[0], step):
        block = buffer[:min(step, columns.shape[0] - start)]
        np.copyto(block, columns[start:start + block.shape[0]])
        col_terms[start:start + block.shape[0]] = 2.0 * np.einsum("ij,j->i", block, centre64) - \
            np.einsum("ij,ij->i", block, block)
    return torch.from_numpy(shifted), torch.from_numpy(col_terms), torch.from_numpy(centre)


class _FusedPass:
    """The exact mode's fused pass (``openbench_matrix_fused_f32``): each part's keys computed a
    tile at a time and counted while the tile is in cache, as :class:`_BlockPass` counts a block
    (its grid, windows and float64 step), with no block of keys written and read again; the dot
    products summed in chunks (:func:`fused_chain`), whose bound makes the windows, and the keys
    re-scored in float64, some seven times fewer than a GEMM's at d = 200."""

    def __init__(self, plain: _BlockPass, blocks: "_EmbeddingBlocks", pair_windows: Optional[tuple] = None,
                 packed: Optional[np.ndarray] = None, inputs: Optional[_FusedInputs] = None):
        """``pair_windows``: (terms (D, 3), column norms (S,), centers (T,), extra) the pairs' own
        windows (``MATRIX_COUNT_KEY``), or None; ``packed``: :func:`_packed_columns` of the
        blocks' columns where the caller has it; ``inputs``: :func:`_fused_inputs` (default:
        computed here)."""
        self.plain, self.blocks, self.pair_windows = plain, blocks, pair_windows
        if inputs is None:
            inputs = _fused_inputs(blocks, ExactRanks(blocks.scorer).grid_bits)
        self.inputs = inputs
        _, columns, _ = blocks.fast_tables()
        self.queries, self.columns = inputs.queries, columns.contiguous()
        width, dims = self.columns.shape
        self.width, self.dims, self.chunk = width, dims, fused_chunk(dims)
        self.packed = _packed_columns(self.columns.numpy()) if packed is None else packed
        self.kind = 1 if blocks.kind == "l2" else 0
        # the windows with two values past their end: the pass reads a short range's next two without a branch
        padding = torch.full((2,), float("inf"), dtype=torch.float32)
        self.lows = torch.cat([plain.windows.lows, padding]).contiguous()
        self.highs = torch.cat([plain.windows.highs, padding]).contiguous()
        self.col_terms, self.row_terms = inputs.col_terms, inputs.row_terms

    def keys(self, first: int, last: int) -> torch.Tensor:
        """(B, S) float32 the fast keys of rows ``first .. last - 1`` as this pass computes them (the
        same tiles, sums and finishing; the tests hold them to the order the bound assumes)."""
        out = torch.empty((last - first, self.width), dtype=torch.float32)
        row_terms = self.row_terms[first:last].data_ptr() if self.row_terms is not None else None
        found = self.plain.library.openbench_matrix_fused_keys_f32(
            self.queries[first:last].data_ptr(), last - first, self.packed.ctypes.data, self.width, self.dims,
            self.chunk, row_terms, self.col_terms.data_ptr() if self.col_terms is not None else None, self.kind,
            out.data_ptr())
        if found < 0:
            raise MemoryError(f"the fused matrix keys could not be computed (code {found})")
        return out

    def __call__(self, first: int, last: int, floor: Optional[float]):
        """(beyond (T + 1,), reached (T + 1,), undecided (n, 3), top positions (k,), their fast
        keys (k,)) of rows ``first .. last - 1``, positions within those rows."""
        width = self.width
        most = max(1, COUNTER_LIMIT // max(1, width))  # the pass's int32 counters
        if last - first > most:
            return _merged_parts([self(r0, min(last, r0 + most), floor) for r0 in range(first, last, most)],
                                 [(r0 - first) * width for r0 in range(first, last, most)])
        plain, grid = self.plain, self.plain.grid
        floor = _floor_in(torch.float32, floor)
        refine: tuple = (None, None, None)
        if plain.queries64 is not None and plain.lows64 is not None and plain.highs64 is not None:
            refine = (plain.queries64[first:last].data_ptr(), plain.lows64.ctypes.data, plain.highs64.ctypes.data)
        rows = last - first
        pair: tuple = (None, None, None, 0.0)
        if self.pair_windows is not None and plain.record:
            terms, norms, centers, extra = self.pair_windows
            pair = (terms[first:last].ctypes.data, norms.ctypes.data, centers.ctypes.data, extra)
        counts = np.empty(grid.cells + 3, np.int32)  # the cells' counters and a spare (``_counting.c``)
        # a pass repeated costs a pass: room for the best pairs over the first floor (untouched pages cost nothing)
        capacity, top_capacity = 1 << 16, max(1 << 16, (last - first) * width // 64)
        queries = self.queries[first:last]
        row_terms = self.row_terms[first:last].data_ptr() if self.row_terms is not None else None
        col_terms = self.col_terms.data_ptr() if self.col_terms is not None else None
        while True:
            beyond, reached = np.zeros(plain.count + 1, np.int64), np.zeros(plain.count + 1, np.int64)
            pairs, tops = np.empty(3 * capacity, np.int64), np.empty(top_capacity, np.int64)
            top_keys, top_count = np.empty(top_capacity, np.float32), np.zeros(1, np.int64)
            found = plain.library.openbench_matrix_fused_f32(
                queries.data_ptr(), rows, self.packed.ctypes.data, self.columns.data_ptr(), width, self.dims,
                self.chunk, row_terms, col_terms, self.lows.data_ptr(), self.highs.data_ptr(), plain.count,
                grid.codes.ctypes.data, grid.impure.ctypes.data, grid.ranges.ctypes.data, grid.cells, grid.base,
                grid.scale, counts.ctypes.data, beyond.ctypes.data, reached.ctypes.data, int(plain.record),
                pairs.ctypes.data, capacity, -np.inf if floor is None else floor,
                tops.ctypes.data if floor is not None else None, top_keys.ctypes.data, top_capacity,
                top_count.ctypes.data, self.kind, *refine, *pair)
            if found == -1:  # a NaN key: the plain pass over these rows' GEMM names it
                keys = self.blocks.keys(first, last, torch.empty((rows, width), dtype=torch.float32))
                plain(keys, floor, first)
                raise ScoreError("the model gave a NaN score to a pair of the matrix; a repurposing matrix ranks "
                                 "finite scores")
            if found < 0:
                raise MemoryError(f"the fused matrix pass could not run (code {found})")
            kept = int(top_count[0]) if floor is not None else 0
            if found <= capacity and kept <= top_capacity:
                recorded = pairs[:3 * found].reshape(-1, 3)
                order = np.argsort(tops[:kept], kind="stable")
                return (beyond, reached, recorded[np.argsort(recorded[:, 0], kind="stable")], tops[:kept][order],
                        top_keys[:kept][order].astype(np.float64))
            capacity, top_capacity = max(capacity, int(found)), max(top_capacity, kept)


def _pass_name(count_pass, device: torch.device) -> str:
    """Which pass counted the blocks, and where (the record's timing says it)."""
    kind = ("torch" if isinstance(count_pass, _TorchPass) else "fused C" if isinstance(count_pass, _FusedPass)
            else "C" if isinstance(count_pass, _BlockPass) else "numpy")
    return f"{kind} on {device}"


def _pass_on_device(device: Optional[torch.device]) -> bool:
    """Whether the blocks are counted by :class:`_TorchPass`: on a GPU, or forced on the CPU."""
    import os

    return (device is not None and device.type != "cpu") or os.environ.get(PASS_VARIABLE, "").lower() == "torch"


# -- the blocks' keys ---------------------------------------------------------------------------

def _matrix_columns(scorer, spec: MatrixSpec) -> torch.Tensor:
    """(S, d') the candidate vectors of the matrix's columns (read as a view where their ids run in
    order)."""
    return scorer.candidate_rows(_stored_rows(scorer.entities, spec.cols), spec.side).contiguous()


class _EmbeddingBlocks:
    """Fast keys of a block of rows against every column (:func:`candidate_scores`), and what the
    exact decisions need: float64 queries with their magnitude bounds, the columns' stored rows."""

    def __init__(self, scorer, spec: MatrixSpec, columns: Optional[torch.Tensor] = None):
        """``columns``: :func:`_matrix_columns` where the caller has them."""
        from openbench.evaluation.counting.exact import query_rows
        from openbench.models.scorers import squared_norms

        self.scorer, self.spec, self.kind = scorer, spec, scorer.kind
        side = spec.side
        self.columns = _matrix_columns(scorer, spec) if columns is None else columns
        self.squared = squared_norms(self.columns) if self.kind == "l2" else None
        triples = spec.queries(0, spec.shape[0])
        self.fast_queries = scorer.query_vectors(triples, side).contiguous()  # (D, d') the blocks' queries
        ids = triples[:, 0] if spec.rows_are_heads else triples[:, 2]
        relations = triples[:, 1]
        built = query_rows(scorer, side, ids, relations, self.kind)
        if built is None:
            from openbench.evaluation.counting.exact import norm_bounds, real_rows

            anchor = real_rows(scorer.entities[ids])
            relation = real_rows(scorer.relations[relations])
            query = torch.from_numpy(np.ascontiguousarray(scorer.query_formula(anchor, relation, side, np.subtract)))
            magnitude = scorer.query_formula(np.abs(anchor), np.abs(relation), side, np.add)
            norms = norm_bounds(torch.from_numpy(np.ascontiguousarray(magnitude)))
        else:
            query, norms = built.query, built.norms
        self.exact_queries = query  # (D, d') float64
        self.query_norms = (norms[0].numpy(), norms[1].numpy())
        self.anchor_ids, self.relation_ids = ids, relations
        self.rewritten = scorer.rewrites(spec.side)  # the fast pass scores a rewritten query formula

    device = torch.device("cpu")  # where the blocks' keys are computed (:meth:`on`)
    _device_tables: Optional[tuple] = None  # the fast tables copied there

    def keys(self, first: int, last: int, out: torch.Tensor) -> torch.Tensor:
        from openbench.models.scorers import candidate_scores

        queries, columns, squared = self.fast_tables()
        return candidate_scores(self.kind, queries[first:last], columns, squared, out, keys=True)

    def keys_at(self, rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """(B, S) the fast keys of the rows ``rows`` (B,) int64 (matrix indexes)."""
        from openbench.models.scorers import candidate_scores

        queries, columns, squared = self.fast_tables()
        return candidate_scores(self.kind, queries[rows.to(queries.device)], columns, squared, out, keys=True)

    def fast_tables(self) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """(queries, columns, squared norms) of the fast pass on :attr:`device` (copied there once)."""
        if self.device.type == "cpu":
            return self.fast_queries, self.columns, self.squared
        if self._device_tables is None:
            self._device_tables = tuple(None if t is None else t.to(self.device)
                                        for t in (self.fast_queries, self.columns, self.squared))
        return self._device_tables

    def on(self, device: torch.device) -> "_EmbeddingBlocks":
        """The same blocks whose keys are computed on ``device`` (the exact steps stay on the host)."""
        other = object.__new__(_EmbeddingBlocks)
        other.__dict__.update(self.__dict__)
        other.device, other._device_tables = device, None
        return other

    def in_float64(self) -> "_EmbeddingBlocks":
        """The same matrix whose fast pass runs in float64 from the exact queries (the query formula
        in float64, not a rewritten one) and the stored columns: twice a float32 GEMM's work, but
        windows some 10^9 times narrower, for a matrix whose float32 windows hold many keys."""
        from openbench.models.scorers import squared_norms

        other = object.__new__(_EmbeddingBlocks)
        other.__dict__.update(self.__dict__)
        other.fast_queries = self.exact_queries.contiguous()
        other.columns = self.columns.to(torch.float64).contiguous()
        other.squared = squared_norms(other.columns) if self.kind == "l2" else None
        other.rewritten = False
        other._device_tables = None
        other._bound_cache = other._column_norms = None  # other tables: other norms and bounds
        return other

    def fast_bound(self, grid_bits: Optional[int], chain: Optional[int] = None) -> float:
        """The largest bound on a fast key's rounding over the matrix's rows (0 where the grid
        criterion says the fast pass computes every key exactly); ``chain``: the fused pass's
        roundings per term (:func:`fused_chain`), None for a GEMM's sum in any order."""
        from openbench.evaluation.counting.exact import fast_key_bound

        inputs = self._bound_inputs(grid_bits)
        if inputs is None:
            return 0.0
        u, width, fast, magnitudes, (c2, c1), rewrite, tiny = inputs
        delta = fast_key_bound(self.kind, self.scorer, u, width, self.query_norms, fast, magnitudes, (c2, c1),
                               rewrite, chain)
        return float(delta.max(initial=0.0)) + tiny

    def pair_bound_terms(self, grid_bits: Optional[int], chain: int) -> Optional[np.ndarray]:
        """(D, 3) float64 each row's bound on its fast keys' rounding as a polynomial in the
        column's norm bound (:func:`~openbench.evaluation.counting.exact.fast_key_bound_terms`,
        the subnormal term in the constant): a pair's own bound, at most :meth:`fast_bound`'s. None
        where the keys are exact, or the fast pass scores a rewritten query formula (its error is
        bounded for the largest column only)."""
        from openbench.evaluation.counting.exact import fast_key_bound_terms

        inputs = self._bound_inputs(grid_bits)
        if inputs is None or self.rewritten or self.kind not in ("dot", "l2"):
            return None
        u, width, fast, magnitudes, _, _, tiny = inputs
        quadratic, linear, constant = fast_key_bound_terms(self.kind, self.scorer, u, width, self.query_norms, fast,
                                                           magnitudes, chain)
        return np.ascontiguousarray(np.stack([quadratic, linear, constant + tiny], axis=1))

    def column_norms(self) -> np.ndarray:
        """(S,) float64 upper bounds on the columns' 2-norms (computed once)."""
        return self.column_norm_bounds()[0]

    def column_norm_bounds(self) -> Tuple[np.ndarray, np.ndarray]:
        """((S,), (S,)) float64 upper bounds on the columns' 2-norms and 1-norms (computed once; two
        setup threads that ask at once may both compute them, to the same values)."""
        from openbench.evaluation.counting.exact import norm_bounds

        found = self._column_norms
        if found is None:
            found = self._column_norms = tuple(n.numpy() for n in norm_bounds(self.columns))
        return found

    _column_norms: Optional[tuple] = None
    _bound_cache: Optional[tuple] = None

    def _bound_inputs(self, grid_bits: Optional[int]):
        """What the fast keys' bounds are computed from (None where every fast key is exact): u,
        the width, the fast queries' norms, the magnitudes their own error is relative to, the
        largest column norms (C₂, C₁), the rewritten formula's error (or None), the subnormal
        term. Computed once per grid."""
        from openbench.evaluation.counting.exact import norm_bounds, unit_roundoff, SUBNORMAL_SPACING

        if self._bound_cache is not None and self._bound_cache[0] == grid_bits:
            return self._bound_cache[1]
        scorer, dtype = self.scorer, self.fast_queries.dtype
        u = unit_roundoff(dtype)
        width = self.fast_queries.shape[1]
        c2, c1 = (float(n.max()) if n.size else 0.0 for n in self.column_norm_bounds())
        inputs = None
        if not self._fast_exact(grid_bits, c2, c1, dtype):
            fast_two, fast_one = (n.numpy() for n in norm_bounds(self.fast_queries))
            rewrite, magnitudes = None, self.query_norms
            if self.rewritten:
                from openbench.evaluation.counting.exact import real_rows

                anchor = real_rows(scorer.entities[self.anchor_ids])
                relation = real_rows(scorer.relations[self.relation_ids])
                rewrite = scorer.rewrite_error(torch.from_numpy(relation), self.spec.side, torch.from_numpy(anchor),
                                               (c2, c1)).numpy()
                rewritten = scorer.fast_query_formula(np.abs(anchor), np.abs(relation), self.spec.side, np.add)
                two, one = norm_bounds(torch.from_numpy(np.ascontiguousarray(rewritten)))
                magnitudes = (two.numpy(), one.numpy())
            tiny = 4 * (width + scorer.query_rounding + 8) * SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]
            inputs = (u, width, (fast_two, fast_one), magnitudes, (c2, c1), rewrite, tiny)
        self._bound_cache = (grid_bits, inputs)
        return inputs

    def _fast_exact(self, grid_bits: Optional[int], c2: float, c1: float, dtype) -> bool:
        """Every fast key computed without rounding (the ranking engine's grid criterion)."""
        from openbench.evaluation.counting.exact import SUBNORMAL_SPACING

        if grid_bits is None or self.kind not in ("dot", "l2", "l1") or self.rewritten:
            return False
        significand = 53 if dtype == torch.float64 else 24
        degree = self.scorer.query_degree + 1 if self.kind == "dot" else (
            2 * self.scorer.query_degree if self.kind == "l2" else self.scorer.query_degree)
        q2, q1 = self.query_norms
        size = {"dot": q2 * c2, "l2": (q2 + c2) ** 2, "l1": q1 + c1}[self.kind]
        finest = -int(np.log2(SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]))
        if degree * grid_bits >= min(1000, finest + 1):
            return False
        with np.errstate(over="ignore"):  # a size beyond float64 is simply not on an exact grid
            return bool(np.all(size * 2.0 ** (degree * grid_bits) < 2.0 ** (significand - 3)))

    def pair_keys(self, rows: np.ndarray, cols: np.ndarray, grid_bits: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
        """(float64 keys (P,), bounds (P,)) of the pairs (rows, cols) (matrix indexes)."""
        from openbench.evaluation.counting.exact import float64_key_bound, pair_keys

        computed = pair_keys(self.kind, self.exact_queries, self.columns, torch.from_numpy(rows),
                             torch.from_numpy(cols))
        keys = computed.keys.numpy()
        bound = float64_key_bound(self.kind, self.scorer, grid_bits, keys, self.exact_queries.shape[1],
                                  (self.query_norms[0][rows], self.query_norms[1][rows]),
                                  (computed.norm2.numpy(), computed.norm1.numpy()))
        return keys, bound

    def decimal_key(self, row: int, col: int):
        """The exact key of pair (row, col) in decimal arithmetic."""
        from openbench.evaluation.counting.exact import exact_key, real_rows

        anchor = real_rows(self.scorer.entities[self.anchor_ids[row]][None])[0]
        relation = real_rows(self.scorer.relations[self.relation_ids[row]][None])[0]
        candidate = real_rows(self.scorer.entities[self.spec.cols[col]][None])[0]
        return exact_key(self.scorer, self.kind, anchor, relation, self.spec.side, candidate)


class _ValueBlocks:
    """Scores as a scorer computes them (float64, higher first): any scorer, or fast ranks."""

    def __init__(self, scorer, spec: MatrixSpec, lower_is_better: bool, fast: bool):
        self.scorer, self.spec, self.sign = scorer, spec, -1.0 if lower_is_better else 1.0
        self.fast = fast and hasattr(scorer, "query_vectors") and hasattr(scorer, "candidate_rows")
        if self.fast:
            from openbench.models.scorers import squared_norms

            self.columns = _matrix_columns(scorer, spec)
            self.squared = squared_norms(self.columns) if scorer.kind == "l2" else None
            queries = scorer.query_vectors(spec.queries(0, spec.shape[0]), spec.side)  # (D, d'): every row's
            scorer.refuse_fast_overflow(scorer.provably_finite(queries, spec.side), queries.dtype)

    def keys(self, first: int, last: int, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.fast:
            from openbench.models.scorers import candidate_scores

            queries = self.scorer.query_vectors(self.spec.queries(first, last), self.spec.side)
            return candidate_scores(self.scorer.kind, queries, self.columns, self.squared, out, keys=True)
        count = last - first
        candidates = self.spec.cols[None].expand(count, -1)
        scores = self.scorer.score_candidates(self.spec.queries(first, last), self.spec.side, candidates)
        scores = scores.to(torch.float64)
        return scores.neg_() if self.sign < 0 else scores


# -- the pass over every block ----------------------------------------------------------------

def block_keys() -> int:
    """Keys per block: :data:`BLOCK_KEYS`, or the environment's :data:`BLOCK_VARIABLE`."""
    return _given_block_keys() or BLOCK_KEYS


def _given_block_keys() -> Optional[int]:
    """The environment's :data:`BLOCK_VARIABLE` where it names a positive number of keys, else None."""
    import os

    given = os.environ.get(BLOCK_VARIABLE, "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else None


def _blocks(rows: int, width: int, keys: Optional[int] = None) -> List[Tuple[int, int]]:
    """Row ranges of at most ``keys`` (default :func:`block_keys`) keys each, as equal as whole rows
    allow (no short last block for a worker to finish alone)."""
    step = max(1, (keys or block_keys()) // max(1, width))
    count = -(-rows // step)
    step = -(-rows // max(1, count))
    return [(first, min(rows, first + step)) for first in range(0, rows, step)]


def _fused_block_keys() -> int:
    """Keys per block of the fused pass: :data:`FUSED_BLOCKS` times :func:`block_keys` (it holds no
    block of keys; a block is a round of the threads and a rise of the best pairs' floor), or the
    environment's :data:`BLOCK_VARIABLE` as given."""
    return _given_block_keys() or FUSED_BLOCKS * BLOCK_KEYS


def _run_blocks(make_keys: Callable, count_part: Callable, blocks: List[Tuple[int, int]], workers: int,
                progress: Optional[Callable], on_result: Callable) -> None:
    """For every block: its keys ``make_keys(first, last)`` (B, S) computed on the calling thread
    (the GEMM on every torch thread; None where the pass computes its own), then counted by
    ``count_part(keys[r0:r1], first + r0, first + r1)`` on ``workers`` threads, a share of its
    rows each (the C passes release the GIL), and ``on_result`` called with each part's result in
    row order before the next block: what it learns (the floor of the best pairs) serves the next
    blocks."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-matrix") if workers > 1 else None
    try:
        for first, last in blocks:
            keys = make_keys(first, last)
            rows = last - first
            step = -(-rows // workers) if pool is not None else rows
            parts = [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]

            def run(part: Tuple[int, int]):
                return count_part(None if keys is None else keys[part[0]:part[1]], first + part[0], first + part[1])

            results = [run(part) for part in parts] if pool is None or len(parts) == 1 else list(pool.map(run, parts))
            for result in results:
                on_result(result)
            if progress:
                progress(rows)
    finally:
        if pool is not None:
            pool.shutdown()


def count_matrix(scorer, spec: MatrixSpec, special_rows: np.ndarray, special_cols: np.ndarray,
                 thresholds: np.ndarray, top_k: int = 0, top_excluded: Optional[np.ndarray] = None,
                 ranks: str = "exact", lower_is_better: bool = False,
                 progress: Optional[Callable[[int], None]] = None, shard: Optional[Shard] = None,
                 device: Optional[torch.device] = None) -> MatrixCounts:
    """Count the matrix of ``spec`` against its special pairs (see the module docstring).

    :param special_rows: (P,) int64 row indexes (into ``spec.rows``) of the special pairs;
        ``special_cols`` (P,) their column indexes.
    :param thresholds: (P,) bool, the special pairs whose greater and equal counts are wanted.
    :param top_k: how many best pairs to find (0: none); ``top_excluded`` (P,) bool: special pairs
        that are never among them (the known positives).
    :param ranks: ``"exact"`` (embedding scorers of dot, L2 or L1 keys: exact decisions) or
        ``"fast"`` (the keys as computed); other scorers are always compared as computed.
    :param shard: under torch.distributed, this rank's share (:class:`Shard`): every rank returns
        the counts of the whole matrix.
    :param device: where the exact mode's blocks are computed and counted (a GPU: the scorer's
        tables are copied there; None or the CPU: here, by the C pass); the scores as computed are
        counted on the CPU.
    """
    special_rows = np.asarray(special_rows, dtype=np.int64)
    special_cols = np.asarray(special_cols, dtype=np.int64)
    thresholds = np.asarray(thresholds, dtype=bool)
    top_excluded = np.zeros(special_rows.shape[0], bool) if top_excluded is None else np.asarray(top_excluded, bool)
    rows, width = spec.shape
    exact = ranks == "exact" and exact_mode_applies(scorer) and not lower_is_better
    if exact:
        try:
            return _count_exact(scorer, spec, special_rows, special_cols, thresholds, top_k, top_excluded, progress,
                                shard, device)
        except UnboundedKeys:  # a stored non-finite value is named first (openbench.models.finite)
            refuse_nonfinite(scorer)
            raise
    return _count_values(_ValueBlocks(scorer, spec, lower_is_better, fast=ranks == "fast"), spec, special_rows,
                         special_cols, thresholds, top_k, top_excluded, progress, shard)


def _codes(rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    return rows.astype(np.int64) * width + cols.astype(np.int64)


_CONFIGURED: set = set()


def _library():
    library = COUNTING_LIBRARY.get()
    if library is not None and id(library) not in _CONFIGURED:
        _configure(library)
        _CONFIGURED.add(id(library))
    return library


def _passes(windows: _Windows, record: bool, device: Optional[torch.device] = None, **refine):
    """The block pass: torch's on a GPU (or forced), else the C helper's (with the float64 step
    where ``refine`` gives its inputs), else numpy's."""
    if _pass_on_device(device):
        return _TorchPass(windows, record, device or torch.device("cpu"), **refine)
    library = _library()
    return _BlockPass(windows, record, library, **refine) if library is not None else _numpy_pass(windows, record)


class _Tops:
    """The best pairs seen so far (positions as codes row * width + col), kept with a floor that
    only rises; excluded codes never enter."""

    def __init__(self, wanted: int, excluded: np.ndarray, slack: float):
        self.wanted, self.excluded, self.slack = wanted, np.sort(excluded), slack
        self.codes = np.zeros(0, np.int64)
        self.keys = np.zeros(0, np.float64)
        self.floor: Optional[float] = -np.inf if wanted else None

    def prime(self, keys: torch.Tensor, rows: np.ndarray, width: int, slack: Optional[float] = None) -> None:
        """Before the first block is counted: a floor from some rows' keys (B, width), the rows
        ``rows`` (B,) of the matrix (the first block's, or the fused pass's probe), so that the pass
        records a few candidates instead of the whole block. The (K + e)-th largest key, e the
        excluded pairs these rows hold, is at most the K-th largest of the others; so is the
        (K + e)-th largest of any K + e of their keys, here the maxima of some 4 (K + e) equal
        segments of them (one pass, and close to their own: the best keys mostly lie in segments of
        their own). ``slack``: the floor's margin where these keys were computed otherwise than the
        pass's (default: :attr:`slack`)."""
        if not self.wanted or self.floor is None or self.floor > -np.inf:
            return
        inside = int(np.count_nonzero(np.isin(self.excluded // width, rows)))
        rank = self.wanted + inside
        flat = keys.reshape(-1)
        segment = max(1, flat.numel() // (4 * rank))
        maxima = flat[:flat.numel() - flat.numel() % segment].view(-1, segment).amax(dim=1)
        if maxima.numel() >= rank:
            kth = float(torch.topk(maxima, rank, sorted=False).values.min())
            self.floor = kth - (self.slack if slack is None else slack)

    def add(self, codes: np.ndarray, keys: np.ndarray) -> None:
        if not self.wanted or codes.size == 0:
            return
        if self.excluded.size:  # membership in the sorted excluded codes, by binary search
            at = np.minimum(np.searchsorted(self.excluded, codes), self.excluded.size - 1)
            keep = self.excluded[at] != codes
            codes, keys = codes[keep], keys[keep]
        self.codes, self.keys = np.concatenate([self.codes, codes]), np.concatenate([self.keys, keys])
        if self.keys.size > 4 * self.wanted:
            kth = np.partition(self.keys, -self.wanted)[-self.wanted]
            keep = self.keys >= kth - self.slack
            self.codes, self.keys = self.codes[keep], self.keys[keep]
        if self.keys.size >= self.wanted:
            kth = float(np.partition(self.keys, -self.wanted)[-self.wanted])
            self.floor = max(self.floor if self.floor is not None else -np.inf, kth - self.slack)


def _count_values(blocks: _ValueBlocks, spec: MatrixSpec, special_rows, special_cols, thresholds, top_k,
                  top_excluded, progress, shard: Optional[Shard] = None) -> MatrixCounts:
    """Scores as computed: the special pairs' values read from their blocks (a first pass over the
    blocks that hold one), then every block counted against them with point windows."""
    rows, width = spec.shape
    block_list = _blocks(rows, width)
    mine = shard.mine(block_list) if shard else block_list
    values = np.zeros(special_rows.shape[0], np.float64)
    for first, last in mine:
        inside = np.flatnonzero((special_rows >= first) & (special_rows < last))
        if inside.size:
            block = blocks.keys(first, last).double().numpy()
            values[inside] = block[special_rows[inside] - first, special_cols[inside]]
    if shard:  # each value read by the one rank whose block holds it, 0 elsewhere: an exact sum
        values = shard.sum(values)
    if np.isnan(values).any():
        raise ScoreError("the model gave a NaN score to a pair of the matrix; a repurposing matrix ranks finite scores")
    order = np.argsort(values[thresholds], kind="stable")
    threshold_values = values[thresholds][order]
    tensor = torch.from_numpy(np.ascontiguousarray(threshold_values))
    count_pass = _passes(_Windows(tensor, tensor, True), record=False)
    tops = _Tops(top_k, _codes(special_rows[top_excluded], special_cols[top_excluded], width), 0.0)

    beyond, reached = np.zeros(threshold_values.shape[0] + 1, np.int64), np.zeros(threshold_values.shape[0] + 1,
                                                                                    np.int64)

    def make_keys(first: int, last: int) -> torch.Tensor:
        keys = blocks.keys(first, last).double().contiguous()
        tops.prime(keys, np.arange(first, last), width)
        return keys

    def count_part(keys: torch.Tensor, first: int, _last: int):
        block_beyond, block_reached, _, top_positions = count_pass(keys, tops.floor, first)
        flat = keys.reshape(-1).numpy() if keys.is_contiguous() else keys.contiguous().reshape(-1).numpy()
        return block_beyond, block_reached, first * width + top_positions, flat[top_positions]

    def on_result(result) -> None:
        beyond.__iadd__(result[0])
        reached.__iadd__(result[1])
        tops.add(result[2], result[3])

    _run_blocks(make_keys, count_part, mine, max(1, torch.get_num_threads()), progress, on_result)
    if shard:
        beyond, reached = shard.sum(beyond), shard.sum(reached)
        tops = _gathered_tops(tops, shard)
    greater, equal = np.zeros(values.shape[0], np.int64), np.zeros(values.shape[0], np.int64)
    above = _suffix(beyond)
    at_least = _suffix(reached)
    where = np.flatnonzero(thresholds)[order]
    greater[where] = above
    equal[where] = at_least - above
    groups = _dense_groups(values)

    def keys_of(codes: np.ndarray):
        lookup = dict(zip(tops.codes.tolist(), tops.keys.tolist()))
        return np.array([lookup[code] for code in codes.tolist()], dtype=np.float64), None

    top, top_groups, top_keys = _final_tops(tops, top_k, width, keys_of)
    return MatrixCounts(greater, equal, groups, values, top, top_groups, top_keys,
                        {"mode": "as computed", "blocks": len(block_list), "rescored": 0, "decimal": 0,
                         "pass": _pass_name(count_pass, torch.device("cpu"))})


def _gathered_tops(tops: "_Tops", shard: Shard) -> "_Tops":
    """Every rank's best-pair candidates in one :class:`_Tops` (each rank's floor came from its own
    blocks, so each kept every pair of its own at least as good as the matrix's K-th)."""
    merged = _Tops(tops.wanted, tops.excluded, tops.slack)
    for codes, keys in shard.gather((tops.codes, tops.keys)):
        merged.add(codes, keys)
    return merged


def _suffix(histogram: np.ndarray) -> np.ndarray:
    """(T,) for each sorted threshold t: the keys counted at positions above t (t + 1 .. T)."""
    totals = np.cumsum(histogram[::-1])[::-1]  # totals[i] = sum of histogram[i:]
    return totals[1:]


def _dense_groups(values: np.ndarray) -> np.ndarray:
    """Dense ranks from the lowest value (equal values: one group)."""
    if values.size == 0:
        return np.zeros(0, np.int64)
    _, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1)


def _final_tops(tops: _Tops, top_k: int, width: int, keys_of) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best pairs through the end of the tie group at place ``top_k``, best first."""
    if not top_k or tops.codes.size == 0:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    codes = np.unique(tops.codes)
    keys, groups = keys_of(codes)
    if groups is None:
        groups = _dense_groups(keys)
    order = np.lexsort((codes, -groups))  # best group first; within a group by position
    codes, keys, groups = codes[order], keys[order], groups[order]
    if codes.size > top_k:
        cut_group = groups[top_k - 1]
        end = int(np.searchsorted(-groups, -cut_group, "right"))
        end = min(end, TOP_SLACK * top_k)
        codes, keys, groups = codes[:end], keys[:end], groups[:end]
    return np.stack([codes // width, codes % width], axis=1), groups, keys


# -- exact decisions -----------------------------------------------------------------------------

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


def _count_exact(scorer, spec: MatrixSpec, special_rows, special_cols, thresholds, top_k, top_excluded,
                 progress, shard: Optional[Shard] = None, device: Optional[torch.device] = None) -> MatrixCounts:
    rows, width = spec.shape
    on_device = _pass_on_device(device)
    library = _library()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="openbench-matrix-setup") as setup:
        # the grid (one pass over the candidate table) and, where the fused pass may apply, the columns' packing
        # while the blocks are built; then the fused pass's inputs and the probe's GEMM on these two threads while
        # the thresholds' keys, order and windows are worked out here
        grid = setup.submit(lambda: ExactRanks(scorer).grid_bits)
        columns = _matrix_columns(scorer, spec)
        packed = setup.submit(_packed_columns, columns.numpy()) if not on_device and \
            _fused_columns(scorer.kind, columns, library) else None
        blocks = _EmbeddingBlocks(scorer, spec, columns)
        if on_device and device is not None:
            blocks = blocks.on(device)
        finite = scorer.provably_finite(blocks.fast_queries, spec.side)
        if not finite:
            wide = blocks.fast_queries.dtype == torch.float64
            raise ScoreError("the matrix's fast keys may overflow the embeddings' precision; "
                             + ("evaluate with fast ranks (--fast: float64 keys, as computed) or rescale the embeddings"
                                if wide else "give the embeddings as float64, or rescale them"))
        grid_bits = grid.result()
        if packed is not None and fused_applies(blocks, library):
            inputs = setup.submit(_fused_inputs, blocks, grid_bits)  # the longest first
            early = _EarlyWork(inputs, setup.submit(_probe_keys, blocks, rows), packed)
            return _count_exact_from(scorer, spec, blocks, grid_bits, early, special_rows, special_cols, thresholds,
                                     top_k, top_excluded, progress, shard, device)
    return _count_exact_from(scorer, spec, blocks, grid_bits, None, special_rows, special_cols, thresholds, top_k,
                             top_excluded, progress, shard, device)


@dataclass
class _EarlyWork:
    """The fused pass's setup on the two setup threads (futures): :func:`_fused_inputs`, the probe
    (:func:`_probe_keys`) and the packed columns (:func:`_packed_columns`)."""

    inputs: Future
    probe: Future
    packed: Future


def _count_exact_from(scorer, spec: MatrixSpec, blocks: "_EmbeddingBlocks", grid_bits, early: Optional[_EarlyWork],
                      special_rows, special_cols, thresholds, top_k, top_excluded, progress, shard: Optional[Shard],
                      device: Optional[torch.device]) -> MatrixCounts:
    """:func:`_count_exact` once the blocks are built; ``early``: the fused pass's setup on its way,
    or None where the fused pass does not apply."""
    rows, width = spec.shape
    on_device = _pass_on_device(device)
    library = _library()
    special_keys, special_bounds = blocks.pair_keys(special_rows, special_cols, grid_bits)
    exact = _ExactOrder(blocks)
    groups = exact.groups(special_rows, special_cols, special_keys, special_bounds)
    where = np.flatnonzero(thresholds)
    order = np.lexsort((where, groups[where]))  # ascending exact order
    sorted_where = where[order]
    threshold_keys = special_keys[sorted_where]
    max_bound = float(special_bounds[thresholds].max(initial=0.0))
    # the windows must be non-decreasing: the float64 keys are, up to their bounds, which the width covers
    monotone = np.maximum.accumulate(threshold_keys) if threshold_keys.size else threshold_keys
    threshold_width = max_bound + float(np.max(monotone - threshold_keys, initial=0.0))
    windows64: Optional[Tuple[np.ndarray, np.ndarray]] = None
    if early is not None:  # the fused pass's float64 windows here while the setup threads work
        windows64 = _float64_windows(blocks, scorer, grid_bits, monotone, max_bound)
    gemm_delta = delta = blocks.fast_bound(grid_bits)
    inputs: Optional[_FusedInputs] = None
    if early is not None:
        inputs = early.inputs.result()
        delta = inputs.delta
    windows = _windows(monotone, delta + threshold_width, blocks.fast_queries.dtype)
    record = not windows.point
    refine: Optional[dict] = None
    if record and not on_device:
        _grid(windows, record)  # the pass's grid (the probe's too) while the probe may still run
    if record and (library is not None or on_device) and blocks.fast_queries.dtype == torch.float32 and \
            _crowded(blocks, windows, library, early.probe.result()[1] if early is not None
                     else _probe_keys(blocks, rows)[1], on_device):
        # most keys would be re-scored one by one: the whole pass in float64 costs less
        early = inputs = None
        blocks = blocks.in_float64()
        delta = blocks.fast_bound(grid_bits)
        windows = _windows(monotone, delta + threshold_width, torch.float64)
        record = not windows.point
    if record and (library is not None or on_device) and blocks.fast_queries.dtype == torch.float32:
        lows64, highs64 = windows64 or _float64_windows(blocks, scorer, grid_bits, monotone, max_bound)
        refine = dict(kind=blocks.kind, queries64=blocks.exact_queries, columns=blocks.columns, lows64=lows64,
                      highs64=highs64)
    count_pass = _passes(windows, record, blocks.device if on_device else None, **(refine or {}))
    slack = 2 * (delta + float(special_bounds.max(initial=0.0))) * (1 + 2.0 ** -30)
    tops = _Tops(top_k, _codes(special_rows[top_excluded], special_cols[top_excluded], width), slack)
    if early is not None and inputs is not None and isinstance(count_pass, _BlockPass):
        count_pass = _FusedPass(count_pass, blocks, _pair_windows(blocks, inputs.terms, monotone, threshold_width),
                                early.packed.result(), inputs)
        probe_rows, probe = early.probe.result()
        # the first floor from the probe's GEMM keys: a pair's fused key is off by the fused bound, the probe's
        # by a GEMM's
        tops.prime(probe, probe_rows, width, slack + 2 * gemm_delta * (1 + 2.0 ** -30))

    buffer = None if isinstance(count_pass, _FusedPass) else torch.empty(
        (min(rows, max(1, block_keys() // max(1, width))), width), dtype=blocks.fast_queries.dtype,
        device=blocks.device)

    def make_keys(first: int, last: int) -> Optional[torch.Tensor]:
        if buffer is None:
            return None  # the fused pass computes its own
        keys = blocks.keys(first, last, buffer[:last - first])
        tops.prime(keys, np.arange(first, last), width)
        return keys

    def count_part(keys: Optional[torch.Tensor], first: int, last: int):
        if keys is None:
            beyond, reached, triples, top_positions, top_keys = count_pass(first, last, tops.floor)
            return (beyond, reached, first * width + triples[:, 0], triples[:, 1:], first * width + top_positions,
                    top_keys)
        flat = keys.reshape(-1)  # the rows of a part are contiguous in the block
        beyond, reached, triples, top_positions = count_pass(keys, tops.floor, first)
        return (beyond, reached, first * width + triples[:, 0], triples[:, 1:], first * width + top_positions,
                flat[torch.from_numpy(top_positions).to(flat.device)].double().cpu().numpy())

    block_list = _blocks(rows, width, _fused_block_keys() if isinstance(count_pass, _FusedPass) else None)
    count = sorted_where.shape[0]
    beyond, reached = np.zeros(count + 1, np.int64), np.zeros(count + 1, np.int64)
    undecided: List[Tuple[np.ndarray, np.ndarray]] = []

    def on_result(result) -> None:
        beyond.__iadd__(result[0])
        reached.__iadd__(result[1])
        if result[2].size:
            undecided.append((result[2], result[3]))
        tops.add(result[4], result[5])

    _run_blocks(make_keys, count_part, shard.mine(block_list) if shard else block_list,
                1 if on_device else max(1, torch.get_num_threads()), progress, on_result)
    if shard:
        beyond, reached = shard.sum(beyond), shard.sum(reached)
        tops = _gathered_tops(tops, shard)
    above = _suffix(beyond)
    greater_sorted, equal_sorted = above.copy(), np.zeros(count, np.int64)
    if windows.point:
        equal_sorted = _suffix(reached) - above
    rescored = 0
    if record:
        undecided_codes = np.concatenate([codes for codes, _ in undecided]) if undecided else np.zeros(0, np.int64)
        rescored = undecided_codes.size
        # the range of thresholds each recorded key is still undecided for
        ranges = np.concatenate([r for _, r in undecided]) if undecided else np.zeros((0, 2), np.int64)
        first_t, last_t = ranges[:, 0], ranges[:, 1]
        more_greater, more_equal = _settle(blocks, exact, grid_bits, undecided_codes, first_t, last_t,
                                           special_rows[sorted_where], special_cols[sorted_where], threshold_keys,
                                           special_bounds[sorted_where], width)
        if shard:  # each rank settled the keys of its own blocks
            more_greater, more_equal = shard.sum(more_greater), shard.sum(more_equal)
            rescored = int(shard.sum(np.array([rescored], np.int64))[0])
        greater_sorted += more_greater
        equal_sorted += more_equal
    greater, equal = np.zeros(special_rows.shape[0], np.int64), np.zeros(special_rows.shape[0], np.int64)
    greater[sorted_where], equal[sorted_where] = greater_sorted, equal_sorted

    def keys_of(codes: np.ndarray):
        top_rows, top_cols = codes // width, codes % width
        keys, bounds = blocks.pair_keys(top_rows, top_cols, grid_bits)
        return keys, exact.groups(top_rows, top_cols, keys, bounds)

    top, top_groups, top_keys = _final_tops(tops, top_k, width, keys_of)
    return MatrixCounts(greater, equal, groups, special_keys, top, top_groups, top_keys,
                        {"mode": "exact", "blocks": len(block_list), "rescored": int(rescored),
                         "decimal": int(exact.decimal), "fast_bound": delta,
                         "pass_precision": str(blocks.fast_queries.dtype).replace("torch.", ""),
                         "float64_in_pass": refine is not None,
                         "pass": _pass_name(count_pass, blocks.device if on_device else torch.device("cpu"))})


PROBE_KEYS = 1 << 19  # the probe's keys: whether a matrix is crowded, and the fused pass's first floor
CROWDED = 0.05  # the share of a block's keys inside float32 windows beyond which the pass runs in float64


def _pair_windows(blocks: _EmbeddingBlocks, terms: Optional[np.ndarray], centers: np.ndarray,
                  threshold_width: float) -> Optional[tuple]:
    """The fused pass's own window of each pair (None where the rows have no bound polynomial):
    each row's polynomial in the column's norm (the pair's own fast-key bound), the columns' norm
    bounds, the thresholds' sorted float64 keys (``centers``), and what every window adds: the
    thresholds' own bound and order slack (``threshold_width``) and the centers' evaluation."""
    from openbench.evaluation.counting.exact import U64

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
    count = max(1, min(rows, blocks.fast_queries.shape[0], max(1, min(PROBE_KEYS, COUNTER_LIMIT) // width)))
    spread = np.unique(np.linspace(0, rows - 1, max(1, count // 2)).round().astype(np.int64))
    chosen = spread
    if count > spread.shape[0]:
        from openbench.models.scorers import candidate_scores

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
    inside = library.openbench_matrix_count_f32(
        keys.data_ptr(), keys.stride(0), rows, keys.shape[1], windows.lows.data_ptr(), windows.highs.data_ptr(),
        count, grid.codes.ctypes.data, grid.impure.ctypes.data, grid.ranges.ctypes.data, grid.cells,
        ctypes.c_float(grid.base),
        ctypes.c_float(grid.scale), counts.ctypes.data, beyond.ctypes.data, reached.ctypes.data, 1, None, 0,
        ctypes.c_float(np.inf), None, 0, None, 0, None, 0, None, None, None)
    return inside < 0 or inside > CROWDED * keys.numel()


def _float64_windows(blocks: _EmbeddingBlocks, scorer, grid_bits, keys: np.ndarray,
                     threshold_bound: float) -> Tuple[np.ndarray, np.ndarray]:
    """The thresholds' float64 windows for the pass's float64 step: each sorted key widened by the
    largest bound on any matrix pair's float64 key (the largest norms on both sides) plus the
    thresholds' own, rounded outwards (non-decreasing, as the keys)."""
    from openbench.evaluation.counting.exact import U64, float64_key_bound

    q2, q1 = (float(n.max(initial=0.0)) for n in blocks.query_norms)
    c2, c1 = (float(n.max()) if n.size else 0.0 for n in blocks.column_norm_bounds())
    worst = {"dot": 0.0, "l2": -(q2 + c2) ** 2, "l1": -(q1 + c1)}[blocks.kind]
    pair_bound = float(float64_key_bound(blocks.kind, scorer, grid_bits, np.array([worst]),
                                         blocks.exact_queries.shape[1], (np.array([q2]), np.array([q1])),
                                         (np.array([c2]), np.array([c1])))[0])
    width = (pair_bound + threshold_bound) * (1 + 2.0 ** -30)
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


class RowCounts(NamedTuple):
    """What :func:`count_rows` counts of P pairs, each in its own row: ``greater`` (P,) and
    ``equal`` (P,) int64 (itself included), and ``keys`` (P,) float64, each pair's key as compared
    in its row where the values are compared as computed (None in the exact mode of embeddings,
    whose keys are one function of the triple in either orientation)."""

    greater: np.ndarray
    equal: np.ndarray
    keys: Optional[np.ndarray]


def _skipped_by_row(skip: Optional[Tuple[np.ndarray, np.ndarray]]) -> Dict[int, np.ndarray]:
    """{row: the columns of it not counted} of ``skip`` = (rows (S,), cols (S,))."""
    if skip is None or np.asarray(skip[0]).size == 0:
        return {}
    skip_rows, skip_cols = (np.asarray(part, np.int64) for part in skip)
    order = np.argsort(skip_rows, kind="stable")
    rows, starts = np.unique(skip_rows[order], return_index=True)
    return {int(row): cols for row, cols in zip(rows, np.split(skip_cols[order], starts[1:]))}


def count_rows(scorer, spec: MatrixSpec, rows: np.ndarray, cols: np.ndarray, ranks: str = "exact",
               lower_is_better: bool = False, shard: Optional[Shard] = None,
               skip: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> RowCounts:
    """The counts of P pairs (rows, cols) (matrix indexes), each against its own row only: how
    many columns of its row have a greater key, and how many an equal one (itself included),
    leaving out the columns ``skip`` = (rows, cols) names in that row (the pair's own column is
    always counted). The ranking engine's question for one query per pair, decided as
    :func:`count_matrix` decides it (exact windows per row, or values as computed)."""
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    greater, equal = np.zeros(rows.shape[0], np.int64), np.zeros(rows.shape[0], np.int64)
    exact_mode = ranks == "exact" and exact_mode_applies(scorer) and not lower_is_better
    keys_of = None if exact_mode else np.zeros(rows.shape[0], np.float64)
    if rows.size == 0:
        return RowCounts(greater, equal, keys_of)
    width = spec.shape[1]
    if exact_mode:
        from openbench.evaluation.counting.exact import U64, round_outwards

        embedding = _EmbeddingBlocks(scorer, spec)
        grid_bits = ExactRanks(scorer).grid_bits
        keys64, bounds64 = embedding.pair_keys(rows, cols, grid_bits)
        exact = _ExactOrder(embedding)
        delta = embedding.fast_bound(grid_bits)
    else:
        values_of = _ValueBlocks(scorer, spec, lower_is_better, fast=ranks == "fast")
    skipped = _skipped_by_row(skip)
    wanted, inverse = np.unique(rows, return_inverse=True)
    members_of = np.split(np.argsort(inverse.reshape(-1), kind="stable"),
                          np.cumsum(np.bincount(inverse.reshape(-1)))[:-1])  # each row's pairs, in pair order
    mine = list(range(wanted.size))
    if shard:  # the rows dealt round-robin; the counts summed at the end
        mine = shard.mine(mine)
    for position in mine:
        row, members = int(wanted[position]), members_of[position]
        counted = np.ones(width, bool)
        counted[skipped.get(row, np.zeros(0, np.int64))] = False
        if not exact_mode:
            values = values_of.keys(row, row + 1).double().reshape(-1).numpy()
            own = values[cols[members]]
            kept = np.repeat(counted[None, :], members.size, axis=0)
            kept[np.arange(members.size), cols[members]] = True
            greater[members] = ((values[None, :] > own[:, None]) & kept).sum(axis=1)
            equal[members] = ((values[None, :] == own[:, None]) & kept).sum(axis=1)
            keys_of[members] = own  # type: ignore[index]
            continue
        keys = embedding.keys(row, row + 1, torch.empty((1, width), dtype=embedding.fast_queries.dtype))
        values = keys[0].double().numpy()
        margin = (delta + bounds64[members]) * (1 + 2.0 ** -30) + 4 * U64 * np.abs(keys64[members])
        margin = np.where((delta == 0) & (bounds64[members] == 0), 0.0, margin)
        lows, highs = (t.double().numpy() for t in round_outwards(keys64[members] - margin, keys64[members] + margin,
                                                                   embedding.fast_queries.dtype))
        for index, member in enumerate(members.tolist()):
            kept = counted.copy()
            kept[cols[member]] = True
            beyond = (values > highs[index]) & kept
            inside = np.flatnonzero((values >= lows[index]) & (values <= highs[index]) & kept)
            count = int(beyond.sum())
            if lows[index] == highs[index]:
                greater[member], equal[member] = count, inside.size
                continue
            above, tie = _decide(embedding, exact, grid_bits, np.full(inside.size, row), inside,
                                 np.full(inside.size, row), np.full(inside.size, cols[member]),
                                 np.full(inside.size, keys64[member]), np.full(inside.size, bounds64[member]))
            greater[member], equal[member] = count + int(above.sum()), int(tie.sum())
    if shard:
        greater, equal = shard.sum(greater), shard.sum(equal)
        keys_of = None if keys_of is None else shard.sum(keys_of)
    return RowCounts(greater, equal, keys_of)
