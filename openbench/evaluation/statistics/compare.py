"""Paired comparison of two models on the same queries, from their per-query ranks.

Given two ranks tables (:mod:`openbench.evaluation.statistics.ranks_table`) of the same queries, :func:`compare_ranks`
reports each model's metric, their difference a - b and how sure one can be of it:

* ``ci``: the paired bootstrap's 95 % percentile interval of the difference. Resample i draws the
  *units* of row i of ``rng.integers(0, U, size=(resamples, U), dtype=numpy.int32)`` (as the
  record's intervals do, :mod:`openbench.evaluation.statistics.intervals`): for ``side="both"`` a unit is a
  test triple with both its queries (the two queries of a triple are not independent), otherwise
  a query, numbered in sorted order; the resample's difference is the mean over the queries of the
  drawn units.
* ``p_value``: the two-sided paired sign-flip permutation test of the per-query differences d:
  the share of sign vectors s with |Σ s_i d_i| >= |Σ d_i| (zero differences cannot change the
  sum). With at most :data:`EXACT_SIGN_FLIPS` non-zero differences every one of the 2^n sign
  vectors is enumerated (the exact p-value); otherwise ``permutations`` random ones (seeded) give
  (1 + hits) / (1 + permutations), never 0.
* ``wilcoxon_p``: :func:`scipy.stats.wilcoxon` on the per-query differences with
  ``zero_method="wilcox"`` (zero differences dropped); None when every difference is zero.

A query's value is its reciprocal (realistic) rank for ``mrr`` and whether that rank is at most K
for ``hits@K``; an answer a ranked list does not contain counts 0 for both.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import polars as pl

from openbench.errors import InputError, UsageError, option
from openbench.evaluation.statistics.intervals import WEIGHT_ELEMENTS, bootstrap_weights
from openbench.evaluation.statistics.evidence import check_provenance, check_rows, read_ranks
from openbench.evaluation.statistics.ranks_table import COMPARABLE_PROTOCOL, RANKS_SCHEMA, query_values, ranks_provenance

__all__ = ["PAIRING_NOTE", "comparison_verdict", "EXACT_SIGN_FLIPS", "QUERY_KEY", "compare", "compare_ranks", "paired_queries", "query_values",
           "sign_flip_p_value", "paired_bootstrap", "format_comparison"]

EXACT_SIGN_FLIPS = 16  # at most this many non-zero differences: all 2^n sign vectors are enumerated
QUERY_KEY = ("split", "side", "relation", "head", "tail")
_TRIPLE_KEY = ("split", "relation", "head", "tail")
_BLOCK_ELEMENTS = 1 << 22  # values per vectorised step (resamples × units, sign vectors × differences)

Ranks = Union[str, Path, pl.DataFrame, Any]  # a ranks file, a ranks table, or a ResultRecord with ranks


def sign_flip_p_value(differences: np.ndarray, permutations: int, rng: np.random.Generator) -> float:
    """Two-sided sign-flip p-value of the sum of ``differences`` (n,): exact over all 2^m sign
    vectors of the m non-zero ones when m <= :data:`EXACT_SIGN_FLIPS`, else Monte Carlo."""
    nonzero = differences[differences != 0]
    observed = abs(float(nonzero.sum()))
    if nonzero.size == 0:
        return 1.0
    tolerance = 1e-9 * float(np.abs(nonzero).sum())  # sums taken in another order differ in the last bits
    if nonzero.size <= EXACT_SIGN_FLIPS:
        patterns = np.arange(1 << nonzero.size)[:, None] >> np.arange(nonzero.size)[None, :] & 1
        sums = np.abs((1 - 2 * patterns) @ nonzero)
        return float((sums >= observed - tolerance).mean())
    if permutations < 1:
        raise UsageError(f"{option('permutations', permutations)}: expected at least 1")
    hits, done = 0, 0
    step = max(1, _BLOCK_ELEMENTS // nonzero.size)
    while done < permutations:
        count = min(step, permutations - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(count, nonzero.size), dtype=np.int8)
        hits += int((np.abs(signs @ nonzero) >= observed - tolerance).sum())
        done += count
    return (1 + hits) / (1 + permutations)


def paired_bootstrap(differences: np.ndarray, units: np.ndarray, resamples: int,
                     rng: np.random.Generator) -> np.ndarray:
    """(resamples,) the mean difference of each bootstrap resample: ``differences`` (Q,) per
    query, ``units`` (Q,) int64 unit ids 0..U-1 (the units drawn with replacement)."""
    if resamples < 1:
        raise UsageError(f"{option('resamples', resamples)}: expected at least 1")
    n_units = int(units.max()) + 1
    sums = np.stack([np.bincount(units, weights=differences, minlength=n_units),
                     np.bincount(units, minlength=n_units).astype(np.float64)], axis=1)  # (U, 2)
    means = np.empty(resamples)
    step = max(1, WEIGHT_ELEMENTS // n_units)
    for first in range(0, resamples, step):
        count = min(step, resamples - first)
        drawn = bootstrap_weights(rng, n_units, count) @ sums
        means[first:first + count] = drawn[:, 0] / drawn[:, 1]
    return means


def _table(ranks: Ranks, name: str) -> Tuple[pl.DataFrame, Optional[dict], str]:
    """(ranks table, provenance or None, how to name it in errors) of a file, table or record;
    every row checked (:func:`openbench.evaluation.statistics.evidence.check_rows`), a file's or record's
    provenance too."""
    if isinstance(ranks, (str, Path)):
        frame, provenance = read_ranks(ranks)
        return frame, provenance, str(ranks)
    info: Optional[dict] = None
    if isinstance(ranks, pl.DataFrame):
        table = ranks
    elif getattr(ranks, "ranks", None) is not None:
        table, info = ranks.ranks, ranks_provenance(ranks.to_dict())
    else:
        raise UsageError(f"{name}: expected a ranks file, a ranks DataFrame or a record evaluated in this process "
                         "(its .ranks); a record read back from JSON has no ranks (write them with --ranks-output)")
    if dict(table.schema) != RANKS_SCHEMA:
        raise UsageError(f"{name}: expected the columns {', '.join(RANKS_SCHEMA)}")
    check_rows(table, name)
    if info is not None:
        check_provenance(info, table, name)
    return table, info, name


def _check_provenance(info_a: Optional[dict], info_b: Optional[dict], name_a: str, name_b: str) -> None:
    if info_a is None or info_b is None:
        return
    if info_a.get("dataset_fingerprint") != info_b.get("dataset_fingerprint"):
        raise InputError(f"{name_a} and {name_b} rank different datasets (fingerprints "
                         f"{str(info_a.get('dataset_fingerprint'))[:12]}… and {str(info_b.get('dataset_fingerprint'))[:12]}…)")
    for key in COMPARABLE_PROTOCOL:
        left, right = (info.get("protocol", {}).get(key) for info in (info_a, info_b))
        if left != right:
            raise InputError(f"{name_a} and {name_b} were evaluated under different protocols: {key} "
                             f"{left!r} against {right!r}")


def _describe(row: dict) -> str:
    return f"{row['side']} query of ({row['head']}, {row['relation']}, {row['tail']}) in {row['split']}"


def paired_queries(a: pl.DataFrame, b: pl.DataFrame, side: str, name_a: str,
                   name_b: str) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """Both tables restricted to ``side`` and sorted by query, refused unless they hold the same queries."""
    for frame, name in ((a, name_a), (b, name_b)):
        if frame.is_empty():
            raise InputError("no queries to compare", name)
    splits_a, splits_b = sorted(set(a["split"].to_list())), sorted(set(b["split"].to_list()))
    if splits_a != splits_b:
        raise InputError(f"{name_a} ranks the {'/'.join(splits_a)} split, {name_b} the {'/'.join(splits_b)} split")
    sides_a, sides_b = sorted(set(a["side"].to_list())), sorted(set(b["side"].to_list()))
    if side != "both":
        a, b = a.filter(pl.col("side") == side), b.filter(pl.col("side") == side)
        if a.is_empty() or b.is_empty():
            missing = name_a if a.is_empty() else name_b
            raise InputError(f"no {side} queries to compare (it holds {'/'.join(sides_a if missing == name_a else sides_b)})",
                             missing)
    elif sides_a != sides_b:
        raise InputError(f"{name_a} holds {'/'.join(sides_a)} queries, {name_b} {'/'.join(sides_b)}: give --side")
    a, b = a.sort(list(QUERY_KEY), maintain_order=True), b.sort(list(QUERY_KEY), maintain_order=True)
    keys_a, keys_b = a.select(QUERY_KEY), b.select(QUERY_KEY)
    if len(a) != len(b) or not keys_a.equals(keys_b):
        only_a = keys_a.join(keys_b, on=list(QUERY_KEY), how="anti")
        only_b = keys_b.join(keys_a, on=list(QUERY_KEY), how="anti")
        if not only_a.is_empty():
            raise InputError(f"{name_a} has a {_describe(only_a.row(0, named=True))} that {name_b} does not "
                             f"({len(only_a)} such queries): compare needs the same queries")
        if not only_b.is_empty():
            raise InputError(f"{name_b} has a {_describe(only_b.row(0, named=True))} that {name_a} does not "
                             f"({len(only_b)} such queries): compare needs the same queries")
        raise InputError(f"{name_a} and {name_b} hold the same queries a different number of times ({len(a)} "
                         f"and {len(b)} rows)")
    return a, b


def compare_ranks(ranks_a: Ranks, ranks_b: Ranks, *, metric: str = "mrr", side: str = "both", seed: int = 0,
                  resamples: int = 1000, permutations: int = 10000, names: Sequence[str] = ("A", "B")) -> Dict[str, Any]:
    """The paired comparison of two models' ranks of the same queries (see the module docstring):
    {metric, side, queries, a, b, difference, ci: [low, high], p_value, wilcoxon_p, seed}."""
    from scipy.stats import wilcoxon

    if side not in ("both", "head", "tail"):
        raise UsageError(f"{option('side', side)}: expected both, head or tail")
    query_values(pl.DataFrame(schema=RANKS_SCHEMA), metric)  # the metric's name, checked before any work
    table_a, info_a, name_a = _table(ranks_a, names[0])
    table_b, info_b, name_b = _table(ranks_b, names[1])
    _check_provenance(info_a, info_b, name_a, name_b)
    table_a, table_b = paired_queries(table_a, table_b, side, name_a, name_b)
    values_a, values_b = query_values(table_a, metric), query_values(table_b, metric)
    differences = values_a - values_b
    unit_key = list(_TRIPLE_KEY) if side == "both" else list(QUERY_KEY)
    units = table_a.select(pl.struct(unit_key).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    rng = np.random.default_rng(seed)
    means = paired_bootstrap(differences, units, resamples, rng)
    low, high = np.quantile(means, [0.025, 0.975])
    p_value = sign_flip_p_value(differences, permutations, rng)
    wilcoxon_p: Optional[float] = None
    if np.any(differences != 0):
        wilcoxon_p = float(wilcoxon(differences, zero_method="wilcox").pvalue)
    return {"metric": metric, "side": side, "queries": int(differences.size), "a": float(values_a.mean()),
            "b": float(values_b.mean()), "difference": float(differences.mean()), "ci": [float(low), float(high)],
            "p_value": p_value, "wilcoxon_p": None if wilcoxon_p is None or math.isnan(wilcoxon_p) else wilcoxon_p,
            "seed": seed}


def compare(a: Ranks, b: Ranks, **options) -> Dict[str, Any]:
    """``openbench.compare(record_a, record_b, metric="mrr", side="both", seed=0, resamples=1000,
    permutations=10000)``: :func:`compare_ranks` of two records evaluated in this process (their
    ``.ranks``), two ranks tables or two ranks files."""
    return compare_ranks(a, b, **options)


def format_comparison(result: Dict[str, Any], name_a: str = "A", name_b: str = "B") -> str:
    """The comparison as a few aligned lines (``openbench compare``'s table)."""
    from openbench._io.outputs import visible

    low, high = result["ci"]
    name_a, name_b = visible(name_a), visible(name_b)
    wilcoxon_text = "n/a (no differences)" if result["wilcoxon_p"] is None else f"{result['wilcoxon_p']:.4g}"
    return "\n".join([
        f"{result['metric']} on {result['side']} ({result['queries']} queries, seed {result['seed']})",
        f"  A  {result['a']:.4f}  {name_a}",
        f"  B  {result['b']:.4f}  {name_b}",
        f"  A - B  {result['difference']:+.4f}   95 % CI [{low:+.4f}, {high:+.4f}] (paired bootstrap)",
        f"  p = {result['p_value']:.4g} (paired sign-flip permutation test)   Wilcoxon p = {wilcoxon_text}",
        f"  reading: {comparison_verdict(result, name_a, name_b)}",
        f"  note: {PAIRING_NOTE}",
    ])


# what a paired test assumes of ranks files it did not compute (issue 63): moving rank values
# between queries of one relation and side changes no metric, so no check can refute it
PAIRING_NOTE = ("a paired test trusts each rank to belong to its query; ranks files are checked against their "
                "records' metrics, which do not fix which rank belongs to which query")


def comparison_verdict(result: Dict[str, Any], name_a: str = "A", name_b: str = "B") -> str:
    """One sentence: which model is better, by how much, and whether the 95 % interval of the
    paired difference excludes 0 (the test's significance at 5 %)."""
    low, high = result["ci"]
    difference = result["difference"]
    metric = result["metric"]
    if low > 0 or high < 0:
        better, worse = (name_a, name_b) if difference > 0 else (name_b, name_a)
        return (f"{better} is better than {worse} by {abs(difference):.4f} {metric} on these queries; the 95 % "
                f"interval of the difference excludes 0 (p = {result['p_value']:.2g})")
    return (f"no clear difference: {name_a} - {name_b} = {difference:+.4f} {metric}, and the 95 % interval "
            f"[{low:+.4f}, {high:+.4f}] includes 0 (p = {result['p_value']:.2g})")
