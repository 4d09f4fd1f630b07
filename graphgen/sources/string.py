"""STRING protein links and actions (human), and STRING's entrez_2_string mapping.

Links come in three layouts (``links``, ``links.detailed``, ``links.full``), all space-separated
with a header; only protein1, protein2 and combined_score are used. Actions (``protein.actions``)
are tab-separated: item_id_a, item_id_b, mode, action, is_directional, a_is_acting, score.
"""
from __future__ import annotations

import polars as pl

from openbench._io.download import Remote
from openbench._io.inputs import read_table

__all__ = ["REMOTES", "DIRECTED_MODES", "UNDIRECTED_MODES", "BINDING_ACTIONS", "read_links", "read_actions",
           "action_edges", "read_entrez_mapping"]

REMOTES = {
    "links": Remote("STRING", "https://stringdb-static.org/download/protein.links.v11.0/"
                    "9606.protein.links.v11.0.txt.gz", "9606.protein.links.v11.0.txt.gz", version="11.0"),
    "actions": Remote("STRING", "https://stringdb-static.org/download/protein.actions.v11.0/"
                      "9606.protein.actions.v11.0.txt.gz", "9606.protein.actions.v11.0.txt.gz", version="11.0"),
    "entrez": Remote("STRING", "http://string-db.org/mapping_files/entrez/human.entrez_2_string.2018.tsv.gz",
                     "human.entrez_2_string.2018.tsv.gz", version="2018"),
}

# directional action modes and the edge type each gives (a acting on b)
DIRECTED_MODES = {"activation": "ACTIVATION", "catalysis": "CATALYSIS", "expression": "EXPRESSION",
                  "inhibition": "INHIBITION", "reaction": "REACTION"}
UNDIRECTED_MODES = {"binding": "BINDING", "ptmod": "PTMOD"}
BINDING_ACTIONS = {"activation": "BINDACT", "inhibition": "BINDINH"}


def read_links(path) -> pl.DataFrame:
    """protein1, protein2 (``9606.ENSP…``), score (combined score, 0–1000, as text)."""
    return read_table(path, {"protein1": "protein1", "protein2": "protein2", "combined_score": "score"},
                      separator=" ", required=("protein1", "protein2", "score"), numeric=("score",))


def read_actions(path) -> pl.DataFrame:
    """All columns of an actions file, as text."""
    columns = ("item_id_a", "item_id_b", "mode", "action", "is_directional", "a_is_acting", "score")
    return read_table(path, {name: name for name in columns}, required=("item_id_a", "item_id_b", "mode"),
                      numeric=("score",))


def action_edges(actions: pl.DataFrame, prefix: str = "GENE", tail: str = "GENE",
                 require_acting: bool = True) -> pl.DataFrame:
    """Edges typed by action: id1, id2, score, edge_type (e.g. GENE_INHIBITION_GENE).

    Directional modes need ``is_directional == 't'`` (and ``a_is_acting == 't'`` when
    ``require_acting``); binding with action activation/inhibition gives BINDACT/BINDINH the
    same way; undirected binding and ptmod need ``is_directional == 'f'``.
    """
    directional = pl.col("is_directional") == "t"
    if require_acting:
        directional = directional & (pl.col("a_is_acting") == "t")
    kind = (pl.when(directional & pl.col("mode").is_in(list(DIRECTED_MODES)))
            .then(pl.col("mode").replace_strict(DIRECTED_MODES, default=None))
            .when(directional & (pl.col("mode") == "binding") & pl.col("action").is_in(list(BINDING_ACTIONS)))
            .then(pl.col("action").replace_strict(BINDING_ACTIONS, default=None))
            .when((pl.col("is_directional") == "f") & pl.col("mode").is_in(list(UNDIRECTED_MODES)))
            .then(pl.col("mode").replace_strict(UNDIRECTED_MODES, default=None)))
    return (actions.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
            .select(pl.col("item_id_a").alias("id1"), pl.col("item_id_b").alias("id2"), "score",
                    pl.format(f"{prefix}_{{}}_{tail}", "kind").alias("edge_type")))


def read_entrez_mapping(path) -> pl.DataFrame:
    """string (``9606.ENSP…``), gene (Entrez id); ``|``-joined Entrez ids are split."""
    frame = read_table(path, {1: "gene", 2: "string"}, header=False, width=3, required=("gene", "string"))
    return frame.select("string", pl.col("gene").str.split("|")).explode("gene").unique(maintain_order=True)
