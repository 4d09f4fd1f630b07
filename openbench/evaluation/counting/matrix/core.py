"""The matrix and what a count of it returns: :class:`MatrixSpec` (which rows and columns, scored how),
:class:`MatrixCounts` (the pass's answer), :class:`Shard` (a rank's share under torch.distributed), and
how the rows are cut into blocks. The limits every pass shares live here, once: the keys per block
and the keys one C call may count (``COUNTER_LIMIT``: its cells' counters are int32)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist

from openbench.models.scorers import EmbeddingScorer


__all__ = ["MatrixSpec", "MatrixCounts", "Shard", "BLOCK_KEYS", "BLOCK_VARIABLE", "COUNTER_LIMIT", "TOP_SLACK", "exact_mode_applies", "block_keys"]


BLOCK_KEYS = 1 << 24  # keys per block: 64 MB of float32, a GEMM at the machine's speed, few blocks to merge
BLOCK_VARIABLE = "OPENBENCH_MATRIX_BLOCK_KEYS"  # another block size (tests deal small blocks over ranks)
COUNTER_LIMIT = (1 << 31) - 1  # the keys one C pass counts (its cells' counters are int32)
TOP_SLACK = 4  # the best pairs kept at most this many times the asked number (ties at the cut)


@dataclass(frozen=True)
class MatrixSpec:
    """The matrix: ``rows`` (D,) and ``cols`` (S,) int64 entity ids (drugs and diseases), scored
    under relation id ``relation`` as (row, relation, col) when ``rows_are_heads``, else as (col,
    relation, row)."""

    rows: torch.Tensor
    cols: torch.Tensor
    relation: int
    rows_are_heads: bool

    @property
    def side(self) -> str:
        """The side the columns are candidates of: a row's query is (row, r, ?) or (?, r, row)."""
        return "tail" if self.rows_are_heads else "head"

    @property
    def shape(self) -> Tuple[int, int]:
        return int(self.rows.shape[0]), int(self.cols.shape[0])

    def triples(self, row_index: torch.Tensor, col_index: torch.Tensor) -> torch.Tensor:
        """(n, 3) the triples of the pairs (rows[row_index], cols[col_index]), in the relation's
        orientation."""
        row_ids, col_ids = self.rows[row_index], self.cols[col_index]
        relation = torch.full_like(row_ids, self.relation)
        heads, tails = (row_ids, col_ids) if self.rows_are_heads else (col_ids, row_ids)
        return torch.stack([heads, relation, tails], dim=1)

    def queries(self, first: int, last: int) -> torch.Tensor:
        """(B, 3) the triples whose ``side`` queries are rows ``first .. last - 1`` (the
        candidate's slot holds the first column: it is not read)."""
        return self.triples(torch.arange(first, last), torch.zeros(last - first, dtype=torch.long))


@dataclass
class MatrixCounts:
    """What :func:`count_matrix` found.

    ``greater`` and ``equal`` (P,) int64: for each special pair flagged as a threshold, how many
    pairs of the whole matrix score above it and how many tie with it (itself included); 0 for the
    others. ``groups`` (P,) int64: the special pairs' exact order, a dense rank from the lowest
    key (equal keys, one group). ``keys`` (P,) float64: their keys (float64 values; the order is
    ``groups``'). ``top`` (K', 2) int64 row and column indexes of the matrix's best pairs, best
    first, without the excluded special pairs, through the end of the tie group at the K-th place
    (at most ``TOP_SLACK`` · K); ``top_groups`` (K',) their tie groups (equal: tied), ``top_keys``.
    ``stats``: the mode, blocks, keys re-scored and decided in exact decimal arithmetic."""

    greater: np.ndarray
    equal: np.ndarray
    groups: np.ndarray
    keys: np.ndarray
    top: np.ndarray
    top_groups: np.ndarray
    top_keys: np.ndarray
    stats: Dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Shard:
    """This process's share of the matrix under torch.distributed (every rank one ``Shard`` with
    its rank): blocks dealt round-robin, and the reductions that make every rank hold the counts of
    the whole matrix. Histograms and counts are int64 sums, exact in any order: the record is the
    one process's, byte for byte."""

    rank: int
    world: int

    def mine(self, items: list) -> list:
        return items[self.rank::self.world]

    def sum(self, values: np.ndarray) -> np.ndarray:
        """The element-wise sum over the ranks (int64 or float64; float64 only where one rank holds
        each value and the others 0, so that the sum is exact)."""

        tensor = torch.from_numpy(np.ascontiguousarray(values)).clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.numpy()

    def gather(self, value) -> list:
        """Every rank's ``value``, in rank order."""

        gathered: list = [None] * self.world
        dist.all_gather_object(gathered, value)
        return gathered


def _stored_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``table[ids]`` (N, ...) for (N,) int64 ids: a view where the ids are one ascending run (the
    matrix's columns often are: no 14 MB copy at PrimeKG's size), else a gathered copy."""
    count = int(ids.shape[0])
    if count and int(ids[-1]) - int(ids[0]) == count - 1 and bool((ids[1:] - ids[:-1] == 1).all()):
        return table[int(ids[0]):int(ids[0]) + count]
    return table[ids]


def exact_mode_applies(scorer) -> bool:
    """Whether ``scorer``'s keys can be decided exactly here: an embedding scorer of dot, L2 or L1
    keys whose candidate vectors are stored values (no rounding formula), on the CPU."""

    return (isinstance(scorer, EmbeddingScorer) and scorer.kind in ("dot", "l2", "l1") and scorer.exact_keys
            and not scorer.candidate_rounding and scorer.entities.device.type == "cpu"
            and scorer.entities.dtype in (torch.float32, torch.float64)
            and scorer.relations.dtype == scorer.entities.dtype)


def block_keys() -> int:
    """Keys per block: :data:`BLOCK_KEYS`, or the environment's :data:`BLOCK_VARIABLE`."""
    return _given_block_keys() or BLOCK_KEYS


def _given_block_keys() -> Optional[int]:
    """The environment's :data:`BLOCK_VARIABLE` where it names a positive number of keys, else None."""

    given = os.environ.get(BLOCK_VARIABLE, "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else None


def _blocks(rows: int, width: int, keys: Optional[int] = None) -> List[Tuple[int, int]]:
    """Row ranges of at most ``keys`` (default :func:`block_keys`) keys each, as equal as whole rows
    allow (no short last block for a worker to finish alone)."""
    step = max(1, (keys or block_keys()) // max(1, width))
    count = -(-rows // step)
    step = -(-rows // max(1, count))
    return [(first, min(rows, first + step)) for first in range(0, rows, step)]


def _codes(rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    return rows.astype(np.int64) * width + cols.astype(np.int64)
