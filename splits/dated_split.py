"""A split by the edges' own dates: train on what was known at a cut-off, test on what was found after.

A random split asks whether a model recovers edges hidden from a graph it was built with; the
question people who look for treatments ask is whether it predicts what was **found later**.
Every Cure dates edges by their first PubTator co-mention and splits before and after a year;
time-resolved evaluation on SemMedDB dropped cross-validation's AUROC from 0.95 to 0.80 (Mayers et
al., 2019). :func:`dated_split` reads a plain triples file with a date per edge (a ``date`` column,
``--date-column`` names another, or a fourth field) and writes:

* **training**: every edge dated on or before the cut-off (or the validation cut-off, where one is
  given), and every undated edge (counted: their time is unknown, so they are treated as known);
* **validation** (``valid_cutoff``): the edges dated after the validation cut-off and on or before
  the cut-off;
* **test**: the edges dated after the cut-off;

negatives for each as the time split draws them (none may equal a positive of any date), and the
same leakage removal as every split (reverse, inverse, duplicate-relation and super-property copies
of an evaluation edge in training, :func:`splits.random_split.write_fold`). Entities first seen
after the cut-off are counted; the evaluation rows that reach them are removed as the time split
removes new nodes (an inductive evaluation keeps them: ``openbench split inductive``). Dates are
``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``, one form per file (a month or a year is its first day);
an unparseable date, mixed forms or a cut-off outside the data end in one line naming the file and
line. ``split_info.json`` records the cut-offs and the counts; ``test_dates.tsv`` the test edges'
dates, which ``openbench evaluate --by-period`` groups by.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Dict, Optional, Sequence

import polars as pl

from graphgen.graph_files import SPLIT_COLUMNS, check_nodes_known, no_edges, nodes_of_edges, read_any_edges, \
    read_any_nodes
from openbench._io import check_output_folder, replace_folder
from openbench._io.dates import DATE_FORMS, parse_date, parse_dates
from openbench._io.triples import read_dated_triples
from openbench.errors import InputError, UsageError
from splits.leakage import categorical_ids
from splits.negatives import sample_negatives
from splits.random_split import KEY, SplitSet, remove_inconsistent, write_fold

__all__ = ["DATE_FORMS", "parse_date", "parse_dates", "dated_split", "TEST_DATES"]

TEST_DATES = "test_dates.tsv"


def _edges(frame: pl.DataFrame, dates: pl.Series) -> pl.DataFrame:
    """Split rows (positives) with their dates; an edge listed twice keeps its earliest date."""
    rows = frame.select(pl.col("h").cast(pl.Categorical).alias("id1"), pl.col("r").alias("relation"),
                        pl.col("t").cast(pl.Categorical).alias("id2"), pl.lit("").alias("qscore"),
                        pl.lit("1").alias("value"), pl.lit("").alias("source")).with_columns(dates)
    return rows.sort("date", nulls_last=True, maintain_order=True).unique(KEY, keep="first", maintain_order=True)


def _nodes(tn_path, nodes_path, positives: pl.DataFrame, edges_path, true_negatives: pl.DataFrame) -> pl.DataFrame:
    if nodes_path is not None:
        nodes = read_any_nodes(nodes_path, plain=True)
    else:
        found = [(positives, Path(edges_path))] + ([(true_negatives, Path(tn_path))] if tn_path is not None else [])
        nodes = nodes_of_edges(found, plain=True)
    check_nodes_known(positives, nodes, edges_path, nodes_path)
    return nodes


def dated_split(edges_path, output, *, cutoff, valid_cutoff=None, date_column: str = "date", tn_path=None,
                nodes_path=None, seed: int = 42, directed: bool = True, neg_train_val: bool = True,
                neg_test: bool = True, neg_ratio: float = 1.0, seen_nodes: str = "positives",
                eval_negatives: int = 0, typed_negatives: bool = False) -> dict:
    """Split the dated triples at ``edges_path`` at ``cutoff`` (see the module docstring) into
    ``output`` (replaced atomically); returns the split info."""
    inputs: Sequence[Path] = [Path(p) for p in (edges_path, tn_path, nodes_path) if p is not None]
    check_output_folder(output, inputs)
    cut = parse_date(cutoff) if not isinstance(cutoff, datetime.date) else cutoff
    valid_cut = None if valid_cutoff is None else (
        parse_date(valid_cutoff, "--valid-cutoff") if not isinstance(valid_cutoff, datetime.date) else valid_cutoff)
    frame, first_line = read_dated_triples(edges_path, date_column)
    dates, form = parse_dates(frame.get_column("date"), edges_path, first_line)
    positives = _edges(frame, dates)
    dated = positives.filter(pl.col("date").is_not_null())
    if not dated.height:
        raise InputError(f"no edge has a date (column {date_column!r} empty): nothing to split by time", edges_path)
    earliest, latest = dated.get_column("date").min(), dated.get_column("date").max()
    if cut < earliest or cut >= latest:
        raise InputError(f"--cutoff {cut.isoformat()} lies outside the edges' dates ({earliest} to {latest}): "
                         "training or test would be empty", edges_path)
    if valid_cut is not None and not earliest <= valid_cut < cut:
        raise UsageError(f"--valid-cutoff {valid_cut.isoformat()}: expected a date from {earliest} and before "
                         f"--cutoff {cut.isoformat()} (validation lies between the two)")
    true_negatives = read_any_edges(tn_path, "0") if tn_path is not None else no_edges()
    nodes = _nodes(tn_path, nodes_path, positives, edges_path, true_negatives)
    training_end = valid_cut or cut
    date = pl.col("date")
    parts = {"train": positives.filter(date.is_null() | (date <= training_end)),
             "val": positives.filter((date > training_end) & (date <= cut)) if valid_cut is not None else None,
             "test": positives.filter(date > cut)}
    known = categorical_ids(positives.select(SPLIT_COLUMNS))
    true_negatives = categorical_ids(true_negatives)
    empty = categorical_ids(pl.DataFrame(schema={c: pl.String for c in SPLIT_COLUMNS}))
    stats: Dict[str, Dict[str, int]] = {}
    rows: Dict[str, Optional[pl.DataFrame]] = {}
    for offset, (name, part) in enumerate(parts.items()):
        if part is None:
            rows[name] = None
            continue
        wanted = neg_test if name == "test" else neg_train_val
        stats[name] = {}
        negatives = sample_negatives(categorical_ids(part.select(SPLIT_COLUMNS)), true_negatives, nodes, neg_ratio,
                                     seed + offset, known=known, stats=stats[name]) if wanted else empty
        rows[name] = remove_inconsistent(pl.concat([categorical_ids(part.select(SPLIT_COLUMNS)), negatives]))
    train_entities = pl.concat([parts["train"]["id1"].cast(pl.String), parts["train"]["id2"].cast(pl.String)])
    later = pl.concat([part[column].cast(pl.String) for name, part in parts.items() if name != "train"
                       and part is not None for column in ("id1", "id2")]).unique()
    new_entities = later.filter(~later.is_in(train_entities.unique().implode())).len() if len(later) else 0
    by_year = parts["test"].group_by(date.dt.year().alias("year")).len().sort("year")
    info: dict = {
        "parameters": {"cutoff": cut.isoformat(), "valid_cutoff": valid_cut.isoformat() if valid_cut else None,
                       "date_column": date_column, "date_form": form, "seed": seed, "directed": directed,
                       "neg_train_val": neg_train_val, "neg_test": neg_test, "neg_ratio": neg_ratio,
                       "seen_nodes": seen_nodes, "eval_negatives": eval_negatives, "typed_negatives": typed_negatives},
        "dated": {"cutoff": cut.isoformat(), "valid_cutoff": valid_cut.isoformat() if valid_cut else None,
                  "date_column": date_column, "earliest": earliest.isoformat(), "latest": latest.isoformat(),
                  "undated_edges_in_training": positives.filter(date.is_null()).height,
                  "edges_after_cutoff": parts["test"].height,
                  "entities_first_seen_after_training": int(new_entities),
                  "test_edges_by_year": {str(year): count for year, count in by_year.iter_rows()},
                  "entities_after_cutoff": "removed with their rows from evaluation (counted in test_cleaning."
                                           "unseen_nodes); openbench split inductive keeps such entities"},
        "input": {"positives": positives.height, "new_positives": parts["test"].height,
                  "after_inconsistent": sum(frame.height for frame in rows.values() if frame is not None),
                  "true_negatives": true_negatives.height},
        "negatives": stats}

    def fill(staging: Path) -> None:
        test = rows["test"]
        assert test is not None and rows["train"] is not None
        info["split"] = write_fold(staging, rows["train"], rows["val"], SplitSet(test, pl.Series("id", [], pl.String)),
                                   directed, neg_train_val, neg_test, nodes, seen_nodes, eval_negatives,
                                   typed_negatives, seed)
        parts["test"].select(pl.col("id1").cast(pl.String).alias("head"), "relation",
                             pl.col("id2").cast(pl.String).alias("tail"),
                             date.dt.to_string("%Y-%m-%d")).sort(["head", "relation", "tail"]).write_csv(
            staging / TEST_DATES, separator="\t", include_header=True)
        (staging / "split_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    replace_folder(output, fill, inputs=inputs, kind="split")
    return info
