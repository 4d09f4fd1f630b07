"""Reading OpenBioLink's ``graph_files`` layout (edges and nodes TSV), with line-precise errors.

The format is graphgen's (it writes it); the splits and the exports read it through here."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from graphgen.edge_types import EDGE_TYPES, PREFIX_TO_NODE_TYPE
from openbench._io.inputs import line_of_row, read_table
from openbench.errors import InputError

__all__ = ["SPLIT_COLUMNS", "read_edges", "read_nodes", "check_nodes_known"]

# the split files' columns: an edge with its label (value 1 positive, 0 negative)
SPLIT_COLUMNS = ["id1", "relation", "id2", "qscore", "value", "source"]


def read_edges(path, value: str, sep: str = "\t") -> pl.DataFrame:
    """Edges ``id1, EDGE_TYPE, id2, qscore, source`` as split rows with ``value`` ("1" or "0")."""
    path = Path(path)
    frame = read_table(path, {0: "id1", 1: "relation", 2: "id2", 3: "qscore", 4: "source"}, separator=sep,
                       header=False, width=5, comment_prefixes=(), required=("id1", "relation", "id2"))
    unknown = frame.select((~pl.col("relation").is_in(list(EDGE_TYPES))).arg_true()).to_series()
    if len(unknown):
        row = int(unknown[0])
        raise InputError(f"unknown relation {frame['relation'][row]!r}; expected one of the 32 edge types "
                         f"(openbench generate --list-edge-types)", path, line_of_row(path, row))
    # categorical ids: 4 bytes a value through the joins of sampling and cleaning (peak memory)
    return frame.select(pl.col("id1").cast(pl.Categorical), "relation", pl.col("id2").cast(pl.Categorical),
                        pl.col("qscore").fill_null(""), pl.lit(value).alias("value"), pl.col("source").fill_null(""))


def read_nodes(path, sep: str = "\t") -> pl.DataFrame:
    """Nodes ``id, NODE_TYPE``; the type must agree with the id's CURIE prefix."""
    path = Path(path)
    frame = read_table(path, {0: "id", 1: "node_type"}, separator=sep, header=False, width=2, comment_prefixes=(),
                       required=("id", "node_type"))
    prefix_type = pl.col("id").str.extract(r"^([^:]+):", 1).replace_strict(PREFIX_TO_NODE_TYPE, default=None,
                                                                         return_dtype=pl.String)
    bad = frame.select((prefix_type.is_null() | (prefix_type != pl.col("node_type"))).arg_true()).to_series()
    if len(bad):
        row = int(bad[0])
        raise InputError(f"node {frame['id'][row]!r} of type {frame['node_type'][row]!r}: its prefix maps to no "
                         f"node type, or to another; expected prefixes {', '.join(PREFIX_TO_NODE_TYPE)}",
                         path, line_of_row(path, row))
    return frame.unique("id", keep="first", maintain_order=True).with_columns(pl.col("id").cast(pl.Categorical))


def check_nodes_known(edges: pl.DataFrame, nodes: pl.DataFrame, path, nodes_path=None) -> None:
    """Every edge node must be listed in the nodes file; the error names the first edge line that
    fails (and the nodes file, when given)."""
    known = nodes.get_column("id").implode()
    missing = edges.select((~pl.col("id1").is_in(known) | ~pl.col("id2").is_in(known)).arg_true()).to_series()
    if len(missing):
        row = int(missing[0])
        node = edges["id1"][row] if edges["id1"][row] not in set(nodes["id"].to_list()) else edges["id2"][row]
        listing = f" {nodes_path}" if nodes_path is not None else ""
        raise InputError(f"node {node!r} is missing from the nodes file{listing}", Path(path),
                         line_of_row(Path(path), row))
