"""What the leaderboard knows of each row's uncertainty: its per-query ranks, their intervals, and
which rows are not significantly worse than the best of their ranking.

A row may carry the per-query ranks of its run (``leaderboard submit RESULT.json --ranks FILE``;
server-scored rows always do), stored beside it as Parquet bytes, checked against the record they
belong to (:mod:`openbench.evaluation.statistics.evidence`: every row, the same queries, every metric). From them:

* ``interval``: the 95 % bootstrap interval of the ranking's metric on its side (realistic ranks),
  from the record's own ``confidence`` block where it has one, else computed once when the row is
  stored (:func:`~openbench.evaluation.statistics.intervals.confidence_block`, 1,000 resamples, seed 0);
* ``not_worse_than_best``: a paired verdict, drawn **only between rows whose ranks the board
  computed** (``verified`` server: scored against hidden answers; reproduced: the submitted model
  re-evaluated by the board, :mod:`openbench.leaderboard.reproduce`). A paired test trusts each
  rank to belong to its query, and a ranks file someone else wrote cannot show that: moving rank
  values between queries of one relation and side changes no metric the evidence check can see,
  yet turns "significantly worse" into "≈ best". Within each ranking (a dataset, task, protocol
  family and scope), every computed row whose ranks hold the same queries as the best computed
  row's is compared with it by the paired sign-flip test of
  :mod:`openbench.evaluation.statistics.compare` (``PERMUTATIONS`` sign flips, seed 0; exact for at
  most 16 non-zero differences), the p-values Holm-corrected over the rows compared; a row is
  marked ``True`` when its corrected p-value is at least ``ALPHA`` (or it is not below the best),
  ``False`` when it is significantly worse, ``None`` when it cannot be compared (no ranks, several
  runs, other queries, or self-reported: ``paired`` then says why). The best computed row itself
  is ``True``.

Only aggregates leave the store: the ranks of a hosted benchmark hold its hidden test triples.
"""
from __future__ import annotations

import io
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from openbench._io.outputs import strict_json
from openbench.errors import OpenbenchError
from openbench.record import RecordError

__all__ = ["ALPHA", "PERMUTATIONS", "BOOTSTRAP", "SELF_REPORTED", "COMPUTED_BY_THE_BOARD", "check_ranks", "ranks_blob", "ranks_of_blob", "confidence_of",
           "holm", "annotate"]

ALPHA = 0.05
PERMUTATIONS = 2000  # per comparison with the best row (a listing compares every row of a ranking)
BOOTSTRAP = 1000


def check_ranks(record: dict, ranks, provenance: Optional[dict] = None, name=None) -> None:
    """Refuse (:class:`~openbench.record.RecordError`) ``ranks`` (a ranks DataFrame) that are not
    the ranks of ``record`` (:func:`openbench.evaluation.statistics.evidence.check_against_record`: every
    row, the provenance where given, every metric); the store reports it as a refused submission."""
    from openbench.evaluation.statistics.evidence import EvidenceError, check_against_record

    try:
        check_against_record(record, ranks, provenance, name)
    except EvidenceError as problem:
        raise RecordError(str(problem) if name is not None else f"the ranks file: {problem}") from None


def ranks_blob(ranks) -> bytes:
    """The ranks as compact Parquet bytes (zstd)."""
    buffer = io.BytesIO()
    ranks.write_parquet(buffer, compression="zstd", statistics=False)
    return buffer.getvalue()


def ranks_of_blob(blob: bytes):
    """The ranks DataFrame of :func:`ranks_blob`'s bytes."""
    import polars as pl

    return pl.read_parquet(io.BytesIO(blob))


def confidence_of(record: dict, ranks) -> dict:
    """The intervals a row shows: the record's own confidence block, else 1,000 resamples (seed 0)."""
    if record.get("confidence") is not None:
        return record["confidence"]
    from openbench.evaluation.statistics.intervals import confidence_block

    return confidence_block(ranks, record["protocol"]["hits_at"], BOOTSTRAP, 0)


def holm(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = np.argsort(p_values, kind="stable")
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted


RanksLoader = Callable[[int], Optional[Tuple[object, dict]]]

# the rows whose ranks the board produced (runs.VERIFIED): only they are paired with each other
COMPUTED_BY_THE_BOARD = ("server", "reproduced")

# why a self-reported row with ranks gets no paired verdict (the page, show and the docs say it)
SELF_REPORTED = ("self-reported: no paired verdict (a paired test trusts each rank to belong to its query, which "
                 "only ranks the board computed can show)")


def _comparable(metric: str, rank_type: str) -> bool:
    return rank_type == "realistic" and (metric == "mrr" or metric.startswith("hits@"))


def _p_value(best, other, metric: str, side: str) -> Optional[Tuple[float, float]]:
    """(difference other - best, sign-flip p) on the same queries; None when they hold others."""
    from openbench.evaluation.statistics.compare import paired_queries, sign_flip_p_value
    from openbench.evaluation.statistics.ranks_table import query_values

    try:
        left, right = paired_queries(other, best, side, "row", "best")
    except OpenbenchError:
        return None
    differences = query_values(left, metric) - query_values(right, metric)
    return float(differences.mean()), sign_flip_p_value(differences, PERMUTATIONS, np.random.default_rng(0))


def annotate(rows: List[dict], load: RanksLoader, sort: str, side: str, rank_type: str,
             cache: Optional[Dict[tuple, Optional[Tuple[float, float]]]] = None) -> None:
    """Add ``interval`` and ``not_worse_than_best`` (see the module docstring) to ``rows``, sorted
    best first within each ranking; ``load(id)`` gives (ranks, confidence block) of a stored run
    or None; ``cache`` keeps the p-values of pairs already compared."""
    cache = {} if cache is None else cache
    comparable = _comparable(sort, rank_type)
    rankings: Dict[str, List[dict]] = {}
    for row in rows:
        ids = row.pop("_ids", None)
        row["interval"], row["not_worse_than_best"] = None, None
        own = row.pop("record_interval", None)  # a record's own interval (a task without kept ranks)
        if own is not None:
            row["interval"] = {"metric": sort, "side": side, "low": own[0], "high": own[1]}
        stored = load(ids[0]) if comparable and ids and len(ids) == 1 else None
        row["_stored"] = (ids[0], *stored) if stored else None
        if stored is not None:
            intervals = (stored[1].get(side) or {}) if isinstance(stored[1], dict) else {}
            if sort in intervals:
                row["interval"] = {"metric": sort, "side": side, "low": intervals[sort][0], "high": intervals[sort][1]}
        if row.get("published"):
            continue
        if row.get("verified") not in COMPUTED_BY_THE_BOARD:
            if stored is not None:
                row["paired"] = SELF_REPORTED
            row["_stored"] = None  # shown with its own interval, never paired with another row
            continue
        rankings.setdefault(f"{row.get('group')}|{row.get('scope')}", []).append(row)
    for members in rankings.values():
        best = members[0]
        if best["_stored"] is not None:
            compared: List[Tuple[dict, float, float]] = []
            for row in members[1:]:
                if row["_stored"] is None:
                    continue
                key = (best["_stored"][0], row["_stored"][0], sort, side)
                if key not in cache:
                    cache[key] = _p_value(best["_stored"][1], row["_stored"][1], sort, side)
                outcome = cache[key]
                if outcome is not None:
                    compared.append((row, outcome[0], outcome[1]))
            best["not_worse_than_best"] = True
            for (row, difference, _), adjusted in zip(compared, holm([p for _, _, p in compared])):
                row["not_worse_than_best"] = bool(difference >= 0 or adjusted >= ALPHA)
                row["p_vs_best"] = adjusted
    for row in rows:
        row.pop("_stored", None)


def confidence_json(record: dict, ranks) -> str:
    """The stored confidence block (JSON)."""
    return strict_json(confidence_of(record, ranks))
