"""The graph's output formats by name, importable without polars (the command line's choices).

``TSV`` is OpenBioLink's ``graph_files`` layout (:mod:`graphgen.writers.tsv`); the others are
exports of the same graph (:mod:`graphgen.export`, whose writer table must name exactly these)."""

__all__ = ["EXPORT_FORMATS", "OUTPUT_FORMATS"]

EXPORT_FORMATS = ("BEL", "RDF-N3", "RDF-NT", "RDF-TTL", "PARQUET")
OUTPUT_FORMATS = ("TSV",) + EXPORT_FORMATS
