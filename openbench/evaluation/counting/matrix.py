"""A whole score matrix counted against thresholds: the drug × disease matrix of the repurposing task.

The ranking engine counts, per query row, the candidates that score above that row's own answer.
The repurposing task asks a global question instead: for each of T threshold pairs of the matrix
(a test indication, a known negative, a pair of a ground-truth file), how many of the matrix's
D × S pairs score above it, and how many tie with it; and which pairs are the matrix's best.
Ranking every pair of the matrix against T scores by a Python loop, or holding a float64 copy of
the matrix, does not scale to PrimeKG's 1.36e8 pairs; this module counts it in one pass:

1. **Blocks.** Rows (drugs) are taken a block at a time, about :data:`BLOCK_KEYS` keys, and each
   block's keys are computed on the worker thread that counts it, right after its GEMM, so the
   block is counted from cache (:func:`~openbench.models.scorers.candidate_scores`: the ranking
   pass's own arithmetic on the matrix's columns).
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

The special pairs (thresholds, and the pairs each view removes: known positives) are also put in
their exact order (:attr:`MatrixCounts.groups`), so that a view subtracts what it removes with the
same decisions. Counts are int64 sums over blocks: the order the workers finish in changes nothing.
"""
from __future__ import annotations

import ctypes
import decimal
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY

__all__ = ["BLOCK_KEYS", "MatrixSpec", "MatrixCounts", "count_matrix", "count_rows", "exact_mode_applies"]

logger = logging.getLogger(__name__)

BLOCK_KEYS = 1 << 20  # keys per block: 4 MB of float32, counted from cache by the thread that made it
GRID_CELLS_PER_THRESHOLD = 4
MAX_GRID_CELLS = 1 << 20
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
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_double,
                             ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        function.restype = ctypes.c_int64


@dataclass
class _Windows:
    """T windows sorted ascending in the blocks' dtype, and the grid that places a key among them."""

    lows: torch.Tensor
    highs: torch.Tensor
    firsts: np.ndarray  # (cells, 4) int64
    base: float
    scale: float
    point: bool  # lows == highs: a key inside is a tie, decided in the pass


def _grid(lows: np.ndarray, highs: np.ndarray) -> Tuple[np.ndarray, float, float]:
    """The cells of :func:`_windows`: for cell c, the ranges of ``highs`` and ``lows`` (float64,
    sorted) that a key of cells c - 1 .. c + 1 can fall between."""
    count = lows.shape[0]
    if count == 0:
        return np.zeros((1, 4), dtype=np.int64), 0.0, 0.0
    bottom, top = float(lows[0]), float(highs[-1])
    cells = int(min(MAX_GRID_CELLS, max(1, GRID_CELLS_PER_THRESHOLD * count)))
    span = top - bottom
    scale = cells / span if span > 0 and np.isfinite(span) else 0.0
    if scale == 0.0:
        cells = 1
    edges = np.arange(-1, cells + 2, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        points = bottom + edges / scale if scale else np.full(edges.shape, bottom)
    left, right = points[:-2][:cells], points[3:][:cells]
    if cells == 1:
        left, right = np.array([-np.inf]), np.array([np.inf])
    firsts = np.stack([np.searchsorted(highs, left, "left"), np.searchsorted(highs, right, "right"),
                       np.searchsorted(lows, left, "left"), np.searchsorted(lows, right, "right")], axis=1)
    return np.ascontiguousarray(firsts.astype(np.int64)), bottom, scale


def _windows(keys: np.ndarray, half_width: float, dtype: torch.dtype) -> _Windows:
    """Windows [key - w, key + w] of the sorted float64 ``keys``, w the half-width plus the
    bound's own evaluation, rounded outwards to ``dtype`` (non-decreasing, as the keys)."""
    from openbench.evaluation.counting.exact import U64, round_outwards

    # a width of 0: keys and blocks exact (the grid criterion), the windows the keys themselves
    margin = half_width * (1 + 2.0 ** -30) + 4 * U64 * np.abs(keys) if half_width > 0 else np.zeros_like(keys)
    lows, highs = round_outwards(keys - margin, keys + margin, dtype)
    lows, highs = lows.contiguous(), highs.contiguous()
    lows_f64, highs_f64 = lows.double().numpy(), highs.double().numpy()
    firsts, base, scale = _grid(lows_f64, highs_f64)
    return _Windows(lows, highs, firsts, base, scale, bool(np.array_equal(lows_f64, highs_f64)))


class _BlockPass:
    """One block's C pass, capacities grown and the pass repeated where a block records more."""

    def __init__(self, windows: _Windows, record: bool, library):
        self.windows, self.record, self.library = windows, record, library
        self.count = int(windows.lows.shape[0])

    def __call__(self, keys: torch.Tensor, floor: Optional[float]):
        """(beyond (T + 1,), reached (T + 1,), undecided positions, top positions) of one block."""
        windows = self.windows
        rows, width = keys.shape
        capacity, top_capacity = 1 << 12, 1 << 12
        function = (self.library.openbench_matrix_count_f32 if keys.dtype == torch.float32
                    else self.library.openbench_matrix_count_f64)
        real = ctypes.c_float if keys.dtype == torch.float32 else ctypes.c_double
        if floor is not None and keys.dtype == torch.float32:  # rounded down: every key at the floor stays
            rounded = np.float32(floor)
            floor = float(np.nextafter(rounded, np.float32(-np.inf)) if rounded > floor else rounded)
        while True:
            beyond, reached = np.zeros(self.count + 1, np.int64), np.zeros(self.count + 1, np.int64)
            pairs, tops = np.empty(capacity, np.int64), np.empty(top_capacity, np.int64)
            top_count = np.zeros(1, np.int64)
            found = function(keys.data_ptr(), keys.stride(0), rows, width, windows.lows.data_ptr(),
                             windows.highs.data_ptr(), self.count, windows.firsts.ctypes.data, windows.firsts.shape[0],
                             windows.base, windows.scale, beyond.ctypes.data, reached.ctypes.data, int(self.record),
                             pairs.ctypes.data, capacity, real(-np.inf if floor is None else floor),
                             tops.ctypes.data if floor is not None else None, top_capacity, top_count.ctypes.data)
            if found < 0:
                position = -1 - found
                raise ScoreError(f"the model gave a NaN score to pair (row {position // width} of a block, column "
                                 f"{position % width}); a repurposing matrix ranks finite scores")
            kept = int(top_count[0]) if floor is not None else 0
            if found <= capacity and kept <= top_capacity:
                return beyond, reached, pairs[:found], tops[:kept]
            capacity, top_capacity = max(capacity, int(found)), max(top_capacity, kept)


def _numpy_pass(windows: _Windows, record: bool):
    """The C pass's contract in numpy (no compiled helper; ``OPENBENCH_KERNEL=torch``)."""
    lows, highs = windows.lows.double().numpy(), windows.highs.double().numpy()
    count = lows.shape[0]

    def run(keys: torch.Tensor, floor: Optional[float]):
        flat = keys.double().reshape(-1).numpy()
        if np.isnan(flat).any():
            position = int(np.flatnonzero(np.isnan(flat))[0])
            raise ScoreError(f"the model gave a NaN score to pair (row {position // keys.shape[1]} of a block, "
                             f"column {position % keys.shape[1]}); a repurposing matrix ranks finite scores")
        a = np.searchsorted(highs, flat, "left")
        b = np.searchsorted(lows, flat, "right")
        beyond = np.bincount(a, minlength=count + 1).astype(np.int64)
        reached = np.bincount(b, minlength=count + 1).astype(np.int64)
        undecided = np.flatnonzero(a < b) if record else np.zeros(0, np.int64)
        tops = np.flatnonzero(flat >= floor) if floor is not None else np.zeros(0, np.int64)
        return beyond, reached, undecided, tops

    return run


# -- the blocks' keys ---------------------------------------------------------------------------

class _EmbeddingBlocks:
    """Fast keys of a block of rows against every column (:func:`candidate_scores`), and what the
    exact decisions need: float64 queries with their magnitude bounds, the columns' stored rows."""

    def __init__(self, scorer, spec: MatrixSpec):
        from openbench.evaluation.counting.exact import query_rows
        from openbench.models.scorers import squared_norms

        self.scorer, self.spec, self.kind = scorer, spec, scorer.kind
        side = spec.side
        self.columns = scorer.candidate_rows(scorer.entities[spec.cols], side).contiguous()
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

    def keys(self, first: int, last: int, out: torch.Tensor) -> torch.Tensor:
        from openbench.models.scorers import candidate_scores

        return candidate_scores(self.kind, self.fast_queries[first:last], self.columns, self.squared, out, keys=True)

    def fast_bound(self, grid_bits: Optional[int]) -> float:
        """The largest bound on a fast key's rounding over the matrix's rows (0 where the grid
        criterion says the fast pass computes every key exactly)."""
        from openbench.evaluation.counting.exact import fast_key_bound, norm_bounds, unit_roundoff, SUBNORMAL_SPACING

        scorer, kind = self.scorer, self.kind
        dtype = self.fast_queries.dtype
        u = unit_roundoff(dtype)
        width = self.fast_queries.shape[1]
        c2, c1 = (float(n.max()) if n.numel() else 0.0 for n in norm_bounds(self.columns))
        if self._fast_exact(grid_bits, c2, c1, dtype):
            return 0.0
        fast_two, fast_one = (n.numpy() for n in norm_bounds(self.fast_queries))
        rewrite, magnitudes = None, self.query_norms
        if scorer.rewrites(self.spec.side):
            from openbench.evaluation.counting.exact import real_rows

            anchor = real_rows(scorer.entities[self.anchor_ids])
            relation = real_rows(scorer.relations[self.relation_ids])
            rewrite = scorer.rewrite_error(torch.from_numpy(relation), self.spec.side, torch.from_numpy(anchor),
                                           (c2, c1)).numpy()
            rewritten = scorer.fast_query_formula(np.abs(anchor), np.abs(relation), self.spec.side, np.add)
            two, one = norm_bounds(torch.from_numpy(np.ascontiguousarray(rewritten)))
            magnitudes = (two.numpy(), one.numpy())
        delta = fast_key_bound(kind, scorer, u, width, self.query_norms, (fast_two, fast_one), magnitudes, (c2, c1),
                               rewrite)
        tiny = SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]
        return float(delta.max(initial=0.0)) + 4 * (width + scorer.query_rounding + 8) * tiny

    def _fast_exact(self, grid_bits: Optional[int], c2: float, c1: float, dtype) -> bool:
        """Every fast key computed without rounding (the ranking engine's grid criterion)."""
        from openbench.evaluation.counting.exact import SUBNORMAL_SPACING

        if grid_bits is None or self.kind not in ("dot", "l2", "l1") or self.scorer.rewrites(self.spec.side):
            return False
        significand = 53 if dtype == torch.float64 else 24
        degree = self.scorer.query_degree + 1 if self.kind == "dot" else (
            2 * self.scorer.query_degree if self.kind == "l2" else self.scorer.query_degree)
        q2, q1 = self.query_norms
        size = {"dot": q2 * c2, "l2": (q2 + c2) ** 2, "l1": q1 + c1}[self.kind]
        finest = -int(np.log2(SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]))
        if degree * grid_bits >= min(1000, finest + 1):
            return False
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

            self.columns = scorer.candidate_rows(scorer.entities[spec.cols], spec.side).contiguous()
            self.squared = squared_norms(self.columns) if scorer.kind == "l2" else None

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

def _blocks(rows: int, width: int) -> List[Tuple[int, int]]:
    step = max(1, BLOCK_KEYS // max(1, width))
    return [(first, min(rows, first + step)) for first in range(0, rows, step)]


def _run_blocks(count_block: Callable, blocks: List[Tuple[int, int]], workers: int, progress: Optional[Callable],
                on_result: Callable) -> None:
    """``on_result(count_block(first, last))`` for every block, in block order on the calling
    thread; the blocks after the first are counted on ``workers`` threads (each with one torch
    thread, so that each computes and counts its own blocks). The first block is counted alone:
    what ``on_result`` learns of it (the floor of the best pairs) serves every other block."""
    from openbench.evaluation.counting.tally import one_torch_thread

    def done(result, first: int, last: int) -> None:
        on_result(result)
        if progress:
            progress(last - first)

    if not blocks:
        return
    done(count_block(*blocks[0]), *blocks[0])
    rest = blocks[1:]
    if workers <= 1 or len(rest) <= 1:
        for first, last in rest:
            done(count_block(first, last), first, last)
        return
    with one_torch_thread(), ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-matrix") as pool:
        futures = [pool.submit(count_block, first, last) for first, last in rest]
        for future, (first, last) in zip(futures, rest):
            done(future.result(), first, last)


def count_matrix(scorer, spec: MatrixSpec, special_rows: np.ndarray, special_cols: np.ndarray,
                 thresholds: np.ndarray, top_k: int = 0, top_excluded: Optional[np.ndarray] = None,
                 ranks: str = "exact", lower_is_better: bool = False,
                 progress: Optional[Callable[[int], None]] = None) -> MatrixCounts:
    """Count the matrix of ``spec`` against its special pairs (see the module docstring).

    :param special_rows: (P,) int64 row indexes (into ``spec.rows``) of the special pairs;
        ``special_cols`` (P,) their column indexes.
    :param thresholds: (P,) bool, the special pairs whose greater and equal counts are wanted.
    :param top_k: how many best pairs to find (0: none); ``top_excluded`` (P,) bool: special pairs
        that are never among them (the known positives).
    :param ranks: ``"exact"`` (embedding scorers of dot, L2 or L1 keys: exact decisions) or
        ``"fast"`` (the keys as computed); other scorers are always compared as computed.
    """
    special_rows = np.asarray(special_rows, dtype=np.int64)
    special_cols = np.asarray(special_cols, dtype=np.int64)
    thresholds = np.asarray(thresholds, dtype=bool)
    top_excluded = np.zeros(special_rows.shape[0], bool) if top_excluded is None else np.asarray(top_excluded, bool)
    rows, width = spec.shape
    exact = ranks == "exact" and exact_mode_applies(scorer) and not lower_is_better
    if exact:
        return _count_exact(scorer, spec, special_rows, special_cols, thresholds, top_k, top_excluded, progress)
    return _count_values(_ValueBlocks(scorer, spec, lower_is_better, fast=ranks == "fast"), spec, special_rows,
                         special_cols, thresholds, top_k, top_excluded, progress)


def _codes(rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    return rows.astype(np.int64) * width + cols.astype(np.int64)


_CONFIGURED: set = set()


def _library():
    library = COUNTING_LIBRARY.get()
    if library is not None and id(library) not in _CONFIGURED:
        _configure(library)
        _CONFIGURED.add(id(library))
    return library


def _passes(windows: _Windows, record: bool):
    library = _library()
    return _BlockPass(windows, record, library) if library is not None else _numpy_pass(windows, record)


class _Tops:
    """The best pairs seen so far (positions as codes row * width + col), kept with a floor that
    only rises; excluded codes never enter."""

    def __init__(self, wanted: int, excluded: np.ndarray, slack: float):
        self.wanted, self.excluded, self.slack = wanted, np.sort(excluded), slack
        self.codes = np.zeros(0, np.int64)
        self.keys = np.zeros(0, np.float64)
        self.floor: Optional[float] = -np.inf if wanted else None

    def add(self, codes: np.ndarray, keys: np.ndarray) -> None:
        if not self.wanted or codes.size == 0:
            return
        if self.excluded.size:
            keep = ~np.isin(codes, self.excluded, assume_unique=False)
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
                  top_excluded, progress) -> MatrixCounts:
    """Scores as computed: the special pairs' values read from their blocks (a first pass over the
    blocks that hold one), then every block counted against them with point windows."""
    rows, width = spec.shape
    block_list = _blocks(rows, width)
    values = np.zeros(special_rows.shape[0], np.float64)
    for first, last in block_list:
        inside = np.flatnonzero((special_rows >= first) & (special_rows < last))
        if inside.size:
            block = blocks.keys(first, last).double().numpy()
            values[inside] = block[special_rows[inside] - first, special_cols[inside]]
    if np.isnan(values).any():
        raise ScoreError("the model gave a NaN score to a pair of the matrix; a repurposing matrix ranks finite scores")
    order = np.argsort(values[thresholds], kind="stable")
    threshold_values = values[thresholds][order]
    windows = _point_windows(threshold_values)
    count_pass = _passes(windows, record=False)
    tops = _Tops(top_k, _codes(special_rows[top_excluded], special_cols[top_excluded], width), 0.0)

    beyond, reached = np.zeros(threshold_values.shape[0] + 1, np.int64), np.zeros(threshold_values.shape[0] + 1,
                                                                                    np.int64)

    def count_block(first: int, last: int):
        keys = blocks.keys(first, last).double().contiguous()
        block_beyond, block_reached, _, top_positions = count_pass(keys, tops.floor)
        flat = keys.reshape(-1).numpy()
        return block_beyond, block_reached, first * width + top_positions, flat[top_positions]

    def on_result(result) -> None:
        beyond.__iadd__(result[0])
        reached.__iadd__(result[1])
        tops.add(result[2], result[3])

    _run_blocks(count_block, block_list, 1, progress, on_result)
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
                        {"mode": "as computed", "blocks": len(block_list), "rescored": 0, "decimal": 0})


def _point_windows(values: np.ndarray) -> _Windows:
    tensor = torch.from_numpy(np.ascontiguousarray(values))
    firsts, base, scale = _grid(values, values)
    return _Windows(tensor, tensor, firsts, base, scale, True)


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
        ranks = np.zeros(count, np.int64)  # the group of each sorted pair, filled cluster by cluster
        group = 0
        boundaries = np.flatnonzero(np.r_[starts, True])
        for begin, end in zip(boundaries[:-1], boundaries[1:]):
            if end - begin == 1:
                ranks[begin] = group
                group += 1
                continue
            members = order[begin:end]
            if not sorted_bounds[begin:end].any():
                exact = [decimal.Decimal(float(k)) for k in sorted_keys[begin:end]]
            else:
                exact = [self.key(int(rows[i]), int(cols[i])) for i in members]
            ordering = sorted(range(end - begin), key=lambda i: exact[i])
            previous = None
            for position in ordering:
                if previous is not None and exact[position] != previous:
                    group += 1
                ranks[begin + position] = group
                previous = exact[position]
            group += 1
        out = np.empty(count, np.int64)
        out[order] = ranks
        return out


def _count_exact(scorer, spec: MatrixSpec, special_rows, special_cols, thresholds, top_k, top_excluded,
                 progress) -> MatrixCounts:
    from openbench.evaluation.counting.exact import ExactRanks

    rows, width = spec.shape
    blocks = _EmbeddingBlocks(scorer, spec)
    finite = scorer.provably_finite(blocks.fast_queries, spec.side)
    if not finite:
        raise ScoreError("the matrix's fast keys may overflow the embeddings' precision; evaluate with fast ranks "
                         "(--fast) or rescale the embeddings")
    grid_bits = ExactRanks(scorer).grid_bits
    special_keys, special_bounds = blocks.pair_keys(special_rows, special_cols, grid_bits)
    exact = _ExactOrder(blocks)
    groups = exact.groups(special_rows, special_cols, special_keys, special_bounds)
    delta = blocks.fast_bound(grid_bits)
    where = np.flatnonzero(thresholds)
    order = np.lexsort((where, groups[where]))  # ascending exact order
    sorted_where = where[order]
    threshold_keys = special_keys[sorted_where]
    max_bound = float(special_bounds[thresholds].max(initial=0.0))
    # the windows must be non-decreasing: the float64 keys are, up to their bounds, which the width covers
    monotone = np.maximum.accumulate(threshold_keys) if threshold_keys.size else threshold_keys
    windows = _windows(monotone, delta + max_bound + (float(np.max(monotone - threshold_keys, initial=0.0))),
                       blocks.fast_queries.dtype)
    record = not windows.point
    count_pass = _passes(windows, record)
    slack = 2 * (delta + float(special_bounds.max(initial=0.0))) * (1 + 2.0 ** -30)
    tops = _Tops(top_k, _codes(special_rows[top_excluded], special_cols[top_excluded], width), slack)

    def count_block(first: int, last: int):
        keys = torch.empty((last - first, width), dtype=blocks.fast_queries.dtype)
        keys = blocks.keys(first, last, keys)
        beyond, reached, undecided, top_positions = count_pass(keys, tops.floor)
        flat = keys.reshape(-1)
        return (beyond, reached, first * width + undecided, flat[torch.from_numpy(undecided)].double().numpy(),
                first * width + top_positions, flat[torch.from_numpy(top_positions)].double().numpy())

    block_list = _blocks(rows, width)
    count = sorted_where.shape[0]
    beyond, reached = np.zeros(count + 1, np.int64), np.zeros(count + 1, np.int64)
    undecided: List[Tuple[np.ndarray, np.ndarray]] = []

    def on_result(result) -> None:
        beyond.__iadd__(result[0])
        reached.__iadd__(result[1])
        if result[2].size:
            undecided.append((result[2], result[3]))
        tops.add(result[4], result[5])

    _run_blocks(count_block, block_list, max(1, torch.get_num_threads()), progress, on_result)
    above = _suffix(beyond)
    greater_sorted, equal_sorted = above.copy(), np.zeros(count, np.int64)
    if windows.point:
        equal_sorted = _suffix(reached) - above
    rescored = 0
    if record:
        undecided_codes = np.concatenate([codes for codes, _ in undecided]) if undecided else np.zeros(0, np.int64)
        undecided_fast = np.concatenate([fast for _, fast in undecided]) if undecided else np.zeros(0)
        rescored = undecided_codes.size
        more_greater, more_equal = _settle(blocks, exact, grid_bits, undecided_codes, undecided_fast, windows,
                                           special_rows[sorted_where], special_cols[sorted_where], threshold_keys,
                                           special_bounds[sorted_where], groups[sorted_where], width)
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
                         "decimal": int(exact.decimal), "fast_bound": delta})


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


def _settle(blocks: _EmbeddingBlocks, exact: _ExactOrder, grid_bits, codes: np.ndarray, fast: np.ndarray,
            windows: _Windows, t_rows, t_cols, t_keys, t_bounds, t_groups, width: int) -> Tuple[np.ndarray, np.ndarray]:
    """(greater (T,), equal (T,)) the recorded keys add to the sorted thresholds whose windows
    hold them (:func:`_decide`)."""
    count = t_keys.shape[0]
    greater, equal = np.zeros(count, np.int64), np.zeros(count, np.int64)
    if codes.size == 0:
        return greater, equal
    lows, highs = windows.lows.double().numpy(), windows.highs.double().numpy()
    first = np.searchsorted(highs, fast, "left")
    last = np.searchsorted(lows, fast, "right")
    spans = last - first
    pair = np.repeat(np.arange(codes.size), spans)
    threshold = (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans)) + np.repeat(first, spans)
    rows, cols = codes // width, codes % width
    above, tie = _decide(blocks, exact, grid_bits, rows[pair], cols[pair], t_rows[threshold], t_cols[threshold],
                         t_keys[threshold], t_bounds[threshold])
    greater += np.bincount(threshold[above], minlength=count).astype(np.int64)
    equal += np.bincount(threshold[tie], minlength=count).astype(np.int64)
    return greater, equal


def count_rows(scorer, spec: MatrixSpec, rows: np.ndarray, cols: np.ndarray, ranks: str = "exact",
               lower_is_better: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(greater (P,), equal (P,)) int64 of P pairs (rows, cols) (matrix indexes), each counted
    against its own row only: how many columns of its row have a greater key, and how many an
    equal one (itself included). The ranking engine's question for one query per pair, decided
    as :func:`count_matrix` decides it (exact windows per row, or values as computed)."""
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    greater, equal = np.zeros(rows.shape[0], np.int64), np.zeros(rows.shape[0], np.int64)
    if rows.size == 0:
        return greater, equal
    exact_mode = ranks == "exact" and exact_mode_applies(scorer) and not lower_is_better
    width = spec.shape[1]
    blocks: object
    if exact_mode:
        from openbench.evaluation.counting.exact import ExactRanks, U64

        embedding = _EmbeddingBlocks(scorer, spec)
        blocks = embedding
        grid_bits = ExactRanks(scorer).grid_bits
        keys64, bounds64 = embedding.pair_keys(rows, cols, grid_bits)
        exact = _ExactOrder(embedding)
        delta = embedding.fast_bound(grid_bits)
    else:
        blocks = _ValueBlocks(scorer, spec, lower_is_better, fast=ranks == "fast")
    wanted = np.unique(rows)
    for first, last in _blocks(spec.shape[0], width):
        inside_rows = wanted[(wanted >= first) & (wanted < last)]
        if inside_rows.size == 0:
            continue
        for row in inside_rows.tolist():
            members = np.flatnonzero(rows == row)
            if exact_mode:
                keys = embedding.keys(row, row + 1, torch.empty((1, width), dtype=embedding.fast_queries.dtype))
                values = keys[0].double().numpy()
                margin = (delta + bounds64[members]) * (1 + 2.0 ** -30) + 4 * U64 * np.abs(keys64[members])
                margin = np.where((delta == 0) & (bounds64[members] == 0), 0.0, margin)
                from openbench.evaluation.counting.exact import round_outwards

                lows, highs = (t.double().numpy() for t in round_outwards(keys64[members] - margin,
                                                                           keys64[members] + margin,
                                                                           embedding.fast_queries.dtype))
                for position, member in enumerate(members.tolist()):
                    beyond = values > highs[position]
                    inside = np.flatnonzero((values >= lows[position]) & ~beyond)
                    count = int(beyond.sum())
                    if lows[position] == highs[position]:
                        greater[member], equal[member] = count, inside.size
                        continue
                    above, tie = _decide(embedding, exact, grid_bits, np.full(inside.size, row), inside,
                                         np.full(inside.size, row), np.full(inside.size, cols[member]),
                                         np.full(inside.size, keys64[member]), np.full(inside.size, bounds64[member]))
                    greater[member], equal[member] = count + int(above.sum()), int(tie.sum())
            else:
                assert isinstance(blocks, _ValueBlocks)
                values = blocks.keys(row, row + 1).double().reshape(-1).numpy()
                own = values[cols[members]]
                greater[members] = (values[None, :] > own[:, None]).sum(axis=1)
                equal[members] = (values[None, :] == own[:, None]).sum(axis=1)
    return greater, equal
