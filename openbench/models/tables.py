"""Predictions are models: a table of scores, read as it is written, is a scorer like any other.

A model of the repurposing field often hands over scores, not embeddings: Every Cure's MATRIX
pipeline writes Spark Parquet folders (``source``, ``target``, ``"treat score"``, ``rank``, flag
columns), ``run_comparison`` takes any model's Parquet/CSV of ``source``, ``target`` and a score,
a GNN's scores come as a long table or a dense matrix. :func:`read_scores` reads

* a **long table of triples** (``head``, ``relation``, ``tail``, a score): each ranking query's
  listed candidates;
* a **long table of pairs** (``drug``/``source``, ``disease``/``target``, a score): every triple of
  any relation between the two ends, either orientation (the repurposing matrix, a treats
  relation's ranking, its triples' classification);
* a **dense matrix** (``.npy`` (D, S), rows and columns in the order of ``drugs``/``diseases``);

from Parquet (a file, or a folder of part-files as Spark writes it), CSV or TSV (gzip or zstd too)
and ``.npy``. Ids are the dataset's labels, mapped by a join, never a Python loop over rows; the
score column is ``score_column``, else the first of :data:`SCORE_COLUMNS` present.

**Unlisted candidates, one rule**: a candidate the table does not score ranks below every scored
one, tied with the other unlisted ones (its score is one value just beyond every listed one, on
the losing side of the run's order: below them, above them under ``lower_is_better``): the realistic
rank is then the expectation over a random order of the unlisted tail, exact for every top-k
metric, rewarding nor punishing a table for leaving pairs out; the optimistic and pessimistic
ranks beside it bound what the order could have been. The scorer counts the candidate slots it
served unscored (the record's model block), and ``require_complete`` refuses them; triple
classification reads an unlisted triple as that same value.

Scores are compared as stored (float32, float64, integers up to 2^53), exactly, with the engine's
tie rules. A NaN or infinite score, a duplicated pair or triple, an id the dataset lacks (listed,
unless ``drop_unknown``), a score column that is not numeric or columns that name no layout end
in one line naming the file and what was expected.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench.errors import InputError, ScoreError
from openbench.models.base import RowScorer

__all__ = ["SCORE_COLUMNS", "TRIPLE_COLUMNS", "PAIR_COLUMNS", "EVERY_CURE_FLAGS", "TableSpec", "ScoreTable",
           "TableScorer", "read_scores", "scores_from_frame", "dense_table", "table_sha256", "ScoresModel", "from_scores",
           "NAMED"]

# the score column unless told: a plain score, Every Cure's raw and transformed treat scores
SCORE_COLUMNS = ("score", "treat score", "treat_score", "transformed_treat_score", "untransformed_treat_score",
                 "probability", "prediction")
TRIPLE_COLUMNS = ("head", "relation", "tail")
PAIR_COLUMNS = (("drug", "disease"), ("source", "target"))
# Every Cure's flag columns: reported, never scored (the dataset's own splits decide what is known)
EVERY_CURE_FLAGS = ("is_known_positive", "is_known_negative", "trial_sig_better", "trial_non_sig_better",
                    "trial_sig_worse", "trial_non_sig_worse", "off_label")
NAMED = 10  # rows named in a message or a record's list
EXACT_INTEGERS = 2 ** 53  # float64 holds every integer up to this


@dataclass
class TableSpec:
    """How to read a table: its score column and id columns where they are not the usual ones,
    the drugs' and diseases' labels of a dense matrix's rows and columns, and what to do with ids
    the dataset lacks (``drop_unknown``) and unscored candidates (``require_complete``)."""

    score_column: Optional[str] = None
    id_columns: Optional[Sequence[str]] = None
    drugs: Optional[Sequence[str]] = None
    diseases: Optional[Sequence[str]] = None
    drop_unknown: bool = False
    require_complete: bool = False


@dataclass
class ScoreTable:
    """A table mapped onto a dataset's ids: ``kind`` ``"triples"`` (``ids`` (N, 3): head,
    relation, tail) or ``"pairs"`` (``ids`` (N, 2): the first and the second end), ``scores`` (N,)
    float64, and what the record says of it (``facts``)."""

    kind: str
    ids: np.ndarray
    scores: np.ndarray
    facts: Dict[str, Any] = field(default_factory=dict)
    source_sha256: Optional[str] = None


def table_sha256(path: Path) -> str:
    """sha256 of a file, or of a folder's files (their relative names and bytes, sorted)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(item for item in path.rglob("*") if item.is_file())
    for item in files:
        if path.is_dir():
            digest.update(str(item.relative_to(path)).encode("utf-8") + b"\0")
        with open(item, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


# -- reading -------------------------------------------------------------------------------------

def _parts(folder: Path) -> List[Path]:
    """A Spark output folder's part-files (Parquet, else CSV), hidden and ``_SUCCESS`` files aside."""
    visible = sorted(item for item in folder.iterdir() if item.is_file() and not item.name.startswith(("_", ".")))
    for suffixes in ((".parquet",), (".csv", ".csv.gz", ".csv.zst"), (".tsv", ".tsv.gz", ".tsv.zst")):
        chosen = [item for item in visible if item.name.endswith(suffixes)]
        if chosen:
            return chosen
    raise InputError("a folder of scores holds Spark part-files (*.parquet, or *.csv / *.tsv); found none", folder)


def _read_parquet(path: Path):
    import polars as pl

    from openbench._io.parquet import read_footer

    read_footer(path)  # a file whose footer lies is refused before polars allocates for it
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as error:
        raise InputError(f"unreadable as Parquet ({error})", path) from None


def _read_delimited(path: Path):
    """A CSV/TSV (gzip too: the bounded reader; zstd: polars) as string columns named by its header."""
    import polars as pl

    from openbench._io.inputs import iter_lines, read_table

    separator = "\t" if ".tsv" in path.name else ","
    if path.name.endswith(".zst"):
        try:
            return pl.read_csv(path, separator=separator, infer_schema=False)
        except (pl.exceptions.PolarsError, OSError) as error:
            raise InputError(f"unreadable as zstd-compressed {'TSV' if separator == chr(9) else 'CSV'} ({error})",
                             path) from None
    header = next((line for _, line in iter_lines(path, ("#",)) if line.strip()), None)
    if header is None:
        raise InputError("an empty table of scores; expected a header and one row per scored pair or triple", path)
    names = [name.strip().strip('"') for name in header.split(separator)]
    return read_table(path, {name: name for name in names}, separator=separator, quote_char='"')


def _frame(path: Path):
    """(the table's columns as a polars frame, its format, whether rows are a text file's lines)."""
    import polars as pl

    if path.is_dir():
        parts = _parts(path)
        frames = [_read_parquet(part) if part.suffix == ".parquet" else _read_delimited(part) for part in parts]
        try:
            return pl.concat(frames, how="vertical_relaxed"), f"folder of {len(parts)} part-file(s)", False
        except pl.exceptions.PolarsError as error:
            raise InputError(f"part-files of different columns ({error})", path) from None
    if path.suffix == ".parquet":
        return _read_parquet(path), "Parquet", False
    if any(part in path.name for part in (".csv", ".tsv")):
        return _read_delimited(path), "CSV" if ".csv" in path.name else "TSV", True
    raise InputError("expected scores as Parquet (a file or a Spark folder of part-files), CSV or TSV (gzip or zstd "
                     "too), or a dense .npy matrix", path)


def _layout(columns: Sequence[str], spec: TableSpec, path) -> Tuple[str, List[str], str]:
    """(kind, id columns, score column) of a table's columns; columns that name no layout are an
    error listing what was found and what is expected."""
    found = list(columns)
    lowered = {name.lower(): name for name in found}
    if spec.id_columns:
        ids = [lowered.get(name.lower(), name) for name in spec.id_columns]
        missing = [name for name in ids if name not in found]
        if missing or len(ids) not in (2, 3):
            raise InputError(f"--id-columns {','.join(spec.id_columns)}: expected 2 (drug, disease) or 3 (head, "
                             f"relation, tail) columns of the table; it has {', '.join(found)}", path)
        kind = "triples" if len(ids) == 3 else "pairs"
    elif all(name in lowered for name in TRIPLE_COLUMNS):
        kind, ids = "triples", [lowered[name] for name in TRIPLE_COLUMNS]
    else:
        pair = next((names for names in PAIR_COLUMNS if all(name in lowered for name in names)), None)
        if pair is None:
            raise InputError(f"columns {', '.join(found)} name no known layout; expected head, relation, tail or "
                             "drug, disease or source, target, and a score column (score, \"treat score\", "
                             "transformed_treat_score, ...; --score-column names another)", path)
        kind, ids = "pairs", [lowered[name] for name in pair]
    if spec.score_column is not None:
        if spec.score_column not in found:
            raise InputError(f"--score-column {spec.score_column!r}: not a column of the table (it has "
                             f"{', '.join(found)})", path)
        score = spec.score_column
    else:
        chosen = next((lowered[name] for name in SCORE_COLUMNS if name in lowered), None)
        if chosen is None:
            raise InputError(f"no score column among {', '.join(found)}; expected one of {', '.join(SCORE_COLUMNS)} "
                             "(--score-column names another)", path)
        score = chosen
    return kind, ids, score


def _where(path, row: int, lines: bool) -> Dict[str, Any]:
    """An InputError's place of a table's 0-based row: a text file's line (after the header), or the row."""
    return {"line": row + 2} if lines else {"row": row}


def _numeric_scores(frame, column: str, path, lines: bool) -> np.ndarray:
    """(N,) float64 scores, exactly as stored: numbers, finite, integers within 2^53."""
    import polars as pl

    series = frame.get_column(column)
    if series.dtype == pl.String:
        converted = series.cast(pl.Float64, strict=False)
        bad = (converted.is_null() & series.is_not_null()) | series.is_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            raise _row_error(f"column {column!r} holds {series[row]!r}; expected a number", path, row, lines)
        series = converted
    elif not series.dtype.is_numeric():
        raise InputError(f"score column {column!r} is {series.dtype}, not numeric", path)
    if series.dtype.is_integer():
        values = series.cast(pl.Int64).to_numpy()
        too_large = np.abs(values) > EXACT_INTEGERS
        if too_large.any():
            row = int(np.flatnonzero(too_large)[0])
            raise _row_error(f"score {values[row]} beyond 2^53: float64 cannot compare it exactly", path, row, lines)
        return values.astype(np.float64)
    nulls = series.is_null()
    if nulls.any():
        raise _row_error(f"column {column!r} is empty; expected a number", path, int(nulls.arg_true()[0]), lines)
    values = series.cast(pl.Float64).to_numpy()
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _row_error(f"score {values[row]} in column {column!r}; expected a finite number (a NaN or infinite "
                         "score orders nothing)", path, row, lines)
    return values


def _row_error(message: str, path, row: int, lines: bool) -> InputError:
    return InputError(message, path, row + 2) if lines else InputError(f"row {row}: {message}", path)


def _mapped(frame, columns: List[str], dataset, spec: TableSpec, path, lines: bool):
    """(ids (N, k) int64, kept rows (N,) bool, the unknown rows described): each id column cast to
    an enum of the dataset's labels (the relation column to its relation labels), whose physical
    code is the id: one hashed lookup per row, no Python loop, no sort."""
    import polars as pl

    entity = pl.Enum(list(dataset.entity_labels))
    relation = pl.Enum(list(dataset.relation_labels))
    coded = frame.select([pl.col(name).cast(pl.String).cast(relation if len(columns) == 3 and position == 1
                                                            else entity, strict=False).to_physical().alias(name)
                          for position, name in enumerate(columns)])
    ids = np.stack([coded.get_column(name).fill_null(-1).cast(pl.Int64).to_numpy() for name in columns], axis=1) \
        if columns else np.zeros((0, 0), np.int64)
    known = (ids >= 0).all(axis=1)
    unknown = np.flatnonzero(~known)
    listed = [{**_where(path, int(row), lines), "ids": [frame[name][int(row)] for name in columns]}
              for row in unknown[:NAMED]]
    if unknown.size and not spec.drop_unknown:
        first = listed[0]
        place = f"line {first['line']}" if "line" in first else f"row {first['row']}"
        raise InputError(f"{unknown.size} row(s) name an entity or relation the dataset lacks (first: {place}, "
                         f"{first['ids']}); give --drop-unknown to score the others", path)
    return ids, known, {"unknown_rows": int(unknown.size), "unknown": listed}


def _duplicates(ids: np.ndarray, path, lines: bool, rows: np.ndarray, num_entities: int) -> None:
    """A pair or triple listed twice is an error naming its rows (found by hashing, in polars)."""
    import polars as pl

    if ids.shape[0] < 2:
        return
    codes = ids[:, 0].astype(np.int64)
    for column in range(1, ids.shape[1]):
        codes = codes * np.int64(num_entities) + ids[:, column]
    series = pl.Series(codes)
    if series.n_unique() == series.len():  # a hashed count: the usual, fast answer
        return
    repeated = series.is_duplicated().to_numpy()
    if repeated.any():
        same = np.flatnonzero(codes == codes[np.flatnonzero(repeated)[0]])[:2]
        a, b = (int(rows[i]) for i in same)
        where = f"lines {a + 2} and {b + 2}" if lines else f"rows {a} and {b}"
        raise InputError(f"the same {'triple' if ids.shape[1] == 3 else 'pair'} twice ({where}); expected one score "
                         "each", path)


def scores_from_frame(frame, dataset, spec: TableSpec = TableSpec(), path=None, lines: bool = False,
                      source_format: str = "a table") -> ScoreTable:
    """A :class:`ScoreTable` of a polars (or pandas) frame's columns over ``dataset``'s ids."""
    import polars as pl

    if not isinstance(frame, pl.DataFrame):
        frame = pl.from_pandas(frame) if hasattr(frame, "to_numpy") and hasattr(frame, "columns") else \
            pl.DataFrame(frame)
    kind, columns, score = _layout(frame.columns, spec, path)
    values = _numeric_scores(frame, score, path, lines)
    ids, known, unknown = _mapped(frame, columns, dataset, spec, path, lines)
    rows = np.flatnonzero(known)
    ids, values = ids[known], values[known]
    _duplicates(ids, path, lines, rows, max(dataset.num_entities, dataset.num_relations))
    flags = {name: int(frame.get_column(name).cast(pl.Boolean, strict=False).sum() or 0)
             for name in frame.columns if name.lower() in EVERY_CURE_FLAGS}
    facts: Dict[str, Any] = {"format": source_format, "layout": kind, "id_columns": columns, "score_column": score,
                             "rows": int(frame.height), **unknown}
    if flags:
        facts["flags_reported_not_scored"] = flags
    if "rank" in frame.columns and kind == "pairs":
        facts["file_ranks"] = _file_ranks(frame.get_column("rank").to_numpy()[known], values)
    return ScoreTable(kind, ids, values, facts)


def _file_ranks(ranks: np.ndarray, scores: np.ndarray) -> Dict[str, Any]:
    """How a file's own ``rank`` column (Every Cure's: ordinal, tied pairs in Spark's order) differs
    from the realistic rank of the same scores (a tie's mean place): pairs and largest difference."""
    ranks = ranks.astype(np.float64)
    order = np.sort(scores)[::-1]
    greater = np.searchsorted(-order, -scores, "left")
    equal = np.searchsorted(-order, -scores, "right") - greater
    realistic = greater + (equal + 1) / 2.0
    difference = np.abs(ranks - realistic)
    return {"pairs": int(ranks.size), "pairs_whose_rank_differs": int((difference > 0).sum()),
            "largest_difference": float(difference.max(initial=0.0)), "tied_pairs": int((equal > 1).sum())}


def read_scores(path, dataset, spec: TableSpec = TableSpec()) -> ScoreTable:
    """The table of scores at ``path`` (see the module docstring) over ``dataset``'s ids."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder; expected a table of scores", path)
    if path.suffix == ".npy":
        table = _dense(path, dataset, spec)
    else:
        frame, source_format, lines = _frame(path)
        table = scores_from_frame(frame, dataset, spec, path, lines, source_format)
    table.facts["path"] = str(path)
    table.source_sha256 = table_sha256(path)
    return table


def _dense(path: Path, dataset, spec: TableSpec) -> ScoreTable:
    """A dense (D, S) ``.npy`` matrix, rows and columns the ``drugs`` and ``diseases`` labels in order."""
    from openbench._io.inputs import load_npy

    return dense_table(load_npy(path, mmap=True), dataset, spec, path)


def dense_table(matrix: np.ndarray, dataset, spec: TableSpec, path=None) -> ScoreTable:
    """A dense (D, S) matrix as a table of pairs, rows and columns the ``drugs`` and ``diseases``
    labels of ``spec`` in order."""
    if not spec.drugs or not spec.diseases:
        raise InputError("a dense matrix of scores needs the labels of its rows and columns: --drugs and --diseases "
                         "(one label per line, in the matrix's order)", path)
    if matrix.ndim != 2 or matrix.shape != (len(spec.drugs), len(spec.diseases)):
        raise InputError(f"expected a ({len(spec.drugs)}, {len(spec.diseases)}) matrix (--drugs × --diseases), found "
                         f"shape {tuple(matrix.shape)}", path)
    if not np.issubdtype(matrix.dtype, np.number):
        raise InputError(f"expected numeric scores, found dtype {matrix.dtype}", path)
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    unknown = [label for label in [*spec.drugs, *spec.diseases] if label not in index]
    if unknown:
        raise InputError(f"{len(unknown)} label(s) of --drugs/--diseases are not entities of the dataset (first: "
                         f"{unknown[0]!r})", path)
    values = np.asarray(matrix, dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"row {row}, column {col}: score {values[row, col]}; expected a finite number", path)
    rows = np.array([index[label] for label in spec.drugs], np.int64)
    cols = np.array([index[label] for label in spec.diseases], np.int64)
    ids = np.stack(np.meshgrid(rows, cols, indexing="ij"), axis=-1).reshape(-1, 2)
    return ScoreTable("pairs", ids, values.reshape(-1), {"format": "dense .npy", "layout": "pairs",
                                                          "rows": int(values.size), "unknown_rows": 0})


# -- the scorer ----------------------------------------------------------------------------------

class TableScorer(RowScorer):
    """A :class:`ScoreTable` as a scorer (see the module docstring): listed scores exactly as
    stored, an unlisted candidate the one value just beyond them on the losing side.

    :param table: the mapped table; ``num_entities``: the dataset's; ``name``: what the record calls it.
    """

    kind = "scores"
    transductive = False  # scores of the dataset's own ids: nothing learnt per entity

    def __init__(self, table: ScoreTable, num_entities: int, num_relations: int, name: str = "score table",
                 require_complete: bool = False):
        super().__init__(num_entities)
        self.table, self.name, self.require_complete = table, name, require_complete
        self.relation_span = max(1, int(num_relations))
        self.unscored = 0  # candidate slots served unscored (the unlisted rule)
        self.served = 0
        self._lowest = float(table.scores.min()) if table.scores.size else 0.0
        self._highest = float(table.scores.max()) if table.scores.size else 0.0
        self.unlisted = float(np.nextafter(self._lowest, -math.inf))
        if table.kind == "pairs":
            self._build_pairs(table)
        else:
            self._build_triples(table)

    def rank_lower_first(self, lower_is_better: bool) -> None:
        """The run ranks lower scores first: unlisted candidates then take the value just above
        every listed score, still the losing side."""
        self.unlisted = float(np.nextafter(self._highest, math.inf) if lower_is_better
                              else np.nextafter(self._lowest, -math.inf))

    def _build_pairs(self, table: ScoreTable) -> None:
        """A dense (A, B) matrix over the first ends A and the second ends B (-inf unlisted)."""
        # the ends present, by a count over the entities (no sort of the table's rows)
        first = np.flatnonzero(np.bincount(table.ids[:, 0], minlength=self.num_entities))
        second = np.flatnonzero(np.bincount(table.ids[:, 1], minlength=self.num_entities))
        self.first_position = np.full(self.num_entities, -1, np.int64)
        self.second_position = np.full(self.num_entities, -1, np.int64)
        self.first_position[first] = np.arange(first.size)
        self.second_position[second] = np.arange(second.size)
        self.first_ids, self.second_ids = first, second
        self.matrix = np.full((first.size, second.size), np.nan)  # NaN: unlisted
        self.matrix[self.first_position[table.ids[:, 0]], self.second_position[table.ids[:, 1]]] = table.scores

    def _build_triples(self, table: ScoreTable) -> None:
        """Sorted keys (h, r, t) for tail queries and (r, t, h) for head queries."""
        h, r, t = (table.ids[:, i] for i in range(3))
        entities = np.int64(self.num_entities)
        self.tail_keys = (h * self.relation_span + r) * entities + t
        self.tail_order = np.argsort(self.tail_keys, kind="stable")
        self.tail_keys = self.tail_keys[self.tail_order]
        self.head_keys = (r * entities + t) * entities + h
        self.head_order = np.argsort(self.head_keys, kind="stable")
        self.head_keys = self.head_keys[self.head_order]

    def description(self) -> dict:
        """The table's facts, the candidate slots served and how many were unscored, its sha256."""
        params = dict(self.table.facts)
        params.update(candidates_served=self.served, candidates_unscored=self.unscored,
                      unlisted_rule="ranked below every scored candidate, tied among themselves")
        return {"name": self.name, "kind": self.kind, "params": params, "source_sha256": self.table.source_sha256}

    # -- rows -------------------------------------------------------------------------------
    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) float64: each query's listed scores, :attr:`unlisted` for its unlisted candidates."""
        queries = batch.cpu().numpy()
        rows = np.full((queries.shape[0], self.num_entities), np.nan)
        if self.table.kind == "pairs":
            anchors = queries[:, 0] if side == "tail" else queries[:, 2]
            self._pair_rows(anchors, rows)
        else:
            self._triple_rows(queries, side, rows)
        return torch.from_numpy(self._filled(rows))

    def _pair_rows(self, anchors: np.ndarray, rows: np.ndarray) -> None:
        first, second = self.first_position[anchors], self.second_position[anchors]
        as_first = np.flatnonzero(first >= 0)
        if as_first.size:
            rows[np.ix_(as_first, self.second_ids)] = self.matrix[first[as_first]]
        as_second = np.flatnonzero((second >= 0) & (first < 0))
        if as_second.size:
            rows[np.ix_(as_second, self.first_ids)] = self.matrix[:, second[as_second]].T

    def _triple_rows(self, queries: np.ndarray, side: str, rows: np.ndarray) -> None:
        entities = np.int64(self.num_entities)
        if side == "tail":
            keys, order = self.tail_keys, self.tail_order
            low = (queries[:, 0] * self.relation_span + queries[:, 1]) * entities
        else:
            keys, order = self.head_keys, self.head_order
            low = (queries[:, 1] * entities + queries[:, 2]) * entities
        first, last = np.searchsorted(keys, low, "left"), np.searchsorted(keys, low + entities, "left")
        counts = last - first
        if not counts.sum():
            return
        query_rows = np.repeat(np.arange(queries.shape[0]), counts)
        # every listed position of every query, without a loop: each run's start plus its offsets
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        positions = np.repeat(first, counts) + offsets
        rows[query_rows, keys[positions] - low[query_rows]] = self.table.scores[order[positions]]

    def _filled(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (B, W) with each unlisted slot (NaN) given :attr:`unlisted`, the slots counted
        (refused under ``require_complete``)."""
        missing = np.isnan(rows)
        unlisted = int(missing.sum())
        self.served += int(rows.size)
        self.unscored += unlisted
        if unlisted and self.require_complete:
            row = int(np.flatnonzero(missing.any(axis=1))[0])
            raise ScoreError(f"the table leaves {int(missing[row].sum())} candidate(s) of a query unscored "
                             f"(batch row {row}), and --require-complete asks for every candidate scored")
        rows[missing] = self.unlisted
        return rows

    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) float64: each query's own candidates, :attr:`unlisted` where unlisted (no (B, E)
        rows: the repurposing matrix asks for blocks of its columns)."""
        queries, chosen = batch.cpu().numpy(), candidates.cpu().numpy()
        if self.table.kind == "pairs" and chosen.shape[0] and (chosen == chosen[:1]).all():
            # the repurposing matrix: every query against the same columns, gathered as one block
            anchors = queries[:, 0] if side == "tail" else queries[:, 2]
            return torch.from_numpy(self._filled(self._block(anchors, chosen[0])))
        anchors = (queries[:, 0] if side == "tail" else queries[:, 2])[:, None].repeat(chosen.shape[1], axis=1)
        heads, tails = (anchors, chosen) if side == "tail" else (chosen, anchors)
        relations = queries[:, 1][:, None].repeat(chosen.shape[1], axis=1)
        values = self._lookup(heads.reshape(-1), relations.reshape(-1), tails.reshape(-1)).reshape(chosen.shape)
        return torch.from_numpy(self._filled(values))

    def _block(self, anchors: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """(B, W) float64 scores of each anchor (B,) against the same columns (W,), NaN where unlisted."""
        values = np.full((anchors.size, columns.size), np.nan)
        for rows, cols, transpose in ((self.first_position[anchors], self.second_position[columns], False),
                                      (self.second_position[anchors], self.first_position[columns], True)):
            listed_rows, listed_cols = np.flatnonzero(rows >= 0), np.flatnonzero(cols >= 0)
            if not (listed_rows.size and listed_cols.size):
                continue
            part = (self.matrix[:, rows[listed_rows]].T if transpose else self.matrix[rows[listed_rows]])
            part = part[:, cols[listed_cols]] if not transpose else part[:, cols[listed_cols]]
            target = values[np.ix_(listed_rows, listed_cols)]
            values[np.ix_(listed_rows, listed_cols)] = np.where(np.isnan(target), part, target)
        return values

    def _lookup(self, heads: np.ndarray, relations: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """(n,) float64 scores of triples, NaN where unlisted."""
        if self.table.kind == "pairs":
            values = np.full(heads.size, np.nan)
            for a, b in ((heads, tails), (tails, heads)):  # either orientation of the pair
                first, second = self.first_position[a], self.second_position[b]
                here = (first >= 0) & (second >= 0) & np.isnan(values)
                values[here] = self.matrix[first[here], second[here]]
            return values
        keys = (heads * self.relation_span + relations) * np.int64(self.num_entities) + tails
        at = np.searchsorted(self.tail_keys, keys).clip(max=max(0, self.tail_keys.size - 1))
        found = self.tail_keys.size > 0
        hit = (self.tail_keys[at] == keys) if found else np.zeros(keys.size, bool)
        values = np.full(keys.size, np.nan)
        values[hit] = self.table.scores[self.tail_order[at[hit]]]
        return values

    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64 scores of the triples; an unlisted one scores :attr:`unlisted`."""
        ids = triples.cpu().numpy()
        return torch.from_numpy(self._filled(self._lookup(ids[:, 0], ids[:, 1], ids[:, 2])[None])[0])


class ScoresModel:
    """Predictions given from Python (:func:`from_scores`), matched to a dataset's ids when the door
    evaluates them (:meth:`for_dataset`)."""

    def __init__(self, source, spec: TableSpec, name: str):
        self.source, self.spec, self.name = source, spec, name

    def for_dataset(self, dataset) -> TableScorer:
        """The :class:`TableScorer` of the predictions over ``dataset``'s ids."""
        source = self.source
        if isinstance(source, (str, Path)):
            table = read_scores(source, dataset, self.spec)
        elif isinstance(source, np.ndarray):
            table = dense_table(source, dataset, self.spec)
            table.source_sha256 = hashlib.sha256(np.ascontiguousarray(source).tobytes()).hexdigest()
        else:
            table = scores_from_frame(source, dataset, self.spec, source_format="a data frame")
        return TableScorer(table, dataset.num_entities, dataset.num_relations, self.name, self.spec.require_complete)


def from_scores(source, *, score_column: Optional[str] = None, id_columns: Optional[Sequence[str]] = None,
                drugs: Optional[Sequence[str]] = None, diseases: Optional[Sequence[str]] = None,
                drop_unknown: bool = False, require_complete: bool = False, name: str = "score table") -> ScoresModel:
    """Any model's predictions as a model :func:`openbench.evaluate` takes: a polars or pandas
    DataFrame (head, relation, tail or drug, disease columns and a score), a dense numpy matrix
    (``drugs`` × ``diseases``: their labels in the matrix's order) or a path (Parquet, a Spark
    folder, CSV/TSV, .npy). Unlisted candidates rank below every scored one, tied (see
    :mod:`openbench.models.tables`)."""
    spec = TableSpec(score_column, list(id_columns) if id_columns else None, list(drugs) if drugs else None,
                     list(diseases) if diseases else None, drop_unknown, require_complete)
    return ScoresModel(source, spec, name)
