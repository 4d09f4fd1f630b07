"""CTD gene–pathway associations (KEGG and REACTOME pathways)."""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["REMOTES", "read_gene_pathways"]

REMOTES = {"pathways": Remote("CTD", "http://ctdbase.org/reports/CTD_genes_pathways.tsv.gz",
                              "CTD_genes_pathways.tsv.gz")}


def read_gene_pathways(path) -> pl.DataFrame:
    """gene (Entrez id), pathway (``KEGG:…``/``REACTOME:…``, CTD's ``hsa_M`` and ``REACT`` prefixes fixed).

    CTD's file opens with ``#`` comment lines, the last of which names the columns
    (``# GeneSymbol\\tGeneID\\tPathwayName\\tPathwayID``); the columns are taken by position.
    """
    frame = read_table(path, {1: "gene", 3: "pathway"}, header=False, width=4, required=("gene", "pathway"))
    pathway = pl.col("pathway").str.replace("^KEGG:hsa_M", "KEGG:M").str.replace("^REACT:", "REACTOME:")
    return frame.select("gene", pathway.alias("pathway"))
