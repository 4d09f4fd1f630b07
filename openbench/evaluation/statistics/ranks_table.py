"""Per-query ranks: one row per evaluated query, from which every metric of the record follows.

Columns (:data:`RANKS_SCHEMA`): ``split``, ``side`` (``head`` | ``tail``), ``relation``, ``head``,
``tail`` (labels of the query's triple), ``n_greater`` (candidates scored above the answer),
``n_equal`` (candidates scored equal to it, *the answer included*: at least 1), ``n_candidates``
(the candidates ranked, the answer included, after filtering) and ``rank``, the realistic rank
``n_greater + (n_equal + 1) / 2``. Optimistic and pessimistic ranks are ``n_greater + 1`` and
``n_greater + n_equal``.

Ranked lists (top-k files, OBL2021 submissions, served predictions) give no score: the listed
order is the rank (``n_equal`` 1). An answer *not in its list* has ``n_greater``, ``n_equal`` and
``rank`` null: its reciprocal rank and every hit count 0, and the mean rank is undefined.

Rows come side by side as the record's ``both`` block concatenates them: every head query in
evaluation order, then every tail query. The table is a polars DataFrame
(:attr:`openbench.record.ResultRecord.ranks`) and ``openbench evaluate --ranks-output FILE.parquet``
writes it; :func:`openbench.evaluation.statistics.evidence.read_ranks` reads one back, checked.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
import polars as pl

from openbench._io.outputs import atomic_path
from openbench._io.parquet import read_footer
from openbench.errors import InputError, UsageError, option
from openbench.vocabulary import QUERY_SIDES

if TYPE_CHECKING:  # reading and checking a ranks file needs no torch (leaderboard show, compare, report)
    import torch

    from openbench.evaluation.counting.counts import RankCounts

__all__ = ["RANKS_SCHEMA", "ranks_table", "query_values", "write_ranks", "is_openbench_ranks", "ranks_provenance"]

PathLike = Union[str, Path]
_HITS = re.compile(r"hits@([1-9][0-9]*)")

RANKS_SCHEMA = {"split": pl.Utf8, "side": pl.Utf8, "relation": pl.Utf8, "head": pl.Utf8, "tail": pl.Utf8,
                "n_greater": pl.Int64, "n_equal": pl.Int64, "n_candidates": pl.Int64, "rank": pl.Float64}


def _labels(labels: Sequence[str], ids: torch.Tensor) -> pl.Series:
    return pl.Series(list(labels), dtype=pl.Utf8).gather(pl.Series(ids.cpu().numpy().astype(np.int64)))


def _side_rows(split: str, side: str, counts: RankCounts, triples: torch.Tensor, entity_labels: Sequence[str],
               relation_labels: Sequence[str]) -> pl.DataFrame:
    """The rows of one side's queries: ``counts`` (T,) of ``triples`` (T, 3)."""
    import torch

    greater = counts.n_greater.cpu().to(torch.float64).numpy()
    listed = np.isfinite(greater)
    n_greater = np.where(listed, greater, 0).astype(np.int64)
    n_equal = counts.n_equal.cpu().numpy().astype(np.int64) + 1
    rank = n_greater + (n_equal + 1) / 2.0
    unlisted = pl.Series(~listed)
    frame = pl.DataFrame({
        "relation": _labels(relation_labels, triples[:, 1]),
        "head": _labels(entity_labels, triples[:, 0]), "tail": _labels(entity_labels, triples[:, 2]),
        "n_greater": pl.Series(n_greater), "n_equal": pl.Series(n_equal),
        "n_candidates": pl.Series(counts.n_candidates.cpu().numpy().astype(np.int64)), "rank": pl.Series(rank),
    }).with_columns(pl.lit(split, dtype=pl.Utf8).alias("split"), pl.lit(side, dtype=pl.Utf8).alias("side"))
    frame = frame.select(list(RANKS_SCHEMA))
    if not listed.all():
        frame = frame.with_columns(pl.when(unlisted).then(None).otherwise(pl.col(name)).alias(name)
                                   for name in ("n_greater", "n_equal", "rank"))
    return frame


def ranks_table(split: str, counts: Dict[str, RankCounts], triples: Dict[str, torch.Tensor],
                entity_labels: Sequence[str], relation_labels: Sequence[str]) -> pl.DataFrame:
    """One row per query (see the module docstring): ``counts`` {side: (T_side,)} of the queries
    whose triples are ``triples`` {side: (T_side, 3)}, head side first."""
    parts: List[pl.DataFrame] = [_side_rows(split, side, counts[side], triples[side], entity_labels, relation_labels)
                                 for side in QUERY_SIDES if side in counts]
    if not parts:
        return pl.DataFrame(schema=RANKS_SCHEMA)
    return pl.concat(parts, how="vertical").cast(RANKS_SCHEMA)  # type: ignore[arg-type]


def query_values(ranks: pl.DataFrame, metric: str) -> np.ndarray:
    """(Q,) float64 per-query values of ``metric`` of a ranks table: ``mrr`` the reciprocal
    realistic rank, ``hits@K`` whether that rank is at most K; 0 for an answer not listed."""
    rank = ranks["rank"].to_numpy().astype(np.float64)  # null (not listed) -> nan
    listed = np.isfinite(rank)
    if metric == "mrr":
        return np.where(listed, 1.0 / np.where(listed, rank, 1.0), 0.0)
    hits = _HITS.fullmatch(metric)
    if hits is None:
        raise UsageError(f"{option('metric', metric)}: expected mrr or hits@K (K a positive integer)")
    return np.where(listed, rank <= int(hits.group(1)), False).astype(np.float64)


# -- the ranks file ------------------------------------------------------------------------------

RANKS_METADATA_KEY = "openbench"  # the Parquet key-value metadata openbench's ranks files carry
RANKS_FORMAT = "openbench-ranks-v2"  # v2: the whole protocol, the query count and the queries' sha256
# what two ranks files must share to be compared query by query (besides the dataset)
COMPARABLE_PROTOCOL = ("evaluation_split", "filter_sets", "exclude_query_entity")


def ranks_provenance(record: dict) -> dict:
    """What a ranks file says of the evaluation it came from (:mod:`openbench.evaluation.statistics.evidence`
    checks it): the dataset's fingerprint, the whole protocol, the model's name and the number and
    sha256 of the queries, from the result ``record`` (JSON values)."""
    diagnostics = record.get("diagnostics") or {}
    return {"format": RANKS_FORMAT, "written_by": "openbench",
            "dataset_fingerprint": (record.get("dataset") or {}).get("fingerprint"),
            "protocol": dict(record.get("protocol") or {}),
            "model": (record.get("model") or {}).get("name"),
            "queries": diagnostics.get("queries"), "queries_sha256": diagnostics.get("queries_sha256")}


def _metadata(path: Path) -> Optional[dict]:
    """The openbench metadata of a Parquet file, or None (not Parquet, or not openbench's)."""
    try:
        values = read_footer(path).metadata
    except InputError:
        return None
    try:
        info = json.loads(values.get(RANKS_METADATA_KEY, ""))
    except ValueError:
        return None
    return info if isinstance(info, dict) and str(info.get("format", "")).startswith("openbench-ranks-") else None


def is_openbench_ranks(path: Path) -> bool:
    """A Parquet file openbench wrote as a ranks file (its metadata says so)."""
    return _metadata(Path(path)) is not None


def write_ranks(path: PathLike, ranks: pl.DataFrame, record: dict, inputs: Iterable[Optional[PathLike]] = ()) -> None:
    """Write ``ranks`` (:data:`RANKS_SCHEMA`) to ``path`` as Parquet, atomically; an existing file is
    replaced only if openbench wrote it. ``record``: the result record they belong to."""
    info = json.dumps(ranks_provenance(record), sort_keys=True)
    with atomic_path(path, inputs, recognise=is_openbench_ranks) as staged:
        ranks.write_parquet(staged, metadata={RANKS_METADATA_KEY: info}, statistics=False)
