"""The exact mode's count of a whole matrix (embedding scorers of dot, L2 or L1 keys): the setup on
two threads, the thresholds' exact order and windows, the pass chosen (fused, C, torch, float64
when crowded), every block counted, and the undecided keys settled."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.rounding import widened
from openbench.evaluation.counting.matrix.blocks import _EmbeddingBlocks, _matrix_columns, _run_blocks
from openbench.evaluation.counting.matrix.core import block_keys, _blocks, _codes, MatrixCounts, MatrixSpec, Shard
from openbench.evaluation.counting.matrix.decisions import (_crowded, _ExactOrder, _float64_windows, _pair_windows,
                                                            _probe_keys, _settle)
from openbench.evaluation.counting.matrix.fused import (fused_applies, _fused_block_keys, _fused_columns,
                                                        _fused_inputs, _FusedInputs, _FusedPass, _packed_columns,
                                                        _pass_name)
from openbench.evaluation.counting.matrix.passes import _BlockPass, _library, _pass_on_device, _passes
from openbench.evaluation.counting.matrix.tops import _final_tops, _gathered_tops, _suffix, _Tops
from openbench.evaluation.counting.matrix.windows import _grid, _Windows, _windows

__all__ = ["count_exact"]


def count_exact(scorer, spec: MatrixSpec, special_rows, special_cols, thresholds, top_k, top_excluded,
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


@dataclass
class _Thresholds:
    """The special pairs' float64 keys (P,) and bounds (P,), their exact ``groups`` (P,), and the
    thresholds among them in ascending exact order: their indexes ``where`` (T,), float64 keys
    ``keys`` (T,), those keys made non-decreasing (``monotone``, the windows' centres), the largest
    bound and the width every window adds for the thresholds' own bounds and order."""

    special_keys: np.ndarray
    special_bounds: np.ndarray
    groups: np.ndarray
    where: np.ndarray
    keys: np.ndarray
    monotone: np.ndarray
    max_bound: float
    width: float


def _thresholds(blocks: _EmbeddingBlocks, exact: _ExactOrder, grid_bits, special_rows, special_cols,
                thresholds) -> _Thresholds:
    """The special pairs' keys and exact order, and the thresholds sorted by it."""
    special_keys, special_bounds = blocks.pair_keys(special_rows, special_cols, grid_bits)
    groups = exact.groups(special_rows, special_cols, special_keys, special_bounds)
    where = np.flatnonzero(thresholds)
    sorted_where = where[np.lexsort((where, groups[where]))]  # ascending exact order
    threshold_keys = special_keys[sorted_where]
    max_bound = float(special_bounds[thresholds].max(initial=0.0))
    # the windows must be non-decreasing: the float64 keys are, up to their bounds, which the width covers
    monotone = np.maximum.accumulate(threshold_keys) if threshold_keys.size else threshold_keys
    width = max_bound + float(np.max(monotone - threshold_keys, initial=0.0))
    return _Thresholds(special_keys, special_bounds, groups, sorted_where, threshold_keys, monotone, max_bound, width)


@dataclass
class _ExactPlan:
    """The pass an exact count runs: its blocks (float32, or float64 where the matrix is crowded),
    windows, whether keys inside them are recorded, the fast keys' bound (``delta``; ``gemm_delta``
    a GEMM's, for the probe's floor), the pass itself, and whether its float64 step runs inside it."""

    blocks: _EmbeddingBlocks
    windows: _Windows
    record: bool
    delta: float
    gemm_delta: float
    count_pass: Any
    float64_in_pass: bool


def _plan(scorer, blocks: _EmbeddingBlocks, grid_bits, early: Optional[_EarlyWork], limits: _Thresholds,
          rows: int, device: Optional[torch.device]) -> Tuple[_ExactPlan, Optional[_EarlyWork],
                                                             Optional[_FusedInputs]]:
    """(the plan, the fused pass's setup where it still applies, its inputs): the windows around the
    thresholds, float64 blocks instead where the probe finds the float32 windows crowded, and the
    block pass with its float64 step."""
    on_device = _pass_on_device(device)
    library = _library()
    windows64: Optional[Tuple[np.ndarray, np.ndarray]] = None
    if early is not None:  # the fused pass's float64 windows here while the setup threads work
        windows64 = _float64_windows(blocks, scorer, grid_bits, limits.monotone, limits.max_bound)
    gemm_delta = delta = blocks.fast_bound(grid_bits)
    inputs: Optional[_FusedInputs] = None
    if early is not None:
        inputs = early.inputs.result()
        delta = inputs.delta
    windows = _windows(limits.monotone, delta + limits.width, blocks.fast_queries.dtype)
    record = not windows.point
    if record and not on_device:
        _grid(windows, record)  # the pass's grid (the probe's too) while the probe may still run
    if record and (library is not None or on_device) and blocks.fast_queries.dtype == torch.float32 and \
            _crowded(blocks, windows, library, early.probe.result()[1] if early is not None
                     else _probe_keys(blocks, rows)[1], on_device):
        # most keys would be re-scored one by one: the whole pass in float64 costs less
        early = inputs = None
        blocks = blocks.in_float64()
        delta = blocks.fast_bound(grid_bits)
        windows = _windows(limits.monotone, delta + limits.width, torch.float64)
        record = not windows.point
    refine: Optional[dict] = None
    if record and (library is not None or on_device) and blocks.fast_queries.dtype == torch.float32:
        lows64, highs64 = windows64 or _float64_windows(blocks, scorer, grid_bits, limits.monotone, limits.max_bound)
        refine = dict(kind=blocks.kind, queries64=blocks.exact_queries, columns=blocks.columns, lows64=lows64,
                      highs64=highs64)
    count_pass = _passes(windows, record, blocks.device if on_device else None, **(refine or {}))
    return _ExactPlan(blocks, windows, record, delta, gemm_delta, count_pass, refine is not None), early, inputs


def _count_blocks(plan: _ExactPlan, tops: _Tops, block_list, count: int, width: int, rows: int, on_device: bool,
                  progress, shard: Optional[Shard]):
    """(beyond (T + 1,), reached (T + 1,), the recorded keys' codes and threshold ranges, tops):
    every block of ``block_list`` (this rank's share) counted by the plan's pass."""
    blocks, count_pass = plan.blocks, plan.count_pass
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
    codes = np.concatenate([codes for codes, _ in undecided]) if undecided else np.zeros(0, np.int64)
    ranges = np.concatenate([r for _, r in undecided]) if undecided else np.zeros((0, 2), np.int64)
    if shard:
        beyond, reached = shard.sum(beyond), shard.sum(reached)
        tops = _gathered_tops(tops, shard)
    return beyond, reached, codes, ranges, tops


def _count_exact_from(scorer, spec: MatrixSpec, blocks: "_EmbeddingBlocks", grid_bits, early: Optional[_EarlyWork],
                      special_rows, special_cols, thresholds, top_k, top_excluded, progress, shard: Optional[Shard],
                      device: Optional[torch.device]) -> MatrixCounts:
    """:func:`count_exact` once the blocks are built; ``early``: the fused pass's setup on its way,
    or None where the fused pass does not apply."""
    rows, width = spec.shape
    on_device = _pass_on_device(device)
    exact = _ExactOrder(blocks)
    limits = _thresholds(blocks, exact, grid_bits, special_rows, special_cols, thresholds)
    plan, early, inputs = _plan(scorer, blocks, grid_bits, early, limits, rows, device)
    blocks = plan.blocks
    slack = widened(2 * (plan.delta + float(limits.special_bounds.max(initial=0.0))))
    tops = _Tops(top_k, _codes(special_rows[top_excluded], special_cols[top_excluded], width), slack)
    if early is not None and inputs is not None and isinstance(plan.count_pass, _BlockPass):
        plan.count_pass = _FusedPass(plan.count_pass, blocks, _pair_windows(blocks, inputs.terms, limits.monotone,
                                                                            limits.width),
                                     early.packed.result(), inputs)
        probe_rows, probe = early.probe.result()
        # the first floor from the probe's GEMM keys: a pair's fused key is off by the fused bound, the probe's
        # by a GEMM's
        tops.prime(probe, probe_rows, width, slack + widened(2 * plan.gemm_delta))
    block_list = _blocks(rows, width, _fused_block_keys() if isinstance(plan.count_pass, _FusedPass) else None)
    count = limits.where.shape[0]
    beyond, reached, codes, ranges, tops = _count_blocks(plan, tops, block_list, count, width, rows, on_device,
                                                         progress, shard)
    above = _suffix(beyond)
    greater_sorted, equal_sorted = above.copy(), np.zeros(count, np.int64)
    if plan.windows.point:
        equal_sorted = _suffix(reached) - above
    rescored = 0
    if plan.record:
        rescored = codes.size
        # the range of thresholds each recorded key is still undecided for
        more_greater, more_equal = _settle(blocks, exact, grid_bits, codes, ranges[:, 0], ranges[:, 1],
                                           special_rows[limits.where], special_cols[limits.where], limits.keys,
                                           limits.special_bounds[limits.where], width)
        if shard:  # each rank settled the keys of its own blocks
            more_greater, more_equal = shard.sum(more_greater), shard.sum(more_equal)
            rescored = int(shard.sum(np.array([rescored], np.int64))[0])
        greater_sorted += more_greater
        equal_sorted += more_equal
    greater, equal = np.zeros(special_rows.shape[0], np.int64), np.zeros(special_rows.shape[0], np.int64)
    greater[limits.where], equal[limits.where] = greater_sorted, equal_sorted

    def keys_of(codes: np.ndarray):
        top_rows, top_cols = codes // width, codes % width
        keys, bounds = blocks.pair_keys(top_rows, top_cols, grid_bits)
        return keys, exact.groups(top_rows, top_cols, keys, bounds)

    top, top_groups, top_keys = _final_tops(tops, top_k, width, keys_of)
    return MatrixCounts(greater, equal, limits.groups, limits.special_keys, top, top_groups, top_keys,
                        {"mode": "exact", "blocks": len(block_list), "rescored": int(rescored),
                         "decimal": int(exact.decimal), "fast_bound": plan.delta,
                         "pass_precision": str(blocks.fast_queries.dtype).replace("torch.", ""),
                         "float64_in_pass": plan.float64_in_pass,
                         "pass": _pass_name(plan.count_pass, blocks.device if on_device else torch.device("cpu"))})
