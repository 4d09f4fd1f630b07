"""Metrics of phenotype-driven disease ranking (spec text_evaluators.md C.2).

A case's rank is the position of its best-ranked true disease. Ties are explicit: a true disease
whose score block spans positions ``first .. last`` ranks ``first`` (optimistic), ``last``
(pessimistic) or ``(first + last) / 2`` (``mean``, the default). A true disease absent from the
ranking gets PhenoBrain's middle rank ``floor((N - 1) / 2) + 1`` for N candidate diseases, counts as
a miss for every top-k, and is counted separately.

* ``top-k`` (micro): mean over cases of [rank <= k]; ``macro``: cases grouped by their set of
  true ids, top-k averaged within each group, then over groups;
* median rank: the 50th percentile with linear interpolation (numpy's default, as PhenoBrain);
* MRR: mean of 1 / rank (the middle rank for missing diseases).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["TIE_POLICIES", "DEFAULT_KS", "CaseRank", "case_rank", "rank_metrics"]

TIE_POLICIES = ("mean", "optimistic", "pessimistic")
DEFAULT_KS = (1, 3, 5, 10, 20)


@dataclass
class CaseRank:
    """Where a case's best true disease landed: its tie block ``first .. last`` (1-based), or
    ``missing`` with ``candidates`` diseases ranked."""

    first: Optional[int]
    last: Optional[int]
    candidates: int
    truth: Tuple[str, ...]

    @property
    def missing(self) -> bool:
        return self.first is None

    def rank(self, ties: str = "mean") -> float:
        if ties not in TIE_POLICIES:
            raise ValueError(f"unknown tie policy {ties!r}; expected one of {', '.join(TIE_POLICIES)}")
        if self.missing:
            return float(math.floor((self.candidates - 1) / 2) + 1)
        if ties == "optimistic":
            return float(self.first)
        if ties == "pessimistic":
            return float(self.last)
        return (self.first + self.last) / 2


def case_rank(ranking: Sequence[Tuple[str, float]], truth: Sequence[str]) -> CaseRank:
    """The tie block of the best true disease in a full ranking [(disease id, score)], best first."""
    truth_key = tuple(sorted(set(truth)))
    ids = np.array([disease for disease, _ in ranking], dtype=object)
    scores = np.array([score for _, score in ranking], dtype=np.float64)
    is_true = np.isin(ids, list(truth_key))
    if not is_true.any():
        return CaseRank(None, None, len(ranking), truth_key)
    best = scores[is_true].max()  # the best-ranked true disease is the best-scored one
    return CaseRank(int(np.sum(scores > best)) + 1, int(np.sum(scores >= best)), len(ranking), truth_key)


def rank_metrics(cases: Sequence[CaseRank], ks: Sequence[int] = DEFAULT_KS, ties: str = "mean") -> Dict[str, object]:
    """top-k (micro and macro), median rank, MRR and counts over ``cases``."""
    if not cases:
        return {"cases": 0, "missing": 0, "ties": ties}
    ranks = np.array([case.rank(ties) for case in cases])
    hits = {k: np.array([(not case.missing) and rank <= k for case, rank in zip(cases, ranks)], dtype=np.float64)
            for k in ks}
    groups: Dict[Tuple[str, ...], List[int]] = {}
    for index, case in enumerate(cases):
        groups.setdefault(case.truth, []).append(index)
    result: Dict[str, object] = {"cases": len(cases), "missing": sum(case.missing for case in cases), "ties": ties}
    for k in ks:
        result[f"top{k}"] = float(hits[k].mean())
        result[f"macro_top{k}"] = float(np.mean([hits[k][members].mean() for members in groups.values()]))
    result["median_rank"] = float(np.percentile(ranks, 50))
    result["quartiles"] = [float(q) for q in np.percentile(ranks, [0, 25, 50, 75, 100])]
    result["mrr"] = float(np.mean(1.0 / ranks))
    return result
