"""Readers of the published biomedical KGs in their native formats, into openbench's graph.

=============  ==========================================  ===============================================
format         files                                       what the reader fixes or checks
=============  ==========================================  ===============================================
hetionet       nodes TSV (CRLF) + edges SIF (gzip)          ``Kind::id`` ids checked against kinds and the 24
                                                           metaedges; isolated nodes kept; only Gr>G directed
primekg        ``kg.csv`` (quoted CSV)                      nodes by type+source+id, not name; x/y-swapped
                                                           copies collapsed, exact duplicates dropped
drkg           ``drkg.tsv`` (headerless)                    first line kept; empty ids refused and counted;
                                                           ``Head:Tail`` suffix checked
ogbl-biokg     OGB folder (``split/random/*.pt``)           per-type ids kept apart; official split kept
biokg          ``biokg.links.tsv`` (headerless)             first line kept; node types from the relations
pharmkg8k      ``train/valid/test.tsv`` (headerless)        official split kept; its overlaps counted
=============  ==========================================  ===============================================

Labels are read as exact strings (no NA conversion; ``NA`` stays ``NA``). :func:`convert` writes
the graph (``graph/``, :mod:`openbench.datasets.published.native.graph`) and, where the publisher has one,
the official split (``split/``, OpenBioLink's sample layout), and checks the counts a registry
entry states against what was read.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Callable, Dict

from openbench.datasets.published.native.biokg import read_biokg
from openbench.datasets.published.native.drkg import read_drkg
from openbench.datasets.published.native.graph import NativeGraph, finish_edges, write_graph
from openbench.datasets.published.native.hetionet import read_hetionet
from openbench.datasets.published.native.ogbl_biokg import read_ogbl_biokg
from openbench.datasets.published.native.pharmkg import read_pharmkg8k
from openbench.datasets.published.native.primekg import read_primekg
from openbench.errors import InputError
from openbench.datasets.layouts import SAMPLE_FILES
from openbench.progress import stage

__all__ = ["READERS", "NATIVE_FORMATS", "OFFICIAL_SPLITS", "NativeGraph", "convert", "CountMismatch", "GRAPH_FOLDER",
           "SPLIT_FOLDER"]

logger = logging.getLogger(__name__)

READERS: Dict[str, Callable[[Path], NativeGraph]] = {
    "hetionet": read_hetionet, "primekg": read_primekg, "drkg": read_drkg, "ogbl-biokg": read_ogbl_biokg,
    "biokg": read_biokg, "pharmkg8k": read_pharmkg8k}
NATIVE_FORMATS = tuple(READERS)
OFFICIAL_SPLITS = frozenset({"ogbl-biokg", "pharmkg8k"})  # the formats whose publisher ships a split
GRAPH_FOLDER = "graph"
SPLIT_FOLDER = "split"


class CountMismatch(InputError):
    """What was read differs from the counts the publisher states."""


def check_counts(stated: Dict[str, int], read: Dict[str, int], source: str) -> None:
    """Every count the registry entry states must equal what the reader counted."""
    unknown = sorted(set(stated) - set(read))
    if unknown:
        raise CountMismatch(f"the registry entry states count(s) {', '.join(unknown)} the {source} reader does not "
                            f"produce; it counts {', '.join(sorted(read))}")
    wrong = [f"{key} {read[key]:,} (the publisher states {stated[key]:,})" for key in sorted(stated)
             if read[key] != stated[key]]
    if wrong:
        raise CountMismatch(f"read {'; '.join(wrong)}: a truncated, altered or different release?")


def convert(fmt: str, native: Path, target: Path, dataset: dict, stated_counts: Dict[str, int]) -> dict:
    """Read the native files in ``native`` with the ``fmt`` reader, check ``stated_counts``, and
    write ``target/graph`` (and ``target/split`` for an official split given as files). Returns
    the graph description (``graph_info.json``), with ``evaluation`` naming the folder that
    ``evaluate --dataset NAME`` reads ("split", "native") or None."""
    if fmt not in READERS:
        raise InputError(f"no reader for the format {fmt!r}; expected one of {', '.join(READERS)}")
    name = dataset.get("name", fmt)
    stage("%s: reading the %s files in %s", name, fmt, native)
    graph = READERS[fmt](native)
    check_counts(stated_counts, graph.counts, fmt)
    stage("%s: %d nodes, %d rows read; writing openbench's graph", name, graph.nodes.height, graph.edges.height)
    edges, fixed = finish_edges(graph.edges, graph.undirected)
    graph.problems = {**fixed, **graph.problems}
    for problem, count in graph.problems.items():
        if count and problem not in ("self_loops_kept", "isolated_nodes_kept"):
            logger.info("%s: %s: %d", name, problem.replace("_", " "), count)
    info = write_graph(graph, edges, target / GRAPH_FOLDER, name, dataset)
    if graph.official is not None:
        folder = target / SPLIT_FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        for split, path in graph.official.items():  # byte for byte: the split as published
            shutil.copyfile(path, folder / SAMPLE_FILES[split])
    info["evaluation"] = {"split": SPLIT_FOLDER, "native": "native"}.get(graph.evaluation or "")
    return info
