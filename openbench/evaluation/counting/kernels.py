"""Row counting: how many candidates of each score row beat, tie or are NaN against a target
(or, for exact ranks, lie beyond or inside a window [low, high] around it).

Three implementations of one contract:

* a small C kernel (``csrc/``, built at install time, loaded with ctypes) that does it in a
  single read pass, rows split over threads (ctypes releases the GIL), for CPU tensors;
* a Triton kernel (:mod:`openbench.evaluation.counting._triton`), also one read pass, for CUDA tensors
  where Triton is importable (it ships with CUDA builds of torch);
* a torch fallback for other devices and dtypes, or when neither kernel is there: sign(s - t)
  in place, then two row sums (five memory passes).

``OPENBENCH_KERNEL=torch`` forces the fallback (tests compare them). The C kernel's row scan is
the best the CPU has (AVX-512, AVX2, else portable C: :func:`chunk_scan`); ``OPENBENCH_SCAN=avx2``
(or ``portable``) chooses a lesser one, as on a CPU without the better (benchmarks and tests; the
counts are the same, bit for bit).
"""
from __future__ import annotations

import ctypes
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional, Tuple

import torch

from openbench._native import OptionalLibrary
from openbench.errors import ScoreError
from openbench.evaluation.counting.c_structs import (ChunkCountArgs, CountWindowArgs, PairKeysArgs, QueryRowsArgs,
                                                     check_layout, declare)

__all__ = ["PARALLEL_MIN_ELEMENTS", "NonFiniteRows", "COUNTING_LIBRARY", "LOOKUP", "ChunkTally", "counted_tally", "kernel_name", "row_counts",
           "chunk_scan", "split_rows"]

logger = logging.getLogger(__name__)

# below this many scores a block is counted by one thread: thread hand-off would dominate
PARALLEL_MIN_ELEMENTS = 1 << 18
_triton = None
_triton_loaded = False
_pool: Optional[ThreadPoolExecutor] = None


class NonFiniteRows(ScoreError):
    """NaN scores in some rows of a block; ``row`` is the first offending row of the block."""

    def __init__(self, row: int, detail: str):
        self.row = row
        super().__init__(detail)


def _configure(library) -> None:
    for struct, layout, names in ((CountWindowArgs, "openbench_count_window_layout", ("openbench_count_window_f32",
                                                                                  "openbench_count_window_f64")),
                                  (PairKeysArgs, "openbench_pair_keys_layout", ("openbench_pair_keys_f32",
                                                                               "openbench_pair_keys_f64"))):
        check_layout(library, struct, layout)
        declare(library, names, struct, None)
    # the fused chunk count (ChunkTally) and exact ranks' queries take one struct each, checked here
    check_layout(library, ChunkCountArgs, "openbench_chunk_count_layout")
    declare(library, ("openbench_count_chunk_f32", "openbench_count_chunk_f64"), ChunkCountArgs, None)
    check_layout(library, QueryRowsArgs, "openbench_query_rows_layout")
    declare(library, ("openbench_query_rows_f32", "openbench_query_rows_f64"), QueryRowsArgs, None)
    for name in ("openbench_table_summary_f32", "openbench_table_summary_f64"):  # exact.py's table_summary
        function = getattr(library, name)
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        function.restype = None
    library.openbench_chunk_scan.argtypes = [ctypes.c_int]
    library.openbench_chunk_scan.restype = ctypes.c_int
    wanted = os.environ.get(SCAN_VARIABLE, "").strip().lower()
    if wanted:
        if wanted not in SCANS:
            from openbench.errors import UsageError

            raise UsageError(f"{SCAN_VARIABLE}={wanted!r}: expected one of {', '.join(SCANS)}")
        library.openbench_chunk_scan(SCANS.index(wanted))
    for name in ("openbench_row_norms_f32", "openbench_row_norms_f64"):
        function = getattr(library, name)
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                             ctypes.c_void_p]
        function.restype = None
    for name in ("openbench_fraction_bits_f32", "openbench_fraction_bits_f64"):  # exact.py's fraction_bits
        function = getattr(library, name)
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        function.restype = ctypes.c_int64


SCANS = ("portable", "avx512", "avx2")  # the C kernel's scans, by its number
SCAN_VARIABLE = "OPENBENCH_SCAN"  # a lesser scan than the CPU's best (where the CPU has the one asked for)

# OPENBENCH_KERNEL=torch forces the torch implementation
COUNTING_LIBRARY = OptionalLibrary(Path(__file__).resolve().parent, "_counting", _configure, "OPENBENCH_KERNEL",
                                   "torch")
_load_library = COUNTING_LIBRARY.get


def _load_triton():
    global _triton, _triton_loaded
    if not _triton_loaded:
        _triton_loaded = True
        if os.environ.get("OPENBENCH_KERNEL", "").lower() != "torch":
            try:
                from openbench.evaluation.counting import _triton as module
                _triton = module
            except ImportError as error:  # CPU builds of torch come without Triton
                logger.debug("Triton is not importable (%s); CUDA blocks use the torch implementation", error)
    return _triton


def kernel_name(scores: torch.Tensor) -> str:
    """Which implementation :func:`row_counts` uses for ``scores``: ``"c"``, ``"triton"`` or ``"torch"``."""
    usable = (scores.dtype in (torch.float32, torch.float64)
              and (scores.shape[1] <= 1 or scores.stride(1) == 1) and scores.shape[1] < 2 ** 31)
    if usable and scores.device.type == "cpu" and _load_library() is not None:
        return "c"
    if usable and scores.device.type == "cuda" and _load_triton() is not None:
        return "triton"
    return "torch"


def row_counts(scores: torch.Tensor, targets: torch.Tensor, lower_is_better: bool = False,
               check_nan: bool = True, highs: Optional[torch.Tensor] = None,
               positions: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per row i: (#{j: s_ij better than t_i}, #{j: s_ij == t_i}) as int64 (B,) tensors.

    "Better" is ``>`` (``<`` when lower is better); comparisons are exact, so equal infinities
    tie. A NaN score raises :class:`NonFiniteRows` (the torch path skips that check when
    ``check_nan`` is False, and the C kernel then makes two comparisons per score instead of
    three). May overwrite ``scores``.

    With ``highs``, row i has the window [targets_i, highs_i]: the counts are then
    (#{beyond the window on the better side}, #{inside the window}).

    :param scores: (B, n) float scores.
    :param targets: (B,) the value each row is compared against (the window's low end), same dtype as ``scores``.
    :param highs: (B,) the window's high end, or None (a window of one value).
    :param positions: optional (B, K) int64 on the CPU: the C kernel writes the columns of the first
        K candidates inside each row's window there (the counts say how many there are); other
        implementations leave it untouched.
    """
    targets = targets.to(dtype=scores.dtype).contiguous()
    highs = targets if highs is None else highs.to(dtype=scores.dtype).contiguous()
    kernel = kernel_name(scores)
    if kernel == "c":
        return _row_counts_c(scores, targets, highs, lower_is_better, positions, check_nan)
    if kernel == "triton":
        return _row_counts_triton(scores, targets, highs, lower_is_better)
    if highs is not targets:
        return _window_counts_torch(scores, targets, highs, lower_is_better, check_nan)
    return _row_counts_torch(scores, targets, lower_is_better, check_nan)


def _row_counts_triton(scores, lows, highs, lower_is_better):
    global _triton
    assert _triton is not None  # kernel_name chose "triton" because it imported
    try:
        greater, equal, has_nan = _triton.row_counts(scores, lows, highs, lower_is_better)
    except (RuntimeError, OSError, ImportError) as error:  # Triton compiles at first use: no compiler, say
        if isinstance(error, torch.OutOfMemoryError):
            raise
        logger.warning("the Triton counting kernel failed (%s); using the torch implementation from now on", error)
        _triton = None
        if highs is not lows:
            return _window_counts_torch(scores, lows, highs, lower_is_better, True)
        return _row_counts_torch(scores.clone(), lows, lower_is_better, True)
    if bool(has_nan.any()):
        raise NonFiniteRows(int(has_nan.nonzero()[0, 0]), "NaN score")
    return greater, equal


def _row_counts_c(scores, lows, highs, lower_is_better, positions=None, check_nan=True):
    rows, width = scores.shape
    greater = torch.empty(rows, dtype=torch.long)
    equal = torch.empty(rows, dtype=torch.long)
    nans = torch.zeros(rows, dtype=torch.long)
    library = COUNTING_LIBRARY.get()
    assert library is not None  # kernel_name chose "c" because it loaded
    function = (library.openbench_count_window_f32 if scores.dtype == torch.float32
                else library.openbench_count_window_f64)
    stride = scores.stride(0) if rows > 1 else width
    fields = dict(scores=scores.data_ptr(), stride=stride, width=width, lows=lows.data_ptr(), highs=highs.data_ptr(),
                  lower_is_better=int(lower_is_better), better=greater.data_ptr(), inside=equal.data_ptr(),
                  nans=nans.data_ptr() if check_nan else None,
                  positions=None if positions is None else positions.data_ptr(),
                  capacity=0 if positions is None else positions.shape[1])

    def run(bounds):  # one struct per call: the threads' calls run at once
        function(ctypes.byref(CountWindowArgs(row_begin=bounds[0], row_end=bounds[1], **fields)))

    split_rows(rows, rows * width, run)
    bad = nans.nonzero()
    if bad.numel():
        raise NonFiniteRows(int(bad[0, 0]), "NaN score")
    return greater, equal




def chunk_scan(isa: Optional[str] = None) -> Optional[str]:
    """The row scan the C kernels use (the chunk count and the repurposing matrix pass):
    ``"avx512"``, ``"avx2"`` or ``"portable"`` (None where the kernel is not built), the best the
    CPU has unless chosen; ``isa`` chooses one (a vector scan only where the CPU has it: ask
    again to see what was chosen). The tests compare them all."""
    library = COUNTING_LIBRARY.get()
    if library is None:
        return None
    if isa is not None and isa not in SCANS:
        raise ValueError(f"scan {isa!r}: expected one of {', '.join(SCANS)}")
    chosen = library.openbench_chunk_scan(-1 if isa is None else SCANS.index(isa))
    return SCANS[chosen]


LOOKUP = object()  # a helper's ``library`` argument when the caller did not resolve the C helpers


class ChunkTally:
    """Counts of one batch side, accumulated chunk by chunk by the C kernel in one call per block
    (``openbench_count_chunk``): the excluded entries (each row's true answer and known answers
    in the chunk) handled in the same pass as the scan, so nothing but the scores' one read
    happens while the block is in cache. The reference is
    :func:`~openbench.evaluation.counting.counts.count_block`, summed over the chunks.

    :param true_ids: (B,) int64 true answers; ``true_scores`` (B,) their scores (fast ranks
        compare each block's true column with them).
    :param known: (offsets (B + 1,), cols (M,)) each row's known answers, sorted global ids.
    :param lows: (B,) and ``highs`` (B,) the windows (exact ranks; ``window=True``) or the true
        scores twice; in the blocks' dtype.
    :param capacity: window columns recorded per row across the chunks (0: none).
    :param check_nan: count NaN scores (the caller raises on them).
    :param library: the C helpers as the caller resolved them (default: looked up here).
    """

    def __init__(self, true_ids: torch.Tensor, true_scores: torch.Tensor, known: Tuple[torch.Tensor, torch.Tensor],
                 lows: torch.Tensor, highs: torch.Tensor, lower_is_better: bool, window: bool, capacity: int,
                 check_nan: bool, dtype: torch.dtype, library=LOOKUP):
        rows = true_ids.shape[0]
        self.true_ids = true_ids.contiguous()
        self.true_scores = true_scores.to(dtype).contiguous()
        self.offsets, self.cols = (part.contiguous() for part in known)
        self.lows, self.highs = lows.to(dtype).contiguous(), highs.to(dtype).contiguous()
        self.lower_is_better, self.window = lower_is_better, window
        self.greater = torch.zeros(rows, dtype=torch.long)
        self.inside = torch.zeros(rows, dtype=torch.long)
        self.nans = torch.zeros(rows, dtype=torch.long) if check_nan else None
        self.differs = torch.zeros(rows, dtype=torch.uint8)
        self.capacity = capacity
        self.positions = torch.empty((rows, capacity), dtype=torch.long) if capacity else None
        self.fill = torch.zeros(rows, dtype=torch.long)
        library = COUNTING_LIBRARY.get() if library is LOOKUP else library
        assert library is not None  # the caller chose the C path
        self._function = (library.openbench_count_chunk_f32 if dtype == torch.float32
                          else library.openbench_count_chunk_f64)

    def add(self, block: torch.Tensor, start: int) -> Optional[int]:
        """Count ``block`` (B, w), candidates ``start .. start + w - 1`` (may overwrite it); the
        first row that has met a NaN score so far (:meth:`first_nan_row`), or None."""
        rows, width = block.shape
        stride = block.stride(0) if rows > 1 else width
        fields = dict(scores=block.data_ptr(), stride=stride, width=width, start=start, lows=self.lows.data_ptr(),
                      highs=self.highs.data_ptr(), lower_is_better=int(self.lower_is_better), window=int(self.window),
                      true_ids=self.true_ids.data_ptr(), true_scores=self.true_scores.data_ptr(),
                      known_offsets=self.offsets.data_ptr(), known_cols=self.cols.data_ptr(),
                      better=self.greater.data_ptr(), inside=self.inside.data_ptr(),
                      nans=None if self.nans is None else self.nans.data_ptr(), true_differs=self.differs.data_ptr(),
                      positions=None if self.positions is None else self.positions.data_ptr(),
                      fill=self.fill.data_ptr(), capacity=self.capacity)

        def run(bounds):  # one struct per call: the threads' calls run at once
            self._function(ctypes.byref(ChunkCountArgs(row_begin=bounds[0], row_end=bounds[1], **fields)))

        split_rows(rows, rows * width, run)
        return self.first_nan_row()

    def first_nan_row(self) -> Optional[int]:
        """The first row that met a NaN score (None: none, or not checked)."""
        if self.nans is None:
            return None
        bad = self.nans.nonzero()
        return int(bad[0, 0]) if bad.numel() else None


def counted_tally(block: torch.Tensor, start: int, *args, **kwargs) -> Tuple[ChunkTally, Optional[int]]:
    """(a :class:`ChunkTally` of ``*args, **kwargs`` with its first ``block`` (B, w), candidates
    ``start`` on, counted; its first NaN row or None), in one call."""
    tally = ChunkTally(*args, **kwargs)
    return tally, tally.add(block, start)


def _window_counts_torch(scores, lows, highs, lower_is_better, check_nan):
    """(beyond the window on the better side, inside it) per row, by direct comparisons."""
    if check_nan:
        has_nan = torch.isnan(scores).any(dim=1) | torch.isnan(lows) | torch.isnan(highs)
        if bool(has_nan.any()):
            raise NonFiniteRows(int(has_nan.nonzero()[0, 0]), "NaN score")
    low, high = lows[:, None], highs[:, None]
    better = (scores < low) if lower_is_better else (scores > high)
    inside = (scores >= low) & (scores <= high)
    return better.sum(dim=1), inside.sum(dim=1)


def split_rows(rows: int, elements: int, run) -> None:
    """``run((begin, end))`` over ``rows`` split evenly across torch's threads (one call where the
    ``elements`` are too few for the hand-off to pay)."""
    workers = max(1, torch.get_num_threads())
    if workers == 1 or rows < 2 or elements < PARALLEL_MIN_ELEMENTS:
        run((0, rows))
        return
    edges = [rows * k // workers for k in range(workers + 1)]
    list(_thread_pool(workers).map(run, zip(edges[:-1], edges[1:])))


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool._max_workers != workers:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-count")
    return _pool


def _row_counts_torch(scores, targets, lower_is_better, check_nan):
    _signs_in_place(scores, targets, lower_is_better, check_nan)
    width = scores.shape[1]
    net = scores.sum(dim=1)  # #better - #worse
    nonzero = scores.abs_().sum(dim=1)  # #better + #worse
    return ((net + nonzero) / 2).to(torch.long), width - nonzero.to(torch.long)


def _signs_in_place(scores: torch.Tensor, targets: torch.Tensor, lower_is_better: bool, check_nan: bool) -> None:
    """Replace ``scores`` by sign(s - t) (sign(t - s) when lower is better), exact for ±inf ties.

    s - t is NaN for two equal infinities, so rows whose target is not finite are compared
    directly instead. Sums of the signs are exact in float32 below 2**24 columns.
    """
    if scores.shape[1] >= 2 ** 24 and scores.dtype != torch.float64:
        raise ValueError("rows wider than 2**24 candidates cannot be counted exactly in float32")
    special = ~torch.isfinite(targets)
    exact = None
    if bool(special.any()):
        special_rows = special.nonzero().squeeze(1)
        block, reference = scores[special_rows], targets[special_rows, None]
        nan_rows = torch.isnan(block).any(dim=1) | torch.isnan(reference.squeeze(1))
        if bool(nan_rows.any()):
            raise NonFiniteRows(int(special_rows[nan_rows.nonzero()[0, 0]]), "NaN score")
        exact = (block > reference).to(scores.dtype) - (block < reference).to(scores.dtype)
        if lower_is_better:
            exact.neg_()
    column = targets[:, None]
    if lower_is_better:
        torch.sub(column, scores, out=scores)
    else:
        scores.sub_(column)
    if check_nan:
        # torch.sign maps NaN to 0, so NaN is caught before: a row sum is NaN if the row holds a
        # NaN (or both infinities, which the exact check tells apart); a cheap read-only pass
        suspicious = torch.isnan(scores.sum(dim=1))
        if bool(suspicious.any()):
            rows = suspicious.nonzero().squeeze(1)
            has_nan = torch.isnan(scores[rows]).any(dim=1) & ~special[rows]
            if bool(has_nan.any()):
                raise NonFiniteRows(int(rows[has_nan.nonzero()[0, 0]]), "NaN score")
    torch.sign(scores, out=scores)
    if exact is not None:
        scores[special_rows] = exact
