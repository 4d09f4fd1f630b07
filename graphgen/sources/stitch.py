"""STITCH 5: chemical–protein links and actions (human).

Only stereo-specific compound ids (``CIDs…``) are kept, as OpenBioLink did; they become PubChem
compound ids. Actions are typed DRUG_<MODE>_GENE with the drug as item_id_a.
"""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from graphgen.sources.sider import stitch_to_pubchem
from openbench._io.inputs import read_table

__all__ = ["REMOTES", "MODES", "BINDING_ACTIONS", "read_links", "read_action_edges"]

REMOTES = {
    "links": Remote("STITCH", "http://stitch.embl.de/download/protein_chemical.links.v5.0/"
                    "9606.protein_chemical.links.v5.0.tsv.gz", "9606.protein_chemical.links.v5.0.tsv.gz", version="5.0"),
    "actions": Remote("STITCH", "http://stitch.embl.de/download/actions.v5.0/9606.actions.v5.0.tsv.gz",
                      "9606.actions.v5.0.tsv.gz", version="5.0"),
}
MODES = {"activation": "ACTIVATION", "binding": "BINDING", "catalysis": "CATALYSIS", "expression": "EXPRESSION",
         "inhibition": "INHIBITION", "pred_bind": "PREDBIND", "reaction": "REACTION"}
BINDING_ACTIONS = {"activation": "BINDACT", "ac": "BINDACT", "inhibition": "BINDINH", "in": "BINDINH"}


def _stereo(column: str) -> pl.Expr:
    return pl.col(column).str.starts_with("CIDs")


def read_links(path) -> pl.DataFrame:
    """protein (``9606.ENSP…``), drug (PubChem CID), score (combined score 0–1000)."""
    frame = read_table(path, {"chemical": "chemical", "protein": "protein", "combined_score": "score"},
                       required=("chemical", "protein", "score"), numeric=("score",))
    return frame.filter(_stereo("chemical")).select("protein", stitch_to_pubchem("chemical").alias("drug"), "score")


def read_action_edges(path) -> pl.DataFrame:
    """drug (PubChem CID), protein, score, edge_type (DRUG_<MODE>_GENE; binding with an activating or
    inhibiting action also gives DRUG_BINDACT_GENE / DRUG_BINDINH_GENE)."""
    frame = read_table(path, {"item_id_a": "a", "item_id_b": "b", "mode": "mode", "action": "action",
                              "score": "score"}, required=("a", "b", "mode"), numeric=("score",))
    drugs = frame.filter(_stereo("a"))
    by_mode = (drugs.filter(pl.col("mode").is_in(list(MODES)))
               .with_columns(pl.col("mode").replace_strict(MODES, default=None).alias("kind")))
    by_action = (drugs.filter((pl.col("mode") == "binding") & pl.col("action").is_in(list(BINDING_ACTIONS)))
                 .with_columns(pl.col("action").replace_strict(BINDING_ACTIONS, default=None).alias("kind")))
    return pl.concat([by_mode, by_action]).select(
        stitch_to_pubchem("a").alias("drug"), pl.col("b").alias("protein"), "score",
        pl.format("DRUG_{}_GENE", "kind").alias("edge_type"))
