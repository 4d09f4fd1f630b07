"""Evaluation on several processes with torch.distributed (gloo on CPU, NCCL on GPUs).

Counts add exactly, so the work splits two ways:

* ``shard="queries"``: each rank evaluates a contiguous slice of the evaluation triples with the
  whole entity table; the per-query counts are gathered (in rank order) and every rank builds
  the same result.
* ``shard="entities"``: each rank owns a contiguous range of candidate entities (and only those
  rows of the entity table). Per batch, the rows of the query anchors are summed across ranks
  (each owner contributes its rows), every rank scores the queries against its own range, the
  owner of each true answer contributes its true score (so it comes from the same kind of score
  row it is compared with), and ``n_greater``/``n_equal`` are summed with one all_reduce.

Initialise the process group before building the evaluator (``torchrun`` sets the environment;
:func:`init_from_environment` does the rest, with a timeout so a dead rank fails the run).
"""
from __future__ import annotations

import datetime
import os
from typing import Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from openbench.errors import InputError
from openbench.evaluation import catalog
from openbench.evaluation.evaluator import EmbeddingEvaluator, Filter
from openbench.evaluation.ranking import COUNT_FIELDS, RankCounts, true_ids_of
from openbench.record import Protocol

__all__ = ["SHARDS", "DEFAULT_TIMEOUT_S", "init_from_environment", "entity_range", "REDUCTIONS", "gather_counts",
           "sum_counts", "DistributedEmbeddingEvaluator"]

SHARDS = catalog.SHARDS
DEFAULT_TIMEOUT_S = 600


def init_from_environment(timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
    """Join the process group torchrun describes (NCCL when CUDA is there, gloo otherwise)."""
    if dist.is_initialized():
        return
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError("--distributed needs torchrun (or RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))


def entity_range(num_entities: int, rank: int, world: int) -> Tuple[int, int]:
    """[start, stop) of the entities rank ``rank`` owns (the first ranks take one more)."""
    base, extra = divmod(num_entities, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


# How RankCounts combine across ranks, per shard mode, declared once (as torchmetrics states declare
# their ``dist_reduce_fx``): query shards hold disjoint queries, whose counts concatenate in rank
# order; entity shards hold disjoint candidates of the same queries, whose better/tied counts add
# (the candidate count is computed from the global filter on every rank, so it is the same).
REDUCTIONS: Dict[str, Dict[str, str]] = {
    "queries": {"n_greater": "cat", "n_equal": "cat", "n_candidates": "cat"},
    "entities": {"n_greater": "sum", "n_equal": "sum", "n_candidates": "same"},
}


def gather_counts(local: Dict[str, RankCounts]) -> Dict[str, RankCounts]:
    """Query shards: every rank's {side: RankCounts} concatenated in rank order, on every rank."""
    gathered: List[Optional[dict]] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, {side: tuple(getattr(c, name).cpu() for name in COUNT_FIELDS)
                                      for side, c in local.items()})
    return {side: RankCounts(*(torch.cat([part[side][i] for part in gathered]) for i in range(len(COUNT_FIELDS))))
            for side in local}


def sum_counts(*tensors: torch.Tensor) -> List[torch.Tensor]:
    """Entity shards: each count tensor (B,) summed over the ranks (one all_reduce for all of them)."""
    stacked = torch.stack(tensors)
    dist.all_reduce(stacked)
    return list(stacked.unbind(0))


class DistributedEmbeddingEvaluator(EmbeddingEvaluator):
    """:class:`EmbeddingEvaluator` over the ranks of the default process group: the producer is
    sharded and its counts reduced as :data:`REDUCTIONS` declares; reduction and record are the
    base class's, identical on every rank."""

    def __init__(self, dataset, scorer, *, shard: str = "queries", **options):
        if shard not in SHARDS:
            raise InputError(f"unknown shard mode {shard!r}; expected one of {', '.join(SHARDS)}")
        if not dist.is_initialized():
            raise InputError("torch.distributed is not initialised; run under torchrun with --distributed")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.shard = shard
        if shard == "entities":
            if scorer.num_entities != dataset.num_entities:
                raise InputError(f"the model has {scorer.num_entities} entities, the dataset {dataset.num_entities}")
            start, stop = entity_range(scorer.num_entities, self.rank, self.world)
            # this rank keeps only its entity rows; query anchors come from their owners
            scorer = type(scorer)(scorer.entities[start:stop].clone(), scorer.relations)
            options["entity_range"] = (start, stop)
        if options.get("sampled_negatives") is not None:
            raise InputError("the sampled protocol runs on one process: its candidates are few per query")
        super().__init__(dataset, scorer, **options)

    def reduce_max(self, values: torch.Tensor) -> torch.Tensor:
        """Entity shards: every rank's largest candidate norms (exact ranks' windows bound them all)."""
        if self.shard == "entities":
            values = values.clone()
            dist.all_reduce(values, op=dist.ReduceOp.MAX)
        return values

    def timing(self) -> dict:
        """The exact-ranks counts summed over the ranks."""
        if self.exact is not None:
            totals = self.exact.stats.as_tensor().to(self.device)
            dist.all_reduce(totals)
            self.exact.stats.set_from(totals.cpu())
        return super().timing()

    def protocol(self) -> Protocol:
        """The base protocol plus the world size, shard mode and backend."""
        protocol = super().protocol()
        protocol.extra["distributed"] = {"world_size": self.world, "shard": self.shard,
                                         "backend": dist.get_backend()}
        return protocol

    def produce(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """Query shards: this rank's contiguous slice of ``triples`` (T, 3), counts gathered.
        Entity shards: every query, counted over this rank's candidates (see :meth:`count_side`)."""
        if self.shard == "entities":
            return super().produce(triples, batch_size)
        first, last = entity_range(triples.shape[0], self.rank, self.world)
        return gather_counts(super().produce(triples[first:last], batch_size))

    def count_side(self, batch: torch.Tensor, side: str, filter_pairs: Filter, width: int):
        """Entity shards: (n_greater, n_equal) (B,) over every rank's candidates. The anchor rows and
        the true scores come from their owners; this rank counts its own range, and the counts are
        summed across ranks (:data:`REDUCTIONS`) before the typed-candidate tie correction."""
        if self.shard != "entities":
            return super().count_side(batch, side, filter_pairs, width)
        start, stop = self.entity_range
        anchor_column = 0 if side == "tail" else 2
        anchors = batch[:, anchor_column]
        owned = (anchors >= start) & (anchors < stop)
        rows = torch.zeros((batch.shape[0],) + tuple(self.scorer.entities.shape[1:]), dtype=self.scorer.entities.dtype,
                           device=self.device)
        rows[owned] = self.scorer.entities[anchors[owned] - start]
        dist.all_reduce(rows)  # each anchor row comes from its one owner, zeros elsewhere
        local_batch = batch.clone()
        local_batch[:, anchor_column] = torch.arange(batch.shape[0], device=self.device)
        query_scorer = type(self.scorer)(rows, self.scorer.relations)
        queries = query_scorer.query_vectors(local_batch, side)
        true_ids = true_ids_of(batch, side)
        here = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
        if self.exact is not None:  # the true answers' stored rows, from their owners
            true_rows = torch.zeros_like(rows)
            true_rows[here] = self.scorer.entities[true_ids[here] - start]
            dist.all_reduce(true_rows)
            self.exact.prepare(query_scorer, local_batch, side, queries, true_rows)
        block = self.scorer.score_chunk(queries, side, 0, stop - start, keys=self.exact is not None,
                                        out=self.scratch_block(batch.shape[0], stop - start))
        true_scores = torch.zeros(batch.shape[0], dtype=block.dtype, device=self.device)
        true_scores[here] = block[here, true_ids[here] - start]
        dist.all_reduce(true_scores)  # from the true answer's owner, zeros elsewhere
        self.exclude_untyped(block, batch, side, start, true_ids)
        window = self.exact_window(true_scores)
        gt, eq, _ = self.count_chunk(block, start, batch, side, true_scores, filter_pairs, True, window, query_scorer)
        gt, eq = sum_counts(gt, eq)
        return gt, self.untie_worst(eq, true_scores, batch, side, filter_pairs)
