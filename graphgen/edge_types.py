"""THE registry of the graph: node types, CURIE prefixes, the 32 edge types, quality cutoffs.

Every other module reads this table; nothing repeats it. Names and numbers follow OpenBioLink's
``EdgeType`` enum (its names are what the output files hold); see ../shared/specs/openbiolink.md
§2.4–§2.6.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple, Union

from openbench.errors import InputError

__all__ = ["QUALITY_LEVELS", "QUALITY_SYNONYMS", "NODE_TYPES", "PREFIX_TO_NODE_TYPE", "MinScore", "ExcludedScores",
           "STRING_LIKE", "DISGENET", "EVIDENCE", "BGEE_PRESENCE", "BGEE_DIFFERENTIAL", "NO_SCORE", "EdgeType",
           "EDGE_TYPES", "RegistryError", "edge_type", "parent_of", "normalise_quality", "node_type_of"]

QUALITY_LEVELS = ("hq", "mq", "lq", "nq")
QUALITY_SYNONYMS = {"high": "hq", "h": "hq", "medium": "mq", "m": "mq", "low": "lq", "l": "lq", "none": "nq"}

# node type -> CURIE prefixes its ids may carry (the first is the default)
NODE_TYPES: Dict[str, Tuple[str, ...]] = {
    "GENE": ("NCBIGENE",),
    "GO": ("GO",),
    "DIS": ("DOID",),
    "DRUG": ("PUBCHEM.COMPOUND",),
    "PHENOTYPE": ("HP",),
    "PATHWAY": ("KEGG", "REACTOME"),
    "ANATOMY": ("UBERON", "CL"),
}
PREFIX_TO_NODE_TYPE: Dict[str, str] = {prefix: kind for kind, prefixes in NODE_TYPES.items() for prefix in prefixes}


@dataclass(frozen=True)
class MinScore:
    """Keep an edge when its numeric score is strictly greater than ``threshold``."""

    threshold: float

    def keeps(self, score: Optional[str]) -> bool:
        return score is not None and score != "" and float(score) > self.threshold


@dataclass(frozen=True)
class ExcludedScores:
    """Keep an edge unless its score (an evidence code or call quality) is one of ``excluded``."""

    excluded: FrozenSet[str]

    def keeps(self, score: Optional[str]) -> bool:
        return score not in self.excluded


Cutoff = Union[MinScore, ExcludedScores, None]


def _levels(hq: Cutoff, mq: Cutoff, lq: Cutoff) -> Dict[str, Cutoff]:
    return {"hq": hq, "mq": mq, "lq": lq, "nq": None}


STRING_LIKE = _levels(MinScore(700), MinScore(400), MinScore(0))
DISGENET = _levels(MinScore(0.7), MinScore(0.4), MinScore(0))
EVIDENCE = _levels(ExcludedScores(frozenset({"IEA"})), ExcludedScores(frozenset()), ExcludedScores(frozenset()))
BGEE_PRESENCE = _levels(ExcludedScores(frozenset({"silver quality"})), None, None)
BGEE_DIFFERENTIAL = _levels(ExcludedScores(frozenset({"low quality"})), None, None)
NO_SCORE = _levels(None, None, None)


@dataclass(frozen=True)
class EdgeType:
    """One relation: ``signatures`` lists the allowed (head type, tail type) pairs."""

    name: str
    code: int
    signatures: Tuple[Tuple[str, str], ...]
    directed: bool
    parent: str
    cutoffs: Dict[str, Cutoff]
    true_negatives: bool = False

    def cutoff(self, level: str) -> Cutoff:
        return self.cutoffs[normalise_quality(level)]


def _edge(name, code, signatures, directed=True, parent=None, cutoffs=NO_SCORE, true_negatives=False):
    return EdgeType(name, code, tuple(signatures), directed, parent or name, cutoffs, true_negatives)


_GENE_GENE = [("GENE", "GENE")]
_DRUG_GENE = [("DRUG", "GENE")]
EDGE_TYPES: Dict[str, EdgeType] = {edge.name: edge for edge in [
    _edge("IS_A", 0, [("GO", "GO"), ("DIS", "DIS"), ("PHENOTYPE", "PHENOTYPE"), ("ANATOMY", "ANATOMY")]),
    _edge("PART_OF", 1, [("GO", "GO"), ("ANATOMY", "ANATOMY")]),
    _edge("GENE_GENE", 10, _GENE_GENE, directed=False, cutoffs=STRING_LIKE),
    _edge("GENE_GO", 11, [("GENE", "GO")], cutoffs=EVIDENCE, true_negatives=True),  # GAF NOT qualifiers
    _edge("GENE_DIS", 12, [("GENE", "DIS")], cutoffs=DISGENET),
    _edge("GENE_DRUG", 13, [("GENE", "DRUG")], cutoffs=STRING_LIKE),
    _edge("GENE_PHENOTYPE", 14, [("GENE", "PHENOTYPE")]),
    _edge("GENE_PATHWAY", 15, [("GENE", "PATHWAY")]),
    _edge("GENE_EXPRESSED_ANATOMY", 16, [("GENE", "ANATOMY")], cutoffs=BGEE_PRESENCE, true_negatives=True),
    _edge("DIS_DRUG", 17, [("DIS", "DRUG")], true_negatives=True),
    _edge("DIS_PHENOTYPE", 18, [("DIS", "PHENOTYPE")], cutoffs=EVIDENCE, true_negatives=True),
    _edge("DRUG_PHENOTYPE", 19, [("DRUG", "PHENOTYPE")]),
    _edge("GENE_OVEREXPRESSED_ANATOMY", 20, [("GENE", "ANATOMY")], parent="GENE_EXPRESSED_ANATOMY",
          cutoffs=BGEE_DIFFERENTIAL, true_negatives=True),
    _edge("GENE_UNDEREXPRESSED_ANATOMY", 201, [("GENE", "ANATOMY")], parent="GENE_EXPRESSED_ANATOMY",
          cutoffs=BGEE_DIFFERENTIAL, true_negatives=True),
    *[_edge(f"DRUG_{action}_GENE", code, _DRUG_GENE, parent="GENE_DRUG", cutoffs=STRING_LIKE)
      for action, code in (("ACTIVATION", 21), ("BINDING", 22), ("CATALYSIS", 23), ("EXPRESSION", 24),
                           ("INHIBITION", 25), ("PREDBIND", 26), ("REACTION", 27), ("BINDACT", 28),
                           ("BINDINH", 29))],
    *[_edge(f"GENE_{action}_GENE", code, _GENE_GENE, directed=action not in ("BINDING", "PTMOD"),
            parent="GENE_GENE", cutoffs=STRING_LIKE)
      for action, code in (("ACTIVATION", 31), ("BINDING", 32), ("CATALYSIS", 33), ("EXPRESSION", 34),
                           ("INHIBITION", 35), ("PTMOD", 36), ("REACTION", 37), ("BINDACT", 38),
                           ("BINDINH", 39))],
]}


class RegistryError(InputError):
    """An unknown name; the message lists the valid ones."""


def edge_type(name: str) -> EdgeType:
    try:
        return EDGE_TYPES[name]
    except KeyError:
        raise RegistryError(f"unknown edge type {name!r}; valid: {', '.join(EDGE_TYPES)}") from None


def parent_of(name: str) -> str:
    """The super-property of an edge type (itself for top-level types)."""
    return edge_type(name).parent


def normalise_quality(level: str) -> str:
    """hq/mq/lq/nq, also accepting high/h, medium/m, low/l and none."""
    key = level.strip().lower()
    key = QUALITY_SYNONYMS.get(key, key)
    if key not in QUALITY_LEVELS:
        raise RegistryError(f"unknown quality level {level!r}; valid: {', '.join(QUALITY_LEVELS)} "
                            f"(or {', '.join(QUALITY_SYNONYMS)})")
    return key


def node_type_of(curie: str) -> str:
    """Node type of a CURIE by its prefix, e.g. ``NCBIGENE:7157`` -> ``GENE``."""
    prefix, separator, _ = curie.partition(":")
    if not separator or prefix not in PREFIX_TO_NODE_TYPE:
        raise RegistryError(f"cannot type {curie!r}: expected one of the prefixes {', '.join(PREFIX_TO_NODE_TYPE)}")
    return PREFIX_TO_NODE_TYPE[prefix]
