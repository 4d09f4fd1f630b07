"""A ranks file is evidence: checked row by row, against its own provenance and against every
metric of the record it claims to belong to, in one place (``openbench compare``,
``leaderboard submit --ranks``, the store and the server all call it).

What a ranks table (:data:`~openbench.evaluation.statistics.ranks_table.RANKS_SCHEMA`) must satisfy:

* **each row** (:func:`check_rows`): labels present; ``side`` head or tail; one ``split``;
  ``n_candidates >= 1``; for a listed answer ``0 <= n_greater``, ``1 <= n_equal``,
  ``n_greater + n_equal <= n_candidates`` and ``rank == n_greater + (n_equal + 1) / 2`` exactly
  (a finite half-integer); for an answer a ranked list does not contain, ``n_greater``,
  ``n_equal`` and ``rank`` all null. The first row that breaks a rule is named.
* **its provenance** (the file's metadata, :func:`check_provenance`): the format and the types of
  every field; ``queries`` and ``queries_sha256`` equal to the rows' own (:func:`queries_digest`:
  the sha256 of the query keys in order).
* **against its record** (:func:`check_against_record`): the record's dataset fingerprint, its
  whole protocol, the number and digest of its queries (``diagnostics.queries_sha256``), and every
  metric it reports — each side, each rank type (adjusted metrics included), each relation, the
  macro average and the bootstrap intervals — recomputed from the rows with the evaluator's own
  reduction and equal to the record's within 1e-9 (relative for values above 1). The strata
  (``by_degree``, ``by_node_type``) need the training graph, and the metrics per period
  (``by_period``) the split's ``test_dates.tsv``: they are not recomputed here.

Sizes are checked from the Parquet footer (:mod:`openbench._io.parquet`) before a row is read:
at most the queries the record states (``MAX_ROWS`` without a record) and ``MAX_DECODED_BYTES``.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import polars as pl

from openbench._io.parquet import read_footer
from openbench.errors import InputError
from openbench.evaluation.statistics.ranks_table import RANKS_FORMAT, RANKS_METADATA_KEY, RANKS_SCHEMA
from openbench.vocabulary import QUERY_SIDES

if TYPE_CHECKING:  # reading a ranks file needs no torch; recomputing a record's metrics from it does
    import torch

    from openbench.evaluation.counting.counts import RankCounts

__all__ = ["MAX_ROWS", "MAX_DECODED_BYTES", "TOLERANCE", "EvidenceError", "differences", "queries_digest", "check_rows",
           "check_provenance", "check_against_record", "read_ranks", "counts_of"]

MAX_ROWS = 50_000_000  # ~25 M test triples ranked on both sides: beyond every published benchmark
MAX_DECODED_BYTES = 8 << 30
TOLERANCE = 1e-9
_KEY = ("split", "side", "relation", "head", "tail")
_LABEL = Union[str, Path]


class EvidenceError(InputError):
    """Ranks that are not the evidence they claim to be; the message names the first disagreement."""


def queries_digest(ranks: pl.DataFrame) -> str:
    """sha256 of the query keys (split, side, relation, head, tail) in row order, each field
    length-prefixed so that no two tables of different keys share the bytes."""
    digest = hashlib.sha256()
    step = 1 << 16
    for first in range(0, ranks.height, step):
        block = ranks.slice(first, step).select(_KEY)
        for name in _KEY:
            column = block[name].fill_null("\x00null")
            digest.update(np.asarray(column.str.len_bytes().to_numpy(), dtype="<i8").tobytes())
            digest.update("".join(column.to_list()).encode("utf-8"))
    return digest.hexdigest()


def _describe(ranks: pl.DataFrame, row: int) -> str:
    values = ranks.row(row, named=True)
    return (f"row {row + 1} (the {values['side']} query of ({values['head']}, {values['relation']}, "
            f"{values['tail']}) in {values['split']})")


def _first(mask) -> Optional[int]:
    found = np.flatnonzero(mask)
    return int(found[0]) if found.size else None


def check_rows(ranks: pl.DataFrame, name: Optional[_LABEL] = None) -> None:
    """Refuse a ranks table with a row that no evaluation can produce (the module docstring's rules)."""
    if dict(ranks.schema) != RANKS_SCHEMA:
        found = ", ".join(f"{column}: {dtype}" for column, dtype in ranks.schema.items())
        raise EvidenceError(f"expected the columns {', '.join(RANKS_SCHEMA)} with their types; found {found}", name)
    if ranks.is_empty():
        raise EvidenceError("no queries: a ranks file holds one row per evaluated query", name)
    for column in _KEY + ("n_candidates",):
        bad = _first(ranks[column].is_null().to_numpy())
        if bad is not None:
            raise EvidenceError(f"row {bad + 1}: {column} is null; every query names its {column}", name)
    bad = _first(~ranks["side"].is_in(list(QUERY_SIDES)).to_numpy())
    if bad is not None:
        raise EvidenceError(f"row {bad + 1}: side {ranks['side'][bad]!r}; expected head or tail", name)
    splits = ranks["split"].unique(maintain_order=True).to_list()
    if len(splits) != 1:
        raise EvidenceError(f"rows of {len(splits)} splits ({', '.join(map(repr, splits[:3]))}); a ranks file ranks "
                            "the queries of one split", name)
    greater, equal, rank = (ranks[column].to_numpy() for column in ("n_greater", "n_equal", "rank"))
    candidates = ranks["n_candidates"].to_numpy()
    nulls = np.stack([ranks[column].is_null().to_numpy() for column in ("n_greater", "n_equal", "rank")])
    bad = _first(nulls.any(axis=0) & ~nulls.all(axis=0))
    if bad is not None:
        raise EvidenceError(f"{_describe(ranks, bad)}: n_greater, n_equal and rank are null together (an answer "
                            "its list does not contain) or not at all", name)
    listed = ~nulls[0]
    g = np.where(listed, np.nan_to_num(greater.astype(np.float64)), 0).astype(np.int64)
    k = np.where(listed, np.nan_to_num(equal.astype(np.float64)), 1).astype(np.int64)
    r = np.where(listed, rank.astype(np.float64), 1.0)
    bad = _first(candidates < 1)
    if bad is not None:
        raise EvidenceError(f"{_describe(ranks, bad)}: n_candidates {int(candidates[bad])}; a query ranks at least "
                            "its answer", name)
    problems = [(g < 0, lambda i: f"n_greater {int(g[i])}; a count is at least 0"),
                (k < 1, lambda i: f"n_equal {int(k[i])}; the answer ties with itself, so n_equal is at least 1"),
                (g + k > candidates, lambda i: f"n_greater {int(g[i])} + n_equal {int(k[i])} exceed its "
                                               f"{int(candidates[i])} candidates"),
                (~np.isfinite(r) | (r != g + (k + 1) / 2.0),
                 lambda i: f"rank {float(r[i])!r}, but its counts give n_greater + (n_equal + 1) / 2 = "
                           f"{float(g[i] + (k[i] + 1) / 2)!r}")]
    for mask, message in problems:
        bad = _first(mask & listed)
        if bad is not None:
            raise EvidenceError(f"{_describe(ranks, bad)}: {message(bad)}", name)


def _expect(condition: bool, message: str, name: Optional[_LABEL]) -> None:
    if not condition:
        raise EvidenceError(message, name)


def check_provenance(provenance: Any, ranks: pl.DataFrame, name: Optional[_LABEL] = None) -> dict:
    """The provenance of a ranks file (its metadata), its fields' types checked and its query
    count and digest equal to the rows'; returns it."""
    _expect(isinstance(provenance, dict), "the metadata is not a JSON object", name)
    _expect(provenance.get("format") == RANKS_FORMAT,
            f"metadata format {str(provenance.get('format'))[:40]!r}; this openbench reads {RANKS_FORMAT} (ranks "
            "files of older versions carry no digest of their queries: evaluate again with --ranks-output)", name)
    fingerprint = provenance.get("dataset_fingerprint")
    _expect(isinstance(fingerprint, str) and len(fingerprint) == 64,
            "the metadata's dataset_fingerprint is not a sha256", name)
    _expect(isinstance(provenance.get("protocol"), dict), "the metadata's protocol is not a JSON object", name)
    _expect(provenance.get("model") is None or isinstance(provenance.get("model"), str),
            "the metadata's model is not a name", name)
    _expect(provenance.get("queries") == ranks.height,
            f"the metadata states {provenance.get('queries')!r} queries, the file holds {ranks.height} rows", name)
    _expect(provenance.get("queries_sha256") == queries_digest(ranks),
            "the rows' queries do not hash to the metadata's queries_sha256: rows were changed, added, removed or "
            "reordered after openbench wrote the file", name)
    return provenance


def read_ranks(path: _LABEL, max_rows: int = MAX_ROWS) -> Tuple[pl.DataFrame, dict]:
    """(ranks, provenance) of a ranks file, every size checked from its footer before a row is
    read, then every row and the provenance (:func:`check_rows`, :func:`check_provenance`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file (expected a ranks file written by openbench evaluate --ranks-output)", path)
    try:
        footer = read_footer(path)
    except InputError as problem:
        raise InputError(f"not a ranks file: expected a Parquet file written by openbench evaluate --ranks-output "
                         f"({problem.reason})", path) from None
    try:
        provenance = json.loads(footer.metadata.get(RANKS_METADATA_KEY, ""))
    except ValueError:
        provenance = None
    if not isinstance(provenance, dict):
        raise InputError("not a ranks file: expected a Parquet file written by openbench evaluate --ranks-output "
                         "(no openbench metadata)", path)
    if footer.rows > max_rows:
        raise EvidenceError(f"the file declares {footer.rows:,} rows, more than the {max_rows:,} queries it may hold; "
                            "not read", path)
    if footer.decoded_bytes > MAX_DECODED_BYTES:
        raise EvidenceError(f"the file declares {footer.decoded_bytes:,} bytes of pages, more than "
                            f"{MAX_DECODED_BYTES:,}; not read", path)
    if sorted(footer.columns) != sorted(RANKS_SCHEMA):
        raise EvidenceError(f"expected the columns {', '.join(RANKS_SCHEMA)}; the footer declares "
                            f"{', '.join(footer.columns[:12])}", path)
    if set(footer.repetitions) != {"optional"}:  # as polars writes every column; the pages' levels follow it
        raise EvidenceError("expected nullable (optional) columns, as openbench writes them; the footer declares "
                            f"{', '.join(f'{c}: {r}' for c, r in zip(footer.columns, footer.repetitions))}", path)
    try:
        frame = pl.read_parquet(path)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # a damaged body behind an intact footer; pyo3's PanicException is no Exception
        raise InputError(f"the ranks file cannot be read ({type(error).__name__}: {str(error)[:200]})", path) from None
    check_rows(frame, path)
    return frame, check_provenance(provenance, frame, path)


# -- against the record --------------------------------------------------------------------------

def counts_of(ranks: pl.DataFrame) -> Tuple[Dict[str, RankCounts], Dict[str, torch.Tensor], List[str]]:
    """({side: counts (T_side,)}, {side: relation ids (T_side,)}, relation labels) of checked rows:
    the evaluator's counts back (an unlisted answer's ``n_greater`` +inf, as top-k producers give it)."""
    import torch

    from openbench.evaluation.counting.counts import RankCounts

    labels = sorted(set(ranks["relation"].to_list()))
    index = {label: i for i, label in enumerate(labels)}
    counts, relations = {}, {}
    for side in QUERY_SIDES:
        part = ranks.filter(pl.col("side") == side)
        if part.is_empty():
            continue
        listed = part["rank"].is_not_null().to_numpy()
        greater = part["n_greater"].cast(pl.Float64).fill_null(float("inf")).to_numpy()
        greater_tensor = torch.from_numpy(greater.copy() if not listed.all() else greater.astype(np.int64))
        equal = torch.from_numpy(part["n_equal"].fill_null(1).to_numpy().astype(np.int64) - 1)
        candidates = torch.from_numpy(part["n_candidates"].to_numpy().astype(np.int64))
        counts[side] = RankCounts(greater_tensor, equal, candidates)
        relations[side] = torch.tensor([index[label] for label in part["relation"].to_list()], dtype=torch.long)
    return counts, relations, labels


def differences(found: Any, stated: Any, where: str) -> Iterator[Tuple[str, Any, Any]]:
    """(path, recomputed, stated) of every leaf where the two nested values differ."""
    if isinstance(found, dict) or isinstance(stated, dict):
        if not isinstance(found, dict) or not isinstance(stated, dict):
            yield where, found, stated
            return
        for key in sorted(set(found) | set(stated)):
            yield from differences(found.get(key, "absent"), stated.get(key, "absent"), f"{where}.{key}")
        return
    if isinstance(found, list) and isinstance(stated, list) and len(found) == len(stated):
        for position, (left, right) in enumerate(zip(found, stated)):
            yield from differences(left, right, f"{where}[{position}]")
        return
    numbers = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in (found, stated))
    if numbers:
        if not (math.isfinite(stated) and abs(found - stated) <= TOLERANCE * max(1.0, abs(found))):
            yield where, found, stated
    elif found != stated:
        yield where, found, stated


def _disagreement(found: Any, stated: Any, where: str, name: Optional[_LABEL]) -> None:
    for path, left, right in differences(found, stated, where):
        raise EvidenceError(f"{path}: the ranks give {left!r}, the record states {right!r}; these are not the ranks "
                            "of this evaluation", name)


def check_against_record(record: dict, ranks: pl.DataFrame, provenance: Optional[dict] = None,
                         name: Optional[_LABEL] = None) -> None:
    """Refuse ``ranks`` (checked rows) unless they are the ranks of ``record`` (JSON values):
    provenance, queries and every reported metric (the module docstring)."""
    from openbench.evaluation.statistics.metrics import summarize

    check_rows(ranks, name)
    protocol = record.get("protocol") or {}
    dataset = record.get("dataset") or {}
    diagnostics = record.get("diagnostics") or {}
    if provenance is not None:
        check_provenance(provenance, ranks, name)
        _expect(provenance["dataset_fingerprint"] == dataset.get("fingerprint"),
                f"the ranks are of dataset {provenance['dataset_fingerprint'][:12]}…, the record of "
                f"{str(dataset.get('fingerprint'))[:12]}…", name)
        _disagreement(provenance["protocol"], protocol, "protocol", name)
    _expect(diagnostics.get("queries") == ranks.height,
            f"the ranks hold {ranks.height} queries, the record {diagnostics.get('queries')!r}", name)
    _expect(diagnostics.get("queries_sha256") == queries_digest(ranks),
            "the ranks' queries (their keys in order) are not the record's (diagnostics.queries_sha256 differs)", name)
    split = ranks["split"][0]
    _expect(split == protocol.get("evaluation_split", "test"),
            f"the ranks are of the {split} split, the record of {protocol.get('evaluation_split')!r}", name)
    sides = sorted(set(ranks["side"].to_list()))
    _expect(sides == sorted(protocol.get("sides") or []),
            f"the ranks hold {'/'.join(sides)} queries, the record's protocol {protocol.get('sides')!r}", name)
    hits_at = protocol.get("hits_at") or []
    counts, relations, labels = counts_of(ranks)
    metrics, per_relation, macro = summarize(counts.get("head"), counts.get("tail"), relations, labels, hits_at)
    _disagreement(metrics, record.get("metrics"), "metrics", name)
    if record.get("per_relation") is not None:
        _disagreement(per_relation, record["per_relation"], "per_relation", name)
    if record.get("macro_relation") is not None:
        _disagreement(macro, record["macro_relation"], "macro_relation", name)
    stated = record.get("confidence")
    if stated is not None:
        from openbench.evaluation.statistics.intervals import confidence_block

        resamples, seed = stated.get("resamples"), stated.get("seed")
        _expect(isinstance(resamples, int) and 1 <= resamples <= 100_000,
                f"confidence.resamples {resamples!r}: expected 1..100,000", name)
        _disagreement(confidence_block(ranks, hits_at, resamples, seed), stated, "confidence", name)
