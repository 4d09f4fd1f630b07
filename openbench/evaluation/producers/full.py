"""Full ranking: every candidate entity of each query, the known answers filtered (openbench's
protocol), from a scorer's score rows or an embedding scorer's chunks, counted by the chain
(:mod:`openbench.evaluation.counting.chain`) with exact ranks by default. The producer contract
is :mod:`.base`'s.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

import torch

from openbench.errors import InputError
from openbench.evaluation.counting.chain import MIN_FULL_ROWS, BlockSource, EmbeddingBlocks, RowBlocks, count_batch
from openbench.evaluation.counting.exact import RANK_MODES, ExactRanks
from openbench.evaluation.counting.counts import NonFiniteRows, RankCounts
from openbench.evaluation.producers.base import Producer, is_out_of_memory, take_warnings
from openbench.evaluation.candidates import RankingSetup, block_elements
from openbench.models.scorers import EmbeddingScorer
from openbench.progress import progress
from openbench.record import Protocol

__all__ = ["FullRanking", "QUERY_TILE", "FUSED_QUERY_TILE", "FUSED_BLOCK_ELEMENTS", "COUNTING_MODES"]

COUNTING_MODES = ("fused", "blocks")

logger = logging.getLogger(__name__)


# queries per batch when full score rows of that many do not fit the block budget: a tile this
# tall makes the GEMM of each entity chunk compute-bound (at 1 M entities, full rows of 8 queries
# streamed the whole table from memory once per 8 queries: 12× slower than the tiled GEMM)
QUERY_TILE = 1024
# exact ranks on the CPU: queries per tile and scores per block and thread, each block counted by
# the core that computed it right after its GEMM (16 MB of float32, from that core's cache rather
# than memory; a taller tile reads each chunk of the table fewer times; benchmarks/bench_scale.py:
# 1024 x 2048 took 3 % longer at 200 k entities)
FUSED_QUERY_TILE, FUSED_BLOCK_ELEMENTS = 2048, 2 ** 22


class FullRanking(Producer):
    """Every candidate entity of each query, the known answers filtered (openbench's protocol).

    :param scorer: an :class:`~openbench.models.scorers.EmbeddingScorer` (streamed in entity
        chunks, exact ranks) or any row scorer (:class:`~openbench.models.base.RowScorer`).
    :param ranks: embeddings: ``"exact"`` (better and tied as exact arithmetic on the stored
        values decides, :mod:`openbench.evaluation.counting.exact`) or ``"fast"`` (as the scores computed in
        the embeddings' precision compare).
    :param entity_chunk: candidates per block (default: by the block budget).
    :param counting: ``"fused"`` (embeddings on the CPU with the C kernel: each block counted in one
        pass right after its GEMM, :class:`~openbench.evaluation.counting.tally.FusedTally`; elsewhere
        as ``"blocks"``) or ``"blocks"`` (:func:`~openbench.evaluation.counting.counts.count_block`
        per block, the reference). Both give the same record.
    """

    def __init__(self, scorer, *, ranks: str = "exact", entity_chunk: Optional[int] = None, counting: str = "fused"):
        if ranks not in RANK_MODES:
            raise InputError(f"unknown ranks mode {ranks!r}; expected one of {', '.join(RANK_MODES)}")
        if counting not in COUNTING_MODES:
            raise InputError(f"unknown counting {counting!r}; expected one of {', '.join(COUNTING_MODES)}")
        self.counting = counting
        self.scorer, self.ranks, self.entity_chunk = scorer, ranks, entity_chunk
        self.exact: Optional[ExactRanks] = None
        self.source: Optional[BlockSource] = None
        self.entity_range: Optional[tuple] = None  # an entity shard's [start, stop)
        self._block_budget = 0
        self._bound: Optional[RankingSetup] = None
        self._fused_counting = False  # read at bind (every batch's block width depends on it)
        self._total = 0  # candidates this process scores, read at bind

    @property
    def embeddings(self) -> bool:
        return isinstance(self.scorer, EmbeddingScorer)

    def bind(self, setup: RankingSetup, entity_range: Optional[tuple] = None, gather_rows=None, reduce=None,
             reduce_max=None) -> None:
        """Move the scorer to the setup's device; embeddings: check the entity count (an entity
        shard's, given ``entity_range`` and its cross-process ``gather_rows``/``reduce``/
        ``reduce_max``), set up exact ranks, and stream in chunks the block budget holds."""
        if self._bound is setup:  # bound already (an evaluator shell evaluated twice keeps its counts)
            return
        self._bound = setup
        self._block_budget = block_elements(setup.device)
        take_warnings(setup, self.scorer)
        if not self.embeddings:
            if hasattr(self.scorer, "to"):  # a Scorer without it computes where it likes
                self.scorer = self.scorer.to(setup.device)
            self.source = RowBlocks(self.scorer, check=getattr(self.scorer, "check_rows", None))
            return
        start, stop = entity_range if entity_range is not None else (0, setup.num_entities)
        if self.scorer.num_entities != stop - start:
            raise InputError(f"the model has {self.scorer.num_entities} entities, the dataset {setup.num_entities}"
                             + (f" (entity range {start}..{stop - 1})" if entity_range is not None else ""))
        self.entity_range = (start, stop)
        self.scorer = self.scorer.to(setup.device)
        exact = self.ranks == "exact"
        if exact and not self.scorer.exact_keys:
            logger.warning("%s post-processes its scores (%s): ranks compare the computed scores, not exact ones",
                           self.scorer.name, type(self.scorer).__name__)
            exact = False
        self.exact = ExactRanks(self.scorer, setup.lower_is_better, reduce_max, entity_offset=start) if exact else None
        candidate_max = {} if self.exact is None else self.exact.ready(setup.sides)
        self.source = EmbeddingBlocks(self.scorer, self.exact, self.entity_range, gather_rows, reduce,
                                      fused=self.counting == "fused", candidate_max=candidate_max)
        self._total = stop - start
        self._fused_counting = self.exact is not None and self.source.fused

    @property
    def fused_counting(self) -> bool:
        """Exact ranks of an embedding scorer on the CPU, counted by the C kernel's fused chunk count
        (decided at :meth:`bind`)."""
        return self._fused_counting

    # -- sizes ------------------------------------------------------------------------------
    def default_batch_size(self, setup: RankingSetup) -> int:
        """Queries per batch: the fused count's :data:`FUSED_QUERY_TILE`; other embeddings, as many
        full (E,) score rows as the block budget holds
        (at most 4096) where that is at least :data:`QUERY_TILE` of them, else a tile of
        :data:`QUERY_TILE` queries scored in entity chunks (so each candidate row is read from
        memory once per tile, not once per handful of queries); rows, at most 1024."""
        budget = self._block_budget
        if not self.embeddings:
            return max(1, min(budget // max(setup.num_entities, 1), 1024))
        if self.fused_counting:
            return FUSED_QUERY_TILE
        if setup.num_entities * QUERY_TILE <= budget:
            return max(1, min(budget // setup.num_entities, 4096))
        return QUERY_TILE

    def chunk_width(self, batch_size: int) -> int:
        """Candidates per block for ``batch_size`` queries: exact ranks on the CPU with the C
        kernel, blocks of :data:`FUSED_BLOCK_ELEMENTS` (counted by the thread that computed them);
        otherwise all of them where they fit the block budget."""
        total = self._total
        if self.entity_chunk:
            return min(self.entity_chunk, total)
        if self.fused_counting:
            return max(1, min(total, FUSED_BLOCK_ELEMENTS // max(1, batch_size)))
        budget = self._block_budget
        if batch_size * total <= max(budget, MIN_FULL_ROWS * total):
            return total
        return max(1, min(total, budget // batch_size))

    # -- the producer -----------------------------------------------------------------------
    def evaluation_triples(self, setup: RankingSetup) -> torch.Tensor:
        """(T, 3) the scoped triples, in the order the scorer is fastest on (TransR: by relation)."""
        triples = super().evaluation_triples(setup)
        if self.embeddings or not hasattr(self.scorer, "order"):
            return triples
        return self.scorer.order(triples)

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """{side: RankCounts (T,)} of ``triples`` (T, 3), side by side and batch by batch through the
        count chain (:func:`~openbench.evaluation.counting.chain.count_batch`), the batch halved on
        out-of-memory. A batch holds queries of one side (as OGB's and DGL-KE's head-batch and
        tail-batch test loaders do): it goes down the stages once, each side its own ranking task."""
        total = triples.shape[0]
        size = int(batch_size) if batch_size else self.default_batch_size(setup)
        if size < 1:
            raise InputError(f"batch size must be positive, got {size}")
        if self.source is None or self._bound is not setup:
            raise RuntimeError("bind(setup) first")
        if not total:
            empty = torch.zeros(0, dtype=torch.long, device=setup.device)
            return {side: RankCounts(empty, empty, empty) for side in setup.sides}
        counts: Dict[str, RankCounts] = {}
        with progress(total=total * len(setup.sides), desc="evaluating", unit="query", enabled=setup.progress) as bar:
            for side in setup.sides:
                counts[side], size = self._produce_side(setup, triples, side, size, bar)
        return counts

    def _produce_side(self, setup: RankingSetup, triples: torch.Tensor, side: str, size: int,
                      bar) -> Tuple[RankCounts, int]:
        """(RankCounts (T,) of the ``side`` queries of ``triples`` (T, 3), the batch size the side
        ended with: a halving on out-of-memory holds for the sides after it)."""
        assert self.source is not None
        parts: List[RankCounts] = []
        position, total = 0, triples.shape[0]
        while position < total:
            batch = triples[position:position + size]
            try:
                width = self.chunk_width(batch.shape[0]) if self.embeddings else setup.num_entities
                parts.append(count_batch(setup, self.source, batch, side, width))
            except NonFiniteRows as error:
                # an embedding scorer's stored values are finite (the door checked them): its NaN key
                # is inf - inf, a key that overflowed the tables' precision
                overflowed = self.scorer.entities.dtype if self.embeddings else None
                raise setup.nan_error(position + error.row, str(error), side, overflowed) from None
            except (RuntimeError, MemoryError) as error:
                if not is_out_of_memory(error) or size == 1:
                    raise
                self._fallback(setup, size)
                size = max(1, size // 2)
                continue
            position += batch.shape[0]
            bar.update(batch.shape[0])
        return RankCounts.cat(parts), size

    @staticmethod
    def _fallback(setup: RankingSetup, size: int) -> None:
        if setup.device.type == "cuda":
            torch.cuda.empty_cache()
        message = f"out of memory at batch size {size}; continued with batch size {max(1, size // 2)}"
        setup.warnings.append(message)
        logger.warning(message)

    def adjust(self, protocol: Protocol) -> Protocol:
        """Embeddings: how ranks were counted (``ranks``: ``"exact"`` or the precision the scores
        were compared in) and the stored values' dtype (``embedding_precision``)."""
        if self.embeddings:
            precision = str(self.scorer.entities.dtype).replace("torch.", "")
            compared = str(self.scorer.entities.real.dtype).replace("torch.", "")
            protocol.extra["ranks"] = "exact" if self.exact is not None else compared
            protocol.extra["embedding_precision"] = precision
        return protocol

    def model_description(self) -> dict:
        """The scorer's description."""
        return self.scorer.description()

    def timing(self) -> dict:
        """Exact ranks: how many (query, candidate) pairs the fast pass left undecided and what
        settled them (they depend on the arithmetic's order, so they live with the timings)."""
        return {} if self.exact is None else {"exact_ranks": self.exact.stats.as_dict()}
