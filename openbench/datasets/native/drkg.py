"""DRKG: ``drkg.tsv``, headerless (``head, relation, tail``; a loader that infers a header loses the
first triple, gnn4dr/DRKG#29).

Entities are ``Type::id`` (type before the first ``::``; ids may hold spaces, ``Disease::SARS-CoV2
E``); an entity with an empty id (``Gene::``, gnn4dr/DRKG#32) is refused and its rows counted,
not kept as a node. Relations are ``SOURCE::name::Head:Tail``, four ``bioarx`` ones with a single
``::`` (``bioarx::DrugHumGen:Compound:Gene``); both forms end in ``Head:Tail``, which is checked
against the endpoint types (a mismatch is counted and warned about). The 3 exact duplicate rows
are dropped; self-loops are kept and counted.
"""
from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from openbench._io.inputs import line_of_row, read_table
from openbench.datasets.native.graph import NativeGraph, first_bad_row
from openbench.errors import InputError

__all__ = ["FILE", "read_drkg"]

logger = logging.getLogger(__name__)
FILE = "drkg.tsv"


def _type(column: str) -> pl.Expr:
    return pl.col(column).str.split_exact("::", 1).struct.field("field_0")


def _identifier(column: str) -> pl.Expr:
    return pl.col(column).str.split_exact("::", 1).struct.field("field_1").fill_null("")


def read_drkg(folder: Path) -> NativeGraph:
    path = folder / FILE
    rows = read_table(path, {0: "h", 1: "r", 2: "t"}, header=False, width=3, required=("h", "r", "t"),
                      comment_prefixes=())
    row = first_bad_row(rows, ~pl.col("h").str.contains("::", literal=True) | ~pl.col("t").str.contains("::", literal=True))
    if row is not None:
        raise InputError(f"entities {rows['h'][row]!r} and {rows['t'][row]!r}: expected 'Type::id' on both sides",
                         path, line_of_row(path, row))
    suffix = pl.col("r").str.extract(r"::(?:[^:]+:)?([^:]+):([^:]+)$", 1)
    row = first_bad_row(rows, ~pl.col("r").str.contains(r"^[^:]+::.*[^:]:[^:]+$") | suffix.is_null())
    if row is not None:
        raise InputError(f"relation {rows['r'][row]!r}: expected 'SOURCE::name::Head:Tail' (or bioarx's "
                         "'SOURCE::name:Head:Tail')", path, line_of_row(path, row))
    empty = (_identifier("h").str.strip_chars() == "") | (_identifier("t").str.strip_chars() == "")
    refused = rows.filter(empty).height
    if refused:
        logger.warning("%s: %d row(s) with an empty entity id (e.g. 'Gene::') refused", path.name, refused)
    edges = rows.filter(~empty)
    head_type = pl.col("r").str.extract(r":([^:]+):[^:]+$", 1)
    tail_type = pl.col("r").str.extract(r":([^:]+)$", 1)
    mismatched = edges.filter((head_type != _type("h")) | (tail_type != _type("t"))).height
    if mismatched:
        logger.warning("%s: %d edge(s) whose relation's Head:Tail types differ from their entities' types",
                       path.name, mismatched)
    nodes = (pl.concat([edges.select(pl.col("h").alias("id")), edges.select(pl.col("t").alias("id"))])
             .unique("id", keep="first", maintain_order=True).with_columns(_type("id").alias("node_type")))
    return NativeGraph(nodes=nodes, edges=edges, undirected=frozenset(),
                       id_scheme="Type::id, as DRKG writes it (type before the first '::'; ids may hold spaces)",
                       counts={"rows": rows.height, "relations": int(rows.get_column("r").n_unique())},
                       problems={"rows_with_empty_ids_refused": refused, "relation_type_mismatches": mismatched},
                       notes=["headerless: the first line is a triple"])
