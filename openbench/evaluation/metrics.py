"""Metrics from rank counts, per side, per relation and macro-averaged over relations.

Rank types from the counts g = ``n_greater`` and k = ``n_equal + 1`` (ties including the answer):

* optimistic ``g + 1``, pessimistic ``g + k``, realistic ``g + (k + 1) / 2`` (the headline);
* ``expected``: the exact expectation over uniformly random tie orders, E[1/rank] =
  (H(g + k) - H(g)) / k and E[hits@K] = clamp(K - g, 0, k) / k (Sun et al. 2020's RANDOM
  protocol without the sampling).

MRR, MR and hits@k are computed on the (possibly half-integer) rank itself: a realistic rank of
1.5 is not a hit@1 and contributes 1/1.5 to the MRR. AMRI (Berrendorf et al.) uses the realistic
mean rank and the per-query candidate counts C: 1 - (MR - 1) / (E[MR] - 1), E[MR] = mean (C + 1) / 2.
Undefined values (no queries, or every query with a single candidate for AMRI) are ``None``.
Sums are float64, counts int64.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Union

import torch

from openbench.evaluation.ranking import RankCounts
from openbench.vocabulary import RANK_TYPES, SIDES

__all__ = ["RANK_TYPES", "SIDE_NAMES", "harmonic", "task_values", "group_means", "metric_block", "summarize",
           "macro_average"]

SIDE_NAMES = SIDES
_EULER_GAMMA = 0.57721566490153286060651209008240243


def harmonic(n: torch.Tensor) -> torch.Tensor:
    """H(n) = sum_{i=1..n} 1/i for float64 n >= 0."""
    return torch.special.digamma(n + 1.0) + _EULER_GAMMA


def task_values(counts: RankCounts, hits_at: Sequence[int]) -> Dict[str, torch.Tensor]:
    """Per-task float64 values whose group means are the metrics; keys ``"<rank type>.<metric>"``."""
    g = counts.n_greater.to(torch.float64)
    ties = counts.n_equal.to(torch.float64) + 1.0
    ranks = {"optimistic": g + 1.0, "pessimistic": g + ties, "realistic": g + (ties + 1.0) / 2.0}
    values: Dict[str, torch.Tensor] = {}
    for rank_type in RANK_TYPES:
        rank = ranks[rank_type]
        values[f"{rank_type}.mrr"] = 1.0 / rank
        values[f"{rank_type}.mr"] = rank
        for k in hits_at:
            values[f"{rank_type}.hits@{k}"] = (rank <= k).to(torch.float64)
    single = 1.0 / (g + 1.0)
    spread = (harmonic(g + ties) - harmonic(g)) / ties
    values["expected.mrr"] = torch.where(ties == 1.0, single, spread)
    for k in hits_at:
        values[f"expected.hits@{k}"] = (k - g).clamp(min=0.0).minimum(ties) / ties
    values["random.mr"] = (counts.n_candidates.to(torch.float64) + 1.0) / 2.0
    return values


def group_means(values: Dict[str, torch.Tensor], groups: torch.Tensor, n_groups: int):
    """Means of each value per group id; returns (means dict of (G,) float64, counts (G,) int64)."""
    counts = torch.bincount(groups, minlength=n_groups)
    denominator = counts.to(torch.float64)
    means = {}
    for key, value in values.items():
        sums = torch.zeros(n_groups, dtype=torch.float64, device=value.device).index_add_(0, groups, value)
        means[key] = sums / denominator
    return means, counts


def _clean(value: Optional[float]) -> Optional[float]:
    return None if value is None or not math.isfinite(value) else float(value)


def metric_block(means: Dict[str, float], hits_at: Sequence[int]) -> Dict[str, Dict[str, Optional[float]]]:
    """Nest flat means into {rank type: {metric: value}} with the result JSON's keys."""
    block: Dict[str, Dict[str, Optional[float]]] = {}
    for rank_type in RANK_TYPES:
        block[rank_type] = {"mrr": _clean(means[f"{rank_type}.mrr"]), "mr": _clean(means[f"{rank_type}.mr"])}
        for k in hits_at:
            block[rank_type][f"hits@{k}"] = _clean(means[f"{rank_type}.hits@{k}"])
    mean_rank, expected_rank = means["realistic.mr"], means["random.mr"]
    amri: Optional[float] = None
    if math.isfinite(mean_rank) and math.isfinite(expected_rank) and expected_rank > 1.0:
        amri = 1.0 - (mean_rank - 1.0) / (expected_rank - 1.0)
    block["realistic"]["amri"] = _clean(amri)
    block["expected"] = {"mrr": _clean(means["expected.mrr"])}
    for k in hits_at:
        block["expected"][f"hits@{k}"] = _clean(means[f"expected.hits@{k}"])
    return block


def summarize(head: Optional[RankCounts], tail: Optional[RankCounts],
              relations: Union[torch.Tensor, Dict[str, torch.Tensor]], relation_labels: List[str],
              hits_at: Sequence[int]):
    """Metrics for head, tail and both sides, per relation, and macro-averaged over relations.

    :param head: counts of the head-side queries (T_head,); ``tail`` those of the tail side
        (T_tail,). A side not evaluated is None: its blocks are null and ``both`` is the other side
        alone.
    :param relations: (T,) relation id of each evaluation triple, when both sides rank the same
        triples; or {side: (T_side,)} when they rank different ones (a hosted benchmark serves each
        triple on one side): a relation without queries of a side then has a null block there.
    :returns: (metrics, per_relation, macro_relation) shaped as in the result JSON.
    """
    n_relations = len(relation_labels)
    evaluated = {side: counts for side, counts in (("head", head), ("tail", tail)) if counts is not None}
    if not evaluated:
        raise ValueError("summarize needs the counts of at least one side")
    if isinstance(relations, torch.Tensor):
        relations = {side: relations for side in evaluated}
    side_relations = {side: relations[side].to(torch.long).cpu() for side in evaluated}
    sides = {side: task_values(counts.to("cpu"), hits_at) for side, counts in evaluated.items()}
    first = next(iter(sides.values()))
    sides["both"] = {key: torch.cat([values[key] for values in sides.values()]) for key in first}
    side_relations["both"] = torch.cat([side_relations[side] for side in evaluated])

    metrics: Dict[str, Optional[dict]] = {}
    per_relation: Dict[str, dict] = {}
    for side in SIDE_NAMES:
        if side not in sides:
            metrics[side] = None
            continue
        values = sides[side]
        overall, _ = group_means(values, torch.zeros_like(side_relations[side]), 1)
        metrics[side] = metric_block({key: float(v[0]) for key, v in overall.items()}, hits_at)
        by_relation, counts = group_means(values, side_relations[side], n_relations)
        for relation in counts.nonzero().squeeze(1).tolist():
            label = relation_labels[relation]
            per_relation.setdefault(label, {})[side] = metric_block(
                {key: float(v[relation]) for key, v in by_relation.items()}, hits_at)
    for blocks in per_relation.values():
        blocks.update({side: None for side in SIDE_NAMES if side not in blocks})
    return metrics, per_relation, macro_average(per_relation)


def macro_average(per_relation: Dict[str, dict]) -> dict:
    """Unweighted mean over relations of every metric; relations where a value is undefined are skipped."""
    if not per_relation:
        return {}
    macro: dict = {}
    for side in next(iter(per_relation.values())):
        blocks = [rel[side] for rel in per_relation.values() if rel.get(side) is not None]
        if not blocks:  # a side not evaluated
            macro[side] = None
            continue
        macro[side] = {}
        for rank_type, metrics in blocks[0].items():
            macro[side][rank_type] = {}
            for name in metrics:
                present = [block[rank_type][name] for block in blocks if block[rank_type][name] is not None]
                macro[side][rank_type][name] = sum(present) / len(present) if present else None
    return macro
