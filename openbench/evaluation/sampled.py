"""The sampled protocol (OGB's ``ogbl-biokg``/``ogbl-wikikg2``): each query is ranked against its
own fixed list of K negative candidates, not against all entities.

OGB's definition, kept here: no filtering (a negative that happens to be another true answer still
counts against the query), and the rank of the true answer among its 1 + K candidates by the mean
of optimistic and pessimistic ranks, which is openbench's realistic rank
``g + (e + 1 + 1) / 2 = g + e / 2 + 1`` (g candidates score higher, e tie). Optimistic and
pessimistic ranks and every other metric come from the same counts as in the full protocol.

Only the 1 + K candidates of a query are scored (the producer's ``score``: an embedding scorer's
``score_candidates``, which builds each query vector once and gathers only its candidates, or the
candidate triples through ``score_triples``, :func:`score_as_triples`): nothing of size (batch ×
entities) is built, so a 2.5 M-entity graph costs what its negatives cost. The true answer is
scored in the same call and by the same formula as its negatives, so a tie is a tie.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import torch

from openbench.datasets.negatives import SampledNegatives
from openbench.errors import ScoreError
from openbench.evaluation.ranking import RankCounts

# SampledNegatives: defined in openbench.datasets.negatives
__all__ = ["SampledNegatives", "sampled_counts", "score_as_triples", "BLOCK_ELEMENTS"]

BLOCK_ELEMENTS = 1 << 22  # candidate triples scored per call

CandidateScores = Callable[[torch.Tensor, str, torch.Tensor], torch.Tensor]


def score_as_triples(score_triples: Callable[[torch.Tensor], torch.Tensor]) -> CandidateScores:
    """``score(batch (B, 3), side, candidates (B, W)) -> (B, W)`` from a triple scorer: each query's
    triple with its ``side`` entity replaced by each candidate."""
    def score(batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        column = 0 if side == "head" else 2
        expanded = batch[:, None, :].expand(-1, candidates.shape[1], -1).clone()
        expanded[:, :, column] = candidates
        return score_triples(expanded.reshape(-1, 3)).reshape(-1, candidates.shape[1])

    return score


def sampled_counts(score: CandidateScores, sides: Sequence[str], triples: torch.Tensor, negatives: SampledNegatives,
                   batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
    """{side: counts (T,)} of ``triples`` (T, 3), each query against its own negatives.

    :param score: ``score(batch (B, 3), side, candidates (B, W)) -> (B, W)``, higher is more
        plausible; column 0 of the candidates is the true answer.
    """
    counts = {}
    for side in sides:
        chosen = negatives.head if side == "head" else negatives.tail
        column = 0 if side == "head" else 2
        width = chosen.shape[1] + 1
        size = batch_size or max(1, BLOCK_ELEMENTS // width)
        greater, equal = [], []
        for start in range(0, triples.shape[0], size):
            batch = triples[start:start + size].cpu()
            candidates = torch.cat([batch[:, column:column + 1], chosen[start:start + size].to(torch.long)], dim=1)
            scores = score(batch, side, candidates)
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
