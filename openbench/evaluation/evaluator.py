"""The subclassing contract of OpenBioLink's evaluator, kept on top of the one engine.

Code written for OpenBioLink subclasses an evaluator and implements ``score_batch(batch)``,
returning ``(head_scores, tail_scores)``, each (B, E) (``head_scores[i, j]`` the score of
(j, r_i, t_i), ``tail_scores[i, j]`` that of (h_i, r_i, j)), or the older 4-tensor contract
``(pos_head, neg_head, pos_tail, neg_tail)``, where the true score is read from the full row and a
warning is recorded where it differs from ``pos_*`` by more than rounding. :class:`Evaluator`
runs such a subclass through :func:`openbench.evaluation.evaluate.run` (a
:class:`~openbench.evaluation.producers.FullRanking` of its rows), so it gets exactly what every
other model gets. New code passes a scorer to :func:`openbench.evaluate` instead
(:func:`openbench.score_function` turns a function into one). :class:`EmbeddingEvaluator` is the
same shell over an embedding scorer.
"""
from __future__ import annotations

import logging
from typing import Dict, Optional, Tuple, Union

import torch

from openbench.errors import ScoreError
from openbench.evaluation.evaluate import run
from openbench.evaluation.producers import FullRanking, Producer, SampledRanking
from openbench.evaluation.ranking import RankCounts
from openbench.evaluation.setup import DEFAULT_HITS_AT, RankingSetup
from openbench.models.base import RowScorer
from openbench.models.scorers import EmbeddingScorer

__all__ = ["DEFAULT_HITS_AT", "Evaluator", "EmbeddingEvaluator"]

logger = logging.getLogger(__name__)


class _ScoreBatch(RowScorer):
    """An :class:`Evaluator` subclass's ``score_batch`` as a row scorer: called once per batch,
    both sides served from its output; the 4-tensor contract's positives checked against the rows."""

    kind = "score_batch"

    def __init__(self, evaluator: "Evaluator"):
        super().__init__(evaluator.num_entities)
        self.evaluator = evaluator
        self.device = evaluator.device
        self._batch: Optional[torch.Tensor] = None
        self._output: Tuple = ()

    def to(self, device: torch.device) -> "_ScoreBatch":
        """The evaluator computes where it was told to."""
        return self

    def description(self) -> dict:
        """The subclass's model block."""
        return self.evaluator.model_description()

    def _scores_of(self, batch: torch.Tensor) -> Tuple:
        if batch is not self._batch:
            output = self.evaluator.score_batch(batch)
            if not isinstance(output, (tuple, list)) or len(output) not in (2, 4):
                raise ScoreError("score_batch must return (head_scores, tail_scores) or "
                                 "(pos_head, neg_head, pos_tail, neg_tail)")
            self._batch, self._output = batch, tuple(output)
        return self._output

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) ``score_batch``'s ``side`` rows (``neg_*`` of the 4-tensor contract)."""
        output = self._scores_of(batch)
        if len(output) == 2:
            return output[0] if side == "head" else output[1]
        return output[1] if side == "head" else output[3]

    def check_rows(self, batch: torch.Tensor, side: str, rows: torch.Tensor, true_scores: torch.Tensor) -> None:
        """The 4-tensor contract: ``pos_*`` (B,) against the true answers' entries ``true_scores`` (B,)."""
        output = self._scores_of(batch)
        if len(output) == 4:
            positive = torch.as_tensor(output[0] if side == "head" else output[2], device=rows.device)
            self.evaluator._check_positive_scores(side, positive, true_scores)


class Evaluator(RankingSetup):
    """Filtered rank-based evaluation of a ``score_batch`` subclass (see the module docstring);
    the options are :class:`~openbench.evaluation.setup.RankingSetup`'s."""

    model_name = "custom"
    model_kind = "score_batch"

    # -- the model contract ---------------------------------------------------------------
    def score_batch(self, batch: torch.Tensor):
        """Scores for ``batch`` (B, 3) of (h, r, t) ids on the evaluation device.

        Return ``(head_scores, tail_scores)``, each (B, E), or the 4-tuple
        ``(pos_head (B,), neg_head (B, E), pos_tail (B,), neg_tail (B, E))``.
        """
        raise NotImplementedError("subclasses implement score_batch(batch)")

    def model_description(self) -> dict:
        return {"name": self.model_name, "kind": self.model_kind, "params": {}, "source_sha256": None}

    def producer(self) -> Producer:
        """What ranks this evaluator's model: the full ranking of its ``score_batch`` rows."""
        return FullRanking(_ScoreBatch(self))

    def evaluate(self, batch_size: Optional[int] = None) -> dict:
        """Evaluate every triple of the evaluation split; returns the result record as JSON values."""
        return run(self, self.producer(), batch_size).to_dict()

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of the given (n, 3) triples, for triple classification; higher is more
        plausible (distances are negated when ``lower_is_better``), read from the tail rows."""
        scores = _ScoreBatch(self).score_triples(triples)
        return -scores if self.lower_is_better else scores

    def _check_positive_scores(self, side: str, positive: torch.Tensor, from_rows: torch.Tensor) -> None:
        """Warn where ``pos_*`` (B,) and the true answer's entry of the full row (B,) differ by
        more than rounding: the same score computed two ways may differ in its last bits."""
        positive = positive.reshape(-1).to(from_rows.dtype)
        tolerance = 64 * torch.finfo(from_rows.dtype).eps
        differs = ~torch.isclose(positive, from_rows, rtol=tolerance, atol=tolerance, equal_nan=True)
        if bool(differs.any()):
            largest = float((positive - from_rows)[differs].abs().max())
            self.warn(f"{int(differs.sum())} {side} positive score(s) differ from the true answer's entry of the full "
                      f"score row by more than rounding (up to {largest:.3g}); ranked with the full-row value")


class EmbeddingEvaluator(Evaluator):
    """The :class:`Evaluator` shell over an embedding scorer: a
    :class:`~openbench.evaluation.producers.FullRanking` (or, given sampled negatives, a
    :class:`~openbench.evaluation.producers.SampledRanking`) of ``scorer``."""

    model_kind = "embeddings"

    def __init__(self, dataset, scorer: EmbeddingScorer, *, model_params: Optional[dict] = None,
                 source_sha256: Optional[str] = None, entity_chunk: Optional[int] = None,
                 ranks: str = "exact", **kwargs):
        """:param ranks: ``"exact"`` or ``"fast"`` (see :class:`~openbench.evaluation.producers.FullRanking`)."""
        super().__init__(dataset, **kwargs)
        if model_params is not None or source_sha256 is not None:
            scorer = scorer.with_tables(scorer.entities, scorer.relations).described(model_params, source_sha256)
        self.scorer = scorer
        self.model_name = scorer.name
        if self.sampled_negatives is not None:
            self._producer: Union[SampledRanking, FullRanking] = SampledRanking(scorer, self.sampled_negatives)
        else:
            self._producer = FullRanking(scorer, ranks=ranks, entity_chunk=entity_chunk)
        self._producer.bind(self)

    @property
    def exact(self):
        """The full ranking's :class:`~openbench.evaluation.exact.ExactRanks` (None: fast ranks)."""
        return getattr(self._producer, "exact", None)

    def producer(self) -> Producer:
        """The scorer's producer (already bound to this evaluator)."""
        return self._producer

    def model_description(self) -> dict:
        """The scorer's name, kind and parameters (dimension, dtype) and the files' sha256."""
        return self._producer.model_description()

    def produce(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """{side: RankCounts (T,)} of ``triples`` (T, 3) (the producer's)."""
        return self._producer.produce(self, triples, batch_size)

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of (n, 3) triples, each against its own tail only: O(n · d); higher is more
        plausible (negated when ``lower_is_better``)."""
        scores = self._producer.scorer.score_triples(triples)
        return -scores if self.lower_is_better else scores

    @torch.no_grad()
    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) float64 scores of the ``side`` queries of ``batch`` (B, 3) against their own
        candidates (B, W), higher is more plausible."""
        scores = self._producer.scorer.score_candidates(batch, side, candidates)
        return -scores if self.lower_is_better else scores
