"""Metrics from rank counts, per side, per relation and macro-averaged over relations.

Rank types from the counts g = ``n_greater`` and k = ``n_equal + 1`` (ties including the answer):

* optimistic ``g + 1``, pessimistic ``g + k``, realistic ``g + (k + 1) / 2`` (the headline);
* ``expected``: the exact expectation over uniformly random tie orders, E[1/rank] =
  (H(g + k) - H(g)) / k and E[hits@K] = clamp(K - g, 0, k) / k (Sun et al. 2020's RANDOM
  protocol without the sampling).

MRR, MR and hits@k are computed on the (possibly half-integer) rank itself: a realistic rank of
1.5 is not a hit@1 and contributes 1/1.5 to the MRR.

Chance-adjusted metrics (Hoyt et al. 2022, PyKEEN's ``pykeen.metrics.ranking``), in the
optimistic, pessimistic and realistic blocks, from each query's candidate count C (the answer
included) and a rank drawn uniformly from 1..C, the queries independent: E[rank] = (C + 1) / 2,
V[rank] = (C² - 1) / 12, E[1/rank] = H(C) / C, E[1/rank²] = H₂(C) / C, P[rank <= k] = min(k, C) / C;
a mean's expectation is the mean of the expectations, its variance the mean variance over n:

* ``amr`` = MR / E[MR]; ``amri`` = 1 - (MR - 1) / (E[MR] - 1) (Berrendorf et al.);
* ``amrr`` = (MRR - E[MRR]) / (1 - E[MRR]) and ``ahits@k`` likewise (1 is perfect, 0 chance);
* ``zmr`` = (E[MR] - MR) / √V[MR], ``zmrr`` = (MRR - E[MRR]) / √V[MRR], ``zhits@k`` likewise:
  standard deviations above chance, larger is better for all three.

Undefined values (no queries; no rank, for truncated lists' MR; a chance level of 1 or a variance
of 0, every query with one candidate) are ``None``. Sums are float64, counts int64.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from openbench.evaluation.counting.counts import RankCounts
from openbench.vocabulary import QUERY_SIDES, RANK_TYPES, SIDES

__all__ = ["RANK_TYPES", "SIDE_NAMES", "harmonic", "harmonic_squares", "task_values", "group_means", "metric_block", "metric_blocks",
           "adjusted_metrics", "grouped_blocks", "summarize", "strata", "macro_average"]

SIDE_NAMES = SIDES
_EULER_GAMMA = 0.57721566490153286060651209008240243


def harmonic(n: torch.Tensor) -> torch.Tensor:
    """H(n) = sum_{i=1..n} 1/i for float64 n >= 0."""
    return torch.special.digamma(n + 1.0) + _EULER_GAMMA


def harmonic_squares(n: torch.Tensor) -> torch.Tensor:
    """H₂(n) = sum_{i=1..n} 1/i² = π²/6 - ψ₁(n + 1) for float64 n >= 0."""
    return math.pi ** 2 / 6.0 - torch.special.polygamma(1, n + 1.0)


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
    candidates = counts.n_candidates.to(torch.float64)
    chance_rr = harmonic(candidates) / candidates
    values["random.mr"] = (candidates + 1.0) / 2.0
    values["random.mr_var"] = (candidates * candidates - 1.0) / 12.0
    values["random.mrr"] = chance_rr
    values["random.mrr_var"] = harmonic_squares(candidates) / candidates - chance_rr * chance_rr
    for k in hits_at:
        chance_hit = candidates.clamp(max=float(k)) / candidates
        values[f"random.hits@{k}"] = chance_hit
        values[f"random.hits@{k}_var"] = chance_hit * (1.0 - chance_hit)
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


def _ratios(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator where the denominator is positive and the numerator finite; NaN
    (undefined) elsewhere."""
    defined = (denominator > 0.0) & np.isfinite(numerator)
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=defined)
    return out


def _spread(variance: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """√(V / n) of a mean of n queries (0 without queries)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(queries > 0, np.sqrt(np.maximum(variance, 0.0) / np.maximum(queries, 1)), 0.0)


def _adjusted_arrays(means: Dict[str, np.ndarray], rank_type: str, hits_at: Sequence[int],
                     queries: np.ndarray) -> Dict[str, np.ndarray]:
    """The chance-adjusted metrics of one rank type for G groups (see the module docstring): the
    group means (G,) of :func:`task_values` over ``queries`` (G,) queries; NaN where undefined."""
    mr, mrr = means[f"{rank_type}.mr"], means[f"{rank_type}.mrr"]
    expected_mr, expected_mrr = means["random.mr"], means["random.mrr"]
    with np.errstate(over="ignore", invalid="ignore"):
        values = {"amr": _ratios(mr, expected_mr), "amri": 1.0 - _ratios(mr - 1.0, expected_mr - 1.0),
                  "amrr": _ratios(mrr - expected_mrr, 1.0 - expected_mrr)}
        for k in hits_at:
            chance = means[f"random.hits@{k}"]
            values[f"ahits@{k}"] = _ratios(means[f"{rank_type}.hits@{k}"] - chance, 1.0 - chance)
        values["zmr"] = _ratios(expected_mr - mr, _spread(means["random.mr_var"], queries))
        values["zmrr"] = _ratios(mrr - expected_mrr, _spread(means["random.mrr_var"], queries))
        for k in hits_at:
            values[f"zhits@{k}"] = _ratios(means[f"{rank_type}.hits@{k}"] - means[f"random.hits@{k}"],
                                           _spread(means[f"random.hits@{k}_var"], queries))
    return values


def metric_blocks(means: Dict[str, np.ndarray], hits_at: Sequence[int],
                  queries: np.ndarray) -> List[Dict[str, Dict[str, Optional[float]]]]:
    """{rank type: {metric: value}} of each of G groups, with the result JSON's keys, from the
    flat group means (G,) of :func:`task_values` over ``queries`` (G,) queries; computed for all
    groups at once (a record of 822 relations costs one pass, not 822). Non-finite values are None."""
    columns: Dict[tuple, np.ndarray] = {}
    for rank_type in RANK_TYPES:
        columns[(rank_type, "mrr")], columns[(rank_type, "mr")] = means[f"{rank_type}.mrr"], means[f"{rank_type}.mr"]
        for k in hits_at:
            columns[(rank_type, f"hits@{k}")] = means[f"{rank_type}.hits@{k}"]
        for name, value in _adjusted_arrays(means, rank_type, hits_at, queries).items():
            columns[(rank_type, name)] = value
    columns[("expected", "mrr")] = means["expected.mrr"]
    for k in hits_at:
        columns[("expected", f"hits@{k}")] = means[f"expected.hits@{k}"]
    listed = {key: [value if math.isfinite(value) else None for value in np.asarray(column, np.float64).tolist()]
              for key, column in columns.items()}
    blocks: List[Dict[str, Dict[str, Optional[float]]]] = []
    for group in range(int(np.asarray(queries).shape[0])):
        block: Dict[str, Dict[str, Optional[float]]] = {}
        for (rank_type, name), values in listed.items():
            block.setdefault(rank_type, {})[name] = values[group]
        blocks.append(block)
    return blocks


def _one_group(means: Dict[str, float]) -> Dict[str, np.ndarray]:
    return {key: np.array([value], dtype=np.float64) for key, value in means.items()}


def adjusted_metrics(means: Dict[str, float], rank_type: str, hits_at: Sequence[int],
                     queries: int) -> Dict[str, Optional[float]]:
    """The chance-adjusted metrics of one rank type (see the module docstring) from the group
    means of :func:`task_values` over ``queries`` queries (one group of :func:`metric_blocks`)."""
    values = _adjusted_arrays(_one_group(means), rank_type, hits_at, np.array([queries]))
    return {name: float(value[0]) if math.isfinite(value[0]) else None for name, value in values.items()}


def metric_block(means: Dict[str, float], hits_at: Sequence[int], queries: int) -> Dict[str, Dict[str, Optional[float]]]:
    """Nest flat means of ``queries`` queries into {rank type: {metric: value}} with the result
    JSON's keys (one group of :func:`metric_blocks`)."""
    return metric_blocks(_one_group(means), hits_at, np.array([queries]))[0]


def _side_values(head: Optional[RankCounts], tail: Optional[RankCounts], hits_at: Sequence[int]
                 ) -> Dict[str, Dict[str, torch.Tensor]]:
    """{side: per-query values} of the evaluated sides, and ``both`` (head queries first)."""
    evaluated = {side: counts for side, counts in (("head", head), ("tail", tail)) if counts is not None}
    if not evaluated:
        raise ValueError("summarize needs the counts of at least one side")
    sides = {side: task_values(counts.to("cpu"), hits_at) for side, counts in evaluated.items()}
    first = next(iter(sides.values()))
    sides["both"] = {key: torch.cat([values[key] for values in sides.values()]) for key in first}
    return sides


def grouped_blocks(sides: Dict[str, Dict[str, torch.Tensor]], groups: Dict[str, torch.Tensor],
                   labels: Sequence[str], hits_at: Sequence[int]) -> Dict[str, dict]:
    """{label: {side: block or None}} of the groups that hold queries: ``sides`` as
    :func:`_side_values` gives them, ``groups`` {head/tail side: (T_side,) group ids in
    0..len(labels)-1}, in the order of ``labels``."""
    side_groups = {side: groups[side].to(torch.long).cpu() for side in sides if side != "both"}
    side_groups["both"] = torch.cat([side_groups[side] for side in QUERY_SIDES if side in side_groups])
    blocks: Dict[int, dict] = {}
    for side in SIDE_NAMES:
        if side not in sides:
            continue
        means, counts = group_means(sides[side], side_groups[side], len(labels))
        present = counts.nonzero().squeeze(1)
        found = metric_blocks({key: value[present].numpy() for key, value in means.items()}, hits_at,
                              counts[present].numpy())
        for group, block in zip(present.tolist(), found):
            blocks.setdefault(group, {})[side] = block
    out = {}
    for group in sorted(blocks):
        out[labels[group]] = {side: blocks[group].get(side) for side in SIDE_NAMES}
    return out


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
    sides = _side_values(head, tail, hits_at)
    if isinstance(relations, torch.Tensor):
        relations = {side: relations for side in sides if side != "both"}
    metrics: Dict[str, Optional[dict]] = {side: None for side in SIDE_NAMES}
    for side, block in grouped_blocks(sides, {side: torch.zeros_like(relations[side]) for side in relations},
                                      ["all"], hits_at).get("all", {}).items():
        metrics[side] = block
    per_relation = grouped_blocks(sides, relations, relation_labels, hits_at)  # in relation id order
    return metrics, per_relation, macro_average(per_relation)


def strata(head: Optional[RankCounts], tail: Optional[RankCounts], groups: Dict[str, torch.Tensor],
           labels: Sequence[str], hits_at: Sequence[int]) -> Dict[str, dict]:
    """The metric blocks of each group of queries (by the answer's training degree, by its node
    type): {label: {both, head, tail: block or None}}, ``groups`` {side: (T_side,) ids into ``labels``}."""
    return grouped_blocks(_side_values(head, tail, hits_at), groups, labels, hits_at)


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
