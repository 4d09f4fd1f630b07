"""UniProt ID mapping: UniProt accession and Ensembl gene → Entrez gene.

Two layouts: ``HUMAN_9606_idmapping.dat`` (accession, id type, value; one pair a line) and
``HUMAN_9606_idmapping_selected.tab`` (22 fixed columns, ``; ``-joined lists).
"""
from __future__ import annotations

from typing import Tuple

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["BASE", "REMOTES", "SELECTED_COLUMNS", "read_dat", "read_selected"]

BASE = "https://ftp.uniprot.org/pub/databases/uniprot/current_release/knowledgebase/idmapping/by_organism/"
REMOTES = {
    "selected": Remote("UniProt", BASE + "HUMAN_9606_idmapping_selected.tab.gz", "HUMAN_9606_idmapping_selected.tab.gz"),
    "dat": Remote("UniProt", BASE + "HUMAN_9606_idmapping.dat.gz", "HUMAN_9606_idmapping.dat.gz"),
}
# 0-based columns of idmapping_selected.tab (UniProt's README: 1 UniProtKB-AC, 3 GeneID, 19 Ensembl)
SELECTED_COLUMNS = {0: "uniprot", 2: "gene", 18: "ensembl"}


def _strip_version(column: str) -> pl.Expr:
    return pl.col(column).str.replace(r"\.\d+$", "")


def read_dat(path) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """(uniprot → gene, ensembl → gene) from the ``.dat`` layout; Ensembl versions stripped."""
    frame = read_table(path, {0: "uniprot", 1: "kind", 2: "value"}, header=False, width=3,
                       required=("uniprot", "kind", "value"))
    genes = frame.filter(pl.col("kind") == "GeneID").select("uniprot", pl.col("value").alias("gene"))
    ensembl = frame.filter(pl.col("kind") == "Ensembl").select("uniprot", _strip_version("value").alias("ensembl"))
    return _pairs(genes, ensembl)


def read_selected(path) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """(uniprot → gene, ensembl → gene) from the ``_selected.tab`` layout."""
    frame = read_table(path, SELECTED_COLUMNS, header=False, width=19, required=("uniprot",))
    genes = frame.select("uniprot", pl.col("gene").str.split(";")).explode("gene")
    ensembl = frame.select("uniprot", pl.col("ensembl").str.split(";")).explode("ensembl")
    genes = genes.with_columns(pl.col("gene").str.strip_chars()).filter(pl.col("gene").fill_null("") != "")
    ensembl = ensembl.with_columns(_strip_version("ensembl").str.strip_chars()).filter(
        pl.col("ensembl").fill_null("") != "")
    return _pairs(genes, ensembl)


def _pairs(genes: pl.DataFrame, ensembl: pl.DataFrame) -> Tuple[pl.DataFrame, pl.DataFrame]:
    uniprot_to_gene = genes.unique(maintain_order=True)
    ensembl_to_gene = (ensembl.join(uniprot_to_gene, on="uniprot").select("ensembl", "gene")
                       .unique(maintain_order=True))
    return uniprot_to_gene, ensembl_to_gene
