"""Sampled evaluation negatives for a split (``--eval-negatives K``): OGB's protocol on OpenBioLink graphs.

For each validation and test triple (h, r, t), K negative heads h' and K negative tails t':

* drawn uniformly from the entities of the fold's training positives (the entities the
  evaluator and a trained model know), K *distinct* ones per query (a candidate drawn twice would
  count twice against the answer, which matters on small graphs); with ``typed``, only from those
  of the true answer's node type;
* *filtered*, unlike OGB's: never the true answer, and never an entity that makes a known
  positive of the relation ((h', r, t) or (h, r, t') in the fold's train, validation or test
  positives) — a known answer counted as a negative would punish a correct model;
* seeded per (seed, split, side, node type), so the same seed gives the same file.

They are written as ``valid_negatives.npz``/``test_negatives.npz``
(:mod:`openbench.datasets.negatives`), which ``openbench evaluate --protocol sampled`` reads.
"""
from __future__ import annotations

import zlib
from typing import Dict, Tuple

import numpy as np
import polars as pl

from openbench.errors import InputError
from splits.negatives import with_node_types

__all__ = ["MAX_ROUNDS", "draw_eval_negatives"]

MAX_ROUNDS = 64  # redraws of refused candidates before a query is declared impossible


def draw_eval_negatives(evaluation: pl.DataFrame, known: pl.DataFrame, training: pl.DataFrame,
                        nodes: pl.DataFrame, k: int, typed: bool, seed: int,
                        split: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(triples (T, 3), head (T, K), tail (T, K)) labels for the ``evaluation`` positives.

    :param evaluation: id1, relation, id2 of the split's positives, in the order to write.
    :param known: every positive of the fold (train, validation, test).
    :param training: the fold's training positives (their entities are the candidates).
    :param nodes: id, node_type of the graph's nodes (``typed``).
    """
    if k < 1:
        raise InputError(f"--eval-negatives must be at least 1, got {k}")
    pool = pl.concat([training.get_column("id1").cast(pl.String), training.get_column("id2").cast(pl.String)]) \
        .unique().sort()
    labels = pool.to_numpy()
    entity = pl.Enum(pool.to_list())
    relations = pl.concat([known.get_column("relation"), evaluation.get_column("relation")]).cast(pl.String) \
        .unique().sort()
    relation = pl.Enum(relations.to_list())
    size, kinds = len(labels), len(relations)

    def codes(frame: pl.DataFrame) -> Dict[str, np.ndarray]:
        coded = frame.select(pl.col("id1").cast(pl.String).cast(entity, strict=False).to_physical().fill_null(-1),
                             pl.col("relation").cast(pl.String).cast(relation).to_physical(),
                             pl.col("id2").cast(pl.String).cast(entity, strict=False).to_physical().fill_null(-1))
        return {name: coded.get_column(name).to_numpy().astype(np.int64) for name in ("id1", "relation", "id2")}

    def keys(h, r, t):
        return (h * kinds + r) * size + t

    seen = codes(known)
    inside = (seen["id1"] >= 0) & (seen["id2"] >= 0)
    known_keys = np.unique(keys(seen["id1"][inside], seen["relation"][inside], seen["id2"][inside]))
    queries = codes(evaluation)
    types = pool_types = None
    if typed:
        named = nodes.select(pl.col("id").cast(pl.String), pl.col("node_type").cast(pl.String))
        ends = evaluation.select(pl.col(c).cast(pl.String) for c in ("id1", "relation", "id2"))
        typed_ends = with_node_types(ends, named)
        types = {column: typed_ends.get_column(kind).fill_null("").to_numpy().astype(str)
                 for column, kind in (("id1", "type1"), ("id2", "type2"))}
        # the pool's types in pool order, by a join (never by assuming the node table's order)
        pool_types = pool.to_frame("id").join(named, on="id", how="left", maintain_order="left") \
            .get_column("node_type").fill_null("").to_numpy().astype(str)
    drawn = {}
    for side, column in (("head", "id1"), ("tail", "id2")):
        out = np.empty((evaluation.height, k), dtype=np.int64)
        groups = {None: np.arange(evaluation.height)} if types is None else \
            {kind: np.flatnonzero(types[column] == kind) for kind in np.unique(types[column])}
        for kind, rows in groups.items():
            if not rows.size:
                continue
            candidates = np.arange(size) if kind is None else np.flatnonzero(pool_types == kind)
            if not candidates.size:
                raise InputError(f"no training entity of node type {kind!r} to draw {split} {side} negatives from")
            rng = np.random.default_rng([seed, zlib.crc32(f"{split}/{side}/{kind}".encode())])
            h, r, t = (queries[name][rows] for name in ("id1", "relation", "id2"))
            true = h if side == "head" else t
            chosen = candidates[rng.integers(0, candidates.size, (rows.size, k))]
            for _ in range(MAX_ROUNDS):
                key = keys(chosen, r[:, None], t[:, None]) if side == "head" else keys(h[:, None], r[:, None], chosen)
                refused = np.isin(key, known_keys) | (chosen == true[:, None]) | _repeats(chosen)
                if not refused.any():
                    break
                chosen[refused] = candidates[rng.integers(0, candidates.size, int(refused.sum()))]
            else:
                row = rows[int(np.flatnonzero(refused.any(axis=1))[0])]
                triple = evaluation.row(int(row), named=True)
                raise InputError(f"cannot draw {k} distinct {side} negatives for the {split} triple "
                                 f"({triple['id1']}, {triple['relation']}, {triple['id2']}) from the "
                                 f"{candidates.size} training entities{'' if kind is None else f' of type {kind}'}, "
                                 "leaving out known answers; lower --eval-negatives")
            out[rows] = chosen
        drawn[side] = labels[out]
    triples = evaluation.select(pl.col(c).cast(pl.String) for c in ("id1", "relation", "id2")).to_numpy()
    return triples.astype(str), drawn["head"].astype(str), drawn["tail"].astype(str)


def _repeats(chosen: np.ndarray) -> np.ndarray:
    """(n, K) bool: entries equal to an earlier entry of their row."""
    order = np.argsort(chosen, axis=1, kind="stable")
    ordered = np.take_along_axis(chosen, order, axis=1)
    repeated = np.zeros_like(chosen, dtype=bool)
    later = np.zeros_like(ordered, dtype=bool)
    later[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    np.put_along_axis(repeated, order, later, axis=1)
    return repeated
