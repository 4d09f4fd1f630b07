"""The fused pass (``openbench_matrix_fused_f32``; exact mode, float32 dot or L2 keys, AVX-512): each
thread computes its rows' keys a tile at a time and counts the tile in cache, so no block of keys is
written and read again. Its sums run in chunks (:func:`fused_chain`), whose bound makes the windows
some seven times narrower than a GEMM's."""
from __future__ import annotations

import os
import ctypes
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.exact_keys import norm_bounds
from openbench.evaluation.counting.key_bounds import centred_l2_bound_terms
from openbench.evaluation.counting.rounding import U64, gamma, subnormal_slack, unit_roundoff
from openbench.evaluation.counting.matrix import c_pass, core
from openbench.evaluation.counting.matrix.blocks import _EmbeddingBlocks
from openbench.evaluation.counting.matrix.core import BLOCK_KEYS, _given_block_keys
from openbench.evaluation.counting.matrix.passes import _BlockPass, _merged_parts, PASS_VARIABLE, _TorchPass
from openbench.evaluation.counting.matrix.windows import _floor_in
from openbench.models.scorers import squared_norms

__all__ = ["FUSED_BLOCKS", "FUSED_COLS", "fused_chunk", "fused_chain", "fused_applies"]


FUSED_BLOCKS = 4  # the fused pass's blocks hold this many times BLOCK_KEYS keys (fewer rounds of the threads)
FUSED_COLS = 32  # the fused pass's tile width (``csrc/fused_pass.c``'s FUSED_COLS): the columns are packed in panels of it


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
    tiny = subnormal_slack(width, blocks.scorer.query_rounding, torch.float32)
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
        found = self.plain.library.openbench_matrix_fused_keys_f32(ctypes.byref(c_pass.MatrixPassArgs(
            queries=self.queries[first:last].data_ptr(), rows=last - first, packed=self.packed.ctypes.data,
            width=self.width, dims=self.dims, chunk=self.chunk, row_terms=row_terms,
            col_terms=self.col_terms.data_ptr() if self.col_terms is not None else None, kind=self.kind,
            out=out.data_ptr())))
        if found < 0:
            raise MemoryError(f"the fused matrix keys could not be computed (code {found})")
        return out

    def __call__(self, first: int, last: int, floor: Optional[float]):
        """(beyond (T + 1,), reached (T + 1,), undecided (n, 3), top positions (k,), their fast
        keys (k,)) of rows ``first .. last - 1``, positions within those rows."""
        width = self.width
        most = max(1, core.COUNTER_LIMIT // max(1, width))  # the pass's int32 counters
        if last - first > most:
            return _merged_parts([self(r0, min(last, r0 + most), floor) for r0 in range(first, last, most)],
                                 [(r0 - first) * width for r0 in range(first, last, most)])
        plain, grid = self.plain, self.plain.grid
        floor = _floor_in(torch.float32, floor)
        refine: dict = {}
        if plain.queries64 is not None and plain.lows64 is not None and plain.highs64 is not None:
            refine = dict(queries64=plain.queries64[first:last].data_ptr(), keys64_lo=plain.lows64.ctypes.data,
                          keys64_hi=plain.highs64.ctypes.data)
        rows = last - first
        pair: dict = {}
        if self.pair_windows is not None and plain.record:
            terms, norms, centers, extra = self.pair_windows
            pair = dict(pair_terms=terms[first:last].ctypes.data, pair_norms=norms.ctypes.data,
                        centers=centers.ctypes.data, pair_extra=extra)
        counts = np.empty(grid.cells + 3, np.int32)  # the cells' counters and a spare (``csrc/fused_pass.c``)
        # a pass repeated costs a pass: room for the best pairs over the first floor (untouched pages cost nothing)
        capacity, top_capacity = 1 << 16, max(1 << 16, (last - first) * width // 64)
        queries = self.queries[first:last]
        row_terms = self.row_terms[first:last].data_ptr() if self.row_terms is not None else None
        col_terms = self.col_terms.data_ptr() if self.col_terms is not None else None
        while True:
            beyond, reached = np.zeros(plain.count + 1, np.int64), np.zeros(plain.count + 1, np.int64)
            pairs, tops = np.empty(3 * capacity, np.int64), np.empty(top_capacity, np.int64)
            top_keys, top_count = np.empty(top_capacity, np.float32), np.zeros(1, np.int64)
            found = plain.library.openbench_matrix_fused_f32(ctypes.byref(c_pass.MatrixPassArgs(
                queries=queries.data_ptr(), rows=rows, packed=self.packed.ctypes.data, columns=self.columns.data_ptr(),
                width=width, dims=self.dims, chunk=self.chunk, row_terms=row_terms, col_terms=col_terms,
                lows=self.lows.data_ptr(), highs=self.highs.data_ptr(), count=plain.count, **grid.arguments(),
                cell_counts=counts.ctypes.data, beyond=beyond.ctypes.data, reached=reached.ctypes.data,
                record=int(plain.record), pairs=pairs.ctypes.data, capacity=capacity,
                floor=-np.inf if floor is None else floor, tops=tops.ctypes.data if floor is not None else None,
                top_keys=top_keys.ctypes.data, top_capacity=top_capacity, top_count=top_count.ctypes.data,
                kind=self.kind, **refine, **pair)))
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


def _fused_block_keys() -> int:
    """Keys per block of the fused pass: :data:`FUSED_BLOCKS` times :func:`block_keys` (it holds no
    block of keys; a block is a round of the threads and a rise of the best pairs' floor), or the
    environment's :data:`BLOCK_VARIABLE` as given."""
    return _given_block_keys() or FUSED_BLOCKS * BLOCK_KEYS


def _pass_name(count_pass, device: torch.device) -> str:
    """Which pass counted the blocks, and where (the record's timing says it)."""
    kind = ("torch" if isinstance(count_pass, _TorchPass) else "fused C" if isinstance(count_pass, _FusedPass)
            else "C" if isinstance(count_pass, _BlockPass) else "numpy")
    return f"{kind} on {device}"
