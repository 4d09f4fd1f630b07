"""The popularity baseline: each candidate scored by its training degree within the query's
relation and side, no embeddings.

For a tail query (h, r, ?) candidate e scores the number of training triples (·, r, e); for a head
query (?, r, t), the number of training triples (e, r, ·). Scores are integers, so ties are exact
(realistic ranks split them). Bonner et al. (arXiv 2112.06567) show biomedical KG embeddings
mostly learn hub degree: a table that shows this row shows what degree alone scores.
"""
from __future__ import annotations

import torch

from openbench.models.base import RowScorer

__all__ = ["PopularityScorer", "popularity_model"]

POPULARITY_SCORE = "training degree within the query's relation and side"


class PopularityScorer(RowScorer):
    """Row scores from per-relation degree tables: ``tails`` and ``heads`` (R, E) int32 counts.

    :param train: (T, 3) the distinct training triples (head, relation, tail) ids.
    """

    name = kind = "popularity"

    def __init__(self, train: torch.Tensor, num_entities: int, num_relations: int):
        super().__init__(num_entities)
        train = train.cpu().to(torch.long)
        self.tables = {}
        for side, column in (("tail", 2), ("head", 0)):
            codes = train[:, 1] * num_entities + train[:, column]
            counts = torch.bincount(codes, minlength=num_relations * num_entities)
            self.tables[side] = counts.to(torch.int32).reshape(num_relations, num_entities)

    def to(self, device: torch.device) -> "PopularityScorer":
        """The tables on ``device``."""
        self.device = torch.device(device)
        self.tables = {side: table.to(self.device) for side, table in self.tables.items()}
        return self

    def description(self) -> dict:
        """``popularity``, what it scores, no source files (it is computed from the training split)."""
        return {"name": self.name, "kind": self.kind, "params": {"score": POPULARITY_SCORE}, "source_sha256": None}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) float64: each query's relation's degree row for ``side``."""
        table = self.tables[side]
        return torch.index_select(table, 0, batch[:, 1].to(table.device)).to(torch.float64)


def popularity_model(dataset) -> PopularityScorer:
    """The popularity baseline of ``dataset``: degrees in the graph a model reads at test time
    (:meth:`~openbench.datasets.loader.Dataset.test_graph`: the training triples, or an inductive
    split's inference graph)."""
    return PopularityScorer(dataset.test_graph(), dataset.num_entities, dataset.num_relations)
