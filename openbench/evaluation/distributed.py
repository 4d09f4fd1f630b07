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
import time
from typing import Optional, Tuple

import torch
import torch.distributed as dist

from openbench.errors import InputError
from openbench.evaluation import catalog
from openbench.evaluation.evaluator import EmbeddingEvaluator, Filter, _true_ids
from openbench.evaluation.ranking import RankCounts, count_block

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


class DistributedEmbeddingEvaluator(EmbeddingEvaluator):
    """:class:`EmbeddingEvaluator` over the ranks of the default process group."""

    def __init__(self, dataset, scorer, *, shard: str = "queries", **options):
        if shard not in SHARDS:
            raise InputError(f"unknown shard mode {shard!r}; expected one of {', '.join(SHARDS)}")
        if not dist.is_initialized():
            raise InputError("torch.distributed is not initialised; run under torchrun with --distributed")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.shard = shard
        self.entity_shard = shard == "entities"
        if self.entity_shard:
            if scorer.num_entities != dataset.num_entities:
                raise InputError(f"the model has {scorer.num_entities} entities, the dataset {dataset.num_entities}")
            self.start, self.stop = entity_range(scorer.num_entities, self.rank, self.world)
            # this rank keeps only its entity rows; query anchors come from their owners
            scorer = type(scorer)(scorer.entities[self.start:self.stop].clone(), scorer.relations)
        super().__init__(dataset, scorer, **options)

    def _result(self, head, tail, relations, seconds):
        result = super()._result(head, tail, relations, seconds)
        result["protocol"]["distributed"] = {"world_size": self.world, "shard": self.shard,
                                             "backend": dist.get_backend()}
        return result

    # -- queries: every rank a slice of the triples -------------------------------------------
    def evaluate(self, batch_size: Optional[int] = None) -> dict:
        if self.shard == "entities":
            return super().evaluate(batch_size)
        started = time.perf_counter()
        triples = self.dataset.triples[self.evaluation_split]
        first, last = entity_range(triples.shape[0], self.rank, self.world)
        local = self._evaluate_triples(triples[first:last].to(self.device), batch_size)
        gathered = [None] * self.world
        dist.all_gather_object(gathered, {side: (c.n_greater.cpu(), c.n_equal.cpu(), c.n_candidates.cpu())
                                          for side, c in local.items()})
        counts = {side: RankCounts(*(torch.cat([part[side][i] for part in gathered]) for i in range(3)))
                  for side in ("head", "tail")}
        return self._result(counts["head"], counts["tail"], triples[:, 1], time.perf_counter() - started)

    # -- entities: every rank a range of candidates -------------------------------------------
    def _count_side(self, batch: torch.Tensor, side: str, filter_pairs: Filter, width: int):
        if self.shard != "entities":
            return super()._count_side(batch, side, filter_pairs, width)
        anchor_column = 0 if side == "tail" else 2
        anchors = batch[:, anchor_column]
        owned = (anchors >= self.start) & (anchors < self.stop)
        rows = torch.zeros((batch.shape[0],) + tuple(self.scorer.entities.shape[1:]), dtype=self.scorer.entities.dtype,
                           device=self.device)
        rows[owned] = self.scorer.entities[anchors[owned] - self.start]
        dist.all_reduce(rows)  # each anchor row comes from its one owner, zeros elsewhere
        local_batch = batch.clone()
        local_batch[:, anchor_column] = torch.arange(batch.shape[0], device=self.device)
        queries = type(self.scorer)(rows, self.scorer.relations).query_vectors(local_batch, side)
        true_ids = _true_ids(batch, side)
        block = self.scorer.score_chunk(queries, side, 0, self.stop - self.start,
                                        out=self._block(batch.shape[0], self.stop - self.start))
        here = ((true_ids >= self.start) & (true_ids < self.stop)).nonzero().squeeze(1)
        true_scores = torch.zeros(batch.shape[0], dtype=block.dtype, device=self.device)
        true_scores[here] = block[here, true_ids[here] - self.start]
        dist.all_reduce(true_scores)
        self._exclude(block, batch, side, self.start, true_ids)
        gt, eq, _ = count_block(block, self.start, true_ids, true_scores, *filter_pairs, self.lower_is_better)
        totals = torch.stack([gt, eq])
        dist.all_reduce(totals)
        return totals[0], self._untie_worst(totals[1], true_scores, batch, side, filter_pairs)

