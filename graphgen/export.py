"""Exports of a graph in other formats: BEL (PyBEL), RDF (N-Triples, Turtle, N3) and Parquet.

``openbench generate --output-format F`` exports the graph it builds; ``openbench export`` reads
an existing TSV ``graph_files`` folder (checked: every file present, five columns, known edge
types, nodes consistent with their prefixes) and writes the export without rebuilding. The
output folder is filled in a temporary folder beside it and renamed into place, so a failure
leaves nothing half-written. Besides the format's own files, every export carries the list files
and ``graph_props.json`` of the TSV layout.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Sequence

import polars as pl

from graphgen.edge_types import EDGE_TYPES, NODE_TYPES
from graphgen.formats import EXPORT_FORMATS
from graphgen.graph_files import check_nodes_known, read_edges, read_nodes
from graphgen.writers.tsv import graph_props, present_names, write_list
from openbench._io import read_json, replace_folder
from openbench.errors import InputError

__all__ = ["FORMATS", "GRAPH_FILES", "GraphTables", "tables_of_graph", "graph_folder", "read_graph_folder",
           "WRITERS", "export_graph_folder", "export"]

logger = logging.getLogger(__name__)

FORMATS = EXPORT_FORMATS
GRAPH_FILES = ("edges.csv", "nodes.csv", "TN_edges.csv", "TN_nodes.csv")


@dataclass
class GraphTables:
    """A graph as text tables: edges (id1, edge_type, id2, qscore, source; empty qscore/source as
    ""), nodes (id, node_type), the same for true negatives, and the graph properties."""

    edges: pl.DataFrame
    nodes: pl.DataFrame
    tn_edges: pl.DataFrame
    tn_nodes: pl.DataFrame
    props: dict


def _as_text(edges: pl.DataFrame) -> pl.DataFrame:
    return edges.select([pl.col(c).cast(pl.String).fill_null("") for c in ("id1", "edge_type", "id2", "qscore",
                                                                          "source")])


def tables_of_graph(graph) -> GraphTables:
    """The tables of a built :class:`graphgen.build.Graph` (edges in output order)."""

    nodes = lambda frame: frame.select(pl.col("id").cast(pl.String), pl.col("node_type").cast(pl.String))  # noqa: E731
    return GraphTables(_as_text(graph.edges), nodes(graph.nodes), _as_text(graph.tn_edges), nodes(graph.tn_nodes),
                       graph_props(graph))


def graph_folder(path) -> Path:
    """``path`` itself when it holds edges.csv, else its ``graph_files`` subfolder."""
    path = Path(path)
    if not (path / "edges.csv").exists() and (path / "graph_files" / "edges.csv").exists():
        return path / "graph_files"
    return path


def read_graph_folder(path, sep: str = "\t") -> GraphTables:
    """Read and check a TSV graph folder (OpenBioLink's single-file layout)."""
    folder = graph_folder(path)
    missing = [name for name in GRAPH_FILES if not (folder / name).is_file()]
    if missing:
        raise InputError(f"not a graph folder: {', '.join(missing)} missing (expected the files openbench "
                         "generate writes)", folder)
    tables = {}
    for prefix in ("", "TN_"):
        edges = read_edges(folder / f"{prefix}edges.csv", "1", sep).select(
            pl.col("id1").cast(pl.String), pl.col("relation").alias("edge_type"), pl.col("id2").cast(pl.String),
            "qscore", "source")
        nodes = read_nodes(folder / f"{prefix}nodes.csv", sep)
        check_nodes_known(edges, nodes, folder / f"{prefix}edges.csv")
        tables[prefix] = (edges, nodes.with_columns(pl.col("id").cast(pl.String)))
    props_path = folder / "graph_props.json"
    props = {}
    if props_path.is_file():
        props = read_json(props_path, "graph properties JSON")
        if not isinstance(props, dict):
            raise InputError("expected a JSON object of graph properties", props_path)
    return GraphTables(tables[""][0], tables[""][1], tables["TN_"][0], tables["TN_"][1], props)


def _write_side_files(tables: GraphTables, folder: Path) -> None:
    for prefix, edges, nodes in (("", tables.edges, tables.nodes), ("TN_", tables.tn_edges, tables.tn_nodes)):
        write_list(folder / f"{prefix}edges_list.csv", present_names(edges["edge_type"], EDGE_TYPES))
        write_list(folder / f"{prefix}nodes_list.csv", present_names(nodes["node_type"], NODE_TYPES))
    if tables.props:
        (folder / "graph_props.json").write_text(json.dumps(tables.props, indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")


def _all_nodes(tables: GraphTables) -> pl.DataFrame:
    return pl.concat([tables.nodes, tables.tn_nodes]).unique().sort(["node_type", "id"])


def _write_rdf(fmt: str) -> Callable[[GraphTables, Path], Dict[str, int]]:
    def write(tables: GraphTables, folder: Path) -> Dict[str, int]:
        from graphgen.writers import rdf

        extension = rdf.EXTENSIONS[fmt]
        counts = {}
        for prefix, edges, nodes in (("", tables.edges, tables.nodes), ("TN_", tables.tn_edges, tables.tn_nodes)):
            counts[f"{prefix}nodes"] = rdf.write_nodes(nodes, folder / f"{prefix}nodes.{extension}", fmt)
            counts[f"{prefix}edges"] = rdf.write_edges(edges, folder / f"{prefix}edges.{extension}", fmt,
                                                       negative=bool(prefix))
        counts["ALL_nodes"] = rdf.write_nodes(_all_nodes(tables), folder / f"ALL_nodes.{extension}", fmt)
        return counts
    return write


def _write_bel(tables: GraphTables, folder: Path) -> Dict[str, int]:
    from graphgen.writers.bel import write_bel

    counts = {}
    for name, edges, negative in (("positive", tables.edges, False), ("negative", tables.tn_edges, True)):
        for relation, count in write_bel(edges, folder, name, negative, progress=True).items():
            counts[f"{name} {relation}"] = count
    return counts


def _write_parquet(tables: GraphTables, folder: Path) -> Dict[str, int]:
    for name, frame in (("edges", tables.edges), ("nodes", tables.nodes), ("TN_edges", tables.tn_edges),
                        ("TN_nodes", tables.tn_nodes), ("ALL_nodes", _all_nodes(tables))):
        frame.write_parquet(folder / f"{name}.parquet", compression="zstd", statistics=False)
    return {"edges": tables.edges.height, "TN_edges": tables.tn_edges.height}


WRITERS = {"BEL": _write_bel, "RDF-N3": _write_rdf("RDF-N3"), "RDF-NT": _write_rdf("RDF-NT"),
           "RDF-TTL": _write_rdf("RDF-TTL"), "PARQUET": _write_parquet}
if tuple(WRITERS) != EXPORT_FORMATS:
    raise RuntimeError(f"graphgen.export's writers {tuple(WRITERS)} differ from graphgen.formats {EXPORT_FORMATS}")


def export_graph_folder(graph_dir, output, fmt: str, sep: str = "\t") -> Dict[str, int]:
    """Read the TSV graph in ``graph_dir`` (checked) and export it into ``output``; the output is
    checked first, so a refused one costs no reading."""
    from openbench._io import check_output_folder

    check_output_folder(output, [graph_dir])
    return export(read_graph_folder(graph_dir, sep=sep), output, fmt, inputs=[graph_dir])


def export(tables: GraphTables, output, fmt: str, inputs: Sequence = (), within=None) -> Dict[str, int]:
    """Write ``tables`` in ``fmt`` into the folder ``output`` (replacing one openbench wrote);
    returns counts written. ``inputs``: what the tables were read from (never replaced);
    ``within``: the folder the user named where ``output`` is a part of it (see
    :func:`~openbench._io.outputs.replace_folder`)."""
    fmt = fmt.upper()
    if fmt not in WRITERS:
        raise InputError(f"unknown export format {fmt!r}; valid: {', '.join(FORMATS)}")
    counts: Dict[str, int] = {}

    def fill(folder: Path) -> None:
        counts.update(WRITERS[fmt](tables, folder))
        _write_side_files(tables, folder)

    replace_folder(Path(output), fill, inputs=inputs, kind=f"export {fmt}", within=within)
    logger.info("%s export in %s: %s", fmt, output, counts)
    return counts

