"""The random split: negatives, inconsistent triples, test/validation carving, leakage removal, files.

Follows OpenBioLink's ``random_edge_split`` (spec §3) with its bugs fixed: negatives are drawn
independently per meta-edge (``splits.negatives``), hierarchy leakage is removed in both
directions and orientations, cross-validation folds are each filtered against their own training
set (OpenBioLink filtered the test set cumulatively), and the output order is deterministic.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from openbench._io import check_output_folder, replace_folder
from openbench.errors import InputError
from graphgen.graph_files import SPLIT_COLUMNS
from splits.leakage import (categorical_ids, drop_hierarchy_leakage, drop_pattern_leakage, drop_reverse_edges,
                            relation_patterns, drop_unseen_nodes,
                            drop_unseen_relations)
from openbench.datasets.layouts import NEGATIVE_FILES, write_negatives
from splits.eval_negatives import draw_eval_negatives
from splits.negatives import sample_negatives

__all__ = ["KEY", "SplitSet", "remove_inconsistent", "clean_evaluation", "distinct_edges", "random_split",
           "write_fold", "write_sets", "per_relation_counts", "in_file_order"]

logger = logging.getLogger(__name__)
KEY = ["id1", "relation", "id2"]


@dataclass
class SplitSet:
    """One evaluation set after post-processing, with what each step removed."""

    rows: pl.DataFrame
    removed_nodes: pl.Series
    removed: Dict[str, int] = field(default_factory=dict)


SINGLE_KEY_LIMIT = 2 ** 62  # relations × entities² × values below it: the sort key fits one int64


def _lexical_ranks(frame: pl.DataFrame, columns: Sequence[str]) -> Tuple[list, int]:
    """([(N,) int64 per column], size): each value's rank among the columns' distinct values in
    text order, one scale shared by ``columns``. Ranks the few distinct labels instead of comparing
    text row by row (a categorical code's order depends on what the process saw first)."""
    values = pl.concat([frame.get_column(c).cast(pl.Categorical) for c in columns]).unique()
    table = pl.DataFrame({"code": values.to_physical(), "text": values.cast(pl.String)}).sort("text")
    lookup = np.zeros(int(table.get_column("code").max()) + 1, dtype=np.int64)  # type: ignore[arg-type]
    lookup[table.get_column("code").to_numpy()] = np.arange(table.height)
    return [lookup[frame.get_column(c).cast(pl.Categorical).to_physical().to_numpy()] for c in columns], table.height


def in_file_order(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in the text order of (relation, id1, id2, value): the files' row order."""
    if frame.height < 2:
        return frame
    (relation,), relations = _lexical_ranks(frame, ["relation"])
    (head, tail), entities = _lexical_ranks(frame, ["id1", "id2"])
    (value,), values = _lexical_ranks(frame, ["value"])
    if relations * entities * entities * values < SINGLE_KEY_LIMIT:  # one int64 key, one sort
        key = pl.Series(((relation * entities + head) * entities + tail) * values + value)
        order = pl.DataFrame({"key": key}).with_row_index().sort("key").get_column("index")
    else:
        order = (pl.DataFrame({"r": relation, "h": head, "t": tail, "v": value}).with_row_index()
                 .sort(["r", "h", "t", "v"]).get_column("index"))
    return frame[order]


def _row_codes(rows: pl.DataFrame) -> pl.DataFrame:
    """(N, 4) integer codes of (id1, relation, id2, value): equal exactly where the text is equal
    (categorical codes of one string cache), so that uniqueness and joins compare integers."""
    return rows.select(*(pl.col(c).cast(pl.Categorical).to_physical() for c in KEY),
                       (pl.col("value") == "1").alias("positive"))


def remove_inconsistent(rows: pl.DataFrame) -> pl.DataFrame:
    """Drop repeated rows (the first kept), and every row whose (id1, relation, id2) occurs with
    both values; the rest in their order."""
    codes = _row_codes(rows).with_row_index("_row")
    first = codes.unique(KEY + ["positive"], keep="first", maintain_order=True)
    both = (first.filter(pl.col("positive")).select(KEY)
            .join(first.filter(~pl.col("positive")).select(KEY), on=KEY, how="semi"))
    if both.height:
        first = first.join(both, on=KEY, how="anti", maintain_order="left")
    if first.height == rows.height:
        return rows
    return rows[first.get_column("_row")]


def clean_evaluation(evaluation: pl.DataFrame, training: pl.DataFrame, directed: bool,
                     seen_rule: str = "positives", patterns: Optional[dict] = None,
                     leakage_removed: bool = False) -> SplitSet:
    """Hierarchy, reverse and relation-pattern leakage against ``training`` (``patterns``: those
    :func:`splits.leakage.relation_patterns` finds in it, computed when None), then nodes unseen
    in training (:func:`splits.leakage.drop_unseen_nodes`'s ``seen_rule``). Removing evaluation
    rows changes nothing in training, so one pass leaves every kept node seen.

    :param leakage_removed: the rows were cleaned of the three leakages, under the same
        ``patterns``, against a superset of ``training``: each leakage step is a join that finds
        fewer rows in a smaller training set, so only the unseen steps run (their counts 0).
    """
    removed = {}
    if leakage_removed:
        removed.update({"hierarchy_leakage": 0, **({"reverse_edges": 0} if directed else {}), "relation_patterns": 0})
    else:
        evaluation, dropped = drop_hierarchy_leakage(evaluation, training)
        removed["hierarchy_leakage"] = dropped.height
        if directed:
            evaluation, dropped = drop_reverse_edges(evaluation, training)
            removed["reverse_edges"] = dropped.height
        patterns = relation_patterns(training) if patterns is None else patterns
        evaluation, dropped = drop_pattern_leakage(evaluation, training, patterns, directed)
        removed["relation_patterns"] = dropped.height
    before = evaluation.height
    evaluation, unseen = drop_unseen_nodes(evaluation, training, seen_rule)
    removed["unseen_nodes"] = before - evaluation.height
    evaluation, removed["unseen_relations"] = drop_unseen_relations(evaluation, training, seen_rule)
    return SplitSet(evaluation, unseen, removed)


def _carve(rows: pl.DataFrame, fraction: float, rng: np.random.Generator):
    """(rest, carved): a seeded ``fraction`` of the rows carved out, both in their original order."""
    order = rng.permutation(rows.height)
    carved = np.zeros(rows.height, dtype=bool)
    carved[order[:int(rows.height * fraction)]] = True  # a mask keeps the order without sorting the rows' indices
    return rows.filter(pl.Series(~carved)), rows.filter(pl.Series(carved))


def distinct_edges(edges: pl.DataFrame, what: str) -> Tuple[pl.DataFrame, int]:
    """The first row of each (id1, relation, id2); a repeated edge would be sampled against twice.
    Returns the frame and how many repeats were removed (logged as a warning)."""
    repeats = edges.height - edges.select(KEY).n_unique()
    if not repeats:  # the frame itself: its columns shared, not copied (the caller holds it too)
        return edges, 0
    logger.warning("removed %d repeated %s (an edge counts once)", repeats, what)
    return edges.unique(KEY, keep="first", maintain_order=True), repeats


def random_split(positives: pl.DataFrame, true_negatives: pl.DataFrame, nodes: pl.DataFrame, output, *,
                 test_frac: float = 0.05, val: float = 0.05, crossval: bool = False, seed: int = 42,
                 directed: bool = True, neg_train_val: bool = True, neg_test: bool = True,
                 neg_ratio: float = 1.0, inputs: Sequence = (), seen_nodes: str = "positives",
                 eval_negatives: int = 0, typed_negatives: bool = False, provenance: Optional[dict] = None) -> dict:
    """Split and write the files into ``output`` (replaced atomically); returns the split info.

    :param provenance: recorded at the top of the split info (a published graph's ``dataset``:
        release, checksums, what its reader fixed).

    :param seen_nodes: ``"positives"`` (default): every node of a validation or test row occurs
        in a training positive of its fold, so a model trained on the positives, and the
        evaluator's default maps, know it; ``"any"``: OpenBioLink's rule (any training row).

    :param inputs: the files the graph was read from: ``output`` may not be, hold or lie in one
        (checked before any work, see :func:`openbench._io.check_output_folder`).
    """
    check_output_folder(output, inputs)
    if not 0 < test_frac < 1:
        raise InputError(f"--test-frac must lie in (0, 1), got {test_frac}")
    if not 0 <= val < 1:
        raise InputError(f"--val must lie in [0, 1), got {val}")
    if crossval and val == 0:
        raise InputError("--crossval needs 0 < --val < 1 (the folds are ceil(1 / val))")
    rng = np.random.default_rng(seed)
    positives, repeated_positives = distinct_edges(categorical_ids(positives), "positive edge(s)")
    true_negatives, repeated_negatives = distinct_edges(categorical_ids(true_negatives), "true-negative edge(s)")
    if positives.height == 0:
        raise InputError("the graph has no positive edges: nothing to split", inputs[0] if inputs else None)
    negative_stats: Dict[str, int] = {}
    negatives = (sample_negatives(positives, true_negatives, nodes, neg_ratio, seed, stats=negative_stats)
                 if (neg_train_val or neg_test) else categorical_ids(pl.DataFrame(schema={c: pl.String
                                                                                    for c in SPLIT_COLUMNS})))
    rows = remove_inconsistent(pl.concat([positives.select(SPLIT_COLUMNS), negatives.select(SPLIT_COLUMNS)]))
    sampled, samples = negatives.height, rows.height
    counted = {"positives": positives.height, "true_negatives": true_negatives.height}
    # peak memory matters at HQ scale: what the carved sets hold again is let go as soon as it is
    # carved (rows, into train_val and test; train_val, into train and validation, in fill)
    del negatives, positives, true_negatives
    train_val, test = _carve(rows, test_frac, rng)
    del rows
    patterns = relation_patterns(train_val)  # what the audit finds in training: recorded, and cleaned for
    test = clean_evaluation(test, train_val, directed, seen_nodes, patterns)
    info = {"parameters": {"test_frac": test_frac, "val": val, "crossval": crossval, "seed": seed,
                           "directed": directed, "neg_train_val": neg_train_val, "neg_test": neg_test,
                           "neg_ratio": neg_ratio, "seen_nodes": seen_nodes, "eval_negatives": eval_negatives,
                           "typed_negatives": typed_negatives},
            "input": {**counted,
                      "repeated_positives": repeated_positives, "repeated_true_negatives": repeated_negatives,
                      "true_negatives_contradicting_a_positive": negative_stats.get("true_negatives_dropped", 0),
                      "negatives_sampled": sampled, "after_inconsistent": samples},
            # the audit's relation patterns (threshold 0.8) in train + validation: evaluation rows
            # training holds again through them are removed (test_cleaning.relation_patterns)
            "relation_patterns": patterns, **(provenance or {})}

    def fill(staging: Path) -> None:
        nonlocal train_val
        if crossval:
            n_folds = math.ceil(1 / val)
            order = rng.permutation(train_val.height)
            chunks = np.array_split(order, n_folds)
            # as OpenBioLink: the whole train+validation set and the test set at the top, folds below
            info["split"] = write_fold(staging, train_val, None, test, directed, neg_train_val, neg_test, nodes,
                                       seen_nodes, eval_negatives, typed_negatives, seed, patterns)
            info["folds"] = []
            for i in range(n_folds):
                held_out = (n_folds - 1 + i) % n_folds
                val_rows = np.sort(chunks[held_out])
                train_rows = np.sort(np.concatenate([c for j, c in enumerate(chunks) if j != held_out]))
                info["folds"].append(write_fold(staging / f"fold_{i}", train_val[train_rows], train_val[val_rows],
                                                test, directed, neg_train_val, neg_test, nodes, seen_nodes,
                                                eval_negatives, typed_negatives, seed, patterns))
        elif val > 0:
            train, validation = _carve(train_val, val, rng)
            train_val = None  # train and validation hold it now
            info["split"] = write_fold(staging, train, validation, test, directed, neg_train_val, neg_test, nodes,
                                       seen_nodes, eval_negatives, typed_negatives, seed, patterns)
        else:
            info["split"] = write_fold(staging, train_val, None, test, directed, neg_train_val, neg_test, nodes,
                                       seen_nodes, eval_negatives, typed_negatives, seed, patterns)
        (staging / "split_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    replace_folder(output, fill, inputs=inputs, kind="split")
    return info


def write_fold(folder: Path, train: pl.DataFrame, validation: Optional[pl.DataFrame], test: SplitSet,
               directed: bool, neg_train_val: bool, neg_test: bool, nodes: pl.DataFrame,
               seen_nodes: str = "positives", eval_negatives: int = 0, typed_negatives: bool = False,
               seed: int = 42, patterns: Optional[dict] = None) -> dict:
    """Clean the evaluation sets against this fold's training set and write the fold's files.

    ``patterns`` given (the random split): the relation patterns of all non-test rows, against
    which ``test`` was already cleaned of leakage; carving the validation set out of them can
    leave test nodes unseen, so only the unseen steps run on it again against ``train``, and the
    validation set is cleaned under the same patterns (one set of patterns per split, the one
    ``split_info.json`` records). None (the time split): the patterns of ``train``, and ``test``
    cleaned in full. ``test_cleaning`` reports what both passes removed, per step;
    ``val_cleaning`` the validation set's.
    With ``eval_negatives`` K, each evaluation set also gets K sampled negative heads and tails
    per triple (:mod:`splits.eval_negatives`) in ``valid_negatives.npz``/``test_negatives.npz``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    counts: Dict[str, object] = {}
    sets = {}
    test_settled = patterns is not None
    patterns = relation_patterns(train) if patterns is None else patterns
    if validation is not None:
        cleaned_val = clean_evaluation(validation, train, directed, seen_nodes, patterns)
        sets["val"] = cleaned_val
        counts["val_cleaning"] = cleaned_val.removed
    # against this fold's own training set
    cleaned_test = clean_evaluation(test.rows, train, directed, seen_nodes, patterns, leakage_removed=test_settled)
    sets["test"] = cleaned_test
    counts["test_cleaning"] = {step: test.removed.get(step, 0) + removed for step, removed in
                               cleaned_test.removed.items()}
    groups = {"train": train, **{name: s.rows for name, s in sets.items()}}
    counts.update(write_sets(folder, groups, nodes, neg_train_val, neg_test, validation is not None))
    for name, cleaned in sets.items():
        (folder / f"removed_{name}_nodes.csv").write_text("\n".join(cleaned.removed_nodes.to_list()), encoding="utf-8")
    if eval_negatives:
        positives = {name: in_file_order(frame.filter(pl.col("value") == "1")) for name, frame in groups.items()}
        known = pl.concat([frame.select("id1", "relation", "id2") for frame in positives.values()])
        for name in sets:
            split = "valid" if name == "val" else "test"
            triples, head, tail = draw_eval_negatives(positives[name], known, positives["train"], nodes, eval_negatives,
                                                      typed_negatives, seed, split)
            write_negatives(folder / NEGATIVE_FILES[split], triples, head, tail)
            counts[f"{name}_negatives"] = {"per_side": eval_negatives, "typed": typed_negatives,
                                           "queries": int(triples.shape[0])}
    counts["per_relation"] = per_relation_counts(groups)
    return counts


def write_sets(folder: Path, groups: Dict[str, pl.DataFrame], nodes: pl.DataFrame, neg_train_val: bool,
               neg_test: bool, has_validation: bool) -> Dict[str, object]:
    """Write ``groups`` {"train", "val"?, "test": rows of the split layout} into ``folder``: each
    set's positives and (where asked) negatives, and the nodes each set touches (``train_val_nodes.csv``
    for training when there is no validation set, as OpenBioLink names it); returns the counts."""
    counts: Dict[str, object] = {}
    for name, frame in groups.items():
        with_negatives = neg_test if name == "test" else neg_train_val
        _write_rows(folder / f"{name}_sample.csv", frame.filter(pl.col("value") == "1"))
        if with_negatives:
            _write_rows(folder / f"negative_{name}_sample.csv", frame.filter(pl.col("value") == "0"))
        node_ids = pl.concat([frame["id1"], frame["id2"]]).cast(pl.String).implode()
        node_table = nodes.filter(pl.col("id").cast(pl.String).is_in(node_ids))
        node_file = "train_val_nodes.csv" if name == "train" and not has_validation else f"{name}_nodes.csv"
        node_table.sort(pl.col("id").cast(pl.String)).write_csv(folder / node_file, include_header=False,
                                                                separator="\t")
        counts[name] = {"positives": frame.filter(pl.col("value") == "1").height,
                        "negatives": frame.filter(pl.col("value") == "0").height}
    return counts


def per_relation_counts(groups: Dict[str, pl.DataFrame]) -> Dict[str, Dict[str, int]]:
    """{relation: {set name: positives}} of ``groups``, relations sorted."""
    per_relation: Dict[str, Dict[str, int]] = {}
    for name, frame in groups.items():
        for relation, count in frame.filter(pl.col("value") == "1").group_by("relation").len().iter_rows():
            per_relation.setdefault(relation, {})[name] = count
    return dict(sorted(per_relation.items()))


def _write_rows(path: Path, frame: pl.DataFrame) -> None:
    in_file_order(frame).select(SPLIT_COLUMNS).write_csv(path, include_header=False, separator="\t", quote_style="never",
                                                   null_value="")
