"""OpenBioLink's ``graph_files/`` layout, written atomically (a temporary folder, then a rename).

Headerless, separator ``sep`` (TAB by default), ``\\n`` line ends. Edge rows ``id1, EDGE_TYPE, id2,
qscore, source`` sorted by (node1 type, id1, edge type, node2 type, id2, qscore); node rows
``id, NODE_TYPE`` sorted by (type, id). ``graph_props.json`` is real JSON (OpenBioLink wrote
stringified values), and multi-file mode also writes ALL_nodes and the properties (it crashed
before writing them).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence

import numpy as np
import polars as pl

from graphgen.build import EDGE_TYPE_ENUM, SOURCE_ENUM, MAPPING_STATS_COLUMNS, STATS_COLUMNS, EdgeTable, Graph
from graphgen.edge_types import EDGE_TYPES, NODE_TYPES
from graphgen.writers.coded import Column, write_coded, write_coded_parts
from openbench._io import replace_folder

__all__ = ["GRAPH_FOLDER", "present_names", "write_list", "write_tsv", "graph_props"]

GRAPH_FOLDER = "graph_files"


def _write_frame(frame: pl.DataFrame, path: Path, sep: str) -> None:
    frame.write_csv(path, include_header=False, separator=sep, quote_style="necessary", line_terminator="\n",
                    null_value="")


def _edge_columns(table: EdgeTable, no_qscore: bool) -> List[Column]:
    """id1, EDGE_TYPE, id2, qscore, source for :func:`write_coded`, each already in output order."""
    key = table.key
    score = (np.zeros(table.height, dtype=np.uint32), [None]) if no_qscore else (table.score_codes(),
                                                                                 table.score_names)
    return [(key.rank1, table.node_ids), (key.type_code, EDGE_TYPE_ENUM.categories.to_list()),
            (key.rank2, table.node_ids), score, (table.source_codes(), SOURCE_ENUM.categories.to_list())]


def present_names(names: pl.Series, order) -> List[str]:
    """The names of ``order`` that occur in ``names``, in ``order``'s order."""
    present = set(names.unique().cast(pl.String).to_list())
    return [name for name in order if name in present]


def write_list(path: Path, names: List[str]) -> None:
    path.write_text("\n".join(names), encoding="utf-8")  # OpenBioLink: no trailing newline


def write_tsv(graph: Graph, output_dir, sep: str = "\t", multi_file: bool = False, no_qscore: bool = False,
              inputs: Sequence = ()) -> Path:
    """Write ``graph`` into ``output_dir/graph_files`` (replacing a previous one openbench wrote;
    staged beside ``output_dir``, which a kill leaves as it was or with the new graph_files);
    returns that folder. ``inputs``: the source folders, which it may not be, hold or lie in."""
    return replace_folder(Path(output_dir) / GRAPH_FOLDER, lambda folder: _write_all(graph, folder, sep, multi_file,
                                                                                     no_qscore),
                          inputs=inputs, kind="graph_files", within=output_dir)


def graph_props(graph: Graph) -> dict:
    """``graph_props.json``'s content: real JSON values (OpenBioLink stringified them)."""
    all_ids = pl.concat([graph.nodes, graph.tn_nodes])
    namespaces = sorted(set(all_ids["id"].str.extract(r"^([^:]+):", 1).drop_nulls()))
    return {"DIRECTED": graph.directed, "EDGE_TYPES": present_names(graph.edge_table.frame["edge_type"], EDGE_TYPES),
            "NODE_NAMESPACES": namespaces, "NODE_TYPES": present_names(all_ids["node_type"], NODE_TYPES),
            "QUALITY": graph.quality.upper()}


def _write_all(graph: Graph, folder: Path, sep: str, multi_file: bool, no_qscore: bool) -> None:
    all_nodes = pl.concat([graph.nodes, graph.tn_nodes]).unique().sort(["node_type", "id"])
    for prefix, table, nodes in (("", graph.edge_table, graph.nodes), ("TN_", graph.tn_edge_table, graph.tn_nodes)):
        present = present_names(table.frame["edge_type"], EDGE_TYPES)
        columns = _edge_columns(table, no_qscore)
        if multi_file:
            type_names = EDGE_TYPE_ENUM.categories.to_list()
            write_coded_parts([(folder / f"{prefix}edges_{name}.csv",
                                np.flatnonzero(table.key.type_code == type_names.index(name))) for name in present],
                              columns, sep)
            for name, part in nodes.partition_by("node_type", as_dict=True, maintain_order=True).items():
                _write_frame(part, folder / f"{prefix}nodes_{name[0]}.csv", sep)
        else:
            write_coded(folder / f"{prefix}edges.csv", columns, separator=sep)
            _write_frame(nodes, folder / f"{prefix}nodes.csv", sep)
        write_list(folder / f"{prefix}edges_list.csv", present)
        write_list(folder / f"{prefix}nodes_list.csv", present_names(nodes["node_type"], NODE_TYPES))
    _write_frame(all_nodes, folder / "ALL_nodes.csv", sep)
    _write_frame(graph.unmapped, folder / "ids_no_mapping.tsv", "\t")
    _write_frame(graph.tn_unmapped, folder / "tn_ids_no_mapping.tsv", "\t")
    for name, stats, columns in (("stats.txt", graph.stats, STATS_COLUMNS),
                                 ("tn_stats.txt", graph.tn_stats, STATS_COLUMNS),
                                 ("mapping_stats.tsv", graph.mapping_stats, MAPPING_STATS_COLUMNS)):
        lines = ["\t".join(columns)] + ["\t".join(str(row[c]) for c in columns) for row in stats]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    props = graph_props(graph)
    (folder / "graph_props.json").write_text(json.dumps(props, indent=2, sort_keys=True) + "\n", encoding="utf-8")
