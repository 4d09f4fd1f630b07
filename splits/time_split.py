"""The time-slice split: train on the graph of time t-1, test on the edges that are new at t.

Follows OpenBioLink's ``time_slice_split`` (spec §3) with its bugs fixed: positives and
negatives go to separate files (OpenBioLink mixed them here), test negatives never equal a
positive of either graph (OpenBioLink checked only the new positives), new nodes are those of the
current node list absent from the t-1 one, and ``--val`` can carve a validation set from t-1.

The split counts the **strata** between the two snapshots, per relation: the edges added, the
persistent ones and those removed, and the entities that appeared and vanished (PrimeKG-CL reports
its metrics per stratum; OpenBioLink's time slice warns of vanishing edges). With
``removed_as_negatives`` the removed edges between entities present at t (retracted facts a model
should no longer rank high: hard negatives, once believed) are written as test negatives (source
``REMOVED``) and leave training, where they would be taught as true; triple classification reads
them as their own kind of negative, the repurposing task as known negatives.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Sequence

import numpy as np
import polars as pl

from openbench._io import check_output_folder, replace_folder
from openbench.errors import InputError
from graphgen.graph_files import SPLIT_COLUMNS
from splits.leakage import categorical_ids
from splits.negatives import sample_negatives
from splits.random_split import KEY, SplitSet, _carve, distinct_edges, remove_inconsistent, write_fold

__all__ = ["time_split", "snapshot_strata"]


def time_split(positives: pl.DataFrame, true_negatives: pl.DataFrame, nodes: pl.DataFrame,
               tmo_positives: pl.DataFrame, tmo_true_negatives: pl.DataFrame, tmo_nodes: pl.DataFrame, output, *,
               val: float = 0.0, seed: int = 42, directed: bool = True, neg_train_val: bool = True,
               neg_test: bool = True, neg_ratio: float = 1.0, inputs: Sequence = (),
               seen_nodes: str = "positives", eval_negatives: int = 0, typed_negatives: bool = False,
               removed_as_negatives: bool = False) -> dict:
    """Split and write into ``output`` (replaced atomically); returns the split info.

    :param inputs: the files the graphs were read from (see :func:`splits.random_split.random_split`).
    """
    check_output_folder(output, inputs)
    if not 0 <= val < 1:
        raise InputError(f"--val must lie in [0, 1), got {val}")
    rng = np.random.default_rng(seed)
    repeated = {}
    positives, repeated["positives"] = distinct_edges(categorical_ids(positives), "positive edge(s) at t")
    true_negatives, repeated["true_negatives"] = distinct_edges(categorical_ids(true_negatives),
                                                                "true-negative edge(s) at t")
    tmo_positives, repeated["tmo_positives"] = distinct_edges(categorical_ids(tmo_positives),
                                                              "positive edge(s) at t-1")
    tmo_true_negatives, repeated["tmo_true_negatives"] = distinct_edges(categorical_ids(tmo_true_negatives),
                                                                        "true-negative edge(s) at t-1")
    if tmo_positives.height == 0:
        raise InputError("the t-1 graph has no positive edges: nothing to train on", inputs[3] if len(inputs) > 3
                         else None)
    nodes = nodes.with_columns(pl.col("id").cast(pl.Categorical))
    tmo_nodes = tmo_nodes.with_columns(pl.col("id").cast(pl.Categorical))
    empty = categorical_ids(pl.DataFrame(schema={c: pl.String for c in SPLIT_COLUMNS}))
    # every negative avoids the positives of both versions: a triple that is a positive at t (a new
    # edge: a test positive) must not be taught to the model as a training negative
    stats: Dict[str, Dict[str, int]] = {"train_val": {}, "test": {}}
    train_negatives = (sample_negatives(tmo_positives, tmo_true_negatives, tmo_nodes, neg_ratio, seed,
                                        known=positives, stats=stats["train_val"]) if neg_train_val else empty)
    strata = snapshot_strata(positives, tmo_positives, nodes, tmo_nodes)
    retracted = _retracted(positives, tmo_positives, nodes) if removed_as_negatives else empty
    # a retracted fact is a test negative: it leaves training, where it would be taught as true
    trained = tmo_positives.select(SPLIT_COLUMNS).join(retracted.select(KEY), on=KEY, how="anti", maintain_order="left")
    train = remove_inconsistent(pl.concat([trained, train_negatives]))
    new_positives = positives.join(tmo_positives, on=KEY, how="anti", maintain_order="left").select(SPLIT_COLUMNS)
    vanished = pl.concat([tmo_positives.join(positives, on=KEY, how="anti", maintain_order="left"),
                          tmo_true_negatives.join(true_negatives, on=KEY, how="anti", maintain_order="left")])
    new_true_negatives = true_negatives.join(tmo_true_negatives, on=KEY, how="anti", maintain_order="left")
    test_negatives = sample_negatives(new_positives, new_true_negatives, nodes, neg_ratio, seed + 1,
                                      known=pl.concat([positives.select(SPLIT_COLUMNS),
                                                       tmo_positives.select(SPLIT_COLUMNS)]),
                                      stats=stats["test"]) if neg_test else empty
    test = remove_inconsistent(pl.concat([new_positives, test_negatives, retracted]))
    new_nodes = nodes.join(tmo_nodes, on="id", how="anti").get_column("id")
    touching_new = pl.col("id1").is_in(new_nodes.implode()) | pl.col("id2").is_in(new_nodes.implode())
    removed_new_node_rows = test.filter(touching_new).height
    test = test.filter(~touching_new)
    validation = None
    if val > 0:
        train, validation = _carve(train, val, rng)
    def fill(staging: Path) -> None:
        all_nodes = tmo_nodes.vstack(nodes.join(tmo_nodes, on="id", how="anti"))
        counts = write_fold(staging, train, validation, SplitSet(test, pl.Series("id", [], pl.String)), directed,
                            neg_train_val, neg_test, all_nodes, seen_nodes, eval_negatives, typed_negatives, seed)
        vanished.sort(KEY).select(SPLIT_COLUMNS[:4] + ["source"]).write_csv(
            staging / "vanished_edges.csv", include_header=False, separator="\t", quote_style="never", null_value="")
        info.update({"parameters": {"val": val, "seed": seed, "directed": directed, "neg_train_val": neg_train_val,
                                    "neg_test": neg_test, "neg_ratio": neg_ratio, "seen_nodes": seen_nodes,
                                    "eval_negatives": eval_negatives, "typed_negatives": typed_negatives,
                                    "removed_as_negatives": removed_as_negatives},
                     "strata": strata,
                     "input": {"positives": positives.height, "tmo_positives": tmo_positives.height,
                               "new_positives": new_positives.height, "vanished": vanished.height,
                               "new_nodes": new_nodes.len(), "test_rows_with_new_nodes": removed_new_node_rows,
                               "repeated": repeated, "removed_as_test_negatives": retracted.height},
                     # per negative file: random draws refused for hitting a positive of the other
                     # version, and true negatives dropped for contradicting one
                     "negatives": {"negative_train_sample.csv and negative_val_sample.csv": stats["train_val"],
                                   "negative_test_sample.csv": stats["test"]},
                     "split": counts})
        (staging / "split_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    info: dict = {}
    replace_folder(output, fill, inputs=inputs, kind="split")
    return info


def _retracted(positives: pl.DataFrame, tmo_positives: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """The positive edges of t-1 that t no longer holds, between entities t still lists, as
    negative rows (value 0, source ``REMOVED``)."""
    present = nodes.get_column("id").cast(pl.String).implode()
    retracted = (tmo_positives.join(positives, on=KEY, how="anti", maintain_order="left")
                 .filter(pl.col("id1").cast(pl.String).is_in(present) & pl.col("id2").cast(pl.String).is_in(present))
                 .select(SPLIT_COLUMNS).with_columns(pl.lit("0").alias("value"), pl.lit("REMOVED").alias("source")))
    return categorical_ids(retracted)


def snapshot_strata(positives: pl.DataFrame, tmo_positives: pl.DataFrame, nodes: pl.DataFrame,
                    tmo_nodes: pl.DataFrame) -> dict:
    """Per relation the positive edges added at t, persistent from t-1 and removed since, and the
    entities that appeared and vanished (the nodes listed at each time)."""
    def by_relation(frame: pl.DataFrame) -> Dict[str, int]:
        return {relation: count for relation, count in frame.group_by("relation").len().sort("relation").iter_rows()}

    added = positives.join(tmo_positives, on=KEY, how="anti")
    persistent = positives.join(tmo_positives, on=KEY, how="semi")
    removed = tmo_positives.join(positives, on=KEY, how="anti")
    counted = {"added": by_relation(added), "persistent": by_relation(persistent), "removed": by_relation(removed)}
    relations = sorted(set().union(*counted.values()))
    now, before = nodes.get_column("id").cast(pl.String), tmo_nodes.get_column("id").cast(pl.String)
    return {"per_relation": {relation: {name: counted[name].get(relation, 0) for name in counted}
                             for relation in relations},
            "edges": {"added": added.height, "persistent": persistent.height, "removed": removed.height},
            "entities": {"appeared": int((~now.is_in(before.implode())).sum()),
                         "vanished": int((~before.is_in(now.implode())).sum())}}
