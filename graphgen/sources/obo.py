"""OBO 1.2/1.4 ontologies (GO, DO, HPO, UBERON/CL) into polars tables, vectorised.

Every line becomes a row; stanza headers (``[Term]``, ``[Typedef]``, …) start a new stanza
number by a cumulative sum, so each tag line knows its term without a Python loop. Only
``[Term]`` stanzas are kept. Values lose their trailing ``! comment`` and ``{qualifiers}``; tags
match exactly (``is_anonymous`` is not ``is_a``, a bug of OpenBioLink's prefix matching).
Obsolete terms are reported in ``terms`` but give no hierarchy edges.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from openbench._io.inputs import iter_raw_lines, polars_source
from openbench.errors import InputError

__all__ = ["Ontology", "read_lines", "parse_obo"]

_LINE = "line"
# a byte that does not occur in OBO text, so that each line is read as one field
_NO_SEPARATOR = "\x1f"


@dataclass
class Ontology:
    """Tables of one OBO file (all columns strings except ``obsolete``).

    ``terms``: id, name, obsolete · ``is_a``: id, parent · ``relationships``: id, relation, target ·
    ``alt_ids``: alt_id, id · ``xrefs``: id, db, accession · ``replaced_by``: id, replacement.
    """

    terms: pl.DataFrame
    is_a: pl.DataFrame
    relationships: pl.DataFrame
    alt_ids: pl.DataFrame
    xrefs: pl.DataFrame
    replaced_by: pl.DataFrame


def read_lines(path: Path) -> pl.DataFrame:
    """All lines of a text file (gzip understood) as one string column ``line``, CR stripped."""
    try:
        frame = pl.read_csv(polars_source(path), has_header=False, separator=_NO_SEPARATOR, quote_char=None,
                            new_columns=[_LINE], infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.NoDataError:
        return pl.DataFrame({_LINE: []}, schema={_LINE: pl.String})
    except (pl.exceptions.ComputeError, OSError) as error:
        for _ in iter_raw_lines(path):  # names the first undecodable line, or the truncation
            pass
        raise InputError(f"cannot read as text: {error}", path) from error
    return frame.with_columns(pl.col(_LINE).fill_null("").str.strip_chars_end("\r"))


def parse_obo(path) -> Ontology:
    """Parse an OBO file into an :class:`Ontology`."""
    path = Path(path)
    if not path.is_file():
        raise InputError("OBO file does not exist", path)
    lines = read_lines(path)
    header = pl.col(_LINE).str.starts_with("[")
    tagged = (lines.with_row_index("number", offset=1)
              .with_columns(header.cum_sum().alias("stanza"),
                            pl.when(header).then(pl.col(_LINE).str.strip_chars()).alias("kind"))
              .with_columns(pl.col("kind").forward_fill())
              .filter((pl.col("kind") == "[Term]") & ~header & (pl.col(_LINE).str.strip_chars() != "")))
    if tagged.height == 0 and not lines.filter(pl.col(_LINE).str.starts_with("format-version:")).height:
        raise InputError("no [Term] stanza and no format-version header: not an OBO file", path)
    parts = tagged.select(
        "number", "stanza",
        pl.col(_LINE).str.extract(r"^([^:]+):", 1).alias("tag"),
        pl.col(_LINE).str.extract(r"^[^:]+:\s*(.*)$", 1).alias("raw"),
    )
    malformed = parts.filter(pl.col("tag").is_null())
    if malformed.height:
        raise InputError("expected a 'tag: value' line inside a [Term] stanza", path, int(malformed["number"][0]))
    value = pl.col("raw").str.replace(r"\s+\{[^}]*\}\s*(!.*)?$", "").str.replace(r"\s+!.*$", "").str.strip_chars()
    parts = parts.with_columns(value.alias("value"))
    ids = parts.filter(pl.col("tag") == "id").select("stanza", pl.col("value").alias("id"))
    missing = parts.select("stanza", "number").unique("stanza", keep="first").join(ids, on="stanza", how="anti")
    if missing.height:
        raise InputError("a [Term] stanza has no id line", path, int(missing.sort("number")["number"][0]))
    rows = parts.join(ids, on="stanza")

    def tag(name: str) -> pl.DataFrame:
        return rows.filter(pl.col("tag") == name).sort("number")

    names = tag("name").select("id", pl.col("value").alias("name")).unique("id", keep="first")
    obsolete_ids = tag("is_obsolete").filter(pl.col("value") == "true").select("id").unique()
    terms = (ids.sort("stanza").select("id").unique("id", keep="first", maintain_order=True)
             .join(names, on="id", how="left", maintain_order="left")
             .with_columns(pl.col("id").is_in(obsolete_ids["id"].implode()).alias("obsolete")))
    live = pl.col("id").is_in(obsolete_ids["id"].implode()).not_()
    is_a = tag("is_a").filter(live).select("id", pl.col("value").alias("parent"))
    relationships = (tag("relationship").filter(live)
                     .select("id", pl.col("value").str.extract(r"^(\S+)\s+(\S+)", 1).alias("relation"),
                             pl.col("value").str.extract(r"^(\S+)\s+(\S+)", 2).alias("target")))
    alt_ids = tag("alt_id").select(pl.col("value").alias("alt_id"), "id")
    xref_value = pl.col("value").str.extract(r"^(\S+)", 1)
    xrefs = (tag("xref").select("id", xref_value.alias("xref"))
             .filter(pl.col("xref").str.contains(":"))
             .select("id", pl.col("xref").str.extract(r"^([^:]+):", 1).alias("db"),
                     pl.col("xref").str.extract(r"^[^:]+:(.*)$", 1).alias("accession")))
    replaced_by = tag("replaced_by").select("id", pl.col("value").alias("replacement"))
    return Ontology(terms=terms, is_a=is_a, relationships=relationships, alt_ids=alt_ids, xrefs=xrefs,
                    replaced_by=replaced_by)
