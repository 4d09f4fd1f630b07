"""Negative sampling per meta-edge (head type, relation, tail type), seeded and vectorised.

For each meta-edge, in sorted order, ``ratio`` negatives per positive: true negatives first (a
seeded sample when there are more than needed), then type-constrained random corruption (heads
from the nodes of the head type, tails from the nodes of the tail type) that is never a known
positive pair of the relation's family (the relation, its parent, its children; as an unordered
pair, since DRUG_x_GENE and GENE_DRUG point opposite ways), never a pair already taken, and
drawn from a generator seeded by (seed, meta-edge), so that sibling relations with the same node
types get independent pairs (OpenBioLink drew the same sequence for all of them).
"""
from __future__ import annotations

import logging
import zlib
from typing import Dict, List, Optional

import numpy as np
import polars as pl

from graphgen.edge_types import EDGE_TYPES
from graphgen.graph_files import SPLIT_COLUMNS as COLUMNS
from splits.leakage import categorical_ids

__all__ = ["MAX_ROUNDS", "sample_negatives", "contradicted", "with_node_types"]

logger = logging.getLogger(__name__)

MAX_ROUNDS = 25


def _family(relation: str) -> List[str]:
    """The relation, its parent and its children (OpenBioLink's hierarchy; a converted graph's
    relations have none: the relation alone)."""
    edge = EDGE_TYPES.get(relation)
    parent = {edge.parent} if edge is not None and edge.parent else set()
    return sorted({relation} | parent | {name for name, other in EDGE_TYPES.items() if other.parent == relation})


def with_node_types(frame: pl.DataFrame, node_types: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (id1, relation, id2, …) with the node types of both ends as type1 and type2
    (null where a node is missing), rows in their order; ids of the same dtype on both sides."""
    types = node_types.select("id", "node_type")
    return (frame.join(types.rename({"id": "id1", "node_type": "type1"}), on="id1", how="left", maintain_order="left")
            .join(types.rename({"id": "id2", "node_type": "type2"}), on="id2", how="left", maintain_order="left"))


def _unordered_pairs(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(pl.min_horizontal("id1", "id2").alias("lo"), pl.max_horizontal("id1", "id2").alias("hi"))


def contradicted(edges: pl.DataFrame, positives: pl.DataFrame) -> pl.Series:
    """(n,) bool: the rows of ``edges`` whose unordered pair is a positive of their relation's
    family (the relation, its parent, its children) in ``positives``: a negative there would
    contradict a positive."""
    edges, positives = categorical_ids(edges), categorical_ids(positives)
    pairs = _unordered_pairs(positives).with_columns(positives.get_column("relation").alias("positive_relation"))
    keyed = _unordered_pairs(edges).with_columns(edges.get_column("relation")).with_row_index("_row")
    relations = sorted(set(EDGE_TYPES) | set(edges.get_column("relation").unique().to_list()))
    family = pl.DataFrame([(name, member) for name in relations for member in _family(name)],
                          schema={"relation": pl.String, "positive_relation": pl.String}, orient="row")
    matched = keyed.join(pairs, on=["lo", "hi"], how="inner")
    hits = matched.join(family, on=["relation", "positive_relation"], how="semi")
    flags = np.zeros(edges.height, dtype=bool)
    flags[hits.get_column("_row").to_numpy()] = True
    return pl.Series("contradicted", flags)


def sample_negatives(positives: pl.DataFrame, true_negatives: pl.DataFrame, nodes: pl.DataFrame,
                     ratio: float = 1.0, seed: int = 42, known: Optional[pl.DataFrame] = None,
                     stats: Optional[Dict[str, int]] = None) -> pl.DataFrame:
    """Negatives (value "0") for ``positives``; columns as in the split files.

    :param positives: id1, relation, id2, … of the positive edges.
    :param true_negatives: the graph's true-negative edges (same columns).
    :param nodes: id, node_type of every node that corruption may draw.
    :param known: further positives that no negative may equal, with their family relations
        (another version of the graph); true negatives that contradict them are dropped.
    :param stats: filled with ``redrawn_for_known`` (random draws refused because they hit a
        ``known`` positive only) and ``true_negatives_dropped`` (true negatives on a pair that a
        positive of their relation's family joins, in ``positives`` or ``known``: dropped).
    """
    positives, true_negatives = categorical_ids(positives), categorical_ids(true_negatives)
    nodes = nodes.with_columns(pl.col("id").cast(pl.Categorical))
    stats = stats if stats is not None else {}
    stats.setdefault("redrawn_for_known", 0)
    stats.setdefault("true_negatives_dropped", 0)
    extra = categorical_ids(known).select(COLUMNS) if known is not None else None
    excluded = positives if extra is None else pl.concat([positives.select(COLUMNS), extra])
    if true_negatives.height:  # a true negative on a positive pair of its family is no negative
        clash = contradicted(true_negatives, excluded)
        stats["true_negatives_dropped"] += int(clash.sum())
        true_negatives = true_negatives.filter(~clash)
    meta = with_node_types(positives, nodes).group_by(["type1", "relation", "type2"]).len().sort(["type1", "relation", "type2"])
    typed_tn = with_node_types(true_negatives, nodes)
    # each type's ids in text order, kept categorical: a draw gathers codes, never builds strings
    by_type = {kind: frame.get_column("id").cast(pl.String).sort().cast(pl.Categorical)
               for (kind,), frame in nodes.partition_by("node_type", as_dict=True).items()}
    family_pairs = {}  # holds only the current relation's pairs, to keep peak memory down
    parts = []
    for type1, relation, type2, count in meta.iter_rows():
        need = int(round(count * ratio))
        if need == 0:
            continue
        key = f"{type1}_{relation}_{type2}"
        if type1 is None or type2 is None:
            logger.warning("%s: %d positive(s) with nodes missing from the node table; no negatives drawn",
                           key, count)
            continue
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        tn = typed_tn.filter((pl.col("type1") == type1) & (pl.col("relation") == relation)
                             & (pl.col("type2") == type2)).select(COLUMNS).unique(["id1", "id2"], maintain_order=True)
        if tn.height > need:
            tn = tn[np.sort(rng.choice(tn.height, need, replace=False))]
        taken = [tn.with_columns(pl.lit("0").alias("value"))]
        if relation not in family_pairs:
            family = excluded.filter(pl.col("relation").is_in(_family(relation)))
            own = positives.filter(pl.col("relation").is_in(_family(relation)))
            family_pairs = {relation: (_unordered_pairs(family), _unordered_pairs(own))}
        missing = need - tn.height
        if missing > 0:
            forbidden, own_pairs = family_pairs[relation]
            taken.append(_corrupt(rng, relation, by_type[type1], by_type[type2], missing,
                                  forbidden, _unordered_pairs(tn), key, own_pairs if extra is not None else None,
                                  stats))
        parts.append(pl.concat(taken))
    if not parts:
        return categorical_ids(pl.DataFrame(schema={c: pl.String for c in COLUMNS}))
    return pl.concat(parts).select(COLUMNS)


def _corrupt(rng: np.random.Generator, relation: str, heads: pl.Series, tails: pl.Series, missing: int,
             forbidden: pl.DataFrame, already: pl.DataFrame, key: str, own: Optional[pl.DataFrame] = None,
             stats: Optional[Dict[str, int]] = None) -> pl.DataFrame:
    """``missing`` random (head, tail) pairs of the given node pools (categorical ids in text
    order), none forbidden or repeated.
    With ``own`` (the pairs of the graph's own positives), draws refused only because they are a
    pair of ``forbidden`` beyond ``own`` (another version's positives) count in ``stats``."""
    blocked = pl.concat([forbidden, already])
    found = pl.DataFrame(schema={"id1": pl.Categorical, "id2": pl.Categorical})
    for _ in range(MAX_ROUNDS):
        size = 2 * (missing - found.height) + 16
        draw = pl.DataFrame({"id1": heads.gather(rng.integers(0, len(heads), size)),
                             "id2": tails.gather(rng.integers(0, len(tails), size))})
        draw = draw.filter(pl.col("id1") != pl.col("id2"))
        draw = draw.with_columns(pl.min_horizontal("id1", "id2").alias("lo"), pl.max_horizontal("id1", "id2").alias("hi"))
        if own is not None and stats is not None:
            others = (draw.join(own, on=["lo", "hi"], how="anti").join(forbidden, on=["lo", "hi"], how="semi"))
            stats["redrawn_for_known"] += others.height
        draw = draw.join(blocked, on=["lo", "hi"], how="anti", maintain_order="left").drop("lo", "hi")
        found = pl.concat([found, draw]).unique(maintain_order=True)
        if found.height >= missing:
            break
        blocked = pl.concat([blocked, _unordered_pairs(found)])
    if found.height < missing:
        logger.warning("%s: only %d of %d random negatives could be drawn", key, found.height, missing)
    return found.head(missing).select("id1", pl.lit(relation).alias("relation"), "id2",
                                      pl.lit("", dtype=pl.String).alias("qscore"), pl.lit("0").alias("value"),
                                      pl.lit("GENERATED").alias("source"))
