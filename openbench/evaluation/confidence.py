"""Bootstrap confidence intervals of a record's headline metrics, from its per-query ranks.

``confidence_block(ranks, hits_at, resamples, seed)`` resamples the *test triples* with
replacement (each with all its queries: both sides of a triple move together, since they are not
independent) and gives the 95 % percentile interval of the realistic MRR and hits@k for ``both``,
``head``, ``tail`` and the macro average over relations. Resample i draws
``rng.integers(0, U, size=U)`` of the U triples (``rng = numpy.random.default_rng(seed)``, in
order); its metric is the mean over the drawn triples' queries, and its macro average the mean
over the relations drawn at least once. Every resample is one row of a (resamples × U) weight
matrix, multiplied with the per-triple sums: no Python loop over resamples or queries.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import polars as pl

from openbench.errors import UsageError, option

__all__ = ["CONFIDENCE_LEVEL", "confidence_block", "bootstrap_weights"]

CONFIDENCE_LEVEL = 0.95
_WEIGHT_ELEMENTS = 1 << 22  # resamples × triples per step


def bootstrap_weights(rng: np.random.Generator, units: int, count: int) -> np.ndarray:
    """(count, units) float64: how often each unit is drawn in each of ``count`` resamples."""
    drawn = np.stack([rng.integers(0, units, size=units) for _ in range(count)])
    offsets = drawn + (np.arange(count) * units)[:, None]
    return np.bincount(offsets.ravel(), minlength=count * units).reshape(count, units).astype(np.float64)


def _query_values(ranks: pl.DataFrame, hits_at: Sequence[int]) -> Dict[str, np.ndarray]:
    """(Q,) per-query reciprocal realistic rank and hits@k (0 for an unlisted answer)."""
    rank = ranks["rank"].to_numpy().astype(np.float64)
    listed = np.isfinite(rank)
    safe = np.where(listed, rank, np.inf)
    values = {"mrr": 1.0 / safe}
    for k in hits_at:
        values[f"hits@{k}"] = (safe <= k).astype(np.float64)
    return values


def _interval(samples: np.ndarray) -> List[float]:
    tail = (1.0 - CONFIDENCE_LEVEL) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return [float(low), float(high)]


def confidence_block(ranks: pl.DataFrame, hits_at: Sequence[int], resamples: int, seed: Optional[int]) -> dict:
    """The record's ``confidence`` block (see the module docstring) from a ranks table."""
    if resamples < 1:
        raise UsageError(f"{option('bootstrap', resamples)}: expected at least 1 resample")
    values = _query_values(ranks, hits_at)
    names = list(values)
    units = ranks.select(pl.struct(["split", "relation", "head", "tail"]).rank("dense").cast(pl.Int64) - 1) \
        .to_series().to_numpy()
    n_units = int(units.max()) + 1 if units.size else 0
    relation_codes = (ranks["relation"].rank("dense").cast(pl.Int64) - 1).to_numpy() if len(ranks) else np.zeros(0, np.int64)
    n_relations = int(relation_codes.max()) + 1 if relation_codes.size else 0
    sides = ranks["side"].to_numpy()
    columns: Dict[str, np.ndarray] = {}  # (U, metrics + 1) per-unit sums, the query count last
    for side in ("both", "head", "tail"):
        chosen = np.ones(len(sides), dtype=bool) if side == "both" else sides == side
        if chosen.any():
            columns[side] = np.stack([np.bincount(units[chosen], weights=values[name][chosen], minlength=n_units)
                                      for name in names] + [np.bincount(units[chosen], minlength=n_units)
                                                             .astype(np.float64)], axis=1)
    # per relation: the "both" sums of each unit in its relation's columns, (U, relations × (metrics + 1))
    unit_relation = np.zeros(n_units, dtype=np.int64)
    unit_relation[units] = relation_codes
    spread = np.zeros((n_units, n_relations, len(names) + 1))
    if n_units:
        spread[np.arange(n_units), unit_relation] = columns["both"]
    by_relation = spread.reshape(n_units, -1)
    samples: Dict[str, List[np.ndarray]] = {side: [] for side in list(columns) + ["macro_relation"]}
    rng = np.random.default_rng(seed)
    step = max(1, _WEIGHT_ELEMENTS // max(1, n_units))
    for first in range(0, resamples, step):
        weights = bootstrap_weights(rng, n_units, min(step, resamples - first))
        for side, sums in columns.items():
            drawn = weights @ sums
            samples[side].append(drawn[:, :-1] / drawn[:, -1:])
        drawn = (weights @ by_relation).reshape(weights.shape[0], n_relations, len(names) + 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = drawn[:, :, :-1] / drawn[:, :, -1:]  # nan where a relation was not drawn
        samples["macro_relation"].append(np.nanmean(means, axis=1))
    block: dict = {"resamples": resamples, "seed": seed, "level": CONFIDENCE_LEVEL,
                   "method": "percentile bootstrap over test triples (each with all its queries)"}
    for side in ("both", "head", "tail", "macro_relation"):
        if side not in samples or not samples[side]:
            block[side] = None
            continue
        stacked = np.concatenate(samples[side])
        block[side] = {name: _interval(stacked[:, column]) for column, name in enumerate(names)}
    return block
