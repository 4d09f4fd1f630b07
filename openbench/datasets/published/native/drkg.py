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
from openbench.datasets.published.native.graph import NativeGraph, first_bad_row
from openbench.errors import InputError

__all__ = ["FILE", "read_drkg"]

logger = logging.getLogger(__name__)
FILE = "drkg.tsv"


def _type(column: str) -> pl.Expr:
    return pl.col(column).str.split_exact("::", 1).struct.field("field_0")


def _identifier(column: str) -> pl.Expr:
    return pl.col(column).str.split_exact("::", 1).struct.field("field_1").fill_null("")


def read_drkg(folder: Path) -> NativeGraph:
    """The checks run on the distinct entities (97 k) and relations (107), not on the 5.9 M rows."""
    path = folder / FILE
    rows = read_table(path, {0: "h", 1: "r", 2: "t"}, header=False, width=3, required=("h", "r", "t"),
                      comment_prefixes=())
    entities = pl.concat([rows.get_column("h"), rows.get_column("t")]).unique(maintain_order=True).to_frame("id")
    untyped = entities.filter(~pl.col("id").str.contains("::", literal=True)).get_column("id").implode()
    row = first_bad_row(rows, pl.col("h").is_in(untyped) | pl.col("t").is_in(untyped))
    if row is not None:
        raise InputError(f"entities {rows['h'][row]!r} and {rows['t'][row]!r}: expected 'Type::id' on both sides",
                         path, line_of_row(path, row))
    relations = rows.get_column("r").unique(maintain_order=True).to_frame("r")
    malformed = relations.filter(~pl.col("r").str.contains(r"^[^:]+::.*[^:]:[^:]+$")
                                 | pl.col("r").str.extract(r"::(?:[^:]+:)?([^:]+):([^:]+)$", 1).is_null())
    row = first_bad_row(rows, pl.col("r").is_in(malformed.get_column("r").implode()))
    if row is not None:
        raise InputError(f"relation {rows['r'][row]!r}: expected 'SOURCE::name::Head:Tail' (or bioarx's "
                         "'SOURCE::name:Head:Tail')", path, line_of_row(path, row))
    entities = entities.with_columns(_type("id").alias("node_type"),
                                     (_identifier("id").str.strip_chars() == "").alias("empty"))
    empty_ids = entities.filter(pl.col("empty")).get_column("id").implode()
    empty = pl.col("h").is_in(empty_ids) | pl.col("t").is_in(empty_ids)
    refused = rows.filter(empty).height
    if refused:
        logger.warning("%s: %d row(s) with an empty entity id (e.g. 'Gene::') refused", path.name, refused)
    edges = rows.filter(~empty)
    signatures = relations.with_columns(pl.col("r").str.extract(r":([^:]+):[^:]+$", 1).alias("head_type"),
                                        pl.col("r").str.extract(r":([^:]+)$", 1).alias("tail_type"))
    types = entities.select("id", "node_type")
    mismatched = (edges.join(types.rename({"id": "h", "node_type": "h_type"}), on="h")
                  .join(types.rename({"id": "t", "node_type": "t_type"}), on="t").join(signatures, on="r")
                  .filter((pl.col("head_type") != pl.col("h_type")) | (pl.col("tail_type") != pl.col("t_type"))).height)
    if mismatched:
        logger.warning("%s: %d edge(s) whose relation's Head:Tail types differ from their entities' types",
                       path.name, mismatched)
    nodes = entities.filter(~pl.col("empty")).select("id", "node_type")
    if refused:  # an entity met only beside an empty id is no node of the kept edges
        kept = pl.concat([edges.get_column("h"), edges.get_column("t")]).unique().implode()
        nodes = nodes.filter(pl.col("id").is_in(kept))
    return NativeGraph(nodes=nodes, edges=edges, undirected=frozenset(),
                       id_scheme="Type::id, as DRKG writes it (type before the first '::'; ids may hold spaces)",
                       counts={"rows": rows.height, "relations": relations.height},
                       problems={"rows_with_empty_ids_refused": refused, "relation_type_mismatches": mismatched},
                       notes=["headerless: the first line is a triple"])
