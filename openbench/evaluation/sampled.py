"""The sampled protocol (OGB's ``ogbl-biokg``/``ogbl-wikikg2``): each query is ranked against its
own fixed list of K negative candidates, not against all entities.

OGB's definition, kept here: no filtering (a negative that happens to be another true answer still
counts against the query), and the rank of the true answer among its 1 + K candidates by the mean
of optimistic and pessimistic ranks, which is openbench's realistic rank
``g + (e + 1 + 1) / 2 = g + e / 2 + 1`` (g candidates score higher, e tie). Optimistic and
pessimistic ranks and every other metric come from the same counts as in the full protocol.

Only the 1 + K candidates of a query are scored (through the evaluator's ``score_candidates``
where it has one, which builds each query vector once and gathers only its candidates, else
:meth:`~openbench.evaluation.evaluator.Evaluator.score_triples`): nothing of size (batch ×
entities) is built, so a 2.5 M-entity graph costs what its negatives cost. The true answer is
scored in the same call and by the same formula as its negatives, so a tie is a tie.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, Optional

import torch

from openbench.errors import InputError, ScoreError
from openbench.evaluation.ranking import RankCounts

__all__ = ["SampledNegatives", "sampled_counts", "BLOCK_ELEMENTS"]

BLOCK_ELEMENTS = 1 << 22  # candidate triples scored per call


@dataclass
class SampledNegatives:
    """Negative candidates per evaluation triple: ``head`` (T, K_h) and ``tail`` (T, K_t) entity
    ids (in the dataset's maps), row i for triple i of the evaluation split."""

    head: torch.Tensor
    tail: torch.Tensor

    def check(self, triples: torch.Tensor, num_entities: int, where=None) -> None:
        for side, negatives in (("head", self.head), ("tail", self.tail)):
            if negatives.dim() != 2 or negatives.shape[0] != triples.shape[0] or negatives.shape[1] < 1:
                raise InputError(f"{side} negatives of shape {tuple(negatives.shape)}: expected ({triples.shape[0]}, K) "
                                 "with K >= 1, one row per evaluation triple", where)
            if negatives.numel() and (int(negatives.min()) < 0 or int(negatives.max()) >= num_entities):
                raise InputError(f"{side} negatives hold entity ids outside [0, {num_entities})", where)

    def description(self) -> Dict[str, object]:
        digest = hashlib.sha256()
        for negatives in (self.head, self.tail):
            digest.update(negatives.to(torch.int64).contiguous().numpy().tobytes())
        return {"head": int(self.head.shape[1]), "tail": int(self.tail.shape[1]), "sha256": digest.hexdigest()}


def sampled_counts(evaluator, triples: torch.Tensor, negatives: SampledNegatives,
                   batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
    """{side: counts (T,)} of ``triples`` (T, 3), each query against its own negatives.

    :param evaluator: anything with ``sides`` and ``score_triples`` (higher is more plausible).
    """
    counts = {}
    for side in evaluator.sides:
        chosen = negatives.head if side == "head" else negatives.tail
        column = 0 if side == "head" else 2
        width = chosen.shape[1] + 1
        size = batch_size or max(1, BLOCK_ELEMENTS // width)
        greater, equal = [], []
        for start in range(0, triples.shape[0], size):
            batch = triples[start:start + size].cpu()
            candidates = torch.cat([batch[:, column:column + 1], chosen[start:start + size].to(torch.long)], dim=1)
            if hasattr(evaluator, "score_candidates"):
                scores = evaluator.score_candidates(batch, side, candidates)  # higher: better
            else:
                expanded = batch[:, None, :].expand(-1, width, -1).clone()
                expanded[:, :, column] = candidates
                scores = evaluator.score_triples(expanded.reshape(-1, 3)).reshape(-1, width)
            bad = torch.isnan(scores).any(dim=1)
            if bool(bad.any()):
                row = start + int(bad.nonzero()[0])
                raise ScoreError(f"the model gave NaN scores to the {side} candidates of evaluation triple {row}")
            true = scores[:, :1]
            greater.append((scores[:, 1:] > true).sum(dim=1))
            equal.append((scores[:, 1:] == true).sum(dim=1))
        n = triples.shape[0]
        counts[side] = RankCounts(torch.cat(greater) if greater else torch.zeros(0, dtype=torch.long),
                                  torch.cat(equal) if equal else torch.zeros(0, dtype=torch.long),
                                  torch.full((n,), width, dtype=torch.long))
    return counts
