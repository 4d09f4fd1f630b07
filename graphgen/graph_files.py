"""Reading OpenBioLink's ``graph_files`` layout (edges and nodes TSV), with line-precise errors.

The format is graphgen's (it writes it); the splits and the exports read it through here. A
published graph converted by ``openbench datasets get`` (:mod:`openbench.datasets.published.native`) is
written in the same layout with a ``graph_info.json`` beside it (:data:`GRAPH_INFO`): its own
relations (instead of OpenBioLink's 32 edge types) and node types (instead of CURIE prefixes),
which :func:`read_graph_info` reads and the readers below then check against."""
from __future__ import annotations

from pathlib import Path
from typing import Collection, Optional, Sequence, Tuple

import polars as pl

from graphgen.edge_types import EDGE_TYPES, PREFIX_TO_NODE_TYPE
from openbench._io.inputs import line_of_row, read_table
from openbench.errors import InputError

__all__ = ["SPLIT_COLUMNS", "GRAPH_INFO", "GRAPH_FORMAT", "UNTYPED", "UNWRITABLE", "read_edges", "read_nodes",
           "read_any_edges", "read_any_nodes", "no_edges", "nodes_of_edges", "check_nodes_known", "read_graph_info",
           "refuse_unwritable"]

# the split files' columns: an edge with its label (value 1 positive, 0 negative)
SPLIT_COLUMNS = ["id1", "relation", "id2", "qscore", "value", "source"]
GRAPH_INFO = "graph_info.json"  # beside the edges of a converted published graph
GRAPH_FORMAT = "openbench-graph"
UNTYPED = "entity"  # the node type of every node of a plain triples file read without --nodes


def read_graph_info(folder) -> Optional[dict]:
    """The ``graph_info.json`` of a graph folder (a converted published graph), or None for a
    graph of OpenBioLink's edge types; a damaged one is an InputError."""
    path = Path(folder) / GRAPH_INFO
    if not path.is_file():
        return None
    from openbench._io import read_json

    info = read_json(path, "graph description")
    if (not isinstance(info, dict) or info.get("format") != GRAPH_FORMAT or not isinstance(info.get("relations"), dict)
            or not info["relations"] or not all(isinstance(name, str) for name in info["relations"])):
        raise InputError(f"expected an object with format {GRAPH_FORMAT!r} and the graph's relations "
                         "(written by openbench datasets get)", path)
    return info


def read_edges(path, value: str, sep: str = "\t", relations: Optional[Collection[str]] = None) -> pl.DataFrame:
    """Edges ``id1, EDGE_TYPE, id2, qscore, source`` as split rows with ``value`` ("1" or "0").

    :param relations: the relation names allowed (a converted graph's); None: OpenBioLink's 32."""
    path = Path(path)
    frame = read_table(path, {0: "id1", 1: "relation", 2: "id2", 3: "qscore", 4: "source"}, separator=sep,
                       header=False, width=5, comment_prefixes=(), required=("id1", "relation", "id2"))
    refuse_unwritable(frame, ("id1", "relation", "id2", "qscore", "source"), path)
    allowed = list(EDGE_TYPES) if relations is None else list(relations)
    unknown = frame.select((~pl.col("relation").is_in(allowed)).arg_true()).to_series()
    if len(unknown):
        row = int(unknown[0])
        expected = ("one of the 32 edge types (openbench generate --list-edge-types)" if relations is None
                    else f"one of the {len(allowed)} relations of {GRAPH_INFO}")
        raise InputError(f"unknown relation {frame['relation'][row]!r}; expected {expected}", path,
                         line_of_row(path, row))
    # categorical ids: 4 bytes a value through the joins of sampling and cleaning (peak memory)
    return frame.select(pl.col("id1").cast(pl.Categorical), "relation", pl.col("id2").cast(pl.Categorical),
                        pl.col("qscore").fill_null(""), pl.lit(value).alias("value"), pl.col("source").fill_null(""))


def read_nodes(path, sep: str = "\t", node_types: Optional[Collection[str]] = None) -> pl.DataFrame:
    """Nodes ``id, NODE_TYPE``; the type must agree with the id's CURIE prefix, or, for a converted
    graph, be one of its ``node_types``."""
    path = Path(path)
    frame = read_table(path, {0: "id", 1: "node_type"}, separator=sep, header=False, width=2, comment_prefixes=(),
                       required=("id", "node_type"))
    refuse_unwritable(frame, ("id", "node_type"), path)
    _refuse_two_types(frame, path)
    if node_types is not None:
        bad = frame.select((~pl.col("node_type").is_in(list(node_types))).arg_true()).to_series()
        if len(bad):
            row = int(bad[0])
            raise InputError(f"node {frame['id'][row]!r} has type {frame['node_type'][row]!r}; expected one of "
                             f"the node types of {GRAPH_INFO} ({', '.join(sorted(node_types))})", path,
                             line_of_row(path, row))
        return frame.unique("id", keep="first", maintain_order=True).with_columns(pl.col("id").cast(pl.Categorical))
    prefix_type = pl.col("id").str.extract(r"^([^:]+):", 1).replace_strict(PREFIX_TO_NODE_TYPE, default=None,
                                                                         return_dtype=pl.String)
    bad = frame.select((prefix_type.is_null() | (prefix_type != pl.col("node_type"))).arg_true()).to_series()
    if len(bad):
        row = int(bad[0])
        raise InputError(f"node {frame['id'][row]!r} of type {frame['node_type'][row]!r}: its prefix maps to no "
                         f"node type, or to another; expected prefixes {', '.join(PREFIX_TO_NODE_TYPE)}",
                         path, line_of_row(path, row))
    return frame.unique("id", keep="first", maintain_order=True).with_columns(pl.col("id").cast(pl.Categorical))


def no_edges() -> pl.DataFrame:
    """An empty frame of edges as :func:`read_edges` returns them (a graph without true negatives)."""
    return pl.DataFrame(schema={"id1": pl.Categorical, "relation": pl.String, "id2": pl.Categorical,
                                "qscore": pl.String, "value": pl.String, "source": pl.String})


def _plain_edges(path: Path, value: str) -> pl.DataFrame:
    """A plain triples file (:mod:`openbench._io.triples`) as split rows with ``value``."""
    from openbench._io.triples import read_triples

    frame = read_triples(path).rename({"h": "id1", "r": "relation", "t": "id2"})
    refuse_unwritable(frame, ("id1", "relation", "id2"), path)
    return frame.select(pl.col("id1").cast(pl.Categorical), "relation", pl.col("id2").cast(pl.Categorical),
                        pl.lit("").alias("qscore"), pl.lit(value).alias("value"), pl.lit("").alias("source"))


def read_any_edges(path, value: str, sep: str = "\t", relations: Optional[Collection[str]] = None) -> pl.DataFrame:
    """:func:`read_edges` of OpenBioLink's edges, or the triples of a plain ``head, relation, tail``
    file (three fields a line, TSV or CSV, optional header; any relation names), as split rows."""
    from openbench._io.triples import sniff

    path = Path(path)
    layout = sniff(path)
    if relations is None and layout is not None and layout.fields == 3:
        return _plain_edges(path, value)
    return read_edges(path, value, sep, relations)


def read_any_nodes(path, sep: str = "\t", node_types: Optional[Collection[str]] = None,
                   plain: bool = False) -> pl.DataFrame:
    """:func:`read_nodes`, or for a plain triples graph (``plain``) an ``id, type`` file of any type
    names (TSV or CSV, optional header), a node listed with two types refused."""
    if not plain:
        return read_nodes(path, sep, node_types)
    from openbench._io.triples import read_node_types

    path = Path(path)
    frame = read_node_types(path)
    refuse_unwritable(frame, ("id", "node_type"), path)
    _refuse_two_types(frame, path)
    return frame.unique("id", keep="first", maintain_order=True).with_columns(pl.col("id").cast(pl.Categorical))


def nodes_of_edges(edges: Sequence[Tuple[pl.DataFrame, Path]], plain: bool = False) -> pl.DataFrame:
    """The nodes of ``edges`` ((frame, its file) pairs) when no node file is given: for a plain
    triples graph, every node of type :data:`UNTYPED`; for OpenBioLink's edges, the type of each
    id's CURIE prefix (an id with a prefix of no node type is an error naming its file and line)."""
    ids = pl.concat([frame.select(pl.col(column).cast(pl.String).alias("id")) for frame, _ in edges
                     for column in ("id1", "id2")]).unique(maintain_order=True)
    if plain:
        return ids.with_columns(pl.col("id").cast(pl.Categorical), pl.lit(UNTYPED).alias("node_type"))
    typed = ids.with_columns(pl.col("id").str.extract(r"^([^:]+):", 1).replace_strict(
        PREFIX_TO_NODE_TYPE, default=None, return_dtype=pl.String).alias("node_type"))
    untyped = typed.filter(pl.col("node_type").is_null())
    if untyped.height:
        node = untyped["id"][0]
        for frame, path in edges:
            rows = frame.select(((pl.col("id1").cast(pl.String) == node) | (pl.col("id2").cast(pl.String) == node))
                                .arg_true()).to_series()
            if len(rows):
                raise InputError(f"node {node!r}: its prefix maps to no node type (expected prefixes "
                                 f"{', '.join(PREFIX_TO_NODE_TYPE)}); give the node types with --nodes", path,
                                 line_of_row(Path(path), int(rows[0])))
    return typed.with_columns(pl.col("id").cast(pl.Categorical))


# what no split file can hold inside a field: its separator, and line ends
UNWRITABLE = ("\t", "\n", "\r")


def refuse_unwritable(frame: pl.DataFrame, columns, path) -> None:
    """Refuse, naming the file and line, the first row whose ``columns`` hold a tab, a newline or a
    carriage return: the split files are tab-separated, one row a line, so such a label (read from
    a comma-separated input) would write rows of the wrong width. Checked as the input is read,
    before anything is written."""
    present = [column for column in columns if column in frame.columns]
    if not present or frame.is_empty():
        return
    holds = pl.any_horizontal([pl.col(column).fill_null("").str.contains(r"[\t\n\r]") for column in present])
    bad = frame.select(holds.arg_true()).to_series()
    if len(bad):
        row = int(bad[0])
        column = next(name for name in present if any(c in (frame[name][row] or "") for c in UNWRITABLE))
        raise InputError(f"{column} {frame[column][row]!r} holds a tab or a line break; the split files are "
                         "tab-separated, one row a line, so it cannot be written (rename it in the input)",
                         path, line_of_row(path, row))


def _refuse_two_types(frame: pl.DataFrame, path) -> None:
    """A node listed twice with the same type is one node; with two different types it is refused,
    naming both lines (which type it has would otherwise depend on line order)."""
    pairs = frame.select("id", "node_type").with_row_index("row")
    first = pairs.unique(["id", "node_type"], keep="first", maintain_order=True)
    clash = first.filter(pl.col("id").is_duplicated())
    if clash.is_empty():
        return
    node = clash["id"][0]
    rows = clash.filter(pl.col("id") == node)
    one, two = int(rows["row"][0]), int(rows["row"][1])
    raise InputError(f"node {node!r} is listed with two types, {rows['node_type'][0]!r} (line "
                     f"{line_of_row(path, one)}) and {rows['node_type'][1]!r}; expected one type per node",
                     path, line_of_row(path, two))


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
