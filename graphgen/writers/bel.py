"""BEL exports through PyBEL: a BEL Script and a PyBEL node-link JSON per edge set, gzipped.

Each edge becomes a qualified BEL statement: the subject and object nodes in the function of their
type (GENE ``p()``, GO and PATHWAY ``bp()``, DIS and PHENOTYPE ``path()``, DRUG ``a()``, ANATOMY
``pop()``) with the CURIE's prefix as namespace and its local part as identifier (no doubled
prefix); the citation is the source database (its web site as a ``url`` citation, never a
placeholder PubMed id); the evidence is the source's name; the annotations carry the source
(``SourceDatabase``), the quality score (``QualityScore``), the openbench edge type (``EdgeType``:
two edge types may share a BEL relation), ``Predicted`` for STITCH's predicted binding and
``TrueNegative`` in the negative files (BEL cannot negate a statement). Every namespace and
annotation is declared, so PyBEL reads the files back without warnings.

Streaming: the edges go through PyBEL a chunk at a time (a small ``BELGraph`` each, on a process
per core), and PyBEL serialises every statement and link; each chunk comes back as gzip members
(concatenated members are a valid gzip file). Only the node table is held whole. No time stamps
(the gzip headers' are zero), so the same graph gives the same bytes.
"""
from __future__ import annotations

import gzip
import json
import logging
import multiprocessing
import os
import warnings
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import polars as pl
from openbench.progress import progress as progress_bar

from graphgen.edge_types import PREFIX_TO_NODE_TYPE
from openbench.errors import InputError

__all__ = ["CHUNK_EDGES", "NODE_FUNCTIONS", "RELATIONS", "PREDICTED", "STORED_RELATION", "SOURCE_SITES",
           "bel_escaped", "citation", "write_bel"]

logger = logging.getLogger(__name__)

CHUNK_EDGES = 20_000
NODE_FUNCTIONS = {"GENE": "Protein", "GO": "BiologicalProcess", "DIS": "Pathology", "DRUG": "Abundance",
                  "PHENOTYPE": "Pathology", "PATHWAY": "BiologicalProcess", "ANATOMY": "Population"}
# OpenBioLink's mapping, corrected: GENE_BINDINH_GENE decreases, DRUG_PREDBIND_GENE is exported
RELATIONS = {
    **dict.fromkeys(["GENE_GENE", "GENE_EXPRESSED_ANATOMY", "GENE_PHENOTYPE", "DIS_PHENOTYPE", "DRUG_PHENOTYPE",
                     "GENE_DRUG", "DIS_DRUG", "GENE_DIS", "DRUG_PREDBIND_GENE"], "association"),
    **dict.fromkeys(["GENE_OVEREXPRESSED_ANATOMY", "DRUG_EXPRESSION_GENE"], "positiveCorrelation"),
    "GENE_UNDEREXPRESSED_ANATOMY": "negativeCorrelation",
    "GENE_EXPRESSION_GENE": "correlation",
    **dict.fromkeys(["GENE_GO", "GENE_PATHWAY", "PART_OF"], "partOf"),
    "IS_A": "isA",
    **dict.fromkeys(["GENE_INHIBITION_GENE", "DRUG_INHIBITION_GENE"], "decreases"),
    **dict.fromkeys(["GENE_BINDINH_GENE", "DRUG_BINDINH_GENE"], "directlyDecreases"),
    **dict.fromkeys(["GENE_ACTIVATION_GENE", "DRUG_ACTIVATION_GENE"], "increases"),
    **dict.fromkeys(["GENE_BINDACT_GENE", "DRUG_BINDACT_GENE"], "directlyIncreases"),
    **dict.fromkeys(["GENE_PTMOD_GENE", "GENE_BINDING_GENE", "DRUG_BINDING_GENE"], "binds"),
    **dict.fromkeys(["GENE_REACTION_GENE", "DRUG_REACTION_GENE", "GENE_CATALYSIS_GENE", "DRUG_CATALYSIS_GENE"],
                    "regulates"),
}
PREDICTED = {"DRUG_PREDBIND_GENE"}
# PyBEL stores "A binds B" as "A directlyIncreases complex(A, B)" (and so reads it back)
STORED_RELATION = {"binds": "directlyIncreases"}
SOURCE_SITES = {"STRING": "https://string-db.org", "STITCH": "http://stitch.embl.de", "GO": "http://geneontology.org",
                "DisGeNet": "https://www.disgenet.org", "HPO": "https://hpo.jax.org", "Bgee": "https://bgee.org",
                "CTD": "http://ctdbase.org", "CDT": "http://ctdbase.org", "SIDER": "http://sideeffects.embl.de",
                "DrugCentral": "https://drugcentral.org", "DO": "https://disease-ontology.org",
                "UBERON": "http://uberon.org"}


_PYBEL = None
_MEMO_CLASSES: Dict[type, type] = {}


def _pybel():
    global _PYBEL
    if _PYBEL is None:
        with warnings.catch_warnings():  # pybel imports pkg_resources, which warns that it is deprecated
            warnings.simplefilter("ignore")
            try:
                import pybel
                import pybel.canonicalize
                import pybel.dsl
            except ImportError as error:
                raise InputError(f"the BEL export needs PyBEL ({error}): pip install 'openbench[bel]'") from error
        _PYBEL = pybel
    return _PYBEL


def _memoised(cls: type) -> type:
    """A subclass of the PyBEL node class ``cls`` that computes its BEL term once: PyBEL hashes and
    compares nodes by their term, rebuilding it on every call (most of the export's time)."""
    if cls not in _MEMO_CLASSES:
        def as_bel(self, use_identifiers: bool = True) -> str:
            memo = self.__dict__.setdefault("_openbench_bel", {})
            if use_identifiers not in memo:
                memo[use_identifiers] = cls.as_bel(self, use_identifiers=use_identifiers)
            return memo[use_identifiers]

        _MEMO_CLASSES[cls] = type(cls.__name__, (cls,), {"as_bel": as_bel, "__hash__": cls.__hash__})
    return _MEMO_CLASSES[cls]


def bel_escaped(edges: pl.DataFrame) -> pl.DataFrame:
    """The text columns with BEL's string escapes (``\\`` for a backslash, ``\"`` for a double
    quote): PyBEL quotes identifiers and values but does not escape them, and a bare quote inside
    one makes the file unreadable. PyBEL reads the escaped form back as written."""
    escape = lambda column: (pl.col(column).cast(pl.String).fill_null("")  # noqa: E731
                             .str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True))
    return edges.with_columns([escape(column) for column in ("id1", "id2", "qscore", "source")])


def citation(source: str) -> Tuple[str, str]:
    site = SOURCE_SITES.get(source)
    return ("url", site) if site else ("other", source or "unknown source")


def _split(curie: str) -> Tuple[str, str]:
    prefix, _, local = curie.partition(":")
    return prefix, local


def _node(curie: str):
    pybel = _pybel()
    prefix, local = _split(curie)
    function = _memoised(getattr(pybel.dsl, NODE_FUNCTIONS[PREFIX_TO_NODE_TYPE[prefix]]))
    return function(namespace=prefix, identifier=local)


def _template(name: str, edges: pl.DataFrame, negative: bool):
    """An empty BELGraph holding the document metadata and every namespace and annotation the edges use."""
    pybel = _pybel()
    from openbench import __version__

    graph = pybel.BELGraph(name=name, version=__version__, authors="openbench", contact="openbench maintainers",
                           description="openbench export of " + ("true-negative" if negative else "positive") + " edges")
    ids = pl.concat([edges["id1"], edges["id2"]]).unique()
    for prefix in sorted(set(ids.str.extract(r"^([^:]+):", 1).drop_nulls().to_list())):
        graph.namespace_pattern[prefix] = ".+"
    graph.annotation_list["SourceDatabase"] = set(edges["source"].fill_null("").unique().to_list()) - {""}
    graph.annotation_list["EdgeType"] = set(edges["edge_type"].unique().to_list())
    graph.annotation_pattern["QualityScore"] = ".+"
    if PREDICTED & graph.annotation_list["EdgeType"]:
        graph.annotation_list["Predicted"] = {"true"}
    if negative:
        graph.annotation_list["TrueNegative"] = {"true"}
    return graph


def _chunk_graph(rows: List[tuple], nodes: Dict[str, object], negative: bool, definitions: dict):
    pybel = _pybel()
    graph = pybel.BELGraph()
    graph.namespace_pattern.update(definitions["namespace_pattern"])
    graph.annotation_pattern.update(definitions["annotation_pattern"])
    graph.annotation_list.update(definitions["annotation_list"])
    for id1, edge_type, id2, qscore, source in rows:
        annotations = {"EdgeType": edge_type}
        if source:
            annotations["SourceDatabase"] = source
        if qscore:
            annotations["QualityScore"] = qscore
        if edge_type in PREDICTED:
            annotations["Predicted"] = "true"
        if negative:
            annotations["TrueNegative"] = "true"
        qualifiers = dict(citation=citation(source), evidence=source or "unknown source", annotations=annotations)
        if RELATIONS[edge_type] == "binds":
            graph.add_binds(nodes[id1], nodes[id2], **qualifiers)
        else:
            graph.add_qualified_edge(nodes[id1], nodes[id2], relation=RELATIONS[edge_type], **qualifiers)
    return graph


_WORKER: dict = {}


def _start_worker(curies: List[str], index_of: Dict[str, int], definitions: dict, negative: bool) -> None:
    """Per process: the node objects, the node-link index of each BEL term, the declarations."""
    _WORKER.update(nodes={curie: _node(curie) for curie in curies}, index_of=index_of, definitions=definitions,
                   negative=negative)


def _serialise_chunk(rows: List[tuple]) -> Tuple[bytes, bytes]:
    """The BEL Script statements of ``rows`` and their node-link JSON links (both by PyBEL), each
    as one gzip member: members concatenate into a valid gzip file, so the compression runs here,
    on the worker, too."""
    pybel = _pybel()
    chunk = _chunk_graph(rows, _WORKER["nodes"], _WORKER["negative"], _WORKER["definitions"])
    script = "".join(line + "\n" for line in pybel.canonicalize._to_bel_lines_body(chunk, True))
    index_of = _WORKER["index_of"]
    links = []
    for u, v, key, data in chunk.edges(keys=True, data=True):
        if "citation" in data:  # complexes' member edges are written once, with the nodes
            links.append(_link(u, v, key, data, index_of))
    return _member(script), _member(", ".join(links))


def _link(u, v, key, data, index_of: Dict[str, int]) -> str:
    """One node-link JSON link, as ``pybel.to_nodelink`` writes it."""
    entry = dict(data)
    entry.update(source=index_of[u.as_bel()], target=index_of[v.as_bel()], key=key)
    return json.dumps(entry, ensure_ascii=False)


def _member(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0) if text else b""


@contextmanager
def _chunk_results(chunks: Iterator[List[tuple]], curies, index_of, definitions, negative: bool, workers: int):
    """Serialised chunks in order: in this process, or on ``workers`` processes (PyBEL is pure
    Python, so processes are what uses the cores)."""
    if workers <= 1:
        _start_worker(curies, index_of, definitions, negative)
        yield map(_serialise_chunk, chunks)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process whose polars threads run
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(curies, index_of, definitions, negative)) as pool:
        yield _ordered(pool, chunks, ahead=2 * workers)


def _ordered(pool, chunks, ahead: int):
    pending = deque()
    for chunk in chunks:
        pending.append(pool.submit(_serialise_chunk, chunk))
        if len(pending) > ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def write_bel(edges: pl.DataFrame, folder: Path, name: str, negative: bool, workers: Optional[int] = None,
              progress: bool = False) -> Dict[str, int]:
    """``<name>.bel.gz`` and ``<name>.bel.nodelink.json.gz`` in ``folder`` from ``edges`` (columns
    id1, edge_type, id2, qscore, source as text); returns the statement count per BEL relation
    (as PyBEL stores it: binding becomes directlyIncreases of the complex).

    :param workers: processes serialising chunks (default: one per core when there are several
        chunks); the files do not depend on it.
    """
    if workers is None:
        workers = min(os.cpu_count() or 1, 4) if edges.height > CHUNK_EDGES else 1
    pybel = _pybel()
    unknown = sorted(set(edges["edge_type"].unique().to_list()) - set(RELATIONS))
    if unknown:
        raise ValueError(f"no BEL relation for edge type(s) {', '.join(unknown)}")
    edges = bel_escaped(edges)
    template = _template(name, edges, negative)
    curies = pl.concat([edges["id1"], edges["id2"]]).unique().sort().to_list()
    nodes = {curie: _node(curie) for curie in curies}
    node_graph = pybel.BELGraph()
    for node in nodes.values():
        node_graph.add_node_from_data(node)
    binding = edges.filter(pl.col("edge_type").replace_strict(RELATIONS, default=None) == "binds")
    for id1, id2 in binding.select("id1", "id2").unique().sort(["id1", "id2"]).rows():
        node_graph.add_node_from_data(pybel.dsl.ComplexAbundance([nodes[id1], nodes[id2]]))
    node_entries = pybel.to_nodelink(node_graph)["nodes"]  # sorted by BEL term, as PyBEL writes them
    index_of = {entry["bel"]: i for i, entry in enumerate(node_entries)}
    counts: Dict[str, int] = {}
    for relation in edges["edge_type"].replace_strict(RELATIONS).to_list():
        relation = STORED_RELATION.get(relation, relation)
        counts[relation] = counts.get(relation, 0) + 1
    header = list(pybel.to_bel_script_lines(template))[1:]  # the first line is a time stamp
    graph_entry = pybel.to_nodelink(template)["graph"]
    definitions = {"namespace_pattern": dict(template.namespace_pattern),
                   "annotation_pattern": dict(template.annotation_pattern),
                   "annotation_list": {k: set(v) for k, v in template.annotation_list.items()}}
    chunks = (edges.slice(start, CHUNK_EDGES).rows() for start in range(0, edges.height, CHUNK_EDGES))
    with open(folder / f"{name}.bel.gz", "wb") as script, open(folder / f"{name}.bel.nodelink.json.gz", "wb") as link, \
            _chunk_results(chunks, curies, index_of, definitions, negative, workers) as results:
        script.write(_member("# BEL Script written by openbench with PyBEL " + pybel.get_version() + "\n"
                             + "".join(line + "\n" for line in header)))
        link.write(_member('{"directed": true, "multigraph": true, "graph": '
                           + json.dumps(graph_entry, ensure_ascii=False) + ', "nodes": ['
                           + ", ".join(json.dumps(e, ensure_ascii=False) for e in node_entries) + '], "links": ['))
        separator = b""
        for statements, links in progress_bar(results, total=-(-edges.height // CHUNK_EDGES), desc=f"BEL {name}",
                                              unit="chunk", enabled=progress):
            script.write(statements)
            if links:
                link.write(separator + links)
                separator = _member(", ")
        members = [_link(u, v, key, data, index_of) for u, v, key, data in node_graph.edges(keys=True, data=True)]
        if members:
            link.write(separator + _member(", ".join(members)))
        link.write(_member("]}\n"))
    logger.info("BEL %s: %d statements", name, edges.height)
    return counts
