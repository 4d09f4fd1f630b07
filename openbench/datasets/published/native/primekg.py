"""PrimeKG: ``kg.csv`` (comma-separated, quoted fields; ``relation, display_relation, x_index,
x_id, x_type, x_name, x_source, y_index, y_id, y_type, y_name, y_source``).

A node is ``x_type::x_source::x_id`` (ids are source-native and repeat across sources and types;
names collide, which is why a name-keyed loader merges nodes). PrimeKG's build adds every edge a
second time with x and y swapped under the same relation (8,100,498 rows for 4,050,249
relationships, mims-harvard/PrimeKG#14), so every relation is read as undirected: the swapped copy
collapses into the first-read orientation (the build's original one, written first) and a random
split can no longer put one copy in training and the other in test. The 370 exact duplicate rows
are dropped. Both counts are reported.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl

from openbench._io.inputs import read_table
from openbench.datasets.published.native.graph import NativeGraph

__all__ = ["FILE", "COLUMNS", "read_primekg"]

FILE = "kg.csv"
COLUMNS = ["relation", "display_relation", "x_index", "x_id", "x_type", "x_name", "x_source", "y_index", "y_id",
           "y_type", "y_name", "y_source"]
_KEY = ["relation", "x_id", "x_type", "x_source", "y_id", "y_type", "y_source"]


def _node_id(side: str) -> pl.Expr:
    return pl.concat_str([pl.col(f"{side}_type"), pl.col(f"{side}_source"), pl.col(f"{side}_id")], separator="::")


def read_primekg(folder: Path) -> NativeGraph:
    path = folder / FILE
    rows = read_table(path, {name: name for name in COLUMNS}, separator=",", quote_char='"', required=_KEY,
                      comment_prefixes=())
    edges = rows.select(_node_id("x").alias("h"), pl.col("relation").alias("r"), _node_id("y").alias("t"))
    ends = pl.concat([rows.select(_node_id(side).alias("id"), pl.col(f"{side}_type").alias("node_type"),
                                  pl.col(f"{side}_name").fill_null("").alias("name")) for side in ("x", "y")])
    nodes = ends.unique("id", keep="first", maintain_order=True)
    relations = set(edges.get_column("r").unique().to_list())
    return NativeGraph(nodes=nodes.select("id", "node_type"), edges=edges, undirected=frozenset(relations),
                       id_scheme="x_type::x_source::x_id (the source-native id, qualified by node type and source)",
                       counts={"rows": rows.height, "nodes": nodes.height}, names=nodes.select("id", "name"),
                       notes=["every edge is stored twice with x and y swapped: read as undirected, one edge each"])
