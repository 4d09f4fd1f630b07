"""The split commands as library calls: read and check the graph files, split, write.

``openbench split rand|time|entity|inductive`` and the demo call these, so every caller gets the same checks: the
nodes of every edge are listed, the output may not replace an input, repeats are removed and
counted.

The graph is OpenBioLink's ``graph_files`` layout (edges, true-negative edges, nodes) or a plain
triples file (``head, relation, tail``; TSV or CSV, optional header: :mod:`openbench._io.triples`).
True negatives are optional (without them every negative is drawn), and so are the nodes: a plain
graph's nodes are then of one type (:data:`~graphgen.graph_files.UNTYPED`), OpenBioLink's take the
type of their CURIE prefix.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from graphgen.graph_files import (check_nodes_known, no_edges, nodes_of_edges, read_any_edges, read_any_nodes,
                                  read_graph_info)
from openbench._io.triples import is_plain_triples
from openbench._io import check_output_folder
from splits.entity_split import Selection, entity_split
from splits.inductive_split import inductive_split
from splits.random_split import random_split
from splits.time_split import time_split

__all__ = ["split_random", "split_time", "split_dated", "split_entity", "split_inductive", "read_entity_file"]


def _read_graph(edges_path, tn_path, nodes_path, sep: str):
    """(positives, true negatives, nodes, graph_info.json or None): a converted published graph
    (``graph_info.json`` beside its edges) is checked against its own relations and node types; a
    plain triples file may name any relation and node type."""
    info = read_graph_info(Path(edges_path).parent)
    relations = None if info is None else list(info["relations"])
    node_types = None if info is None else list(info.get("node_types", {}))
    plain = info is None and is_plain_triples(edges_path)
    positives = read_any_edges(edges_path, "1", sep, relations)
    true_negatives = read_any_edges(tn_path, "0", sep, relations) if tn_path is not None else no_edges()
    if nodes_path is not None:
        nodes = read_any_nodes(nodes_path, sep, node_types, plain=plain)
    else:
        edges = [(positives, Path(edges_path))] + ([(true_negatives, Path(tn_path))] if tn_path is not None else [])
        nodes = nodes_of_edges(edges, plain=plain)
    check_nodes_known(positives, nodes, edges_path, nodes_path)
    if tn_path is not None:
        check_nodes_known(true_negatives, nodes, tn_path, nodes_path)
    return positives, true_negatives, nodes, info


def _paths(*paths) -> Sequence[Path]:
    return [Path(path) for path in paths if path is not None]


def _provenance(info) -> dict:
    """What ``split_info.json`` records of a converted published graph (``dataset``): which
    release, and what its reader fixed (collapsed reverse copies, dropped duplicates, refused rows)."""
    if info is None:
        return {}
    dataset = info.get("dataset", {}) if isinstance(info.get("dataset"), dict) else {}
    return {"dataset": {**dataset, "id_scheme": info.get("id_scheme"), "problems": info.get("problems", {}),
                        "undirected_relations": sorted(name for name, relation in info["relations"].items()
                                                       if isinstance(relation, dict) and not relation.get("directed", True))}}


def split_random(edges_path, tn_path: Optional[str], nodes_path: Optional[str], output, *, sep: str = "\t",
                 **parameters) -> dict:
    """Random split of a graph (``graph_files`` or a plain triples file; true negatives and nodes
    optional) into ``output`` (see :func:`splits.random_split.random_split` for the parameters);
    returns the split info."""
    inputs = _paths(edges_path, tn_path, nodes_path)
    check_output_folder(output, inputs)  # before reading: fail fast
    positives, true_negatives, nodes, info = _read_graph(edges_path, tn_path, nodes_path, sep)
    return random_split(positives, true_negatives, nodes, output, inputs=inputs, provenance=_provenance(info),
                        **parameters)


def split_time(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path, output, *,
               sep: str = "\t", **parameters) -> dict:
    """Time-slice split of the graph at t against the one at t-1 (see
    :func:`splits.time_split.time_split`); returns the split info."""
    inputs = _paths(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path)
    check_output_folder(output, inputs)
    positives, true_negatives, nodes, _ = _read_graph(edges_path, tn_path, nodes_path, sep)
    tmo_positives, tmo_true_negatives, tmo_nodes, _ = _read_graph(tmo_edges_path, tmo_tn_path, tmo_nodes_path, sep)
    return time_split(positives, true_negatives, nodes, tmo_positives, tmo_true_negatives, tmo_nodes, output,
                      inputs=inputs, **parameters)


def split_dated(edges_path, tn_path, nodes_path, output, *, cutoff, **parameters) -> dict:
    """A time split of one graph by its edges' dates at ``cutoff`` (see
    :func:`splits.dated_split.dated_split`); returns the split info."""
    from splits.dated_split import dated_split

    return dated_split(edges_path, output, cutoff=cutoff, tn_path=tn_path, nodes_path=nodes_path, **parameters)


def read_entity_file(path) -> list:
    """The entity ids of an ``--entities`` file: one per line (blank lines and a BOM ignored)."""
    from openbench._io import read_text
    from openbench.errors import InputError

    labels = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not labels:
        raise InputError("the entity list is empty; expected one entity id per line", path)
    return labels


def split_entity(edges_path, tn_path, nodes_path, output, *, sep: str = "\t", selection: Selection,
                 **parameters) -> dict:
    """Entity-held-out split of a graph (``graph_files`` or a plain triples file) into ``output``
    (see :func:`splits.entity_split.entity_split`); returns the split info."""
    inputs = _paths(edges_path, tn_path, nodes_path)
    check_output_folder(output, inputs)
    positives, true_negatives, nodes, info = _read_graph(edges_path, tn_path, nodes_path, sep)
    return entity_split(positives, true_negatives, nodes, output, selection=selection, inputs=inputs,
                        provenance=_provenance(info), **parameters)


def split_inductive(edges_path, output, *, sep: str = "\t", **parameters) -> dict:
    """Inductive split (ILPC's layout) of a graph's positive edges into ``output`` (see
    :func:`splits.inductive_split.inductive_split`); returns the split info. True negatives and
    nodes play no part: ILPC's files hold positive triples only."""
    inputs: Sequence[Path] = [Path(edges_path)]
    check_output_folder(output, inputs)
    info = read_graph_info(Path(edges_path).parent)
    relations = None if info is None else list(info["relations"])
    positives = read_any_edges(edges_path, "1", sep, relations)
    return inductive_split(positives, output, inputs=inputs, provenance=_provenance(info), **parameters)
