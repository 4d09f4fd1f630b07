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

from typing import Callable, Dict, List, Optional, Sequence

import torch

from openbench.datasets.negatives import SampledNegatives
from openbench.errors import InputError, ScoreError
from openbench.evaluation.candidates import RankingSetup
from openbench.evaluation.counting.counts import RankCounts
from openbench.evaluation.producers.base import Producer, take_warnings
from openbench.models.scorers import EmbeddingScorer
from openbench.record import Protocol

# SampledNegatives: defined in openbench.datasets.negatives
__all__ = ["SampledNegatives", "SampledRanking", "sampled_counts", "score_as_triples", "BLOCK_ELEMENTS"]

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


class SampledRanking(Producer):
    """OGB's sampled protocol: each query against its own negatives, unfiltered (see
    the module docstring). Embeddings score each query's candidates directly;
    other scorers score the (1 + K) triples of each query."""

    def __init__(self, scorer, negatives: SampledNegatives):
        self.scorer, self.negatives = scorer, negatives
        self.sides: List[str] = []
        self.lower_is_better = False

    @property
    def embeddings(self) -> bool:
        return isinstance(self.scorer, EmbeddingScorer)

    def bind(self, setup: RankingSetup) -> None:
        """Move the scorer to the setup's device and check it holds every entity."""
        if self.embeddings and self.scorer.num_entities != setup.num_entities:
            raise InputError(f"the model has {self.scorer.num_entities} entities, the dataset {setup.num_entities}")
        take_warnings(setup, self.scorer)
        if hasattr(self.scorer, "to"):
            self.scorer = self.scorer.to(setup.device)
        self.sides, self.lower_is_better = list(setup.sides), setup.lower_is_better

    def evaluation_triples(self, setup: RankingSetup) -> torch.Tensor:
        """(T, 3) every evaluation row, repeats included: each row has its own negatives (OGB)."""
        return setup.scoped(setup.evaluation_triples())

    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) float64, higher is more plausible (embeddings only; see :func:`sampled_counts`)."""
        scores = self.scorer.score_candidates(batch, side, candidates)
        return -scores if self.lower_is_better else scores

    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64, higher is more plausible."""
        scores = self.scorer.score_triples(triples)
        return -scores if self.lower_is_better else scores

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """{side: RankCounts (T,)}: each query of ``triples`` (T, 3) against its 1 + K candidates."""
        score = self.score_candidates if self.embeddings else score_as_triples(self.score_triples)
        return sampled_counts(score, self.sides, triples, self.negatives, batch_size)

    def adjust(self, protocol: Protocol) -> Protocol:
        """Embeddings: sampled ranks compare the scores as computed (``ranks``: their precision)."""
        if self.embeddings:
            precision = str(self.scorer.entities.dtype).replace("torch.", "")
            protocol.extra["ranks"] = str(self.scorer.entities.real.dtype).replace("torch.", "")
            protocol.extra["embedding_precision"] = precision
        return protocol

    def model_description(self) -> dict:
        """The scorer's description."""
        return self.scorer.description()
