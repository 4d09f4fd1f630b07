"""Pairs counted each in its own row (:func:`count_rows`): the disease-specific view of the
repurposing task, each test pair among its disease's drugs, the view's other positives left out."""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.rounding import U64, round_outwards, widened
from openbench.evaluation.counting.matrix.blocks import _EmbeddingBlocks, _ValueBlocks
from openbench.evaluation.counting.matrix.core import exact_mode_applies, MatrixSpec, Shard
from openbench.evaluation.counting.matrix.decisions import _decide, _ExactOrder

__all__ = ["RowCounts", "count_rows"]


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
        margin = widened(delta + bounds64[members]) + 4 * U64 * np.abs(keys64[members])
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
