"""BioKG (dsi-bdi/biokg): ``biokg.links.tsv`` from ``biokg.zip``, headerless (``subject, predicate,
object``; a loader that infers a header loses the first triple).

The file has no node types; each relation implies its endpoints' types (``links_description.txt``):
a UniProt accession is a protein, a DrugBank id a drug, and so on (:data:`RELATIONS`). A node that
two relations type differently keeps the first type and is counted. PPI and DDI are symmetric and
stored once (``s < o``): read as undirected. DPI repeats every DRUG_TARGET / DRUG_CARRIER /
DRUG_ENZYME / DRUG_TRANSPORTER pair as a generic link: those copies are counted (the split's
relation-pattern cleaning keeps a pair's copy under the other relation out of training).
"""
from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from openbench._io.inputs import line_of_row, read_table
from openbench.datasets.published.native.graph import NativeGraph, first_bad_row
from openbench.errors import InputError

__all__ = ["FILE", "RELATIONS", "read_biokg"]

logger = logging.getLogger(__name__)
FILE = "biokg.links.tsv"
# relation -> (subject type, object type); the two *_PATHWAY names links_description.txt uses for
# what compile_biokg.py writes as COMPLEX_IN_PATHWAY / COMPLEX_TOP_LEVEL_PATHWAY are accepted too
RELATIONS = {
    "PPI": ("protein", "protein"), "DPI": ("drug", "protein"), "DRUG_TARGET": ("drug", "protein"),
    "DRUG_CARRIER": ("drug", "protein"), "DRUG_ENZYME": ("drug", "protein"), "DRUG_TRANSPORTER": ("drug", "protein"),
    "DDI": ("drug", "drug"), "PROTEIN_PATHWAY_ASSOCIATION": ("protein", "pathway"),
    "PROTEIN_DISEASE_ASSOCIATION": ("protein", "disease"), "MEMBER_OF_COMPLEX": ("protein", "complex"),
    "COMPLEX_IN_PATHWAY": ("complex", "pathway"), "COMPLEX_TOP_LEVEL_PATHWAY": ("complex", "pathway"),
    "MEMBER_OF_PATHWAY": ("complex", "pathway"), "MEMBER_OF_TOP_LEVEL_PATHWAY": ("complex", "pathway"),
    "DRUG_PATHWAY_ASSOCIATION": ("drug", "pathway"), "DRUG_DISEASE_ASSOCIATION": ("drug", "disease"),
    "DISEASE_PATHWAY_ASSOCIATION": ("disease", "pathway"), "DISEASE_GENETIC_DISORDER": ("disease", "genetic_disorder"),
    "RELATED_GENETIC_DISORDER": ("protein", "genetic_disorder")}
SYMMETRIC = frozenset({"PPI", "DDI"})
DRUG_FUNCTIONS = ("DRUG_TARGET", "DRUG_CARRIER", "DRUG_ENZYME", "DRUG_TRANSPORTER")


def read_biokg(folder: Path) -> NativeGraph:
    path = folder / FILE
    rows = read_table(path, {0: "h", 1: "r", 2: "t"}, header=False, width=3, required=("h", "r", "t"),
                      comment_prefixes=())
    row = first_bad_row(rows, ~pl.col("r").is_in(list(RELATIONS)))
    if row is not None:
        raise InputError(f"predicate {rows['r'][row]!r}: expected one of BioKG's relations "
                         f"({', '.join(RELATIONS)})", path, line_of_row(path, row))
    signatures = pl.DataFrame([(name, a, b) for name, (a, b) in RELATIONS.items()],
                              schema={"r": pl.String, "h_type": pl.String, "t_type": pl.String}, orient="row")
    typed = rows.join(signatures, on="r", how="left", maintain_order="left")
    ends = pl.concat([typed.select(pl.col("h").alias("id"), pl.col("h_type").alias("node_type")),
                      typed.select(pl.col("t").alias("id"), pl.col("t_type").alias("node_type"))])
    typings = ends.unique(maintain_order=True)
    nodes = typings.unique("id", keep="first", maintain_order=True)
    conflicts = typings.height - nodes.height
    if conflicts:
        logger.warning("%s: %d node(s) typed differently by two relations; each keeps its first type", path.name, conflicts)
    pairs = rows.filter(pl.col("r").is_in(DRUG_FUNCTIONS)).select("h", "t").unique()
    dpi_copies = rows.filter(pl.col("r") == "DPI").join(pairs, on=["h", "t"], how="semi").height
    return NativeGraph(nodes=nodes, edges=rows, undirected=SYMMETRIC,
                       id_scheme="the source ids as BioKG writes them (UniProt, DrugBank, MeSH, KEGG, OMIM, …); node "
                                 "types implied by the relations",
                       counts={"rows": rows.height, "relations": int(rows.get_column("r").n_unique())},
                       problems={"node_type_conflicts": conflicts, "dpi_copies_of_drug_function_links": dpi_copies},
                       notes=["headerless: the first line is a triple", "PPI and DDI are stored once (s < o)"])
