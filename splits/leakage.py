"""Leakage removal between a training set and an evaluation set (polars anti-joins, no row loops).

Frames hold the split layout's columns ``id1, relation, id2, qscore, value, source`` (strings;
``value`` "1" for positives, "0" for negatives). Each function returns the kept evaluation rows
and what it removed, so the caller can report counts per step.

* unseen nodes: evaluation rows touching a node that no training *positive* touches (the
  vocabulary of a model trained on the positives, and the evaluator's default entity map); with
  ``seen="any"`` a training negative counts too (OpenBioLink's rule); the same for relations;
* reverse edges (directed graphs): evaluation ``(a, r, b)`` when training has ``(b, r, a)``
  with the same value;
* hierarchy: evaluation rows whose relation's parent or child (``graphgen.edge_types``) joins
  the same *unordered* pair in training with the same value. DRUG_x_GENE points drug→gene while
  its parent GENE_DRUG points gene→drug, so orientation must not hide a pair;
* relation patterns (:mod:`splits.audit`, found in the training positives): evaluation rows whose
  copy under a duplicate relation, or whose reverse under an inverse relation (or, undirected,
  under a symmetric one), is in training.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import polars as pl

from graphgen.edge_types import EDGE_TYPES
from splits import SEEN_RULES

__all__ = ["PARENT", "SEEN_RULES", "categorical_ids", "nodes_of", "drop_unseen_nodes", "drop_unseen_relations",
           "drop_reverse_edges", "drop_hierarchy_leakage", "relation_patterns", "drop_pattern_leakage"]



PARENT = {name: edge.parent for name, edge in EDGE_TYPES.items()}


def categorical_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """id1 and id2 as categoricals (a no-op when they are): joins need one dtype on both sides."""
    return frame.with_columns(pl.col("id1").cast(pl.Categorical), pl.col("id2").cast(pl.Categorical))


def nodes_of(frame: pl.DataFrame) -> pl.Series:
    """Distinct node ids of a frame's id1 and id2 columns."""
    return pl.concat([frame.get_column("id1"), frame.get_column("id2")]).unique().rename("id")


def drop_unseen_nodes(evaluation: pl.DataFrame, training: pl.DataFrame,
                      seen_rule: str = "positives") -> Tuple[pl.DataFrame, pl.Series]:
    """(evaluation rows whose both nodes occur in training, sorted ids of the unseen nodes).

    :param seen_rule: ``"positives"``: a node is seen when a training positive touches it;
        ``"any"``: any training row, negatives included (OpenBioLink).
    """
    if seen_rule not in SEEN_RULES:
        raise ValueError(f"unknown seen-nodes rule {seen_rule!r}; expected one of {', '.join(SEEN_RULES)}")
    evaluation, training = categorical_ids(evaluation), categorical_ids(training)
    if seen_rule == "positives":
        training = training.filter(pl.col("value") == "1")
    seen = nodes_of(training).implode()
    evaluated = nodes_of(evaluation)
    unseen = evaluated.filter(~evaluated.is_in(seen)).cast(pl.String).sort()
    kept = evaluation.filter(pl.col("id1").is_in(seen) & pl.col("id2").is_in(seen))
    return kept, unseen


def drop_unseen_relations(evaluation: pl.DataFrame, training: pl.DataFrame,
                          seen_rule: str = "positives") -> Tuple[pl.DataFrame, int]:
    """(evaluation rows whose relation occurs in training, how many were dropped): a relation no
    training positive has is unknown to a model (and to the evaluator's default relation map)."""
    if seen_rule == "positives":
        training = training.filter(pl.col("value") == "1")
    kept = evaluation.filter(pl.col("relation").is_in(training.get_column("relation").unique().implode()))
    return kept, evaluation.height - kept.height


def drop_reverse_edges(evaluation: pl.DataFrame, training: pl.DataFrame) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """(kept, removed): evaluation (a, r, b) whose reverse (b, r, a) with the same value is in training."""
    evaluation, training = categorical_ids(evaluation), categorical_ids(training)
    reversed_training = training.select(pl.col("id2").alias("id1"), "relation", pl.col("id1").alias("id2"), "value")
    keys = ["id1", "relation", "id2", "value"]  # semi and anti joins need no unique right side
    removed = evaluation.join(reversed_training, on=keys, how="semi", maintain_order="left")
    kept = evaluation.join(reversed_training, on=keys, how="anti", maintain_order="left")
    return kept, removed


def _unordered(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.min_horizontal("id1", "id2").alias("_lo"), pl.max_horizontal("id1", "id2").alias("_hi"))


def drop_hierarchy_leakage(evaluation: pl.DataFrame, training: pl.DataFrame) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """(kept, removed): evaluation rows whose relation's parent or a child of it joins the same
    unordered node pair in training with the same value (siblings do not count)."""
    evaluation, training = categorical_ids(evaluation), categorical_ids(training)
    parent = pl.col("relation").replace_strict(PARENT, default=None, return_dtype=pl.String)
    candidates = _unordered(evaluation).with_row_index("_row").with_columns(parent.alias("_parent"))
    # only training rows on a pair the evaluation set has can matter: filter by node, then by pair
    evaluated = nodes_of(evaluation).implode()
    near = training.filter(pl.col("id1").is_in(evaluated) & pl.col("id2").is_in(evaluated))
    train = (_unordered(near).join(candidates.select("_lo", "_hi").unique(), on=["_lo", "_hi"], how="semi")
             .select("_lo", "_hi", "value", pl.col("relation").alias("train_relation"), parent.alias("train_parent"))
             .unique())
    joined = candidates.join(train, on=["_lo", "_hi", "value"], how="inner")
    related = joined.filter(
        (pl.col("train_relation") != pl.col("relation"))
        & ((pl.col("train_relation") == pl.col("_parent")) | (pl.col("train_parent") == pl.col("relation"))))
    leaking = related.get_column("_row").unique().implode()
    flagged = candidates.with_columns(pl.col("_row").is_in(leaking).alias("_leak"))
    columns = evaluation.columns
    return (flagged.filter(~pl.col("_leak")).select(columns), flagged.filter(pl.col("_leak")).select(columns))


def relation_patterns(training: pl.DataFrame, threshold: float = 0.8, involving: Optional[Sequence[str]] = None) -> dict:
    """The audit's relation patterns (:mod:`splits.audit`) in the training positives:
    ``{"inverse_pairs", "duplicate_relations", "symmetric_relations"}`` as the audit reports them
    (``involving``: only those with one of these relations). Entities are compared by their
    categorical codes, relations coded in label order, as the audit codes them."""
    from splits.audit import relation_patterns_of_codes

    positives = training.filter(pl.col("value") == "1")
    if positives.height == 0:
        return {"inverse_pairs": [], "duplicate_relations": [], "symmetric_relations": []}
    labels = positives.get_column("relation").cast(pl.String).unique().sort()
    coded = positives.select(
        pl.col("id1").cast(pl.Categorical).to_physical().cast(pl.Int64).alias("h"),
        pl.col("relation").cast(pl.String).cast(pl.Enum(labels)).to_physical().cast(pl.Int64).alias("r"),
        pl.col("id2").cast(pl.Categorical).to_physical().cast(pl.Int64).alias("t"))
    return relation_patterns_of_codes(coded, labels.to_list(), threshold, involving)


def _partners(pairs, partner: str) -> pl.DataFrame:
    rows = [(pair["relation"], pair[partner]) for pair in pairs]
    rows += [(b, a) for a, b in rows]
    return pl.DataFrame(rows, schema={"relation": pl.String, "partner": pl.String}, orient="row")


def drop_pattern_leakage(evaluation: pl.DataFrame, training: pl.DataFrame, patterns: dict,
                         directed: bool) -> Tuple[pl.DataFrame, pl.DataFrame]:
    """(kept, removed): evaluation rows training holds again under another name: (a, r', b) for a
    duplicate relation r' of r, (b, r', a) for an inverse partner r', and, in an undirected graph,
    (b, r, a) for a symmetric relation r (a directed graph's reverse edges go in any case:
    :func:`drop_reverse_edges`), each with the same value. ``patterns``: :func:`relation_patterns`."""
    evaluation, training = categorical_ids(evaluation), categorical_ids(training)
    indexed = evaluation.with_row_index("_row")
    matched = ["id1", "relation", "id2", "value"]
    copies = [indexed.join(_partners(patterns["duplicate_relations"], "duplicate"), on="relation")
              .select("_row", "id1", pl.col("partner").alias("relation"), "id2", "value"),
              indexed.join(_partners(patterns["inverse_pairs"], "inverse"), on="relation")
              .select("_row", pl.col("id2").alias("id1"), pl.col("partner").alias("relation"), pl.col("id1").alias("id2"),
                      "value")]
    if not directed:
        symmetric = [item["relation"] for item in patterns["symmetric_relations"]]
        copies.append(indexed.filter(pl.col("relation").is_in(symmetric))
                      .select("_row", pl.col("id2").alias("id1"), "relation", pl.col("id1").alias("id2"), "value"))
    found = [copy.join(training.select(matched), on=matched, how="semi").get_column("_row") for copy in copies]
    leaking = pl.concat(found).unique().implode() if found else pl.Series([], dtype=pl.UInt32).implode()
    flagged = indexed.with_columns(pl.col("_row").is_in(leaking).alias("_leak"))
    columns = evaluation.columns
    return (flagged.filter(~pl.col("_leak")).select(columns), flagged.filter(pl.col("_leak")).select(columns))
