"""The headline metrics per period of the test edges' dates, on a split by dates.

A split by the edges' own dates (``openbench split time --cutoff``, :mod:`splits.dated_split`)
writes ``test_dates.tsv``: each test edge (``head``, ``relation``, ``tail``) with the date it was
first known. ``openbench evaluate --by-period year`` joins the run's per-query ranks
(:mod:`~openbench.evaluation.statistics.ranks_table`) with those dates and gives, per period of the
dates (a calendar year, or a month), the realistic MRR and hits@k over both sides, the triples and
queries counted, the median days from the cut-off to the period's edges, and the 95 % percentile
bootstrap interval of each metric over the period's test triples
(:func:`~openbench.evaluation.statistics.intervals.confidence_block`, each period resampled on
its own with the run's seed). A model that predicts what was found later keeps its MRR as the
periods move away from the cut-off; one that learnt the graph's present decays.

The record's ``by_period`` block::

    {"period": "year", "cutoff": "2019-12-31", "dates_file": {"name": ..., "sha256": ...},
     "undated_triples": 0, "resamples": 1000, "seed": 0, "level": 0.95,
     "periods": {"2020": {"triples": T, "queries": Q, "days_after_cutoff": D,
                          "metrics": {"mrr": ..., "hits@10": ...},
                          "intervals": {"mrr": [low, high], ...}}, ...}}
"""
from __future__ import annotations

import datetime
import hashlib
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np
import polars as pl

from openbench.errors import InputError, UsageError, option
from openbench.evaluation.statistics.intervals import CONFIDENCE_LEVEL, confidence_block
from openbench.evaluation.statistics.ranks_table import query_values

__all__ = ["PERIODS", "DEFAULT_RESAMPLES", "read_test_dates", "period_of", "period_block"]

PERIODS = {"year": "%Y", "month": "%Y-%m"}  # a period's name and how its label is written
DEFAULT_RESAMPLES = 1000  # the intervals' resamples where --bootstrap gives none
_KEY = ["head", "relation", "tail"]


def read_test_dates(path) -> pl.DataFrame:
    """``head``, ``relation``, ``tail`` (strings) and ``date`` (Date) of a ``test_dates.tsv``
    (a header, tab-separated, dates ``YYYY-MM-DD``); a bad date or a repeated edge is an error
    naming the file and line."""
    from openbench._io import read_text

    path = Path(path)
    header = read_text(path).split("\n", 1)[0].rstrip("\r").split("\t")
    if header != _KEY + ["date"]:
        raise InputError(f"the header names {', '.join(header)}; expected head, relation, tail, date (tab-separated)",
                         path, 1)
    try:
        frame = pl.read_csv(path, separator="\t", has_header=True, schema=dict.fromkeys(_KEY + ["date"], pl.String),
                            quote_char=None)
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, pl.exceptions.SchemaError, OSError) as error:
        raise InputError(f"cannot read the test edges' dates ({str(error).splitlines()[0]}); expected head, relation, "
                         "tail, date, tab-separated, with a header", path) from None
    parsed = frame.get_column("date").str.to_date("%Y-%m-%d", strict=False)
    bad = (parsed.is_null()).arg_true()
    if len(bad):
        row = int(bad[0])
        raise InputError(f"date {frame['date'][row]!r}; expected YYYY-MM-DD", path, row + 2)
    repeated = frame.select(~pl.struct(_KEY).is_first_distinct()).to_series().arg_true()  # the repeat, not the first
    if len(repeated):
        row = int(repeated[0])
        raise InputError("the edge " + " ".join(str(frame[name][row]) for name in _KEY) + " is dated twice; expected "
                         "one date per test edge", path, row + 2)
    return frame.with_columns(parsed.alias("date"))


def period_of(dates: pl.Expr, period: str) -> pl.Expr:
    """The label of each date's period (``"2020"``, ``"2020-03"``)."""
    return dates.dt.strftime(PERIODS[period])


def _metrics(ranks: pl.DataFrame, hits_at: Sequence[int]) -> Dict[str, float]:
    """The realistic MRR and hits@k over ``ranks``' queries (an unlisted answer counts 0)."""
    names = ["mrr"] + [f"hits@{k}" for k in hits_at]
    return {name: float(np.mean(query_values(ranks, name))) for name in names}


def period_block(ranks: pl.DataFrame, dates_path, cutoff: str, period: str, hits_at: Sequence[int],
                 resamples: Optional[int], seed: Optional[int]) -> dict:
    """The record's ``by_period`` block (see the module docstring) of a run's test ranks."""
    if period not in PERIODS:
        raise UsageError(f"{option('by_period', period)}: expected one of {', '.join(PERIODS)}")
    dates = read_test_dates(dates_path)
    test = ranks.filter(pl.col("split") == "test")
    dated = test.join(dates, on=_KEY, how="left", maintain_order="left")
    undated = dated.filter(pl.col("date").is_null()).select(_KEY).unique().height
    dated = dated.filter(pl.col("date").is_not_null()).with_columns(period_of(pl.col("date"), period).alias("period"))
    cut = datetime.date.fromisoformat(cutoff)
    count = resamples or DEFAULT_RESAMPLES
    periods: Dict[str, dict] = {}
    for (label,), rows in sorted(dated.group_by(["period"]), key=lambda item: str(item[0][0])):
        days = rows.select((pl.col("date") - pl.lit(cut)).dt.total_days().median()).item()
        block = confidence_block(rows.drop("date", "period"), hits_at, count, seed)["both"]
        periods[str(label)] = {"triples": rows.select(_KEY).unique().height, "queries": rows.height,
                               "days_after_cutoff": float(days),
                               "metrics": _metrics(rows, hits_at), "intervals": block}
    return {"period": period, "cutoff": cutoff,
            "dates_file": {"name": Path(dates_path).name,
                           "sha256": hashlib.sha256(Path(dates_path).read_bytes()).hexdigest()},
            "undated_triples": undated, "resamples": count, "seed": seed, "level": CONFIDENCE_LEVEL,
            "periods": periods}
