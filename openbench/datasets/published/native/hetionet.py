"""Hetionet v1.0: ``hetionet-v1.0-nodes.tsv`` (``id, name, kind``; CRLF line endings) and
``hetionet-v1.0-edges.sif.gz`` (``source, metaedge, target``).

Ids are ``Kind::identifier`` (split at the first ``::``; the kind must be the row's ``kind``);
the 24 metaedges are checked against their endpoint kinds (the SIF writes each edge in its
metaedge's orientation); every metaedge but ``Gr>G`` is undirected and stored once. The 1,873
nodes without edges stay nodes (an edge-only loader sees 45,158 entities instead of 47,031).
Names are not unique within a kind (two genes, six pathways), so nothing is keyed by name.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl

from openbench._io.inputs import line_of_row, read_table
from openbench.datasets.published.native.graph import NativeGraph, first_bad_row
from openbench.errors import InputError

__all__ = ["NODES_FILE", "EDGES_FILE", "METAEDGES", "read_hetionet"]

NODES_FILE = "hetionet-v1.0-nodes.tsv"
EDGES_FILE = "hetionet-v1.0-edges.sif.gz"
# abbreviation -> (source kind, target kind), from hetionet describe/edges/metaedges.tsv
METAEDGES = {
    "AdG": ("Anatomy", "Gene"), "AeG": ("Anatomy", "Gene"), "AuG": ("Anatomy", "Gene"),
    "CbG": ("Compound", "Gene"), "CcSE": ("Compound", "Side Effect"), "CdG": ("Compound", "Gene"),
    "CpD": ("Compound", "Disease"), "CrC": ("Compound", "Compound"), "CtD": ("Compound", "Disease"),
    "CuG": ("Compound", "Gene"), "DaG": ("Disease", "Gene"), "DdG": ("Disease", "Gene"),
    "DlA": ("Disease", "Anatomy"), "DpS": ("Disease", "Symptom"), "DrD": ("Disease", "Disease"),
    "DuG": ("Disease", "Gene"), "GcG": ("Gene", "Gene"), "GiG": ("Gene", "Gene"),
    "GpBP": ("Gene", "Biological Process"), "GpCC": ("Gene", "Cellular Component"),
    "GpMF": ("Gene", "Molecular Function"), "GpPW": ("Gene", "Pathway"), "Gr>G": ("Gene", "Gene"),
    "PCiC": ("Pharmacologic Class", "Compound")}
DIRECTED = {"Gr>G"}  # the one "forward" metaedge; the others are "both"


def _nodes(path: Path) -> pl.DataFrame:
    nodes = read_table(path, {"id": "id", "name": "name", "kind": "node_type"}, required=("id", "node_type"),
                       comment_prefixes=())
    kind = pl.col("id").str.split_exact("::", 1).struct.field("field_0")
    identifier = pl.col("id").str.split_exact("::", 1).struct.field("field_1")
    row = first_bad_row(nodes, ~pl.col("id").str.contains("::", literal=True) | (kind != pl.col("node_type"))
                        | (identifier.fill_null("") == ""))
    if row is not None:
        raise InputError(f"node id {nodes['id'][row]!r} of kind {nodes['node_type'][row]!r}: expected "
                         "'<kind>::<identifier>' with the row's kind", path, line_of_row(path, row, skip=1))
    repeated = first_bad_row(nodes, ~pl.col("id").is_first_distinct())
    if repeated is not None:
        raise InputError(f"node id {nodes['id'][repeated]!r} is listed twice", path,
                         line_of_row(path, repeated, skip=1))
    return nodes


def read_hetionet(folder: Path) -> NativeGraph:
    nodes_path, edges_path = folder / NODES_FILE, folder / EDGES_FILE
    nodes = _nodes(nodes_path)
    edges = read_table(edges_path, {"source": "h", "metaedge": "r", "target": "t"}, required=("h", "r", "t"),
                       comment_prefixes=())
    row = first_bad_row(edges, ~pl.col("r").is_in(list(METAEDGES)))
    if row is not None:
        raise InputError(f"metaedge {edges['r'][row]!r}: expected one of Hetionet v1.0's 24 "
                         f"({', '.join(METAEDGES)})", edges_path, line_of_row(edges_path, row, skip=1))
    kinds = nodes.select("id", "node_type")
    typed = (edges.with_row_index("_row")
             .join(kinds.rename({"id": "h", "node_type": "h_kind"}), on="h", how="left", maintain_order="left")
             .join(kinds.rename({"id": "t", "node_type": "t_kind"}), on="t", how="left", maintain_order="left"))
    missing = first_bad_row(typed, pl.col("h_kind").is_null() | pl.col("t_kind").is_null())
    if missing is not None:
        node = typed["h"][missing] if typed["h_kind"][missing] is None else typed["t"][missing]
        raise InputError(f"node {node!r} is not in {NODES_FILE}", edges_path, line_of_row(edges_path, missing, skip=1))
    signatures = pl.DataFrame([(name, a, b) for name, (a, b) in METAEDGES.items()],
                              schema={"r": pl.String, "want_h": pl.String, "want_t": pl.String}, orient="row")
    checked = typed.join(signatures, on="r", how="left", maintain_order="left")
    wrong = first_bad_row(checked, (pl.col("h_kind") != pl.col("want_h")) | (pl.col("t_kind") != pl.col("want_t")))
    if wrong is not None:
        raise InputError(f"metaedge {checked['r'][wrong]} joins {checked['want_h'][wrong]} to "
                         f"{checked['want_t'][wrong]}, not {checked['h_kind'][wrong]} to {checked['t_kind'][wrong]}",
                         edges_path, line_of_row(edges_path, wrong, skip=1))
    used = pl.concat([edges["h"], edges["t"]]).unique().implode()
    isolated = nodes.filter(~pl.col("id").is_in(used)).height
    return NativeGraph(nodes=nodes.select("id", "node_type"), edges=edges, undirected=frozenset(set(METAEDGES) - DIRECTED),
                       id_scheme="Kind::identifier, as Hetionet writes it (split at the first '::')",
                       counts={"nodes": nodes.height, "rows": edges.height}, problems={"isolated_nodes_kept": isolated},
                       names=nodes.select("id", "name"),
                       notes=["every metaedge but Gr>G is undirected and stored once; Gr>G is directed"])
