"""One-pass rank counting on the GPU with Triton (optional; see :mod:`openbench.evaluation.counting.kernels`).

Each program counts one span of columns of one row: candidates better than and equal to the
row's target, and NaNs, read once (4 bytes per float32 score) and added atomically into int32
totals. torch's own ops need several passes over the block for the same counts.

Triton ships with CUDA builds of torch; where it is missing the torch path is used instead.
``TRITON_INTERPRET=1`` runs the kernel on CPU tensors (the tests use it where Triton is installed).
"""
from __future__ import annotations

from typing import Tuple

import torch
import triton
import triton.language as tl

BLOCK = 2048  # columns per loop step of one program
SPAN_BLOCKS = 8  # loop steps per program: each program counts BLOCK * SPAN_BLOCKS columns of one row


@triton.jit
def _count_rows(scores, stride, width, lows, highs, greater, equal, nans,
                LOWER: tl.constexpr, BLOCK: tl.constexpr, SPAN_BLOCKS: tl.constexpr):
    row = tl.program_id(0)
    first = tl.program_id(1) * BLOCK * SPAN_BLOCKS
    low = tl.load(lows + row)
    high = tl.load(highs + row)
    base = scores + row.to(tl.int64) * stride
    n_better = tl.zeros([BLOCK], dtype=tl.int32)
    n_same = tl.zeros([BLOCK], dtype=tl.int32)
    n_nan = tl.zeros([BLOCK], dtype=tl.int32)
    for step in range(SPAN_BLOCKS):
        columns = first + step * BLOCK + tl.arange(0, BLOCK)
        inside = columns < width
        value = tl.load(base + columns, mask=inside, other=0.0)
        if LOWER:
            better = value < low
        else:
            better = value > high
        n_better += (better & inside).to(tl.int32)
        n_same += ((value >= low) & (value <= high) & inside).to(tl.int32)
        n_nan += ((value != value) & inside).to(tl.int32)
    tl.atomic_add(greater + row, tl.sum(n_better, axis=0))
    tl.atomic_add(equal + row, tl.sum(n_same, axis=0))
    tl.atomic_add(nans + row, tl.sum(n_nan, axis=0))


def row_counts(scores: torch.Tensor, lows: torch.Tensor, highs: torch.Tensor, lower_is_better: bool
               ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(beyond the window on the better side, inside it, has_nan) per row of ``scores`` (B, n),
    rows with unit column stride; the window of row i is [lows_i, highs_i] (one value: ties).

    :param lows: (B,) and ``highs`` (B,), contiguous, same dtype and device as ``scores``.
    :returns: int64 (B,), int64 (B,) and bool (B,): a NaN score in the row or a NaN target.
    """
    rows, width = scores.shape
    counts = torch.zeros((3, rows), dtype=torch.int32, device=scores.device)
    if rows and width:
        grid = (rows, triton.cdiv(width, BLOCK * SPAN_BLOCKS))
        _count_rows[grid](scores, scores.stride(0), width, lows, highs, counts[0], counts[1], counts[2],
                          LOWER=bool(lower_is_better), BLOCK=BLOCK, SPAN_BLOCKS=SPAN_BLOCKS)
    has_nan = (counts[2] > 0) | torch.isnan(lows) | torch.isnan(highs)
    return counts[0].to(torch.long), counts[1].to(torch.long), has_nan
