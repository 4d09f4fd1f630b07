"""The leakage baseline: answers the training triples imply through the patterns the audit
finds in them (a symmetric relation's reverses, inverse and duplicate relation partners) rank
above everything else, the others by the popularity baseline.

This is the inverse baseline of Dettmers et al. (2018) generalised to the audit's patterns
(:func:`splits.audit.implied_triples`, threshold θ = 0.8): what leakage alone scores, so that a
table can show how much of a model's score a leak explains. For a tail query (h, r, ?), candidate
e scores ``BONUS · [(h, r, e) implied] + popularity``; heads alike.
"""
from __future__ import annotations

import torch

from openbench.datasets.filter_index import FilterIndex
from openbench.models.popularity import PopularityScorer

__all__ = ["RulesScorer", "rules_model"]

RULES_SCORE = ("answers implied by symmetric, inverse and duplicate relations of the training triples "
               "(the audit's patterns) first, then training degree within the query's relation and side")


class RulesScorer(PopularityScorer):
    """Row scores: popularity plus a bonus above every degree for the implied answers.

    :param implied: (N, 3) int64 triples the training triples imply (the audit's patterns).
    """

    name = kind = "rules"

    def __init__(self, train: torch.Tensor, implied: torch.Tensor, num_entities: int, num_relations: int,
                 threshold: float):
        super().__init__(train, num_entities, num_relations)
        self.bonus = float(train.shape[0] + 1)  # above any degree
        self.threshold, self.implied_count = threshold, int(implied.shape[0])
        self.implied = {side: FilterIndex.build(implied.to(torch.long), num_relations, side)
                        for side in ("head", "tail")}

    def to(self, device: torch.device) -> "RulesScorer":
        """The tables and the implied answers on ``device``."""
        super().to(device)
        self.implied = {side: index.to(self.device) for side, index in self.implied.items()}
        return self

    def description(self) -> dict:
        """``rules``, what it scores and with which threshold; computed from the training split."""
        return {"name": self.name, "kind": self.kind, "source_sha256": None,
                "params": {"score": RULES_SCORE, "threshold": self.threshold, "implied_triples": self.implied_count}}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) float64: the popularity row, the implied answers raised by the bonus."""
        rows = super().score_rows(batch, side)
        hit_rows, hit_columns = self.implied[side].lookup(batch.to(self.device))
        rows[hit_rows, hit_columns] += self.bonus
        return rows


def rules_model(dataset, threshold: float = 0.8) -> RulesScorer:
    """The rules baseline of ``dataset``: the patterns at ``threshold`` of the graph a model reads
    at test time (the training triples, or an inductive split's inference graph), and its answers."""
    from splits.audit import implied_triples

    train = dataset.test_graph()
    implied = implied_triples(train, dataset.relation_labels, threshold)
    return RulesScorer(train, implied, dataset.num_entities, dataset.num_relations, threshold)
