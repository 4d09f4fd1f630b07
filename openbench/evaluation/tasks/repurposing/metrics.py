"""The repurposing task's metrics, from counts (no scores): pure functions of numpy arrays.

Every ranked pair is given by its counts against the candidates of its view, as the ranking
engine gives a query's (:class:`~openbench.evaluation.counting.counts.RankCounts`): ``g`` the
candidates with a greater key, ``e`` the *other* candidates with an equal key, ``n`` the
candidates, the pair itself included. Ranks are optimistic ``g + 1``, pessimistic ``g + e + 1``,
realistic ``g + (e + 2) / 2``, and ``expected`` the exact expectation over tie orders
(:mod:`openbench.evaluation.statistics.metrics`).

* **Full matrix** (Every Cure's MATRIX suite, ``evaluation_deep_dive.md``): Recall@n, the share
  of ground-truth pairs ranked within the top n of the matrix (each pair ranked against the
  non-positive pairs, the other positives removed: the filtered setting), per rank type as hits@k
  is; AUROC = 1 - MQR, the quantile rank ``(g + e / 2) / N`` of each positive among the N
  non-positives (a tie counts one half: the Mann-Whitney statistic); the same Recall@n of the known
  negatives (to be small); Drug-Entropy@n and Disease-Entropy@n, the entropy of the drugs (of the
  diseases) among the matrix's top n pairs in base |D| (in base |S|): pairs tied across the n-th
  place share the places left, each an equal part (the expectation of the counts over tie orders).
* **Disease-specific**: each positive among all drugs for its disease (other known positives
  removed): Hit@k and MRR, micro (per pair) and macro (the mean over diseases of each disease's
  mean); per-disease AUROC and AUPRC (average precision, scikit-learn's: tied scores one
  threshold) averaged over the diseases (TxGNN's aggregation).
* **Classification**: positives against known negatives, from their exact order alone.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from openbench.evaluation.counting.counts import RankCounts
from openbench.evaluation.statistics.metrics import group_means, metric_block, task_values

__all__ = ["rank_counts", "recall_block", "auroc_from_counts", "entropy_at", "disease_blocks", "average_precision_groups",
           "bootstrap_interval"]


def rank_counts(greater: np.ndarray, equal: np.ndarray, candidates: np.ndarray) -> RankCounts:
    """The engine's counts of (P,) int64 arrays."""
    as_tensor = [torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64)) for values in (greater, equal,
                                                                                                  candidates)]
    return RankCounts(*as_tensor)


def _means(counts: RankCounts, ks: Sequence[int]) -> Dict[str, float]:
    values = task_values(counts, ks)
    return {key: float(value.mean()) for key, value in values.items()}


def recall_block(counts: RankCounts, recall_at: Sequence[int]) -> Optional[Dict[str, Dict[str, Optional[float]]]]:
    """{rank type: {"recall@n", "mrr", "mr", adjusted metrics}} of the ranked pairs (the engine's
    metric block with hits@n named recall@n); None without pairs."""
    queries = int(counts.n_greater.numel())
    if queries == 0:
        return None
    block = metric_block(_means(counts, recall_at), recall_at, queries)
    renamed: Dict[str, Dict[str, Optional[float]]] = {}
    for rank_type, metrics in block.items():
        renamed[rank_type] = {(name.replace("hits@", "recall@", 1) if "hits@" in name else name): value
                              for name, value in metrics.items()}
    return renamed


def auroc_from_counts(greater: np.ndarray, equal: np.ndarray, negatives: np.ndarray) -> Optional[float]:
    """1 - MQR: the mean over the ranked positives of the share of their ``negatives`` (P,)
    candidates ranked below them, a tie one half (``equal``: ties other than the pair itself); None
    without positives or negatives."""
    defined = negatives > 0
    if not defined.any():
        return None
    quantile = (greater[defined] + equal[defined] / 2.0) / negatives[defined]
    return float(1.0 - quantile.mean())


def entropy_at(top_rows: np.ndarray, top_cols: np.ndarray, top_groups: np.ndarray, n: int, rows: int,
               cols: int) -> Optional[Dict[str, float]]:
    """{"drug_entropy", "disease_entropy"} of the best ``n`` pairs (``top_rows``, ``top_cols``
    (K,), best first, ``top_groups`` their tie groups: equal, tied), the pairs tied across the n-th
    place each counted as an equal part of the places left; in base ``rows`` (drugs) and ``cols``
    (diseases). None when fewer than n pairs are known (the kept top is shorter)."""
    if n <= 0 or top_rows.shape[0] < n:
        return None
    last_group = top_groups[n - 1]
    inside = top_groups == last_group
    before = int(np.count_nonzero(top_groups[:n] != last_group))
    share = (n - before) / int(inside.sum())
    weights = np.where(top_groups > last_group, 1.0, np.where(inside, share, 0.0))
    # top_groups are dense exact ranks from the lowest key: a larger group is a better pair
    result = {}
    for name, labels, base in (("drug_entropy", top_rows, rows), ("disease_entropy", top_cols, cols)):
        totals = np.bincount(labels, weights=weights)
        p = totals[totals > 0] / float(n)
        entropy = float(-(p * np.log(p)).sum()) + 0.0  # one drug alone: 0, not -0
        result[name] = max(0.0, entropy / math.log(base)) if base > 1 else 0.0
    return result


def average_precision_groups(positive_groups: np.ndarray, greater: np.ndarray, equal: np.ndarray) -> Optional[float]:
    """Average precision (scikit-learn's ``average_precision_score``: tied scores one threshold) of
    one disease's m positives among its candidate drugs, from each positive's exact tie group
    (``positive_groups`` (m,), larger is better), its non-positive candidates with a greater key
    (``greater``) and with an equal one (``equal``)."""
    m = positive_groups.shape[0]
    if m == 0:
        return None
    order = np.argsort(-positive_groups, kind="stable")
    groups, above, ties = positive_groups[order], greater[order], equal[order]
    total, precision_sum, position = 0.0, 0.0, 0
    while position < m:
        end = position + 1
        while end < m and groups[end] == groups[position]:
            end += 1
        true_positives = end  # every positive at or above this threshold
        false_positives = int(above[position] + ties[position])
        precision_sum += (end - position) / m * true_positives / (true_positives + false_positives)
        total += (end - position) / m
        position = end
    return float(precision_sum)


def disease_blocks(diseases: np.ndarray, greater: np.ndarray, equal: np.ndarray, candidates: np.ndarray,
                   groups: np.ndarray, hits_at: Sequence[int]) -> Dict[str, object]:
    """The disease-specific view of P ranked pairs: ``diseases`` (P,) their disease ids, the
    engine's counts among each disease's candidate drugs, ``groups`` (P,) their exact tie groups.
    Micro (per pair) and macro (per disease) blocks per rank type, each disease's own means
    (``per_disease_values``: {"<rank type>.<metric>": (U,)}, the diseases ``disease_ids`` (U,)
    sorted), and the per-disease AUROC and AUPRC averaged over the diseases."""
    counts = rank_counts(greater, equal, candidates)
    micro = metric_block(_means(counts, hits_at), hits_at, int(greater.shape[0])) if greater.size else None
    unique, inverse = np.unique(diseases, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    per_disease, sizes = group_means(task_values(counts, hits_at), torch.from_numpy(inverse), int(unique.size))
    macro = metric_block({key: float(value.mean()) for key, value in per_disease.items()}, hits_at,
                         int(unique.size)) if unique.size else None
    # each disease's pairs, in pair order: one sort instead of a scan per disease
    members_of = np.split(np.argsort(inverse, kind="stable"), np.cumsum(sizes.numpy())[:-1])
    aurocs: List[Optional[float]] = []
    auprcs: List[Optional[float]] = []
    for members in members_of if unique.size else []:
        negatives = candidates[members] - 1  # each positive's candidates: the disease's non-positives and itself
        aurocs.append(auroc_from_counts(greater[members], equal[members], negatives))
        auprcs.append(average_precision_groups(groups[members], greater[members], equal[members]))
    defined_auroc = [value for value in aurocs if value is not None]
    defined_auprc = [value for value in auprcs if value is not None]
    return {"micro": micro, "macro": macro,
            "auroc": float(np.mean(defined_auroc)) if defined_auroc else None,
            "auprc": float(np.mean(defined_auprc)) if defined_auprc else None,
            "per_disease_auroc": aurocs, "per_disease_auprc": auprcs, "diseases": int(unique.size),
            "disease_ids": unique,
            "per_disease_values": {key: value.numpy() for key, value in per_disease.items()
                                   if key.startswith("realistic.")}}


def bootstrap_interval(statistic, units: int, resamples: int, seed: int, level: float = 0.95) -> Optional[List[float]]:
    """The percentile interval of ``statistic(indexes)`` over ``resamples`` resamples (with
    replacement) of ``units`` units, seeded; None without units."""
    if units == 0 or resamples <= 0:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        value = statistic(rng.integers(0, units, units))
        if value is not None and math.isfinite(value):
            values.append(value)
    if not values:
        return None
    tail = (1 - level) / 2
    return [float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))]

