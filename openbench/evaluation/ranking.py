"""The pure core of evaluation: per-query rank counts from score rows.

For each query the core returns three int64 counts, from which every rank type and metric
derives (see :mod:`openbench.evaluation.metrics`):

* ``n_greater``: candidates scoring strictly better than the true answer,
* ``n_equal``: *other* candidates scoring exactly like the true answer,
* ``n_candidates``: candidates left after filtering, the true answer included.

The true answer's own column is excluded by index, never by value, and its score is read from
the same score tensor that is compared. Filtered candidates are removed by subtracting their
contribution, so no dense (B, E) mask is ever built. Counts add exactly across entity chunks.

Comparison is exact (no tolerance). ``+inf``/``-inf`` scores are ranked by value (two equal
infinities tie); a NaN score anywhere in a row raises :class:`~openbench.errors.ScoreError`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from openbench.errors import ScoreError

# sums of {-1, 0, 1} in float32 are exact while partial sums stay below 2**24
MAX_CHUNK = 2 ** 24


@dataclass
class RankCounts:
    """Per-query counts; each tensor has shape (Q,) and dtype int64."""

    n_greater: torch.Tensor
    n_equal: torch.Tensor
    n_candidates: torch.Tensor

    @classmethod
    def cat(cls, parts) -> "RankCounts":
        parts = list(parts)
        return cls(*(torch.cat([getattr(p, name) for p in parts]) for name in ("n_greater", "n_equal", "n_candidates")))

    def to(self, device) -> "RankCounts":
        return RankCounts(self.n_greater.to(device), self.n_equal.to(device), self.n_candidates.to(device))


class NonFiniteRows(ScoreError):
    """NaN scores in some rows of a block; ``row`` is the first offending row of the block."""

    def __init__(self, row: int, detail: str):
        self.row = row
        super().__init__(detail)


def other_known(filter_rows: torch.Tensor, filter_cols: torch.Tensor,
                true_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Drop the pairs (row, col) of a filter list whose column is the row's own true answer."""
    keep = filter_cols != true_ids[filter_rows]
    return filter_rows[keep], filter_cols[keep]


def candidate_counts(num_entities: int, filter_rows: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(B,) candidates left per query: all entities less the filtered ones (pairs must exclude the true one)."""
    removed = torch.bincount(filter_rows, minlength=batch_size)
    return num_entities - removed


def count_block(scores: torch.Tensor, start: int, true_ids: torch.Tensor, true_scores: torch.Tensor,
                filter_rows: torch.Tensor, filter_cols: torch.Tensor,
                lower_is_better: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count better and tied candidates in one chunk of candidate columns. Overwrites ``scores``.

    :param scores: (B, n) float scores of candidates ``start .. start + n - 1``; used as scratch.
    :param start: entity id of column 0 of ``scores``.
    :param true_ids: (B,) int64 entity id of each query's true answer.
    :param true_scores: (B,) score of each true answer, read from the compared score rows.
    :param filter_rows: (M,) int64 rows of filtered candidates; ``filter_cols`` (M,) their entity
        ids (any chunk; pairs outside this chunk are ignored). Pairs must exclude the true answer.
    :returns: ``n_greater`` (B,) and ``n_equal`` (B,) int64 over this chunk, and ``true_sign`` (B,):
        the comparison of the true column with ``true_scores`` (0 when the value matches; nonzero
        reveals a score recomputed differently) or 0 where the true answer is not in this chunk.
    """
    batch_size, width = scores.shape
    if width > MAX_CHUNK:
        raise ValueError(f"chunks wider than {MAX_CHUNK} candidates cannot be counted exactly in float32")
    true_scores = true_scores.to(scores.dtype)
    local_true = true_ids - start
    true_here = (local_true >= 0) & (local_true < width)
    in_chunk = (filter_cols >= start) & (filter_cols < start + width)
    rows, cols = filter_rows[in_chunk], filter_cols[in_chunk] - start

    _signs_in_place(scores, true_scores, lower_is_better)

    true_sign = torch.zeros(batch_size, dtype=scores.dtype, device=scores.device)
    true_rows = true_here.nonzero().squeeze(1)
    true_sign[true_rows] = scores[true_rows, local_true[true_rows]]
    filtered_sign = scores[rows, cols]

    net = scores.sum(dim=1)  # #better - #worse
    nonzero = scores.abs_().sum(dim=1)  # #better + #worse
    n_greater = ((net + nonzero) / 2).to(torch.long)
    n_equal = width - nonzero.to(torch.long)

    n_greater -= (true_sign > 0).long()
    n_equal -= (true_here & (true_sign == 0)).long()
    n_greater -= torch.bincount(rows[filtered_sign > 0], minlength=batch_size)
    n_equal -= torch.bincount(rows[filtered_sign == 0], minlength=batch_size)
    return n_greater, n_equal, true_sign


def _signs_in_place(scores: torch.Tensor, true_scores: torch.Tensor, lower_is_better: bool) -> None:
    """Replace ``scores`` by sign(s - s*) (sign(s* - s) when lower is better), exact for ±inf ties.

    s - s* is NaN for two equal infinities, so rows whose true score is not finite are compared
    directly instead; a NaN true score raises.
    """
    special = ~torch.isfinite(true_scores)
    exact = None
    if bool(special.any()):
        special_rows = special.nonzero().squeeze(1)
        nan_true = torch.isnan(true_scores[special_rows])
        if bool(nan_true.any()):
            raise NonFiniteRows(int(special_rows[nan_true.nonzero()[0, 0]]), "NaN score of the true answer")
        block, reference = scores[special_rows], true_scores[special_rows, None]
        if bool(torch.isnan(block).any()):
            raise NonFiniteRows(int(special_rows[torch.isnan(block).any(dim=1).nonzero()[0, 0]]), "NaN score")
        exact = (block > reference).to(scores.dtype) - (block < reference).to(scores.dtype)
        if lower_is_better:
            exact.neg_()
    column = true_scores[:, None]
    if lower_is_better:
        torch.sub(column, scores, out=scores)
    else:
        scores.sub_(column)
    # torch.sign maps NaN to 0, so NaN is caught before: a row sum is NaN if the row holds a NaN
    # (or both infinities, which the exact check below tells apart); it is a cheap read-only pass
    suspicious = torch.isnan(scores.sum(dim=1))
    if bool(suspicious.any()):
        candidates = suspicious.nonzero().squeeze(1)
        has_nan = torch.isnan(scores[candidates]).any(dim=1) & ~special[candidates]
        if bool(has_nan.any()):
            raise NonFiniteRows(int(candidates[has_nan.nonzero()[0, 0]]), "NaN score")
    torch.sign(scores, out=scores)
    if exact is not None:
        scores[special_rows] = exact


def rank_counts(scores: torch.Tensor, true_ids: torch.Tensor, filter_rows: Optional[torch.Tensor] = None,
                filter_cols: Optional[torch.Tensor] = None, lower_is_better: bool = False,
                in_place: bool = False) -> RankCounts:
    """Rank counts for full score rows.

    :param scores: (B, E) scores of every candidate entity for each query.
    :param true_ids: (B,) int64 id of each query's true answer.
    :param filter_rows: (M,) int64 batch rows and ``filter_cols`` (M,) entity ids of known answers
        to remove from the candidates (the true answer is kept even if listed). None: no filter.
    :param in_place: allow ``scores`` to be overwritten (saves a copy).
    """
    batch_size, num_entities = scores.shape
    true_ids = true_ids.to(device=scores.device, dtype=torch.long)
    if scores.dtype not in (torch.float32, torch.float64):
        # exact conversions: half precisions fit float32, integers are compared in float64
        wide = torch.float32 if scores.is_floating_point() else torch.float64
        scores, in_place = scores.to(wide), True
    if filter_rows is None:
        filter_rows = filter_cols = torch.empty(0, dtype=torch.long, device=scores.device)
    filter_rows, filter_cols = other_known(filter_rows, filter_cols, true_ids)
    true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
    work = scores if in_place else scores.clone()
    n_greater, n_equal, _ = count_block(work, 0, true_ids, true_scores, filter_rows, filter_cols, lower_is_better)
    return RankCounts(n_greater, n_equal, candidate_counts(num_entities, filter_rows, batch_size))
