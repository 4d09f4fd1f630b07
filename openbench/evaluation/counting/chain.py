"""The count chain: from one batch's candidates and scores to its RankCounts, written once.

A batch holds queries of one side (the producer walks the sides one after the other). It goes
down the stages once, each handing values to the next: the side's candidates
(:meth:`~openbench.evaluation.candidates.RankingSetup.side_candidates`: true answers, filter pairs,
exclusions), the block source's scores (:meth:`BlockSource.begin`: the queries, the true answers'
scores, the blocks, how to count them), then the count: for fast ranks the tally
(:func:`~openbench.evaluation.counting.tally.count_blocks`), for exact ranks
:meth:`~openbench.evaluation.counting.exact.ExactRanks.count_batch` (the window, the tally inside
it, the settling of what the window left undecided). Counts of an entity shard are summed over the
processes, and the ties a true score at the fill value had with the excluded entries are taken
back. Every model source and every sharding goes through :func:`count_batch`; they differ only in
their :class:`BlockSource`:

* :class:`RowBlocks`: one block, the scorer's full rows (PyKEEN, TransR, a user's function);
* :class:`EmbeddingBlocks`: embedding scorers in entity chunks, exact ranks on, and, with an
  entity range and a reduction, one process's share of the candidates (``shard="entities"``).
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import torch

from openbench.errors import ScoreError
from openbench.evaluation.candidates import Exclusion, RankingSetup, SideCandidates
from openbench.evaluation.counting.counts import RankCounts
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY, kernel_name
from openbench.evaluation.counting.tally import Blocks, TallyPlan, count_blocks
from openbench.models.scorers import ExactQueries

__all__ = ["BlockSource", "BatchWork", "RowBlocks", "EmbeddingBlocks", "count_batch", "untie_worst",
           "MIN_FULL_ROWS", "INITIAL_RECORD", "MAX_RECORD"]

MIN_FULL_ROWS = 8  # full (E,) rows per batch the block budget must hold for unchunked scoring
INITIAL_RECORD, MAX_RECORD = 64, 4096  # window columns a fused count records per row (FusedTally)


class BatchWork(NamedTuple):
    """What a block source serves the chain for one batch of B queries of one side.

    :param blocks: the candidates' blocks (:class:`~openbench.evaluation.counting.tally.Blocks`).
    :param plan: how to count them (:class:`~openbench.evaluation.counting.tally.TallyPlan`).
    :param true_scores: (B,) the true answers' scores (keys, for exact ranks), read from the same
        kind of block they are compared in.
    :param exact: exact ranks' state (None: fast ranks compare the scores); then ``scorer`` is the
        scorer that built ``queries`` (B, d') and ``given`` what exact ranks read of the queries.
    :param reduce: (n_greater, n_equal) (B,) -> the same summed over every process (an entity
        shard); None: this process's candidates are all.
    """

    blocks: Blocks
    plan: TallyPlan
    true_scores: torch.Tensor
    exact: Optional[ExactRanks] = None
    scorer: object = None
    given: Optional[ExactQueries] = None
    queries: Optional[torch.Tensor] = None
    reduce: Optional[Callable[..., list]] = None


class BlockSource:
    """Serves a scorer's scores to the chain, one :class:`BatchWork` per batch (queries of one side)."""

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> BatchWork:
        """The work of the ``candidates.side`` queries of ``batch`` (B, 3), blocks of ``width`` candidates."""
        raise NotImplementedError

    def recorded(self, most: int) -> None:
        """A fused count recorded up to ``most`` window columns in one row (nothing to adapt here)."""


def count_batch(setup: RankingSetup, source: BlockSource, batch: torch.Tensor, side: str, width: int) -> RankCounts:
    """RankCounts (B,) of the ``side`` queries of ``batch`` (B, 3) under ``setup``, scored in blocks
    of ``width`` candidates (the producer's choice for this batch size: a value, not a callback).
    Each stage is called once and hands its values down; a NaN score raises
    :class:`~openbench.evaluation.counting.counts.NonFiniteRows` naming its row."""
    candidates = setup.side_candidates(batch, side)
    work = source.begin(setup, batch, candidates, width)
    if work.exact is None:
        tallied = count_blocks(work.blocks, work.plan, candidates, work.true_scores, None)
        if tallied.mismatched:
            setup.warn(f"{tallied.mismatched} true score(s) differed between two computations of the same chunk")
        greater, equal = tallied.greater, tallied.equal
    else:
        assert work.given is not None and work.queries is not None
        greater, equal, most = work.exact.count_batch(work.scorer, side, work.given, work.queries, work.true_scores,
                                                      work.blocks, work.plan, candidates)
        source.recorded(most)
    if work.reduce is not None:
        greater, equal = work.reduce(greater, equal)
    return RankCounts(greater, untie_worst(equal, work.true_scores, candidates.exclusion), candidates.n_candidates)


def untie_worst(equal: torch.Tensor, true_scores: torch.Tensor, exclusion: Optional[Exclusion]) -> torch.Tensor:
    """``equal`` (B,) less the ties a true score (B,) equal to the fill value had with every
    excluded entry that is not a known answer (those were taken back by the filter correction)."""
    if exclusion is None:
        return equal
    at_worst = true_scores == exclusion.fill
    if not bool(at_worst.any()):
        return equal
    return equal - torch.where(at_worst, exclusion.unfiltered, torch.zeros_like(exclusion.unfiltered))


# ------------------------------------------------------------------------------------------
# full rows


class RowBlocks(BlockSource):
    """A :class:`~openbench.models.base.RowScorer`'s full (B, E) rows as one block each.

    :param check: called with (batch, side, rows, true scores) to check what the scorer returned
        (the 4-tensor contract compares its positives with the rows' entries).
    """

    def __init__(self, scorer, check: Optional[Callable] = None):
        self.scorer, self.check = scorer, check

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> BatchWork:
        """The scorer's rows for ``candidates.side`` (one block: ``width`` does not apply), checked
        for shape, made float32 or float64 exactly, counted block by block."""
        side = candidates.side
        rows = torch.as_tensor(self.scorer.score_rows(batch, side), device=setup.device)
        expected = (batch.shape[0], setup.num_entities)
        if tuple(rows.shape) != expected:
            raise ScoreError(f"the model returned {side} scores of shape {tuple(rows.shape)}; expected {expected}")
        if not rows.is_floating_point() or rows.dtype not in (torch.float32, torch.float64):
            rows = rows.to(torch.float32 if rows.is_floating_point() else torch.float64)
        true_scores = rows.gather(1, candidates.true_ids[:, None]).squeeze(1)
        if self.check is not None:
            self.check(batch, side, rows, true_scores)
        block = rows if kernel_name(rows) != "torch" else rows.clone()  # the torch kernel writes into its block
        total = setup.num_entities
        return BatchWork(Blocks(block, 0, total, total), TallyPlan(False, setup.lower_is_better, total), true_scores)


# ------------------------------------------------------------------------------------------
# embedding scorers: chunks, exact ranks, entity shards


class EmbeddingBlocks(BlockSource):
    """An embedding scorer's scores in blocks of the batch's ``width`` candidates, exact ranks where
    ``exact`` is given.

    :param entity_range: [start, stop) of the candidates this process holds (an entity shard);
        with it, ``gather_rows(tensor)`` sums a (B, ...) tensor over the processes (each row comes
        from its one owner, zeros elsewhere) and ``reduce`` the counts.
    :param fused: count with :class:`~openbench.evaluation.counting.tally.FusedTally` where it
        applies (the C helper built, the scorer on the CPU, float32/float64 tables; the decision is
        kept as ``self.fused``), else with :class:`~openbench.evaluation.counting.tally.BlockTally`.
    :param candidate_max: exact ranks: {side: ``exact.candidate_max(side)``} of every evaluated side.
    """

    def __init__(self, scorer, exact: Optional[ExactRanks],
                 entity_range: Optional[Tuple[int, int]] = None,
                 gather_rows: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 reduce: Optional[Callable[..., list]] = None, fused: bool = True,
                 candidate_max: Optional[Dict[str, float]] = None):
        self.scorer, self.exact = scorer, exact
        self.device = scorer.device
        self.library = COUNTING_LIBRARY.get()  # the C helpers, resolved once for this evaluation
        self.fused = (fused and self.library is not None and self.device.type == "cpu"
                      and scorer.entities.real.dtype in (torch.float32, torch.float64))
        # exact ranks: per side the largest magnitude of the candidate vectors, read once at bind
        self.candidate_max = candidate_max or {}
        self.entity_range = entity_range or (0, scorer.num_entities)
        self.gather_rows, self.reduce_counts = gather_rows, reduce
        self._buffers: Dict[int, torch.Tensor] = {}
        # window columns a fused count records per row before it settles them: grown to what the
        # windows of earlier sides held, so that a flush (a second look at a block) stays rare
        self.record_capacity = INITIAL_RECORD

    def recorded(self, most: int) -> None:
        """A side's fused count recorded up to ``most`` columns in one row: room for more next time."""
        if most > self.record_capacity:
            self.record_capacity = min(MAX_RECORD, 1 << int(math.ceil(math.log2(most * 1.25))))

    def scratch_block(self, rows: int, width: int, worker: int = 0) -> torch.Tensor:
        """A contiguous (rows, width) view of ``worker``'s reusable buffer (avoids page faults)."""
        needed = rows * width
        buffer = self._buffers.get(worker)
        if buffer is None or buffer.numel() < needed:
            buffer = self._buffers[worker] = torch.empty(needed, dtype=self.scorer.entities.real.dtype,
                                                         device=self.device)
        return buffer[:needed].view(rows, width)

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> BatchWork:
        """The queries and the true answers' scores of ``candidates.side`` for ``batch`` (B, 3), in
        one call into the scorer (an entity shard's from the anchors' owners), and how to count
        the blocks: the fused C count where it applies (CPU blocks of float32/float64), exact
        ranks over several chunks on several threads."""
        if self.gather_rows is not None:
            return self._shard_work(setup, batch, candidates)
        side, scorer, keys = candidates.side, self.scorer, self.exact is not None
        total = self.entity_range[1] - self.entity_range[0]
        width, rows = min(width, total), batch.shape[0]
        # the queries, the one block where it holds every candidate, the true keys and what exact
        # ranks read of the queries, from one call into the scorer
        served = scorer.side_scores(batch, side, candidates.true_ids, self.scratch_block(rows, width).view(-1), width,
                                    keys, self.candidate_max.get(side), self.entity_range[0])
        chunks = 1 if served.full is not None else -(-total // width)
        workers = max(1, min(torch.get_num_threads(), chunks)) if self.fused and keys and chunks > 1 else 1
        chunk = None if served.full is not None else functools.partial(scorer.score_chunk, served.queries, side,
                                                                        keys=keys)
        blocks = Blocks(served.full, self.entity_range[0], total, width, chunk,
                        [self.scratch_block(rows, width, worker).view(-1) for worker in range(workers)])
        # where the scorer proves every score finite, the count looks for no NaN (the C kernel then
        # makes two comparisons per score instead of three, torch skips a pass)
        plan = self._plan(setup, not served.finite, workers)
        return BatchWork(blocks, plan, served.true_scores, self.exact, scorer, served.exact, served.queries)

    def _plan(self, setup: RankingSetup, check_nan: bool, workers: int) -> TallyPlan:
        return TallyPlan(self.fused, setup.lower_is_better, setup.num_entities, check_nan, workers, self.record_capacity,
                         self.scorer.entities.real.dtype, self.library)

    def _shard_work(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates) -> BatchWork:
        """An entity shard: the anchor rows and the true answers' rows and scores come from their
        owners (``gather_rows``), this process counts its own candidates as one block, the counts
        are summed over the processes (``reduce``)."""
        if self.gather_rows is None or self.reduce_counts is None:
            raise ValueError("an entity shard needs gather_rows and reduce")
        gather, side, scorer = self.gather_rows, candidates.side, self.scorer
        start, stop = self.entity_range
        anchor_column = 0 if side == "tail" else 2
        anchors = batch[:, anchor_column]
        owned = (anchors >= start) & (anchors < stop)
        rows = torch.zeros((batch.shape[0],) + tuple(scorer.entities.shape[1:]), dtype=scorer.entities.dtype,
                           device=batch.device)
        rows[owned] = scorer.entities[anchors[owned] - start]
        rows = gather(rows)  # each anchor row from its one owner, zeros elsewhere
        local_batch = batch.clone()
        local_batch[:, anchor_column] = torch.arange(batch.shape[0], device=batch.device)
        query_scorer = scorer.with_tables(rows, scorer.relations)
        queries = query_scorer.query_vectors(local_batch, side)
        true_ids = candidates.true_ids
        here = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
        keys, given = self.exact is not None, None
        if keys:  # the true answers' stored rows, from their owners
            true_rows = torch.zeros_like(rows)
            true_rows[here] = scorer.entities[true_ids[here] - start]
            given = query_scorer.exact_queries(local_batch, side, gather(true_rows))
        if not keys:  # every rank decides alike: its own candidates' bound, summed over the ranks
            overflowing = gather(torch.tensor([0.0 if scorer.provably_finite(queries, side) else 1.0],
                                              device=batch.device))
            scorer.refuse_fast_overflow(not bool(overflowing[0] > 0), queries.dtype)
        total = stop - start  # one block: this process's candidates
        full = scorer.score_chunk(queries, side, 0, total, out=self.scratch_block(batch.shape[0], total), keys=keys)
        true_scores = torch.zeros(batch.shape[0], dtype=full.dtype, device=batch.device)
        true_scores[here] = full[here, true_ids[here] - start]
        plan = self._plan(setup, True, 1)
        return BatchWork(Blocks(full, start, total, total), plan, gather(true_scores), self.exact, query_scorer, given,
                         queries, self.reduce_counts)
