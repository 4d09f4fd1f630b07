"""GO annotations (GAF 2.x) and the GO ontology (go-basic.obo)."""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["REMOTES", "read_annotations"]

REMOTES = {
    "annotations": Remote("GO", "http://current.geneontology.org/annotations/goa_human.gaf.gz", "goa_human.gaf.gz"),
    "ontology": Remote("GO", "http://purl.obolibrary.org/obo/go/go-basic.obo", "go-basic.obo"),
}


def read_annotations(path) -> pl.DataFrame:
    """GAF rows: db, uniprot (DB_Object_ID), go, evidence, negated.

    ``NOT`` in the qualifier column (``NOT|enables`` in GAF 2.2) marks a negated annotation: it is
    no positive edge (OpenBioLink ignored the qualifier and made one).
    """
    frame = read_table(path, {0: "db", 1: "uniprot", 3: "qualifier", 4: "go", 6: "evidence"}, header=False,
                       width=15, comment_prefixes=("!",), required=("uniprot", "go"))
    negated = pl.col("qualifier").fill_null("").str.split("|").list.contains("NOT")
    return frame.select("db", "uniprot", "go", "evidence", negated.alias("negated"))
