"""The pure core of evaluation: per-query rank counts from score rows.

For each query the core returns three int64 counts, from which every rank type and metric
derives (see :mod:`openbench.evaluation.statistics.metrics`):

* ``n_greater``: candidates scoring strictly better than the true answer,
* ``n_equal``: *other* candidates scoring exactly like the true answer,
* ``n_candidates``: candidates left after filtering, the true answer included.

The true answer's own column is excluded by index, never by value, and its score is read from
the same score tensor that is compared. Filtered candidates are removed by subtracting their
contribution, so no dense (B, E) mask is ever built. Counts add exactly across entity chunks.

Comparison is exact (no tolerance). ``+inf``/``-inf`` scores are ranked by value (two equal
infinities tie); a NaN score anywhere in a row raises :class:`~openbench.errors.ScoreError`.
The row counting itself lives in :mod:`openbench.evaluation.counting.kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from openbench.evaluation.counting.kernels import NonFiniteRows, kernel_name, row_counts

__all__ = ["COUNT_FIELDS", "RankCounts", "NonFiniteRows", "count_block", "rank_counts"]


COUNT_FIELDS = ("n_greater", "n_equal", "n_candidates")


@dataclass
class RankCounts:
    """Per-query counts; each tensor has shape (Q,) and dtype int64.

    The one exception: evaluators of truncated rankings (:mod:`openbench.evaluation.producers.topk`) give
    ``n_greater`` as float64 with +inf where the list does not contain the answer, so that its
    reciprocal rank and hits are 0 and the mean rank is undefined.
    """

    n_greater: torch.Tensor
    n_equal: torch.Tensor
    n_candidates: torch.Tensor

    @classmethod
    def cat(cls, parts) -> "RankCounts":
        parts = list(parts)
        return cls(*(torch.cat([getattr(p, name) for p in parts]) for name in COUNT_FIELDS))

    def to(self, device) -> "RankCounts":
        return RankCounts(self.n_greater.to(device), self.n_equal.to(device), self.n_candidates.to(device))


def count_block(scores: torch.Tensor, start: int, true_ids: torch.Tensor, true_scores: torch.Tensor,
                filter_rows: torch.Tensor, filter_cols: torch.Tensor, lower_is_better: bool = False,
                check_nan: bool = True, window: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                positions: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count better and tied candidates in one chunk of candidate columns. May overwrite ``scores``.

    :param scores: (B, n) float scores of candidates ``start .. start + n - 1``.
    :param start: entity id of column 0 of ``scores``.
    :param true_ids: (B,) int64 entity id of each query's true answer.
    :param true_scores: (B,) score of each true answer, read from the compared score rows.
    :param filter_rows: (M,) int64 rows of filtered candidates; ``filter_cols`` (M,) their entity
        ids (any chunk; pairs outside this chunk are ignored). Pairs must exclude the true answer.
    :param check_nan: look for NaN candidates; callers that can prove every score finite (see
        :meth:`EmbeddingScorer.provably_finite`) may skip it (the C kernel checks for free).
    :param window: (lows (B,), highs (B,)) around each true score, for exact ranks
        (:mod:`openbench.evaluation.counting.exact`): then ``n_greater`` counts the candidates beyond the
        window on the better side and ``n_equal`` those inside it (undecided). None: the true
        score itself.
    :param positions: (B, K) int64 filled with -1, where the C kernel records the columns of up to
        K candidates inside each window (never the true answer or a filtered one, unless the
        window reaches the worst value, ±inf).
    :returns: ``n_greater`` (B,) and ``n_equal`` (B,) int64 over this chunk, and ``true_differs``
        (B,) bool: the true column of this chunk holds a value other than ``true_scores`` (a score
        recomputed differently); False where the true answer is not in this chunk.
    """
    batch_size, width = scores.shape
    true_scores = true_scores.to(scores.dtype)
    local_true = true_ids - start
    true_here = (local_true >= 0) & (local_true < width)
    in_chunk = (filter_cols >= start) & (filter_cols < start + width)
    rows, cols = filter_rows[in_chunk], filter_cols[in_chunk] - start
    # read the excluded values before the counting may overwrite the block
    true_values = scores.gather(1, torch.where(true_here, local_true, 0)[:, None]).squeeze(1)
    filtered_values = scores[rows, cols]
    read_true = true_values
    hidden_nan = rows[:0]
    if window is not None:
        # exact ranks (the block is the evaluator's own): the excluded entries take the worst
        # value, so that the counting pass passes over them and records none of them (only a
        # window reaching ±inf counts them: the subtraction below compares that value)
        if check_nan:
            hidden_nan = torch.cat([true_here.nonzero().squeeze(1)[torch.isnan(true_values[true_here])],
                                    rows[torch.isnan(filtered_values)]])
        worst = float("inf") if lower_is_better else float("-inf")
        here = true_here.nonzero().squeeze(1)
        scores[here, local_true[here]] = worst
        scores[rows, cols] = worst
        true_values = torch.where(true_here, torch.full_like(true_values, worst), true_values)
        filtered_values = torch.full_like(filtered_values, worst)
    lows, highs = (true_scores, true_scores) if window is None else (w.to(scores.dtype) for w in window)

    try:
        n_greater, n_equal = row_counts(scores, lows, lower_is_better, check_nan,
                                        highs=None if window is None else highs, positions=positions)
    except NonFiniteRows as error:  # the first NaN row, the overwritten entries' included
        if hidden_nan.numel():
            error.row = min(error.row, int(hidden_nan.min()))
        raise
    if hidden_nan.numel():
        raise NonFiniteRows(int(hidden_nan.min()), "NaN score")

    true_better, true_inside = _compare(true_values, lows, highs, lower_is_better)
    n_greater -= (true_here & true_better).long()
    n_equal -= (true_here & true_inside).long()
    if rows.numel():
        better, inside = _compare(filtered_values, lows[rows], highs[rows], lower_is_better)
        n_greater -= torch.bincount(rows, weights=better.to(torch.float64), minlength=batch_size).to(torch.long)
        n_equal -= torch.bincount(rows, weights=inside.to(torch.float64), minlength=batch_size).to(torch.long)
    return n_greater, n_equal, true_here & (read_true != true_scores)


def _compare(values: torch.Tensor, lows: torch.Tensor, highs: torch.Tensor, lower_is_better: bool):
    """(better, inside) masks of ``values`` against the windows [lows, highs], exact comparisons."""
    better = values < lows if lower_is_better else values > highs
    return better, (values >= lows) & (values <= highs)


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
    # the candidates' rules, imported here: the counts themselves need none of candidates.py's
    # imports (the dataset loader, polars), and statistics import this module
    from openbench.evaluation.candidates import candidate_counts, other_known

    batch_size, num_entities = scores.shape
    true_ids = true_ids.to(device=scores.device, dtype=torch.long)
    if scores.dtype not in (torch.float32, torch.float64):
        # exact conversions: half precisions fit float32, integers are compared in float64
        wide = torch.float32 if scores.is_floating_point() else torch.float64
        scores, in_place = scores.to(wide), True
    if filter_rows is None or filter_cols is None:
        filter_rows = filter_cols = torch.empty(0, dtype=torch.long, device=scores.device)
    filter_rows, filter_cols = other_known(filter_rows, filter_cols, true_ids)
    true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
    work = scores if in_place or kernel_name(scores) != "torch" else scores.clone()
    n_greater, n_equal, _ = count_block(work, 0, true_ids, true_scores, filter_rows, filter_cols, lower_is_better)
    return RankCounts(n_greater, n_equal, candidate_counts(num_entities, filter_rows, batch_size))
