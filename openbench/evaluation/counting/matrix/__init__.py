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
2. **One C pass per block** (``openbench_matrix_count_*`` in ``csrc/matrix_pass.c``): every key is
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

The rooms, in the order the data flows: :mod:`.core` (the matrix, its counts, shards, blocks and
the limits every pass shares), :mod:`.windows` (the thresholds' windows and the grid),
:mod:`.blocks` (the keys of a block of rows), :mod:`.passes` (one block counted: C, numpy, torch;
the C passes take one struct, :mod:`.c_pass`'s ``MatrixPassArgs``, checked against the C at load),
:mod:`.fused` (keys and count in one pass), :mod:`.tops` (the best pairs), :mod:`.decisions`
(exact decisions, the probe, the settling), :mod:`.exact_pass` and :mod:`.values_pass` (a whole
matrix, exact or as computed), :mod:`.rows` (pairs counted in their own row); this package's
:func:`count_matrix` chooses between the two whole-matrix passes. The numerical helpers they share
(unit roundoff, outward rounding, the grid criterion) are :mod:`openbench.evaluation.counting.rounding`.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from openbench.evaluation.counting.key_bounds import UnboundedKeys
from openbench.evaluation.counting.matrix.blocks import _ValueBlocks
from openbench.evaluation.counting.matrix.core import (BLOCK_KEYS, BLOCK_VARIABLE, COUNTER_LIMIT, TOP_SLACK,
                                                       MatrixCounts, MatrixSpec, Shard, block_keys,
                                                       exact_mode_applies)
from openbench.evaluation.counting.matrix.exact_pass import count_exact
from openbench.evaluation.counting.matrix.fused import FUSED_BLOCKS, FUSED_COLS, fused_applies, fused_chain, fused_chunk
from openbench.evaluation.counting.matrix.passes import DEVICE_STEP_KEYS, PASS_VARIABLE
from openbench.evaluation.counting.matrix.rows import RowCounts, count_rows
from openbench.evaluation.counting.matrix.values_pass import count_values
from openbench.evaluation.counting.matrix.windows import MAX_GRID_CELLS, grid_margin
from openbench.models.finite import refuse_nonfinite

__all__ = ["BLOCK_KEYS", "BLOCK_VARIABLE", "COUNTER_LIMIT", "TOP_SLACK", "MAX_GRID_CELLS", "PASS_VARIABLE",
           "DEVICE_STEP_KEYS", "FUSED_BLOCKS", "FUSED_COLS", "MatrixSpec", "MatrixCounts", "Shard", "RowCounts",
           "count_matrix", "count_rows", "exact_mode_applies", "block_keys", "fused_applies", "fused_chain",
           "fused_chunk", "grid_margin"]


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
            return count_exact(scorer, spec, special_rows, special_cols, thresholds, top_k, top_excluded, progress,
                               shard, device)
        except UnboundedKeys:  # a stored non-finite value is named first (openbench.models.finite)
            refuse_nonfinite(scorer)
            raise
    return count_values(_ValueBlocks(scorer, spec, lower_is_better, fast=ranks == "fast"), spec, special_rows,
                        special_cols, thresholds, top_k, top_excluded, progress, shard)
