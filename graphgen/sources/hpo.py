"""HPO: disease–phenotype annotations (phenotype.hpoa, and the older phenotype_annotation.tab
layouts, negated rows included) and gene–phenotype links (genes_to_phenotype.txt, both layouts)."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import iter_lines, read_table
from openbench.errors import InputError

__all__ = ["REMOTES", "read_disease_phenotype", "read_gene_phenotype"]

REMOTES = {
    "annotations": Remote("HPO", "http://purl.obolibrary.org/obo/hp/hpoa/phenotype.hpoa", "phenotype.hpoa"),
    "genes": Remote("HPO", "http://purl.obolibrary.org/obo/hp/hpoa/genes_to_phenotype.txt",
                    "genes_to_phenotype.txt"),
    "ontology": Remote("HPO", "http://purl.obolibrary.org/obo/hp.obo", "hp.obo"),
}

# the pre-2019 phenotype_annotation.tab: 14 columns, no header
_OLD_ANNOTATION = {0: "db", 1: "db_object", 2: "name", 3: "qualifier", 4: "hpo", 6: "evidence", 11: "aspect"}
# the 12 columns of phenotype.hpoa, by position (for copies whose header row is space-separated)
_HPOA_POSITIONS = {0: "disease", 1: "name", 2: "qualifier", 3: "hpo", 5: "evidence", 10: "aspect"}


def read_disease_phenotype(path) -> pl.DataFrame:
    """Disease–phenotype annotations: disease (``OMIM:…``, ``ORPHA:…``), name, hpo, evidence,
    aspect (``P`` phenotype, ``I`` inheritance, ``C`` course, ``M`` modifier), negated (bool).

    Layouts: phenotype.hpoa with a ``database_id`` header (2021+; tab- or, in some copies,
    space-separated) or a ``#DatabaseID`` header (2019–2020), and the older headerless
    phenotype_annotation(_negated).tab. ``NOT`` in the qualifier column marks a negated annotation
    (a true negative).
    """
    path = Path(path)
    header_at = _hpoa_header(path)
    if header_at == "database_id":
        frame = read_table(path, {"database_id": "disease", "disease_name": "name", "qualifier": "qualifier",
                                  "hpo_id": "hpo", "evidence": "evidence", "aspect": "aspect"},
                           required=("disease", "hpo"))
    elif header_at == "database_id spaces":  # the header row counts as a comment; columns by position
        frame = read_table(path, _HPOA_POSITIONS, header=False, width=12, comment_prefixes=("#", "database_id "),
                           required=("disease", "hpo"))
    elif header_at == "#databaseid":
        frame = read_table(path, {"#DatabaseID": "disease", "DiseaseName": "name", "Qualifier": "qualifier",
                                  "HPO_ID": "hpo", "Evidence": "evidence", "Aspect": "aspect"},
                           header_prefix="#DatabaseID", required=("disease", "hpo"))
    elif header_at == "none":
        frame = read_table(path, _OLD_ANNOTATION, header=False, width=12, required=("db", "db_object", "hpo"))
        frame = frame.select(pl.concat_str(["db", "db_object"], separator=":").alias("disease"), "name", "qualifier",
                             "hpo", "evidence", "aspect")
    else:
        raise InputError("the file is empty; expected HPO annotations", path)
    return frame.select("disease", "name", "hpo", "evidence", "aspect",
                        pl.col("qualifier").fill_null("").str.to_uppercase().str.contains("NOT").alias("negated"))


def _hpoa_header(path: Path) -> str:
    for _, line in iter_lines(path, ()):
        lowered = line.lower()
        if lowered.startswith("database_id\t"):
            return "database_id"
        if lowered.startswith("database_id "):
            return "database_id spaces"
        if lowered.startswith("#databaseid\t"):
            return "#databaseid"
        if not line.startswith("#"):
            return "none"
    return "empty"


def read_gene_phenotype(path) -> pl.DataFrame:
    """Gene–phenotype links: gene (Entrez id), hpo, disease (may be empty in the older layout)."""
    path = Path(path)
    first = next(iter_lines(path, ()), None)
    if first is None:
        raise InputError("the file is empty; expected HPO gene–phenotype links", path)
    if first[1].lower().startswith("ncbi_gene_id"):
        return read_table(path, {"ncbi_gene_id": "gene", "hpo_id": "hpo", "disease_id": "disease"},
                          required=("gene", "hpo"))
    # older layout: a '#Format:' comment line, then entrez id, symbol, HPO id, name, … (9 columns)
    frame = read_table(path, {0: "gene", 2: "hpo"}, header=False, width=4, required=("gene", "hpo"))
    return frame.with_columns(pl.lit(None, dtype=pl.String).alias("disease"))
