"""Bgee: presence/absence expression calls and differential (over/under) expression calls."""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["REMOTES", "read_expression", "read_differential"]

REMOTES = {
    "expression": Remote("Bgee", "https://www.bgee.org/ftp/current/download/calls/expr_calls/"
                         "Homo_sapiens_expr_simple.tsv.gz", "Homo_sapiens_expr_simple.tsv.gz"),
    "differential": Remote("Bgee", "https://www.bgee.org/ftp/bgee_v13/download/calls/diff_expr_calls/"
                           "Homo_sapiens_diffexpr-anatomy-simple.tsv.zip",
                           "Homo_sapiens_diffexpr-anatomy-simple.tsv.zip", version="13"),
}


def read_expression(path) -> pl.DataFrame:
    """gene (ENSG), anatomy (UBERON/CL), expression (``present``/``absent``), quality (``gold quality``…).

    Columns are found by name, so the older layout and the one with FDR and expression score
    columns both work.
    """
    return read_table(path, {"Gene ID": "gene", "Anatomical entity ID": "anatomy", "Expression": "expression",
                             "Call quality": "quality"}, required=("gene", "anatomy", "expression"))


def read_differential(path) -> pl.DataFrame:
    """gene, anatomy, direction (``over-expression``/``under-expression``/…), quality (``high quality``…)."""
    return read_table(path, {"Gene ID": "gene", "Anatomical entity ID": "anatomy",
                             "Differential expression": "direction", "Call quality": "quality"},
                      required=("gene", "anatomy", "direction"))
