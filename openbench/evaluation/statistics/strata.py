"""Stratified results: the record's metrics by the answer entity's training degree and node type.

Bonner et al. (2021) show that biomedical KG embeddings mostly learn hub degree; these strata show
whether a model's numbers hold on the rare entities. An answer's *training degree* is the number
of training triples it takes part in (as head or tail, any relation); its bucket is fixed, so that
two records on one dataset line up: ``0`` (not in training), ``1``, ``2-3``, ``4-7``, … ``2^(b-1)``
to ``2^b - 1``. The *node type* is the one its CURIE prefix names (``graphgen.edge_types``:
``NCBIGENE:`` → ``GENE``), ``unknown`` for a label without a known prefix; ``by_node_type`` is
null when no entity has a known type.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench.evaluation.statistics.metrics import strata
from openbench.evaluation.candidates import true_ids_of
from openbench.evaluation.counting.counts import RankCounts

__all__ = ["training_degree", "degree_bucket_labels", "degree_buckets", "node_types", "stratified"]


def training_degree(train: torch.Tensor, num_entities: int) -> np.ndarray:
    """(E,) int64: training triples (T, 3) each entity takes part in (a self-loop counts twice)."""
    triples = train.cpu().numpy()
    return (np.bincount(triples[:, 0], minlength=num_entities)
            + np.bincount(triples[:, 2], minlength=num_entities)).astype(np.int64)


def degree_buckets(degree: np.ndarray) -> np.ndarray:
    """(N,) bucket ids of degrees (N,): 0 for 0, else floor(log2(degree)) + 1."""
    buckets = np.zeros(degree.shape, dtype=np.int64)
    positive = degree > 0
    buckets[positive] = np.floor(np.log2(degree[positive])).astype(np.int64) + 1
    return buckets


def degree_bucket_labels(count: int) -> List[str]:
    """Labels of buckets 0..count-1: ``0``, ``1``, ``2-3``, ``4-7``, …"""
    labels = ["0", "1"]
    for bucket in range(2, count):
        labels.append(f"{1 << (bucket - 1)}-{(1 << bucket) - 1}")
    return labels[:count]


def node_types(entity_labels: Sequence[str], among: Optional[np.ndarray] = None
               ) -> Optional[Tuple[np.ndarray, List[str]]]:
    """((E,) type ids, type names) from the labels' CURIE prefixes; None when no label has a known
    one. ``among``: only these entity ids get a type id (the others -1), the names those they
    use (a graph of millions of entities is not walked for a few thousand answers)."""
    from graphgen.edge_types import PREFIX_TO_NODE_TYPE

    def type_of(label: str) -> Optional[str]:
        return PREFIX_TO_NODE_TYPE.get(label.split(":", 1)[0]) if ":" in label else None

    ids = np.arange(len(entity_labels)) if among is None else np.asarray(among, dtype=np.int64)
    names = [type_of(entity_labels[i]) for i in ids.tolist()]
    if not any(name is not None for name in names) and not _any_typed(entity_labels, type_of):
        return None
    ordered = sorted({name for name in names if name is not None}) + (["unknown"] if None in names else [])
    index = {name: i for i, name in enumerate(ordered)}
    type_ids = np.full(len(entity_labels), -1, dtype=np.int64)
    type_ids[ids] = [index[name if name is not None else "unknown"] for name in names]
    return type_ids, ordered


def _any_typed(entity_labels: Sequence[str], type_of) -> bool:
    """Whether any label has a known CURIE prefix (labels without a colon, Wikidata's Q-ids say,
    are ruled out by one search of their joined text)."""
    if ":" not in "\n".join(entity_labels):
        return False
    return any(type_of(label) is not None for label in entity_labels)


def stratified(counts: Dict[str, RankCounts], triples: Dict[str, torch.Tensor], train: torch.Tensor,
               entity_labels: Sequence[str], hits_at: Sequence[int]) -> Tuple[dict, Optional[dict]]:
    """(by_degree, by_node_type) blocks of the queries ``counts`` {side: (T_side,)} of ``triples``
    {side: (T_side, 3)}, grouped by their answers."""
    answers = {side: true_ids_of(triples[side], side).cpu().numpy() for side in counts}
    degree = training_degree(train, len(entity_labels))
    buckets = {side: degree_buckets(degree[ids]) for side, ids in answers.items()}
    top = max((int(b.max()) for b in buckets.values() if b.size), default=0) + 1
    head, tail = counts.get("head"), counts.get("tail")
    by_degree = strata(head, tail, {side: torch.from_numpy(b) for side, b in buckets.items()},
                       degree_bucket_labels(top), hits_at)
    typed = node_types(entity_labels, np.unique(np.concatenate(list(answers.values()))) if answers else None)
    if typed is None:
        return by_degree, None
    type_ids, names = typed
    by_type = strata(head, tail, {side: torch.from_numpy(type_ids[ids]) for side, ids in answers.items()},
                     names, hits_at)
    return by_degree, by_type
