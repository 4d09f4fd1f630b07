"""DisGeNET: curated gene–disease associations and the disease vocabulary mappings (UMLS → DOID)."""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["BASE", "REMOTES", "read_associations", "read_do_mappings"]

BASE = "https://www.disgenet.org/static/disgenet_ap1/files/downloads/"
REMOTES = {
    "curated": Remote("DisGeNet", BASE + "curated_gene_disease_associations.tsv.gz",
                      "curated_gene_disease_associations.tsv.gz"),
    "mappings": Remote("DisGeNet", BASE + "disease_mappings.tsv.gz", "disease_mappings.tsv.gz"),
}


def read_associations(path) -> pl.DataFrame:
    """gene (Entrez id), umls (CUI), score (GDA score 0–1, as text)."""
    return read_table(path, {"geneId": "gene", "diseaseId": "umls", "score": "score"},
                      required=("gene", "umls"), numeric=("score",))


def read_do_mappings(path) -> pl.DataFrame:
    """umls → doid (``DOID:…``) from the rows whose vocabulary is DO."""
    frame = read_table(path, {"diseaseId": "umls", "vocabulary": "vocabulary", "code": "code"},
                       required=("umls", "vocabulary", "code"))
    return (frame.filter(pl.col("vocabulary").str.strip_chars() == "DO")
            .select("umls", pl.concat_str([pl.lit("DOID:"), pl.col("code").str.strip_chars().str.replace("^DOID:", "")])
                    .alias("doid"))
            .unique(maintain_order=True))
