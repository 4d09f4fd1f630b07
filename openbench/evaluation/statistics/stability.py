"""Stability of two repurposing records' best pairs (``openbench compare --stability A B``):
two models, two folds or two seeds on the same matrix, compared by what they put first, as Every
Cure's MATRIX suite does (``evaluation_deep_dive.md``: stability between folds or models). Each
record keeps its best pairs (``repurposing.top_pairs``, ``--keep-top``), so no model is needed.

For each k:

* **Commonality@k** = |A_k ∩ B_k| / k, A_k the first k pairs of A's list (its order: the exact
  keys, ties in the record's order);
* **Spearman@k**: the rank correlation of the common pairs' places in the two lists (tied pairs
  share their average place, as ``scipy.stats.spearmanr`` ranks), with the two-sided p-value of the
  t approximation (n - 2 degrees of freedom); undefined for fewer than 3 common pairs or a
  constant list;
* **the hypergeometric test at k**: P(X >= |A_k ∩ B_k|) for X hypergeometric, the matrix's N
  candidate pairs, k of them A's and k drawn as B's: how unlikely that overlap is by chance.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from openbench.errors import UsageError
from openbench.task_registry import DEFAULT_TASK

__all__ = ["DEFAULT_STABILITY_AT", "spearman", "hypergeometric_tail", "stability"]

DEFAULT_STABILITY_AT = (10, 100, 1000)


def spearman(first: Sequence[float], second: Sequence[float]) -> Optional[Dict[str, float]]:
    """{"rho", "p_value"} of two paired samples (``scipy.stats.spearmanr``: average ranks for ties,
    the t distribution's two-sided p with n - 2 degrees of freedom); None when undefined (fewer
    than 3 pairs, or a constant sample)."""
    import warnings

    from scipy.stats import spearmanr

    x, y = np.asarray(first, np.float64), np.asarray(second, np.float64)
    if x.size < 3:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant sample: scipy warns and gives NaN, said here as None
        result = spearmanr(x, y)
    rho, p_value = float(result.statistic), float(result.pvalue)
    if not math.isfinite(rho):
        return None
    return {"rho": rho, "p_value": p_value}


def hypergeometric_tail(observed: int, population: int, successes: int, draws: int) -> float:
    """P(X >= observed), X ~ Hypergeometric(population, successes, draws) (``scipy.stats.hypergeom``)."""
    from scipy.stats import hypergeom

    return float(hypergeom.sf(observed - 1, population, successes, draws))


def _pairs(record: dict, name: str) -> List[tuple]:
    result = record.get("repurposing") if isinstance(record, dict) else None  # the block that keeps the best pairs
    if not isinstance(result, dict) or "top_pairs" not in result:
        raise UsageError(f"{name}: a repurposing record (evaluate --task repurposing) keeps its best pairs; this is a "
                         f"{record.get('task', DEFAULT_TASK) if isinstance(record, dict) else 'no'} record")
    return [(str(drug), str(disease), float(place)) for drug, disease, place in result["top_pairs"]]


def stability(record_a: dict, record_b: dict, at: Sequence[int] = DEFAULT_STABILITY_AT, names=("A", "B")) -> dict:
    """Commonality@k, Spearman@k and the hypergeometric test at k of two repurposing records of
    one matrix (see the module docstring); k beyond either kept list is reported as not computed."""
    a, b = _pairs(record_a, names[0]), _pairs(record_b, names[1])
    matrix_a, matrix_b = record_a["repurposing"]["matrix"], record_b["repurposing"]["matrix"]
    if (record_a["dataset"].get("fingerprint") != record_b["dataset"].get("fingerprint")
            or matrix_a["pairs"] != matrix_b["pairs"]):
        raise UsageError(f"{names[0]} and {names[1]} rank different matrices (another dataset or other drugs and "
                         "diseases): stability compares two rankings of one matrix")
    population = int(matrix_a["candidates"])
    out: Dict[str, object] = {"population": population, "kept": [len(a), len(b)], "at": {}}
    for k in sorted({int(value) for value in at}):
        if k > len(a) or k > len(b):
            out["at"][str(k)] = None  # type: ignore[index]
            continue
        first, second = a[:k], b[:k]
        places_a = {(drug, disease): place for drug, disease, place in first}
        places_b = {(drug, disease): place for drug, disease, place in second}
        common = sorted(set(places_a) & set(places_b))
        overlap = len(common)
        correlation = spearman([places_a[pair] for pair in common], [places_b[pair] for pair in common])
        out["at"][str(k)] = {"commonality": overlap / k, "common": overlap,  # type: ignore[index]
                             "spearman": None if correlation is None else correlation["rho"],
                             "spearman_p": None if correlation is None else correlation["p_value"],
                             "hypergeometric_p": hypergeometric_tail(overlap, population, k, k)}
    return out
