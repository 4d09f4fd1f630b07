"""PharmKG-8k: ``train.tsv``, ``valid.tsv``, ``test.tsv``, headerless (``head, relation, tail``;
entities are lower-cased names with spaces, no types: every node is an ``entity``).

The published split is kept as published (``evaluate --dataset pharmkg8k`` reads it); its
problems are counted, not fixed: repeated lines within a file (the evaluator counts a repeated
test triple once, with a warning), triples in both test and valid (501 in the real files), test
triples whose reverse is in valid (1,464), self-loops, and evaluation triples naming an entity
training lacks. The graph for ``split rand`` is the three files together, each triple once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import polars as pl

from openbench._io.inputs import read_table
from openbench.datasets.published.native.graph import NativeGraph

__all__ = ["FILES", "read_pharmkg8k"]

FILES = {"train": "train.tsv", "valid": "valid.tsv", "test": "test.tsv"}


def _overlaps(splits: Dict[str, pl.DataFrame]) -> Dict[str, int]:
    test, valid, train = (splits[name].unique() for name in ("test", "valid", "train"))
    reversed_valid = valid.select(pl.col("t").alias("h"), "r", pl.col("h").alias("t"))
    seen = pl.concat([train["h"], train["t"]]).unique().implode()
    problems = {f"repeated_lines_{name}": frame.height - frame.unique().height for name, frame in splits.items()}
    problems.update({
        "triples_in_test_and_valid": test.join(valid, on=["h", "r", "t"], how="semi").height,
        "test_triples_reversed_in_valid": test.join(reversed_valid, on=["h", "r", "t"], how="semi").height,
        "triples_in_train_and_test": test.join(train, on=["h", "r", "t"], how="semi").height,
        "test_triples_with_entities_unseen_in_train": test.filter(~pl.col("h").is_in(seen)
                                                                  | ~pl.col("t").is_in(seen)).height})
    problems.update({f"self_loops_{name}": frame.filter(pl.col("h") == pl.col("t")).height
                     for name, frame in splits.items()})
    return problems


def read_pharmkg8k(folder: Path) -> NativeGraph:
    splits = {name: read_table(folder / file, {0: "h", 1: "r", 2: "t"}, header=False, width=3,
                               required=("h", "r", "t"), comment_prefixes=())
              for name, file in FILES.items()}
    edges = pl.concat([splits[name] for name in ("train", "valid", "test")])
    nodes = (pl.concat([edges.select(pl.col("h").alias("id")), edges.select(pl.col("t").alias("id"))])
             .unique("id", keep="first", maintain_order=True).with_columns(pl.lit("entity").alias("node_type")))
    return NativeGraph(nodes=nodes, edges=edges, undirected=frozenset(),
                       id_scheme="the normalised, lower-cased names PharmKG-8k writes (no node types)",
                       counts={**{name: frame.height for name, frame in splits.items()},
                               "relations": int(edges.get_column("r").n_unique())},
                       problems=_overlaps(splits), official={name: folder / file for name, file in FILES.items()},
                       evaluation="split",
                       notes=["the published split is kept as published; its overlaps are counted, not removed"])
