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

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY, ChunkTally, counted_tally, kernel_name
from openbench.evaluation.counting.counts import NonFiniteRows, RankCounts, count_block
from openbench.evaluation.candidates import Exclusion, Filter, RankingSetup, SideCandidates

__all__ = ["BlockSource", "SidePass", "RowBlocks", "EmbeddingBlocks", "BlockTally", "FusedTally", "count_batch",
           "count_side", "exclude", "untie_worst", "MIN_FULL_ROWS"]

MIN_FULL_ROWS = 8  # full (E,) rows per batch the block budget must hold for unchunked scoring
INITIAL_RECORD, MAX_RECORD = 64, 4096  # window columns a fused count records per row (FusedTally)

Window = Optional[Tuple[torch.Tensor, torch.Tensor]]
_pool: Optional[ThreadPoolExecutor] = None


def _chunk_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool._max_workers != workers:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-chunks")
    return _pool


@contextmanager
def one_torch_thread():
    """torch (and its BLAS) on one thread while the chain's own threads each run a GEMM."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class SidePass:
    """One side of one batch, as a block source serves it to the chain (``setup``, ``side``)."""

    setup: RankingSetup
    side: str
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

    def tally(self, setup: RankingSetup, true_ids: torch.Tensor, true_scores: torch.Tensor, filter_pairs: Filter,
              window: Window) -> "BlockTally":
        """What counts this side's blocks: the block-by-block reference here."""
        return BlockTally(self, setup, true_ids, true_scores, filter_pairs, window)

    def count_into(self, tally, candidates: SideCandidates) -> None:
        """Every block of this side into ``tally``, in order, the entries typed candidates or the
        entity scope do not admit excluded first."""
        for start, block in self.blocks():
            exclude(block, start, candidates)
            tally.add(block, start)


class BlockSource:
    """Serves a scorer's scores to the chain, one :class:`SidePass` per batch and side."""

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> SidePass:
        """The side pass of ``candidates.side`` for ``batch`` (B, 3), blocks of ``width`` candidates."""
        raise NotImplementedError


def count_side(setup: RankingSetup, source: BlockSource, batch: torch.Tensor, side: str, width: int) -> RankCounts:
    """RankCounts (B,) of the ``side`` queries of ``batch`` (B, 3), in blocks of ``width``
    candidates: the side's candidates read once (:meth:`~openbench.evaluation.candidates.
    RankingSetup.side_candidates`) and passed down as values."""
    candidates = setup.side_candidates(batch, side)
    work = source.begin(setup, batch, candidates, width)
    true_ids, filter_pairs = candidates.true_ids, candidates.filter_pairs
    true_scores = work.true_scores()
    window = work.window(true_scores)
    tally = work.tally(setup, true_ids, true_scores, filter_pairs, window)
    work.count_into(tally, candidates)
    greater, equal, mismatched = tally.finish()
    greater, equal = work.reduce(greater, equal)
    if mismatched:
        setup.warn(f"{mismatched} true score(s) differed between two computations of the same chunk")
    return RankCounts(greater, untie_worst(equal, true_scores, candidates.exclusion), candidates.n_candidates)


def exclude(block: torch.Tensor, start: int, candidates: SideCandidates) -> None:
    """Overwrite the entries of ``block`` (B, w), candidates ``start .. start + w - 1``, that the
    side's :class:`~openbench.evaluation.candidates.Exclusion` does not admit with its fill value."""
    exclusion = candidates.exclusion
    if exclusion is None:
        return
    stop = start + block.shape[1]
    excluded = (exclusion.query_bits & exclusion.entity_bits[None, start:stop]) == 0
    true_ids = candidates.true_ids
    inside = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
    excluded[inside, true_ids[inside] - start] = False
    block.masked_fill_(excluded, exclusion.fill)


def untie_worst(equal: torch.Tensor, true_scores: torch.Tensor, exclusion: Optional[Exclusion]) -> torch.Tensor:
    """``equal`` (B,) less the ties a true score (B,) equal to the fill value had with every
    excluded entry that is not a known answer (those were taken back by the filter correction)."""
    if exclusion is None:
        return equal
    at_worst = true_scores == exclusion.fill
    if not bool(at_worst.any()):
        return equal
    return equal - torch.where(at_worst, exclusion.unfiltered, torch.zeros_like(exclusion.unfiltered))


class BlockTally:
    """A side's counts block by block: :func:`~openbench.evaluation.counting.counts.count_block`
    on each, the undecided candidates of exact ranks settled per block (the reference, and the
    path of full rows and of other devices)."""

    def __init__(self, work: SidePass, setup: RankingSetup, true_ids: torch.Tensor, true_scores: torch.Tensor,
                 filter_pairs: Filter, window: Window):
        self.work, self.setup, self.true_ids, self.true_scores = work, setup, true_ids, true_scores
        self.filter_pairs, self.window = filter_pairs, window
        self.greater = torch.zeros(true_ids.shape[0], dtype=torch.long, device=true_ids.device)
        self.equal = torch.zeros_like(self.greater)
        self.mismatched = 0

    def add(self, block: torch.Tensor, start: int) -> None:
        """Count ``block`` (B, w), candidates ``start .. start + w - 1`` (may overwrite it)."""
        positions = self.work.positions(block)
        counts = count_block(block, start, self.true_ids, self.true_scores, *self.filter_pairs,
                             self.setup.lower_is_better, self.work.check_nan, self.window, positions)
        greater, equal = self.work.settle(block, start, counts[:2], self.window, self.true_ids, self.filter_pairs,
                                          positions)
        self.greater += greater.to(self.greater.device)
        self.equal += equal.to(self.equal.device)
        if self.window is None:  # fast ranks compare with the true score itself (exact ranks: the window)
            self.mismatched += int(counts[2].sum())

    def finish(self) -> Tuple[torch.Tensor, torch.Tensor, int]:
        """(n_greater (B,), n_equal (B,), true scores that differed from a block's)."""
        return self.greater, self.equal, self.mismatched


class FusedTally:
    """A side's counts by the C kernel's fused chunk count (:class:`~openbench.evaluation.counting.
    kernels.ChunkTally`): one call per block right after its GEMM, while the block is in cache,
    the excluded entries handled in the same pass. ``workers`` threads may each compute and count
    their own blocks (:meth:`_EmbeddingPass.count_into`), each into its own part; the parts add.
    The window's candidates are recorded across the chunks and settled once per side; a row
    whose record fills up has its columns taken out (the current block's by a scan of the row,
    while it is still there) and kept for the settling.

    :param capacity: window columns recorded per row (exact ranks; fast ranks record none)."""

    def __init__(self, work: "_EmbeddingPass", setup: RankingSetup, true_ids: torch.Tensor, true_scores: torch.Tensor,
                 filter_pairs: Filter, window: Window, capacity: int, workers: int = 1):
        self.work, self.setup, self.true_ids, self.filter_pairs, self.window = work, setup, true_ids, filter_pairs, window
        rows, num_entities = true_ids.shape[0], setup.num_entities
        filter_rows, filter_cols = filter_pairs
        known = (filter_rows * num_entities + filter_cols).sort().values  # grouped by row, sorted within
        offsets = torch.zeros(rows + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(filter_rows, minlength=rows), 0, out=offsets[1:])
        lows, highs = (true_scores, true_scores) if window is None else window
        exact = window is not None
        self._tally_args = (true_ids, true_scores, (offsets, known % max(1, num_entities)), lows, highs,
                            setup.lower_is_better, exact, capacity if exact else 0, work.check_nan, work.dtype,
                            work.source.library)
        # per worker its ChunkTally, made with the first block it counts (None: none counted yet)
        self.parts: List[Optional[ChunkTally]] = [None] * workers
        self.taken: list = [[] for _ in range(workers)]  # per part: (rows, ids) of rows whose record filled up
        self.most_recorded = 0

    @property
    def workers(self) -> int:
        return len(self.parts)

    def add(self, block: torch.Tensor, start: int, part: int = 0) -> None:
        """Count ``block`` (B, w), candidates ``start .. start + w - 1``, into ``part`` (may
        overwrite the block); a NaN score raises :class:`NonFiniteRows` naming the block's first such row."""
        tally = self.parts[part]
        if tally is None:
            tally, bad = counted_tally(block, start, *self._tally_args)
            self.parts[part] = tally
            before = torch.zeros_like(tally.fill) if tally.capacity else None
        else:
            before = tally.fill.clone() if tally.capacity else None
            bad = tally.add(block, start)
        if bad is not None:
            raise NonFiniteRows(bad, "NaN score")
        if before is not None and int(tally.fill.max()) > tally.capacity:
            self._take_full_rows(tally, block, start, before, self.taken[part])

    @staticmethod
    def _recorded(tally: ChunkTally, rows: torch.Tensor, fill: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(batch rows (P,), global ids (P,)) of the first ``fill`` (R,) recorded columns of ``rows`` (R,)."""
        assert tally.positions is not None
        if fill.numel() and int(fill.max()) > tally.capacity:  # their columns past the record are lost
            raise RuntimeError(f"{int(fill.max())} window columns in one row, {tally.capacity} recorded: "
                               "an overflowing row was not taken out")
        recorded = tally.positions.index_select(0, rows)
        valid = torch.arange(recorded.shape[1])[None, :] < fill[:, None]
        return rows.repeat_interleave(fill), recorded[valid]

    def _take_full_rows(self, tally: ChunkTally, block: torch.Tensor, start: int, before: torch.Tensor,
                        taken: list) -> None:
        """The rows whose record overflowed in ``block``: their earlier chunks' columns (``before``
        of them, all recorded) and this block's, found by a scan of the rows, kept aside."""
        over = (tally.fill > tally.capacity).nonzero().squeeze(1)
        self.most_recorded = max(self.most_recorded, int(tally.fill.max()))
        earlier_rows, earlier_ids = self._recorded(tally, over, before[over])
        sub = block.index_select(0, over)
        local, columns = ((sub >= tally.lows[over, None]) & (sub <= tally.highs[over, None])).nonzero(as_tuple=True)
        taken.append((torch.cat([earlier_rows, over[local]]), torch.cat([earlier_ids, columns + start])))
        tally.fill[over] = 0

    def finish(self) -> Tuple[torch.Tensor, torch.Tensor, int]:
        """(n_greater (B,), n_equal (B,), true scores that differed from a block's): the parts
        added, exact ranks' window candidates settled in one call."""
        counted = [part for part in self.parts if part is not None]  # none: no block (no candidates here)
        greater = sum((part.greater for part in counted), torch.zeros_like(self.true_ids))
        inside = sum((part.inside for part in counted), torch.zeros_like(self.true_ids))
        if self.window is None:
            return greater, inside, int(sum(int(part.differs.sum()) for part in counted))
        # every row with window candidates: the settling keeps those of windows that are not a point
        rows = (inside > 0).nonzero().squeeze(1)
        pairs = [(rows[:0], rows[:0])]
        for part, taken in zip(self.parts, self.taken):
            pairs.extend(taken)
            if part is None:
                continue
            self.most_recorded = max(self.most_recorded, int(part.fill.max()) if part.fill.numel() else 0)
            pairs.append(self._recorded(part, rows, part.fill[rows]))
        pair_rows = torch.cat([rows for rows, _ in pairs])
        pair_ids = torch.cat([ids for _, ids in pairs])
        self.work.recorded(self.most_recorded)
        greater, equal = self.work.settle_pairs((greater, inside), self.window, pair_rows, pair_ids, self.true_ids,
                                                self.filter_pairs)
        return greater, equal, 0


def count_batch(setup: RankingSetup, source: BlockSource, batch: torch.Tensor, width: int) -> Dict[str, RankCounts]:
    """{side: RankCounts (B,)} of the queries of ``batch`` (B, 3) under ``setup``, scored in blocks
    of ``width`` candidates (the producer's choice for this batch size: a value, not a callback);
    a NaN score raises :class:`~openbench.evaluation.counting.kernels.NonFiniteRows` naming its
    row and side."""
    counts = {}
    for side in setup.sides:
        try:
            counts[side] = count_side(setup, source, batch, side, width)
        except NonFiniteRows as error:
            error.side = side
            raise
    return counts


# ------------------------------------------------------------------------------------------
# full rows


class _RowPass(SidePass):
    def __init__(self, rows: torch.Tensor, true_ids: torch.Tensor, setup: RankingSetup, side: str):
        self.rows, self.true_ids, self.setup, self.side = rows, true_ids, setup, side

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

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> SidePass:
        """The scorer's rows for ``candidates.side`` (one block: ``width`` does not apply), checked for shape and made float32 or float64 exactly."""
        side = candidates.side
        rows = torch.as_tensor(self.scorer.score_rows(batch, side), device=setup.device)
        expected = (batch.shape[0], setup.num_entities)
        if tuple(rows.shape) != expected:
            raise ScoreError(f"the model returned {side} scores of shape {tuple(rows.shape)}; expected {expected}")
        if not rows.is_floating_point() or rows.dtype not in (torch.float32, torch.float64):
            rows = rows.to(torch.float32 if rows.is_floating_point() else torch.float64)
        work = _RowPass(rows, candidates.true_ids, setup, side)
        if self.check is not None:
            self.check(batch, side, rows, work.true_scores())
        return work


# ------------------------------------------------------------------------------------------
# embedding scorers: chunks, exact ranks, entity shards


class EmbeddingBlocks(BlockSource):
    """An embedding scorer's scores in blocks of the batch's ``width`` candidates, exact ranks where
    ``exact`` is given.

    :param entity_range: [start, stop) of the candidates this process holds (an entity shard);
        with it, ``gather_rows(tensor)`` sums a (B, ...) tensor over the processes (each row comes
        from its one owner, zeros elsewhere) and ``reduce`` the counts.
    :param fused: count CPU blocks with :class:`FusedTally` (False: :class:`BlockTally`).
    :param candidate_max: exact ranks: {side: ``exact.candidate_max(side)``} of every evaluated side.
    """

    def __init__(self, scorer, exact: Optional[ExactRanks],
                 entity_range: Optional[Tuple[int, int]] = None,
                 gather_rows: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 reduce: Optional[Callable[..., list]] = None, fused: bool = True,
                 candidate_max: Optional[Dict[str, float]] = None):
        self.scorer, self.exact, self.fused = scorer, exact, fused
        self.device = scorer.device
        self.library = COUNTING_LIBRARY.get()  # the C helpers, resolved once for this evaluation
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

    def begin(self, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates, width: int) -> SidePass:
        """Query vectors (an entity shard's from the anchors' owners) and the exact window's
        float64 work, done while the query rows are in cache."""
        if self.gather_rows is not None:
            return _ShardPass(self, setup, batch, candidates)
        return _EmbeddingPass(self, setup, batch, candidates, width)


class _EmbeddingPass(SidePass):
    def __init__(self, source: EmbeddingBlocks, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates,
                 width: int):
        side = candidates.side
        self.source, self.setup, self.batch, self.side = source, setup, batch, side
        scorer = source.scorer
        self.query_scorer = scorer
        self.true_ids = candidates.true_ids
        self._window: Window = None
        self.keys = source.exact is not None  # exact ranks compare ranking keys (no square root for L2)
        self.total = source.entity_range[1] - source.entity_range[0]
        self.width = min(width, self.total)
        scratch = source.scratch_block(batch.shape[0], self.width)
        # the queries, the one block where it holds every candidate, the true keys and what exact
        # ranks read of the queries, from one call into the scorer
        served = scorer.side_scores(batch, side, self.true_ids, scratch.view(-1), self.width, self.keys,
                                    source.candidate_max.get(side), source.entity_range[0])
        self.queries, self._full, self._true_scores = served.queries, served.full, served.true_scores
        # where the scorer proves every score finite, the counting pass looks for no NaN (the C
        # kernel then makes two comparisons per score instead of three, torch skips a pass)
        self.check_nan = not served.finite
        if source.exact is not None:
            assert served.exact is not None
            self._window = source.exact.side_window(scorer, side, served.exact, self.queries, served.true_scores,
                                                    candidates.exclusion is not None)

    def _block(self, start: int, stop: int, worker: int = 0) -> torch.Tensor:
        out = self.source.scratch_block(self.batch.shape[0], stop - start, worker)
        return self.source.scorer.score_chunk(self.queries, self.side, start, stop, out=out, keys=self.keys)

    def true_scores(self) -> torch.Tensor:
        """(B,) the true answers' keys, as the scorer served them (:meth:`~openbench.models.scorers.
        EmbeddingScorer.side_scores`: from the one full block, the answers alone for exact ranks,
        or the chunks holding them)."""
        return self._true_scores

    def window(self, true_scores: torch.Tensor) -> Window:
        """Exact ranks' (lows, highs) (B,) around the true keys (None: fast ranks)."""
        return self._window

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

    def settle_pairs(self, counts, window, pair_rows, pair_ids, true_ids, filter_pairs):
        """Exact ranks: the window candidates ``pair_rows``, ``pair_ids`` (P,) re-scored exactly."""
        assert self.source.exact is not None
        return self.source.exact.settle_pairs(counts, window, pair_rows, pair_ids, true_ids, filter_pairs,
                                              self.setup.num_entities, self.query_scorer)

    @property
    def dtype(self) -> torch.dtype:
        """The blocks' dtype (the entity table's real precision)."""
        return self.source.scorer.entities.real.dtype

    def tally(self, setup, true_ids, true_scores, filter_pairs, window):
        """The fused C count where it applies (CPU blocks of float32/float64), else block by block;
        exact ranks over several chunks on several threads: one part per thread."""
        fused = (self.source.fused and self.source.library is not None and self.batch.device.type == "cpu"
                 and self.dtype in (torch.float32, torch.float64))
        if not fused:
            return BlockTally(self, setup, true_ids, true_scores, filter_pairs, window)
        chunks = -(-self.total // self.width)
        workers = min(torch.get_num_threads(), chunks) if window is not None and self._full is None else 1
        return FusedTally(self, setup, true_ids, true_scores, filter_pairs, window, self.source.record_capacity,
                          max(1, workers))

    def count_into(self, tally, candidates: SideCandidates) -> None:
        """Serially, or with a :class:`FusedTally` of several parts on as many threads: each
        thread computes its share of the chunks (every ``workers``-th, one torch thread each, so
        that a block is counted by the core that computed it, from its cache) into its own part.
        A NaN raises as the serial order would: the first chunk holding one, its first row."""
        if not isinstance(tally, FusedTally) or tally.workers == 1:
            super().count_into(tally, candidates)
            return
        workers = tally.workers
        starts = list(range(0, self.total, self.width))
        first_bad = [len(starts)]  # the earliest chunk found to hold a NaN score
        errors: Dict[int, NonFiniteRows] = {}

        def run(worker: int) -> None:
            for index in range(worker, len(starts), workers):
                if index > first_bad[0]:  # the serial order would have stopped before this chunk
                    return
                start = starts[index]
                block = self._block(start, min(start + self.width, self.total), worker)
                exclude(block, start, candidates)
                try:
                    tally.add(block, start, worker)
                except NonFiniteRows as error:
                    errors[index] = error
                    first_bad[0] = min(first_bad[0], index)
                    return

        with one_torch_thread():
            list(_chunk_pool(workers).map(run, range(workers)))
        if errors:
            raise errors[min(errors)]

    def recorded(self, most: int) -> None:
        """A fused count recorded up to ``most`` window columns in one row (the capacity follows)."""
        self.source.recorded(most)


class _ShardPass(_EmbeddingPass):
    """An entity shard: the anchor rows and the true answers' rows and scores come from their
    owners, this process counts its own candidates, the counts are summed over the processes."""

    def __init__(self, source: EmbeddingBlocks, setup: RankingSetup, batch: torch.Tensor, candidates: SideCandidates):
        side = candidates.side
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
        self.true_ids = candidates.true_ids
        self.excluding = candidates.exclusion is not None
        self.here = ((self.true_ids >= start) & (self.true_ids < stop)).nonzero().squeeze(1)
        self.keys = source.exact is not None
        if source.exact is not None:  # the true answers' stored rows, from their owners
            true_rows = torch.zeros_like(rows)
            true_rows[self.here] = scorer.entities[self.true_ids[self.here] - start]
            source.exact.prepare(self.query_scorer, local_batch, side, self.queries, self._gather(true_rows))
        self.total = self.width = stop - start  # one block: this process's candidates
        self.check_nan = True

    def window(self, true_scores: torch.Tensor) -> Window:
        """Exact ranks' (lows, highs) (B,) around the true keys gathered from their owners (None: fast ranks)."""
        if self.source.exact is None:
            return None
        return self.source.exact.finish_checked(true_scores, self.excluding)

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
