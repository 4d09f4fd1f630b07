"""RDF exports (N-Triples, Turtle, N3) of a graph, written by streaming.

Nodes are ``https://identifiers.org/<CURIE>`` IRIs typed with a class of the openbench vocabulary
(``ob:GENE`` …); an edge is the triple ``<id1> ob:<EDGE_TYPE> <id2>`` plus a statement node (RDF
reification) that carries its quality score and source as real triples::

    <…/NCBIGENE:1> ob:GENE_GENE <…/NCBIGENE:2> .
    _:e0 a rdf:Statement ; rdf:subject <…/NCBIGENE:1> ; rdf:predicate ob:GENE_GENE ;
         rdf:object <…/NCBIGENE:2> ; ob:qscore "700" ; ob:source "STRING" .

True negatives never assert the positive fact: their predicate is ``ob:NOT_<EDGE_TYPE>``.
Every term is serialised by rdflib once per distinct node, predicate or literal; the lines are
assembled by polars a slice of edges at a time, so memory stays bounded by the slice and the
node table (OpenBioLink's N3 had the class in a comment and the score in comments; see the spec).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable
from urllib.parse import quote

import polars as pl
from rdflib import Literal, Namespace, URIRef
from rdflib.namespace import RDF

__all__ = ["VOCAB", "IDENTIFIERS", "EXTENSIONS", "NEGATED_PREFIX", "SLICE_ROWS", "node_iri", "write_nodes",
           "write_edges"]

VOCAB = Namespace("https://w3id.org/openbench/vocab#")
IDENTIFIERS = "https://identifiers.org/"
EXTENSIONS = {"RDF-NT": "nt", "RDF-TTL": "ttl", "RDF-N3": "n3"}
NEGATED_PREFIX = "NOT_"
SLICE_ROWS = 500_000
# characters kept as they are in an identifiers.org IRI (RFC 3987 sub-delims, ':' and '@' among them)
_IRI_SAFE = ":@!$&'()*+,;=-._~/"


def node_iri(curie: str) -> URIRef:
    return URIRef(IDENTIFIERS + quote(curie, safe=_IRI_SAFE))


def _prefixed(fmt: str) -> bool:
    return fmt != "RDF-NT"


def _header(fmt: str) -> str:
    if not _prefixed(fmt):
        return ""
    return f"@prefix ob: <{VOCAB}> .\n@prefix rdf: <{RDF}> .\n\n"


def _term(term, fmt: str) -> str:
    """A vocabulary or rdf: IRI as the format writes it (prefixed name where prefixes are declared)."""
    text = str(term)
    if _prefixed(fmt):
        for prefix, namespace in (("ob", str(VOCAB)), ("rdf", str(RDF))):
            if text.startswith(namespace) and text[len(namespace):].replace("_", "").isalnum():
                return f"{prefix}:{text[len(namespace):]}"
    return URIRef(text).n3()


def _replace(column: str, mapping: Dict[str, str]) -> pl.Expr:
    return pl.col(column).replace_strict(mapping, return_dtype=pl.String)


def write_nodes(nodes: pl.DataFrame, path: Path, fmt: str) -> int:
    """``<iri> a ob:<NODE_TYPE> .`` per node (columns id, node_type as text); returns the triple count."""
    type_terms = {name: _term(VOCAB[name], fmt) for name in nodes["node_type"].unique().to_list()}
    a = "a" if _prefixed(fmt) else RDF.type.n3()
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(_header(fmt))
        for start in range(0, nodes.height, SLICE_ROWS):
            part = nodes.slice(start, SLICE_ROWS)
            iris = {curie: node_iri(curie).n3() for curie in part["id"].to_list()}
            lines = part.select(pl.format("{} " + a + " {} .", _replace("id", iris), _replace("node_type", type_terms)))
            _write_lines(handle, lines.to_series())
    return nodes.height


def write_edges(edges: pl.DataFrame, path: Path, fmt: str, negative: bool) -> int:
    """The asserted triple and its statement node per edge (columns id1, edge_type, id2, qscore,
    source as text; empty qscore: no score triple); returns the number of edges written."""
    prefix = NEGATED_PREFIX if negative else ""
    predicates = {name: _term(VOCAB[prefix + name], fmt) for name in edges["edge_type"].unique().to_list()}
    qscores = {q: Literal(q).n3() for q in edges["qscore"].drop_nulls().unique().to_list() if q != ""}
    sources = {s: Literal(s).n3() for s in edges["source"].fill_null("").unique().to_list()}
    names = {key: _term(term, fmt) for key, term in (("type", RDF.type), ("statement", RDF.Statement),
                                                      ("subject", RDF.subject), ("predicate", RDF.predicate),
                                                      ("object", RDF.object), ("qscore", VOCAB.qscore),
                                                      ("source", VOCAB.source))}
    if _prefixed(fmt):
        statement = ("{s} {p} {o} .\n_:e{n} a " + names["statement"] + " ; " + names["subject"] + " {s} ; "
                     + names["predicate"] + " {p} ; " + names["object"] + " {o}{q} ; " + names["source"] + " {src} .")
        score = " ; " + names["qscore"] + " {qs}"
    else:
        statement = ("{s} {p} {o} .\n_:e{n} " + names["type"] + " " + names["statement"] + " .\n_:e{n} "
                     + names["subject"] + " {s} .\n_:e{n} " + names["predicate"] + " {p} .\n_:e{n} "
                     + names["object"] + " {o} .{q}\n_:e{n} " + names["source"] + " {src} .")
        score = "\n_:e{n} " + names["qscore"] + " {qs} ."
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(_header(fmt))
        for start in range(0, edges.height, SLICE_ROWS):
            part = edges.slice(start, SLICE_ROWS).with_row_index("n", offset=start)
            distinct = pl.concat([part["id1"], part["id2"]]).unique().to_list()
            iris = {curie: node_iri(curie).n3() for curie in distinct}
            columns = {"s": _replace("id1", iris), "p": _replace("edge_type", predicates), "o": _replace("id2", iris),
                       "n": pl.col("n").cast(pl.String), "src": _replace("source", sources)}
            has_score = pl.col("qscore").is_not_null() & (pl.col("qscore") != "")
            scored = _format(score, {"n": columns["n"], "qs": pl.col("qscore").replace_strict(
                qscores, default="", return_dtype=pl.String)})
            columns["q"] = pl.when(has_score).then(scored).otherwise(pl.lit(""))
            lines = part.with_columns(pl.col("source").fill_null("")).select(_format(statement, columns))
            _write_lines(handle, lines.to_series())
    return edges.height


def _format(template: str, columns: Dict[str, pl.Expr]) -> pl.Expr:
    """Text from ``template`` with each ``{name}`` replaced by ``columns[name]`` (names may repeat)."""
    parts, rest = [], template
    while "{" in rest:
        before, _, after = rest.partition("{")
        name, _, rest = after.partition("}")
        if before:
            parts.append(pl.lit(before))
        parts.append(columns[name])
    if rest:
        parts.append(pl.lit(rest))
    return pl.concat_str(parts)


def _write_lines(handle, lines: Iterable[str]) -> None:
    handle.write("".join(line + "\n" for line in lines))
