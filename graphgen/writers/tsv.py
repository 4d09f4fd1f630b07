"""OpenBioLink's ``graph_files/`` layout, written atomically (a temporary folder, then a rename).

Headerless, separator ``sep`` (TAB by default), ``\\n`` line ends. Edge rows ``id1, EDGE_TYPE, id2,
qscore, source`` sorted by (node1 type, id1, edge type, node2 type, id2, qscore); node rows
``id, NODE_TYPE`` sorted by (type, id). ``graph_props.json`` is real JSON (OpenBioLink wrote
stringified values), and multi-file mode also writes ALL_nodes and the properties (it crashed
before writing them).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import List

import polars as pl

from graphgen.build import STATS_COLUMNS, Graph
from graphgen.edge_types import EDGE_TYPES, NODE_TYPES

GRAPH_FOLDER = "graph_files"


def _write_frame(frame: pl.DataFrame, path: Path, sep: str) -> None:
    frame.write_csv(path, include_header=False, separator=sep, quote_style="necessary", line_terminator="\n",
                    null_value="")


def _edge_rows(edges: pl.DataFrame, no_qscore: bool) -> pl.DataFrame:
    qscore = pl.lit(None, dtype=pl.String) if no_qscore else pl.col("qscore")
    return edges.select("id1", "edge_type", "id2", qscore.alias("qscore"), "source")


def _present(names: pl.Series, order) -> List[str]:
    present = set(names.unique().cast(pl.String).to_list())
    return [name for name in order if name in present]


def _write_list(path: Path, names: List[str]) -> None:
    path.write_text("\n".join(names), encoding="utf-8")  # OpenBioLink: no trailing newline


def write_tsv(graph: Graph, output_dir, sep: str = "\t", multi_file: bool = False, no_qscore: bool = False) -> Path:
    """Write ``graph`` into ``output_dir/graph_files`` (replacing a previous one); returns that folder."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    final = output_dir / GRAPH_FOLDER
    staging = Path(tempfile.mkdtemp(prefix=f".{GRAPH_FOLDER}.", dir=output_dir))
    try:
        _write_all(graph, staging, sep, multi_file, no_qscore)
        if final.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{GRAPH_FOLDER}.old.", dir=output_dir))
            final.rename(retired / GRAPH_FOLDER)
            staging.rename(final)
            shutil.rmtree(retired)
        else:
            staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return final


def _write_all(graph: Graph, folder: Path, sep: str, multi_file: bool, no_qscore: bool) -> None:
    all_nodes = pl.concat([graph.nodes, graph.tn_nodes]).unique().sort(["node_type", "id"])
    for prefix, edges, nodes in (("", graph.edges, graph.nodes), ("TN_", graph.tn_edges, graph.tn_nodes)):
        rows = _edge_rows(edges, no_qscore)
        if multi_file:
            for name, part in rows.partition_by("edge_type", as_dict=True, maintain_order=True).items():
                _write_frame(part, folder / f"{prefix}edges_{name[0]}.csv", sep)
            for name, part in nodes.partition_by("node_type", as_dict=True, maintain_order=True).items():
                _write_frame(part, folder / f"{prefix}nodes_{name[0]}.csv", sep)
        else:
            _write_frame(rows, folder / f"{prefix}edges.csv", sep)
            _write_frame(nodes, folder / f"{prefix}nodes.csv", sep)
        _write_list(folder / f"{prefix}edges_list.csv", _present(edges["edge_type"], EDGE_TYPES))
        _write_list(folder / f"{prefix}nodes_list.csv", _present(nodes["node_type"], NODE_TYPES))
    _write_frame(all_nodes, folder / "ALL_nodes.csv", sep)
    _write_frame(graph.unmapped, folder / "ids_no_mapping.tsv", "\t")
    _write_frame(graph.tn_unmapped, folder / "tn_ids_no_mapping.tsv", "\t")
    for name, stats in (("stats.txt", graph.stats), ("tn_stats.txt", graph.tn_stats)):
        lines = ["\t".join(STATS_COLUMNS)] + ["\t".join(str(row[c]) for c in STATS_COLUMNS) for row in stats]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    namespaces = sorted(set(all_nodes["id"].str.extract(r"^([^:]+):", 1).drop_nulls()))
    props = {"DIRECTED": graph.directed, "EDGE_TYPES": _present(graph.edges["edge_type"], EDGE_TYPES),
             "NODE_NAMESPACES": namespaces, "NODE_TYPES": _present(all_nodes["node_type"], NODE_TYPES),
             "QUALITY": graph.quality.upper()}
    (folder / "graph_props.json").write_text(json.dumps(props, indent=2, sort_keys=True) + "\n", encoding="utf-8")
