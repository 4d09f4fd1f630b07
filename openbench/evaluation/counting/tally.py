"""The tallies: one batch's candidate blocks counted into better and tied (or undecided) counts.

:func:`count_blocks` is the one call: it walks the batch's :class:`Blocks` (the one block of
every candidate, or chunks the scorer computes on demand), writes the fill value over the
entries typed candidates or the entity scope exclude (:func:`exclude`), and counts each block

* block by block (:class:`BlockTally`, the reference, and the path of full rows and of other
  devices): :func:`~openbench.evaluation.counting.counts.count_block` per block;
* fused (:class:`FusedTally`, embeddings on the CPU with the C helper): one call of the C kernel
  per block right after its GEMM, on several threads where there are several chunks.

With an exact-ranks window both count the candidates beyond the window on the better side and
those inside it. The fused tally hands back the (row, candidate id) pairs inside windows that are
not a point, recorded across the chunks, for
:meth:`~openbench.evaluation.counting.exact.ExactRanks.settle_pairs` to settle once per batch.
The block-by-block tally settles each block's pairs as it counts the block, through the
``settle`` function exact ranks hand it (so that a block's pairs, not a batch's, are held at a
time: on a GPU, where this tally runs, a collapsed model's B × E pairs would not fit). Neither
calls the chain.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch

from openbench.evaluation.counting.counts import NonFiniteRows, count_block
from openbench.evaluation.counting.kernels import ChunkTally, counted_tally

if TYPE_CHECKING:
    from openbench.evaluation.candidates import SideCandidates

__all__ = ["Blocks", "TallyPlan", "Tallied", "BlockTally", "FusedTally", "count_blocks", "exclude",
           "positions_buffer", "window_pairs", "undecided_rows", "POSITIONS_PER_ROW"]

Window = Optional[Tuple[torch.Tensor, torch.Tensor]]
# (n_greater, n_equal) (B,) of one block, its undecided pairs' batch rows (P,) and global ids (P,)
# -> the block's exact (n_greater, n_equal) (B,)
Settle = Callable[[Tuple[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]
# window columns the C counting pass records per row of one block (more: the row is scanned again)
POSITIONS_PER_ROW = 32
_pool: Optional[ThreadPoolExecutor] = None


def _chunk_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool._max_workers != workers:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-chunks")
    return _pool


@contextmanager
def one_torch_thread():
    """torch (and its BLAS) on one thread while the tally's own threads each run a GEMM."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class Blocks(NamedTuple):
    """The candidate blocks of one batch of B queries.

    :param full: (B, total) the one block of every candidate where it was computed (None: chunks).
    :param first: the global id of candidate 0 (an entity shard's first entity).
    :param total: candidates; ``width`` candidates per chunk.
    :param chunk: ``chunk(start, stop, out)`` -> (B, stop - start) scores of candidates
        ``first + start .. first + stop - 1`` written into ``out`` (the scorer's, bound to the
        batch's queries); None where ``full`` is given.
    :param scratch: per worker, a flat buffer of B × ``width`` elements the chunks are written into.
    """

    full: Optional[torch.Tensor]
    first: int
    total: int
    width: int
    chunk: Optional[Callable[[int, int, torch.Tensor], torch.Tensor]] = None
    scratch: Sequence[torch.Tensor] = ()

    @property
    def starts(self) -> List[int]:
        """The chunks' first local candidates (one: the full block)."""
        return [0] if self.full is not None else list(range(0, self.total, self.width))

    def block(self, start: int, worker: int = 0) -> torch.Tensor:
        """(B, w) the chunk of local candidates ``start .. start + w - 1``, in ``worker``'s buffer."""
        if self.full is not None:
            return self.full
        assert self.chunk is not None
        stop = min(start + self.width, self.total)
        rows = self.scratch[worker].numel() // self.width
        return self.chunk(start, stop, self.scratch[worker][:rows * (stop - start)].view(rows, stop - start))

    def each(self) -> Iterator[Tuple[int, torch.Tensor]]:
        """(global id of column 0, (B, w) block) of every block, in order."""
        for start in self.starts:
            yield self.first + start, self.block(start)


class TallyPlan(NamedTuple):
    """How a batch's blocks are counted (a value the block source decides).

    :param fused: by the C kernel's fused chunk count (:class:`FusedTally`), else block by block.
    :param workers: threads that each compute and count their own chunks (fused, exact ranks).
    :param capacity: window columns a fused count records per row before taking the row out.
    :param check_nan: look for NaN scores (False where the scorer proved them finite).
    :param dtype: the blocks' dtype; ``library``: the C helpers as the source resolved them.
    """

    fused: bool
    lower_is_better: bool
    num_entities: int
    check_nan: bool = True
    workers: int = 1
    capacity: int = 0
    dtype: torch.dtype = torch.float32
    library: object = None


class Tallied(NamedTuple):
    """A batch's counts, each (B,): ``greater`` better candidates, ``equal`` tied ones; ``pairs``
    None where these are final (fast ranks, or settled block by block), else (batch rows (P,),
    global ids (P,)) of the candidates inside windows that are not a point, still to settle
    (``greater`` then counts beyond the window, ``equal`` inside it); ``mismatched`` true scores
    that differed from a block's (fast ranks); ``most_recorded`` the most window columns a fused
    count recorded in one row."""

    greater: torch.Tensor
    equal: torch.Tensor
    pairs: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    mismatched: int = 0
    most_recorded: int = 0


def exclude(block: torch.Tensor, start: int, candidates: "SideCandidates") -> None:
    """Overwrite the entries of ``block`` (B, w), candidates ``start .. start + w - 1``, that the
    side's :class:`~openbench.evaluation.candidates.Exclusion` does not admit with its fill value
    (the true answer is never excluded: it is compared with the others)."""
    exclusion = candidates.exclusion
    if exclusion is None:
        return
    stop = start + block.shape[1]
    excluded = (exclusion.query_bits & exclusion.entity_bits[None, start:stop]) == 0
    true_ids = candidates.true_ids
    inside = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
    excluded[inside, true_ids[inside] - start] = False
    block.masked_fill_(excluded, exclusion.fill)


def positions_buffer(block: torch.Tensor) -> Optional[torch.Tensor]:
    """(B, K) int64 of -1 for the C kernel to record window columns in (None off the CPU)."""
    if block.device.type != "cpu":
        return None
    return torch.full((block.shape[0], POSITIONS_PER_ROW), -1, dtype=torch.long)


def undecided_rows(inside: torch.Tensor, window: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(U,) the rows with candidates inside a window that is not a point (a point window's
    inside candidates are exact ties)."""
    lows, highs = window
    return ((inside > 0) & (lows != highs)).nonzero().squeeze(1)


def window_pairs(block: torch.Tensor, rows: torch.Tensor, lows: torch.Tensor, highs: torch.Tensor,
                 positions: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """(batch rows (P,), block columns (P,)) of every candidate of ``rows`` (U,) inside its window:
    from the columns the counting pass recorded in ``positions`` (B, K) where it recorded them
    all, else by a scan of the row of ``block`` (B, w)."""
    scan = rows
    parts = []
    if positions is not None:
        recorded = positions.index_select(0, rows)
        valid = recorded >= 0
        filled = valid.sum(dim=1)
        complete = (filled > 0) & (filled < recorded.shape[1])  # full rows may have had more
        valid &= complete[:, None]
        local = valid.nonzero()[:, 0]
        parts.append((rows[local], recorded[valid]))
        scan = rows[~complete]
    if scan.numel():
        sub = block[scan]
        mask = (sub >= lows[scan, None]) & (sub <= highs[scan, None])
        local, columns = mask.nonzero(as_tuple=True)
        parts.append((scan[local], columns))
    if not parts:
        empty = torch.zeros(0, dtype=torch.long, device=block.device)
        return empty, empty
    return torch.cat([p[0] for p in parts]), torch.cat([p[1].to(block.device) for p in parts])


class BlockTally:
    """A batch's counts block by block: :func:`~openbench.evaluation.counting.counts.count_block`
    on each; with a window, each block's pairs inside windows that are not a point settled by
    ``settle`` as the block is counted. The reference, and the path of full rows and of other
    devices."""

    def __init__(self, plan: TallyPlan, candidates: "SideCandidates", true_scores: torch.Tensor, window: Window,
                 settle: Optional[Settle] = None):
        self.plan, self.true_ids, self.true_scores = plan, candidates.true_ids, true_scores
        self.filter_pairs, self.window, self.settle = candidates.filter_pairs, window, settle
        self.greater = torch.zeros(self.true_ids.shape[0], dtype=torch.long, device=self.true_ids.device)
        self.equal = torch.zeros_like(self.greater)
        self.mismatched = 0

    def add(self, block: torch.Tensor, start: int, part: int = 0) -> None:
        """Count ``block`` (B, w), candidates ``start .. start + w - 1`` (may overwrite it)."""
        positions = None if self.window is None else positions_buffer(block)
        greater, equal, differs = count_block(block, start, self.true_ids, self.true_scores, *self.filter_pairs,
                                              self.plan.lower_is_better, self.plan.check_nan, self.window, positions)
        if self.window is None:  # fast ranks compare with the true score itself (exact ranks: the window)
            self.mismatched += int(differs.sum())
        else:
            assert self.settle is not None  # exact ranks hand their settling with the window
            rows = undecided_rows(equal, self.window)
            pair_rows, pair_ids = rows[:0], rows[:0]
            if rows.numel():
                pair_rows, columns = window_pairs(block, rows, self.window[0], self.window[1], positions)
                pair_ids = columns + start
            greater, equal = self.settle((greater, equal), pair_rows, pair_ids)
        self.greater += greater.to(self.greater.device)
        self.equal += equal.to(self.equal.device)

    def finish(self) -> Tallied:
        """The counts of every block added."""
        return Tallied(self.greater, self.equal, None, self.mismatched)


class FusedTally:
    """A batch's counts by the C kernel's fused chunk count (:class:`~openbench.evaluation.counting.
    kernels.ChunkTally`): one call per block right after its GEMM, while the block is in cache,
    the excluded entries handled in the same pass. ``plan.workers`` threads may each compute and
    count their own blocks (:func:`count_blocks`), each into its own part; the parts add. The
    window's candidates are recorded across the chunks and handed back once per batch; a row whose
    record fills up has its columns taken out (the current block's by a scan of the row, while it
    is still there) and kept."""

    def __init__(self, plan: TallyPlan, candidates: "SideCandidates", true_scores: torch.Tensor, window: Window):
        self.true_ids, self.window = candidates.true_ids, window
        rows, num_entities = self.true_ids.shape[0], plan.num_entities
        filter_rows, filter_cols = candidates.filter_pairs
        known = (filter_rows * num_entities + filter_cols).sort().values  # grouped by row, sorted within
        offsets = torch.zeros(rows + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(filter_rows, minlength=rows), 0, out=offsets[1:])
        lows, highs = (true_scores, true_scores) if window is None else window
        exact = window is not None
        self._tally_args = (self.true_ids, true_scores, (offsets, known % max(1, num_entities)), lows, highs,
                            plan.lower_is_better, exact, plan.capacity if exact else 0, plan.check_nan, plan.dtype,
                            plan.library)
        # per worker its ChunkTally, made with the first block it counts (None: none counted yet)
        self.parts: List[Optional[ChunkTally]] = [None] * plan.workers
        self.taken: list = [[] for _ in range(plan.workers)]  # per part: (rows, ids) of rows whose record filled up
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

    def finish(self) -> Tallied:
        """The parts added; exact ranks: every recorded or taken-out window candidate of the rows
        with any, to settle (the settling drops those of windows that are a point)."""
        counted = [part for part in self.parts if part is not None]  # none: no block (no candidates here)
        greater = sum((part.greater for part in counted), torch.zeros_like(self.true_ids))
        inside = sum((part.inside for part in counted), torch.zeros_like(self.true_ids))
        if self.window is None:
            return Tallied(greater, inside, None, int(sum(int(part.differs.sum()) for part in counted)))
        rows = (inside > 0).nonzero().squeeze(1)
        pairs = [(rows[:0], rows[:0])]
        for part, taken in zip(self.parts, self.taken):
            pairs.extend(taken)
            if part is None:
                continue
            self.most_recorded = max(self.most_recorded, int(part.fill.max()) if part.fill.numel() else 0)
            pairs.append(self._recorded(part, rows, part.fill[rows]))
        return Tallied(greater, inside, (torch.cat([rows for rows, _ in pairs]), torch.cat([ids for _, ids in pairs])),
                       0, self.most_recorded)


def count_blocks(blocks: Blocks, plan: TallyPlan, candidates: "SideCandidates", true_scores: torch.Tensor,
                 window: Window, settle: Optional[Settle] = None) -> Tallied:
    """Every block of ``blocks`` counted against ``true_scores`` (B,) (or exact ranks' ``window``,
    (lows (B,), highs (B,))) after :func:`exclude`, as ``plan`` says: serially, or, fused on
    ``plan.workers`` threads, each computing its share of the chunks (every ``workers``-th, one
    torch thread each, so that a block is counted by the core that computed it, from its cache)
    into its own part. A NaN raises as the serial order would: the first chunk holding one, its
    first row. ``settle``: exact ranks' settling of one block's window pairs (required with a
    ``window``), which the block-by-block tally applies per block (the fused one hands its pairs
    back in :attr:`Tallied.pairs`)."""
    tally = FusedTally(plan, candidates, true_scores, window) if plan.fused else \
        BlockTally(plan, candidates, true_scores, window, settle)
    starts = blocks.starts
    workers = min(plan.workers, len(starts)) if plan.fused else 1
    if workers <= 1:
        for start, block in blocks.each():
            exclude(block, start, candidates)
            tally.add(block, start)
        return tally.finish()
    first_bad = [len(starts)]  # the earliest chunk found to hold a NaN score
    errors: Dict[int, NonFiniteRows] = {}

    def run(worker: int) -> None:
        for index in range(worker, len(starts), workers):
            if index > first_bad[0]:  # the serial order would have stopped before this chunk
                return
            start = blocks.first + starts[index]
            block = blocks.block(starts[index], worker)
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
    return tally.finish()
