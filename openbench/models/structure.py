"""The structure baseline (``--model neighbours``): each candidate scored by how many of the query
entity's training neighbours it answers under the query's relation, popularity breaking ties. No
embeddings, no per-entity parameters: it reads only the training graph, so it scores entities
that no training triple of the query's relation has (an entity-held-out split) from the edges
they keep, and gives every table of that kind a floor.

For a tail query (h, r, ?) candidate e scores |{x : x is a training neighbour of h (any relation,
either direction) and (x, r, e) is a training triple}| — e treats what h's neighbours are treated
with — plus its popularity (training degree within r and the side) divided by one more than the
largest, so counts decide and popularity orders equal counts. A head query (?, r, t) mirrors it:
|{x ∈ N(t) : (e, r, x) is a training triple}|. Scores are exact in float64 (integers plus a
fraction below 1), so ties are exact and realistic ranks split them.
"""
from __future__ import annotations

from typing import Dict

import numpy as np
import torch

from openbench.models.base import RowScorer
from openbench.models.popularity import PopularityScorer

__all__ = ["NEIGHBOURS_SCORE", "NeighbourScorer", "neighbour_model"]

NEIGHBOURS_SCORE = ("training neighbours of the query entity answered by the candidate under the query's relation, "
                    "then popularity")


class NeighbourScorer(RowScorer):
    """Row scores from the training graph (see the module docstring).

    :param train: (T, 3) the distinct training triples (head, relation, tail) ids.
    """

    name = kind = "neighbours"

    def __init__(self, train: torch.Tensor, num_entities: int, num_relations: int):
        from scipy import sparse

        super().__init__(num_entities)
        triples = train.cpu().numpy().astype(np.int64)
        heads, relations, tails = triples[:, 0], triples[:, 1], triples[:, 2]
        ones = np.ones(2 * len(triples), dtype=np.float64)
        both = sparse.csr_matrix((ones, (np.concatenate([heads, tails]), np.concatenate([tails, heads]))),
                                 shape=(num_entities, num_entities))
        both.data[:] = 1.0  # a neighbour counts once, however many edges join them
        both.setdiag(0.0)
        both.eliminate_zeros()
        self.neighbours = both
        self.by_relation: Dict[int, Dict[str, object]] = {}
        for relation in np.unique(relations).tolist():
            chosen = relations == relation
            forward = sparse.csr_matrix((np.ones(int(chosen.sum())), (heads[chosen], tails[chosen])),
                                        shape=(num_entities, num_entities))
            forward.data[:] = 1.0
            self.by_relation[relation] = {"tail": forward, "head": forward.T.tocsr()}
        self.popularity = PopularityScorer(train, num_entities, num_relations)

    def description(self) -> dict:
        """``neighbours``, what it scores, no source files (it is computed from the training split)."""
        return {"name": self.name, "kind": self.kind, "params": {"score": NEIGHBOURS_SCORE}, "source_sha256": None}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) float64: neighbour counts plus popularity / (largest + 1), rows in ``batch``'s order."""
        rows = batch.cpu().numpy().astype(np.int64)
        anchors = rows[:, 0] if side == "tail" else rows[:, 2]
        popularity = self.popularity.score_rows(batch.cpu(), side).numpy()
        scores = popularity / (popularity.max(initial=0.0) + 1.0)
        for relation in np.unique(rows[:, 1]).tolist():
            chosen = np.flatnonzero(rows[:, 1] == relation)
            matrix = self.by_relation.get(relation)
            if matrix is None:
                continue
            counts = (self.neighbours[anchors[chosen]] @ matrix[side]).toarray()
            scores[chosen] += counts
        return torch.from_numpy(scores).to(self.device)


def neighbour_model(dataset) -> NeighbourScorer:
    """The structure baseline of ``dataset``, over the graph a model reads at test time (the
    training triples, or an inductive split's inference graph)."""
    return NeighbourScorer(dataset.test_graph(), dataset.num_entities, dataset.num_relations)
