"""The count chain: from score blocks to the per-query counts of one batch, written once.

For each side of a batch the chain asks its block source for the true answers' scores, centres
the exact-ranks window on them where the source has one, then for every block of candidate
columns excludes the candidates typed candidates or the entity scope do not admit, counts the
better and tied candidates (:func:`~openbench.evaluation.counting.counts.count_block`), settles the
undecided ones exactly, reduces the counts across processes where the candidates are sharded,
and takes back the ties a true score at the fill value had with the excluded entries. Every model
source and every sharding goes through :func:`count_batch`; they differ only in their
:class:`BlockSource`:

* :class:`RowBlocks`: one block, the scorer's full rows (PyKEEN, TransR, a user's function);
* :class:`EmbeddingBlocks`: embedding scorers in entity chunks, exact ranks on, and, with an
  entity range and a reduction, one process's share of the candidates (``shard="entities"``).
"""
from __future__ import annotations

from typing import Callable, Dict, Iterator, Optional, Tuple

import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.kernels import kernel_name
from openbench.evaluation.counting.counts import NonFiniteRows, RankCounts, count_block, true_ids_of
from openbench.evaluation.candidates import Filter, RankingSetup

__all__ = ["BlockSource", "SidePass", "RowBlocks", "EmbeddingBlocks", "count_batch", "count_side", "MIN_FULL_ROWS"]

MIN_FULL_ROWS = 8  # full (E,) rows per batch the block budget must hold for unchunked scoring

Window = Optional[Tuple[torch.Tensor, torch.Tensor]]


class SidePass:
    """One side of one batch, as a block source serves it to the chain."""

    check_nan = True  # look for NaN in the blocks (a source that proves them finite may skip it)

    def true_scores(self) -> torch.Tensor:
        """(B,) the true answers' scores, read from the same kind of block they are compared in."""
        raise NotImplementedError

    def window(self, true_scores: torch.Tensor) -> Window:
        """Exact ranks: (lows (B,), highs (B,)) around the true keys; None: compare the scores."""
        return None

    def blocks(self) -> Iterator[Tuple[int, torch.Tensor]]:
        """(first candidate id, (B, w) scores) of every block of candidates, in order."""
        raise NotImplementedError

    def settle(self, block: torch.Tensor, start: int, counts: Tuple[torch.Tensor, torch.Tensor], window: Window,
               true_ids: torch.Tensor, filter_pairs: Filter, positions) -> Tuple[torch.Tensor, torch.Tensor]:
        """Exact ranks: (n_greater, n_equal) (B,) with the undecided candidates settled."""
        return counts

    def positions(self, block: torch.Tensor) -> Optional[torch.Tensor]:
        """Exact ranks: a (B, K) buffer where the counting kernel notes undecided columns."""
        return None

    def reduce(self, greater: torch.Tensor, equal: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(n_greater, n_equal) (B,) over every process's candidates (here: this one's are all)."""
        return greater, equal


class BlockSource:
    """Serves a scorer's scores to the chain, one :class:`SidePass` per batch and side."""

    def begin(self, setup: RankingSetup, batch: torch.Tensor, side: str) -> SidePass:
        raise NotImplementedError


def count_side(setup: RankingSetup, source: BlockSource, batch: torch.Tensor, side: str,
               filter_pairs: Filter) -> Tuple[torch.Tensor, torch.Tensor]:
    """(n_greater, n_equal), each (B,) int64, of the ``side`` queries of ``batch`` (B, 3).

    :param filter_pairs: (rows (M,), cols (M,)) known answers other than the true one.
    """
    work = source.begin(setup, batch, side)
    true_ids = true_ids_of(batch, side)
    true_scores = work.true_scores()
    window = work.window(true_scores)
    greater = torch.zeros(batch.shape[0], dtype=torch.long, device=batch.device)
    equal = torch.zeros_like(greater)
    mismatched = 0
    for start, block in work.blocks():
        setup.exclude_untyped(block, batch, side, start, true_ids)
        positions = work.positions(block)
        counts = count_block(block, start, true_ids, true_scores, *filter_pairs, setup.lower_is_better,
                             work.check_nan, window, positions)
        chunk_greater, chunk_equal = work.settle(block, start, counts[:2], window, true_ids, filter_pairs, positions)
        greater += chunk_greater.to(greater.device)
        equal += chunk_equal.to(equal.device)
        if window is None:  # fast ranks compare with the true score itself (exact ranks: the window)
            mismatched += int(counts[2].sum())
    greater, equal = work.reduce(greater, equal)
    if mismatched:
        setup.warn(f"{mismatched} true score(s) differed between two computations of the same chunk")
    return greater, setup.untie_worst(equal, true_scores, batch, side, filter_pairs)


def count_batch(setup: RankingSetup, source: BlockSource, batch: torch.Tensor) -> Dict[str, RankCounts]:
    """{side: RankCounts (B,)} of the queries of ``batch`` (B, 3) under ``setup``; a NaN score
    raises :class:`~openbench.evaluation.counting.kernels.NonFiniteRows` naming its row and side."""
    counts = {}
    for side in setup.sides:
        filter_pairs = setup.filter_pairs(batch, side)
        try:
            greater, equal = count_side(setup, source, batch, side, filter_pairs)
        except NonFiniteRows as error:
            error.side = side
            raise
        counts[side] = RankCounts(greater, equal, setup.candidates_of(batch, side, filter_pairs))
    return counts


# ------------------------------------------------------------------------------------------
# full rows


class _RowPass(SidePass):
    def __init__(self, rows: torch.Tensor, true_ids: torch.Tensor):
        self.rows, self.true_ids = rows, true_ids

    def true_scores(self) -> torch.Tensor:
        """(B,) the true answers' entries of the rows."""
        return self.rows.gather(1, self.true_ids[:, None]).squeeze(1)

    def blocks(self) -> Iterator[Tuple[int, torch.Tensor]]:
        """The rows as one block (a copy where the torch kernel would write into the caller's)."""
        yield 0, self.rows if kernel_name(self.rows) != "torch" else self.rows.clone()


class RowBlocks(BlockSource):
    """A :class:`~openbench.models.base.RowScorer`'s full (B, E) rows as one block each.

    :param check: called with (batch, side, rows, true scores) to check what the scorer returned
        (the 4-tensor contract compares its positives with the rows' entries).
    """

    def __init__(self, scorer, check: Optional[Callable] = None):
        self.scorer, self.check = scorer, check

    def begin(self, setup: RankingSetup, batch: torch.Tensor, side: str) -> SidePass:
        """The scorer's rows for ``side``, checked for shape and made float32 or float64 exactly."""
        rows = torch.as_tensor(self.scorer.score_rows(batch, side), device=setup.device)
        expected = (batch.shape[0], setup.num_entities)
        if tuple(rows.shape) != expected:
            raise ScoreError(f"the model returned {side} scores of shape {tuple(rows.shape)}; expected {expected}")
        if not rows.is_floating_point() or rows.dtype not in (torch.float32, torch.float64):
            rows = rows.to(torch.float32 if rows.is_floating_point() else torch.float64)
        work = _RowPass(rows, true_ids_of(batch, side))
        if self.check is not None:
            self.check(batch, side, rows, work.true_scores())
        return work


# ------------------------------------------------------------------------------------------
# embedding scorers: chunks, exact ranks, entity shards


class EmbeddingBlocks(BlockSource):
    """An embedding scorer's scores in blocks of ``width`` candidates (all of them when
    :data:`MIN_FULL_ROWS` full rows fit the budget), exact ranks where ``exact`` is given.

    :param entity_range: [start, stop) of the candidates this process holds (an entity shard);
        with it, ``gather_rows(tensor)`` sums a (B, ...) tensor over the processes (each row comes
        from its one owner, zeros elsewhere) and ``reduce`` the counts.
    """

    def __init__(self, scorer, exact: Optional[ExactRanks], width: Callable[[int], int],
                 entity_range: Optional[Tuple[int, int]] = None,
                 gather_rows: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 reduce: Optional[Callable[..., list]] = None):
        self.scorer, self.exact, self.width = scorer, exact, width
        self.entity_range = entity_range or (0, scorer.num_entities)
        self.gather_rows, self.reduce_counts = gather_rows, reduce
        self._buffer: Optional[torch.Tensor] = None

    def scratch_block(self, rows: int, width: int) -> torch.Tensor:
        """A contiguous (rows, width) view of one reusable buffer (avoids page faults)."""
        needed = rows * width
        if self._buffer is None or self._buffer.numel() < needed:
            self._buffer = torch.empty(needed, dtype=self.scorer.entities.real.dtype, device=self.scorer.device)
        return self._buffer[:needed].view(rows, width)

    def begin(self, setup: RankingSetup, batch: torch.Tensor, side: str) -> SidePass:
        """Query vectors (an entity shard's from the anchors' owners) and the exact window's
        float64 work, done while the query rows are in cache."""
        if self.gather_rows is not None:
            return _ShardPass(self, setup, batch, side)
        return _EmbeddingPass(self, setup, batch, side)


class _EmbeddingPass(SidePass):
    def __init__(self, source: EmbeddingBlocks, setup: RankingSetup, batch: torch.Tensor, side: str):
        self.source, self.setup, self.batch, self.side = source, setup, batch, side
        scorer = source.scorer
        self.query_scorer = scorer
        self.queries = scorer.query_vectors(batch, side)
        self.true_ids = true_ids_of(batch, side)
        self.keys = source.exact is not None  # exact ranks compare ranking keys (no square root for L2)
        # where the scorer proves every score finite, the counting pass looks for no NaN (the C
        # kernel then makes two comparisons per score instead of three, torch skips a pass); scores
        # that can overflow float64 are refused here, before any window is computed from them
        self.check_nan = not scorer.provably_finite(self.queries, side)
        if source.exact is not None:
            true_rows = scorer.entities.index_select(0, self.true_ids - source.entity_range[0])
            source.exact.prepare(scorer, batch, side, self.queries, true_rows)
        self.total = source.entity_range[1] - source.entity_range[0]
        self.width = min(source.width(batch.shape[0]), self.total)
        self._full: Optional[torch.Tensor] = None

    def _block(self, start: int, stop: int) -> torch.Tensor:
        out = self.source.scratch_block(self.batch.shape[0], stop - start)
        return self.source.scorer.score_chunk(self.queries, self.side, start, stop, out=out, keys=self.keys)

    def true_scores(self) -> torch.Tensor:
        """(B,) the true answers' keys: from the one full block, or a first pass over the chunks
        holding them. Exact ranks score each query against its answer alone, O(B · d) (the window
        is centred on the float64 key, so the fast key need not be the block's bit for bit: it is
        read only where the fast pass computes exactly, in any order); fast ranks compute the
        chunks again, as their blocks will be (the answer is compared with the block's own value)."""
        if self.width >= self.total:
            self._full = self._block(0, self.total)
            return self._full.gather(1, self.true_ids[:, None]).squeeze(1)
        if self.source.exact is not None:
            return self.source.scorer.score_lists(self.queries, self.side, self.true_ids[:, None],
                                                  self.source.entity_range[0], keys=self.keys).squeeze(1)
        scores = torch.empty(self.batch.shape[0], dtype=self.source.scorer.entities.real.dtype,
                             device=self.batch.device)
        for start in range(0, self.total, self.width):
            stop = min(start + self.width, self.total)
            here = ((self.true_ids >= start) & (self.true_ids < stop)).nonzero().squeeze(1)
            if here.numel():
                scores[here] = self._block(start, stop)[here, self.true_ids[here] - start]
        return scores

    def window(self, true_scores: torch.Tensor) -> Window:
        """Exact ranks' (lows, highs) (B,) around the true keys (None: fast ranks)."""
        exact = self.source.exact
        if exact is None:
            return None
        if self.setup.admitted is not None and bool(exact.overflowed(true_scores).any()):
            # the excluded candidates hold the same ±inf: they cannot be told from the overflowed ones
            raise ScoreError("typed candidates with exact ranks: some scores overflow the embeddings' precision "
                             f"({self.source.scorer.entities.dtype}); give the embeddings as float64, or use --fast")
        return exact.finish(true_scores)

    def blocks(self) -> Iterator[Tuple[int, torch.Tensor]]:
        """The full block, or every chunk computed again (identical to the first pass's)."""
        if self._full is not None:
            yield 0, self._full
            return
        for start in range(0, self.total, self.width):
            yield start, self._block(start, min(start + self.width, self.total))

    def positions(self, block: torch.Tensor) -> Optional[torch.Tensor]:
        """Exact ranks: the C kernel's (B, K) buffer for the undecided columns."""
        return None if self.source.exact is None else self.source.exact.positions_buffer(block)

    def settle(self, block, start, counts, window, true_ids, filter_pairs, positions):
        """Exact ranks: the undecided candidates of ``block`` (B, w) re-scored exactly."""
        if window is None or self.source.exact is None:
            return counts
        return self.source.exact.settle(block, start, counts, window, true_ids, filter_pairs,
                                        self.setup.num_entities, self.query_scorer, positions)


class _ShardPass(_EmbeddingPass):
    """An entity shard: the anchor rows and the true answers' rows and scores come from their
    owners, this process counts its own candidates, the counts are summed over the processes."""

    def __init__(self, source: EmbeddingBlocks, setup: RankingSetup, batch: torch.Tensor, side: str):
        self.source, self.setup, self.batch, self.side = source, setup, batch, side
        if source.gather_rows is None or source.reduce_counts is None:
            raise ValueError("an entity shard needs gather_rows and reduce")
        self._gather, self._reduce = source.gather_rows, source.reduce_counts
        scorer = source.scorer
        start, stop = source.entity_range
        anchor_column = 0 if side == "tail" else 2
        anchors = batch[:, anchor_column]
        owned = (anchors >= start) & (anchors < stop)
        rows = torch.zeros((batch.shape[0],) + tuple(scorer.entities.shape[1:]), dtype=scorer.entities.dtype,
                           device=batch.device)
        rows[owned] = scorer.entities[anchors[owned] - start]
        rows = self._gather(rows)  # each anchor row from its one owner, zeros elsewhere
        local_batch = batch.clone()
        local_batch[:, anchor_column] = torch.arange(batch.shape[0], device=batch.device)
        self.query_scorer = scorer.with_tables(rows, scorer.relations)
        self.queries = self.query_scorer.query_vectors(local_batch, side)
        self.true_ids = true_ids_of(batch, side)
        self.here = ((self.true_ids >= start) & (self.true_ids < stop)).nonzero().squeeze(1)
        self.keys = source.exact is not None
        if source.exact is not None:  # the true answers' stored rows, from their owners
            true_rows = torch.zeros_like(rows)
            true_rows[self.here] = scorer.entities[self.true_ids[self.here] - start]
            source.exact.prepare(self.query_scorer, local_batch, side, self.queries, self._gather(true_rows))
        self.total = stop - start
        self.check_nan = True

    def true_scores(self) -> torch.Tensor:
        """(B,) the true keys, from the true answer's owner (zeros elsewhere, summed)."""
        self._full = self._block(0, self.total)
        scores = torch.zeros(self.batch.shape[0], dtype=self._full.dtype, device=self.batch.device)
        scores[self.here] = self._full[self.here, self.true_ids[self.here] - self.source.entity_range[0]]
        return self._gather(scores)

    def blocks(self) -> Iterator[Tuple[int, torch.Tensor]]:
        """This process's candidates as one block, at their global ids."""
        assert self._full is not None
        yield self.source.entity_range[0], self._full

    def reduce(self, greater: torch.Tensor, equal: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(n_greater, n_equal) summed over the processes (one all_reduce)."""
        greater, equal = self._reduce(greater, equal)
        return greater, equal
