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
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist

from openbench import vocabulary
from openbench.errors import InputError, option
from openbench.evaluation.producers.base import Producer
from openbench.evaluation.producers.full import FullRanking
from openbench.evaluation.counting.counts import COUNT_FIELDS, RankCounts
from openbench.evaluation.candidates import RankingSetup
from openbench.record import Protocol

__all__ = ["SHARDS", "DEFAULT_TIMEOUT_S", "init_from_environment", "process_group", "entity_range", "REDUCTIONS", "gather_counts",
           "sum_counts", "sum_pieces", "max_over_ranks", "ShardedProducer"]

SHARDS = vocabulary.SHARDS
DEFAULT_TIMEOUT_S = 600


def init_from_environment(timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
    """Join the process group torchrun describes (NCCL when CUDA is there, gloo otherwise)."""
    if dist.is_initialized():
        return
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError(f"{option('shard')} needs torchrun (or RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)")
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
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, {side: tuple(getattr(c, name).cpu() for name in COUNT_FIELDS)
                                      for side, c in local.items()})
    return {side: RankCounts(*(torch.cat([part[side][i] for part in gathered]) for i in range(len(COUNT_FIELDS))))
            for side in local}


def sum_counts(*tensors: torch.Tensor) -> List[torch.Tensor]:
    """Entity shards: each count tensor (B,) summed over the ranks (one all_reduce for all of them)."""
    stacked = torch.stack(tensors)
    dist.all_reduce(stacked)
    return list(stacked.unbind(0))


def sum_pieces(values: torch.Tensor) -> torch.Tensor:
    """A (B, ...) tensor summed over the ranks: each row comes from its one owner, zeros elsewhere."""
    dist.all_reduce(values)
    return values


def max_over_ranks(values: torch.Tensor) -> torch.Tensor:
    """Every rank's values' elementwise maximum (exact ranks: the largest candidate norms)."""
    values = values.clone()
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return values


class ShardedProducer(Producer):
    """A producer run on every rank of the default process group, its counts reduced as
    :data:`REDUCTIONS` declares for the shard mode: query shards evaluate disjoint slices of the
    queries and concatenate their counts in rank order; entity shards hold disjoint ranges of the
    candidates (only those rows of the table) and sum their better/tied counts (inside the count
    chain, before the typed-candidate tie correction). Reduction and record are the usual ones,
    identical on every rank.

    :param producer: a :class:`~openbench.evaluation.producers.full.FullRanking` of an embedding scorer.
    """

    def __init__(self, producer: Producer, shard: str = "queries"):
        if shard not in SHARDS:
            raise InputError(f"unknown shard mode {shard!r}; expected one of {', '.join(SHARDS)}")
        if not dist.is_initialized():
            raise InputError(f"torch.distributed is not initialised; run under torchrun with {option('shard')}")
        if not isinstance(producer, FullRanking) or not producer.embeddings:
            raise InputError("distributed evaluation shards the full ranking of embedding scorers")
        self.inner, self.shard = producer, shard
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.reductions = REDUCTIONS[shard]

    def bind(self, setup: RankingSetup) -> None:
        """Entity shards: this rank keeps only its candidate rows; the count chain gathers anchor
        rows and true scores from their owners and reduces the counts as declared."""
        if self.shard == "queries":
            self.inner.bind(setup)
            return
        scorer = self.inner.scorer
        if scorer.num_entities != setup.num_entities:
            raise InputError(f"the model has {scorer.num_entities} entities, the dataset {setup.num_entities}")
        start, stop = entity_range(scorer.num_entities, self.rank, self.world)
        self.inner.scorer = scorer.with_tables(scorer.entities[start:stop].clone(), scorer.relations)
        self.inner.bind(setup, entity_range=(start, stop), gather_rows=sum_pieces, reduce=self._reduce_counts,
                        reduce_max=max_over_ranks)

    def _reduce_counts(self, greater: torch.Tensor, equal: torch.Tensor) -> List[torch.Tensor]:
        """(n_greater, n_equal) (B,) combined over the ranks as :data:`REDUCTIONS` says ("sum")."""
        assert self.reductions["n_greater"] == self.reductions["n_equal"] == "sum"
        return sum_counts(greater, equal)

    def evaluation_triples(self, setup: RankingSetup) -> torch.Tensor:
        """(T, 3) every rank's evaluation triples (a query shard takes its slice in :meth:`produce`)."""
        return self.inner.evaluation_triples(setup)

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """Query shards: this rank's contiguous slice of ``triples`` (T, 3), the counts combined as
        declared ("cat", rank order). Entity shards: every query over this rank's candidates."""
        if self.shard == "entities":
            return self.inner.produce(setup, triples, batch_size)
        first, last = entity_range(triples.shape[0], self.rank, self.world)
        local = self.inner.produce(setup, triples[first:last], batch_size)
        assert set(self.reductions.values()) == {"cat"}
        return gather_counts(local)

    def adjust(self, protocol: Protocol) -> Protocol:
        """The inner producer's protocol plus the world size, shard mode and backend."""
        protocol = self.inner.adjust(protocol)
        protocol.extra["distributed"] = {"world_size": self.world, "shard": self.shard, "backend": dist.get_backend()}
        return protocol

    def model_description(self) -> dict:
        """The inner producer's model block."""
        return self.inner.model_description()

    def timing(self) -> dict:
        """The exact-ranks counts summed over the ranks."""
        if self.inner.exact is not None:
            totals = self.inner.exact.stats.as_tensor().to(self.inner.scorer.device)
            dist.all_reduce(totals)
            self.inner.exact.stats.set_from(totals.cpu())
        return self.inner.timing()


@contextmanager
def process_group(device) -> Iterator[torch.device]:
    """Within it, this process is a rank of the group torchrun describes (joined here where no
    group is initialised yet, and left again on the way out); yields the rank's device (its own
    GPU under ``device="auto"``)."""
    from openbench.evaluation.counting.device import resolve_device

    joined = not dist.is_initialized()
    init_from_environment()
    try:
        local_rank = os.environ.get("LOCAL_RANK")
        yield resolve_device(device, local_rank=int(local_rank) if local_rank is not None else None)
    finally:
        if joined:
            dist.destroy_process_group()
