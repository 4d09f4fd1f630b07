"""Scores as computed (any scorer, or fast ranks): the special pairs' values read from their blocks,
then every block counted against them with point windows."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.matrix.blocks import _run_blocks, _ValueBlocks
from openbench.evaluation.counting.matrix.core import _blocks, _codes, MatrixCounts, MatrixSpec, Shard
from openbench.evaluation.counting.matrix.fused import _pass_name
from openbench.evaluation.counting.matrix.passes import _passes
from openbench.evaluation.counting.matrix.tops import _dense_groups, _final_tops, _gathered_tops, _suffix, _Tops
from openbench.evaluation.counting.matrix.windows import _Windows

__all__ = ["count_values"]


def count_values(blocks: _ValueBlocks, spec: MatrixSpec, special_rows, special_cols, thresholds, top_k,
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
