"""openbench's graph of a published KG: what every native reader returns, and how it is written.

A reader returns a :class:`NativeGraph`: the node table (every node the publisher lists, isolated
ones included, with its type), the edges as read (file order), the relations whose two directions
are one fact, and counts of what it read and of what it fixed or refused. :func:`finish_edges`
applies the fixes every graph shares (exact duplicates dropped; the reverse copy of an edge of an
undirected relation collapsed into the first-read orientation), and :func:`write_graph` writes the
``graph_files`` layout the splitter reads (``edges.csv``, an empty ``TN_edges.csv``, ``nodes.csv``)
with ``graph_info.json`` naming the relations, node types, id scheme and every count.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

import polars as pl

from graphgen.graph_files import GRAPH_FORMAT, GRAPH_INFO
from openbench.errors import InputError

__all__ = ["NativeGraph", "finish_edges", "write_graph", "NODE_NAMES", "GRAPH_FILES", "first_bad_row"]

GRAPH_FILES = {"edges": "edges.csv", "true_negatives": "TN_edges.csv", "nodes": "nodes.csv"}
NODE_NAMES = "node_names.tsv"
SCHEMA_VERSION = 1


@dataclass
class NativeGraph:
    """A published graph as its reader found it.

    ``nodes``: String columns id, node_type (one row per node). ``edges``: String columns h, r, t
    in file order (before :func:`finish_edges`). ``counts``: what was read (rows, nodes, …), the
    numbers a registry entry's published counts are checked against. ``problems``: what the
    reader fixed or refused, by name (each a count). ``official``: the split files as published
    ({"train"/"valid"/"test": path of a 3-column TSV}) where the publisher has one.
    """

    nodes: pl.DataFrame
    edges: pl.DataFrame
    undirected: FrozenSet[str]
    id_scheme: str
    counts: Dict[str, int]
    problems: Dict[str, int] = field(default_factory=dict)
    names: Optional[pl.DataFrame] = None  # id, name
    official: Optional[Dict[str, Path]] = None
    evaluation: Optional[str] = None  # "split" (official split files) or "native" (an OGB folder)
    notes: List[str] = field(default_factory=list)


def first_bad_row(frame: pl.DataFrame, problem: pl.Expr) -> Optional[int]:
    """The 0-based index of the first row where ``problem`` holds, or None."""
    rows = frame.select(problem.arg_true()).to_series()
    return int(rows[0]) if len(rows) else None


def finish_edges(edges: pl.DataFrame, undirected: FrozenSet[str]) -> Tuple[pl.DataFrame, Dict[str, int]]:
    """(edges, counts): exact duplicate rows dropped (the first kept), then, for relations in
    ``undirected``, every (b, r, a) whose (a, r, b) came first collapsed into it; also counts the
    self-loops kept. Order: the file's, first occurrences."""
    unique = edges.unique(["h", "r", "t"], keep="first", maintain_order=True)
    duplicates = edges.height - unique.height
    is_undirected = pl.col("r").is_in(sorted(undirected))
    lo = pl.when(pl.col("h") <= pl.col("t")).then(pl.col("h")).otherwise(pl.col("t"))
    hi = pl.when(pl.col("h") <= pl.col("t")).then(pl.col("t")).otherwise(pl.col("h"))
    keyed = unique.with_columns(pl.when(is_undirected).then(lo).otherwise(pl.col("h")).alias("_a"),
                                pl.when(is_undirected).then(hi).otherwise(pl.col("t")).alias("_b"))
    collapsed = keyed.unique(["_a", "r", "_b"], keep="first", maintain_order=True).drop("_a", "_b")
    counts = {"exact_duplicates_dropped": duplicates, "reverse_copies_collapsed": unique.height - collapsed.height,
              "self_loops_kept": collapsed.filter(pl.col("h") == pl.col("t")).height}
    return collapsed, counts


def _check_text(frame: pl.DataFrame, columns, where: str) -> None:
    """Ids and relations become TSV fields: a TAB, CR or LF inside one would shift the columns."""
    for column in columns:
        row = first_bad_row(frame, pl.col(column).str.contains(r"[\t\r\n]"))
        if row is not None:
            raise InputError(f"{where}: the {column} {frame[column][row]!r} holds a TAB or line break; it cannot "
                             "be written as a TSV field")


def write_graph(graph: NativeGraph, edges: pl.DataFrame, folder: Path, source: str, dataset: dict) -> dict:
    """Write ``folder``/{edges.csv, TN_edges.csv, nodes.csv, node_names.tsv, graph_info.json};
    ``edges`` as :func:`finish_edges` returned them. Returns the graph description written."""
    folder.mkdir(parents=True, exist_ok=True)
    _check_text(edges, ("h", "r", "t"), source)
    _check_text(graph.nodes, ("id", "node_type"), source)
    out = edges.select("h", "r", "t", pl.lit("").alias("qscore"), pl.lit(source).alias("source"))
    out.write_csv(folder / GRAPH_FILES["edges"], separator="\t", include_header=False, quote_style="never")
    (folder / GRAPH_FILES["true_negatives"]).write_bytes(b"")  # a published KG states no true negatives
    graph.nodes.select("id", "node_type").write_csv(folder / GRAPH_FILES["nodes"], separator="\t",
                                                    include_header=False, quote_style="never")
    if graph.names is not None:
        names = graph.names.with_columns(pl.col("name").str.replace_all(r"[\t\r\n]", " "))
        names.write_csv(folder / NODE_NAMES, separator="\t", include_header=True, quote_style="never")
    per_relation = {relation: count for relation, count in
                    edges.group_by("r").len().sort("r").iter_rows()}
    info = {"format": GRAPH_FORMAT, "schema_version": SCHEMA_VERSION, "dataset": dataset,
            "id_scheme": graph.id_scheme,
            "relations": {name: {"edges": count, "directed": name not in graph.undirected}
                          for name, count in per_relation.items()},
            "node_types": dict(graph.nodes.group_by("node_type").len().sort("node_type").iter_rows()),
            "counts": {**graph.counts, "nodes": graph.nodes.height, "edges": edges.height},
            "problems": graph.problems, "notes": graph.notes}
    (folder / GRAPH_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return info
