"""DrugCentral: tables of the PostgreSQL dump (indications and contraindications, PubChem ids)
and the drug–target TSV export."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Dict, List, Sequence

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import iter_raw_lines, read_table
from openbench.errors import InputError

__all__ = ["REMOTES", "OMOP_COLUMNS", "IDENTIFIER_COLUMNS", "read_dump_tables", "read_indications",
           "read_target_interactions"]

REMOTES = {
    "dump": Remote("DrugCentral", "https://unmtid-shinyapps.net/download/DrugCentral/20180826/"
                   "drugcentral.dump.08262018.sql.gz", "drugcentral.dump.08262018.sql.gz", version="2018-08-26"),
}
OMOP_COLUMNS = ("struct_id", "relationship_name", "umls_cui")
IDENTIFIER_COLUMNS = ("identifier", "id_type", "struct_id")


def read_dump_tables(path, tables: Dict[str, Sequence[str]]) -> Dict[str, pl.DataFrame]:
    """The wanted columns of ``COPY <table> (…) FROM stdin;`` blocks of a PostgreSQL dump.

    :param tables: {qualified table name, e.g. ``public.identifier``: columns to keep}.
    Rows are tab-separated up to the ``\\.`` line; ``\\N`` is NULL. A table missing from the dump,
    or a column missing from its COPY line, is an error naming the file and table.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("DrugCentral dump does not exist", path)
    blocks: Dict[str, List[str]] = {}
    headers: Dict[str, List[str]] = {}
    current = None
    for number, line in iter_raw_lines(path):
        if current is not None:
            if line == "\\.":
                current = None
            elif line.count("\t") + 1 != len(headers[current]):
                raise InputError(f"table {current}: expected {len(headers[current])} tab-separated columns as its COPY "
                                 f"line names, found {line.count(chr(9)) + 1}", path, number)
            else:
                blocks[current].append(line)
            continue
        if "\0" in line:
            raise InputError("a NUL byte: expected a text dump", path, number)
        if line.startswith("COPY "):
            name = line[5:].split(" ", 1)[0]
            if name in tables:
                inside = line[line.index("(") + 1:line.index(")")] if "(" in line else ""
                headers[name] = [column.strip().strip('"') for column in inside.split(",")]
                blocks[name], current = [], name
    result = {}
    for name, wanted in tables.items():
        if name not in headers:
            raise InputError(f"no COPY block for table {name} in the dump", path)
        missing = [column for column in wanted if column not in headers[name]]
        if missing:
            raise InputError(f"table {name} has no column(s) {', '.join(missing)}; found {', '.join(headers[name])}",
                             path)
        text = "\n".join(blocks[name])
        if not text:
            result[name] = pl.DataFrame({c: [] for c in wanted}, schema={c: pl.String for c in wanted})
            continue
        frame = pl.read_csv(io.StringIO(text + "\n"), separator="\t", has_header=False, quote_char=None,
                            infer_schema=False, new_columns=headers[name], null_values="\\N")
        result[name] = frame.select(list(wanted))
    return result


def read_indications(path) -> Dict[str, pl.DataFrame]:
    """{"indications", "contraindications"}: struct_id, umls; and {"pubchem"}: struct_id, drug (CID)."""
    tables = read_dump_tables(path, {"public.omop_relationship": OMOP_COLUMNS,
                                     "public.identifier": IDENTIFIER_COLUMNS})
    omop = tables["public.omop_relationship"].filter(pl.col("umls_cui").is_not_null())
    by_kind = {kind: omop.filter(pl.col("relationship_name") == name).select("struct_id", pl.col("umls_cui").alias("umls"))
               for kind, name in (("indications", "indication"), ("contraindications", "contraindication"))}
    by_kind["pubchem"] = (tables["public.identifier"].filter(pl.col("id_type") == "PUBCHEM_CID")
                          .select("struct_id", pl.col("identifier").alias("drug")).unique(maintain_order=True))
    return by_kind


def read_target_interactions(path) -> pl.DataFrame:
    """The drug.target.interaction TSV export: struct_id, drug_name, uniprot (one accession a row;
    ``|``-joined lists split), gene (as written), action_type. Not used by the graph build yet (OpenBioLink has no edge type for it)."""
    frame = read_table(path, {"STRUCT_ID": "struct_id", "DRUG_NAME": "drug_name", "ACCESSION": "accession",
                              "GENE": "gene", "ACTION_TYPE": "action_type"}, quote_char='"',
                       required=("struct_id", "accession"))
    return (frame.with_columns(pl.col("accession").str.split("|"))
            .explode("accession").rename({"accession": "uniprot"})
            .select("struct_id", "drug_name", "uniprot", "gene", "action_type"))
