"""Known answers per query key in CSR form, built with vectorised sorts and kept on the device."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch

from openbench.vocabulary import QUERY_SIDES

__all__ = ["SIDES", "CPU", "FilterIndex"]

SIDES = QUERY_SIDES
CPU = torch.device("cpu")


@dataclass
class FilterIndex:
    """Known answers of the queries of one side.

    For side ``"tail"`` a query is (h, r, ?) with key ``h * R + r`` and the answers are tails;
    for side ``"head"`` a query is (?, r, t) with key ``t * R + r`` and the answers are heads.

    ``keys`` (K,) sorted unique query keys; ``offsets`` (K + 1,) where the answers of ``keys[i]``
    are ``answers[offsets[i]:offsets[i + 1]]``, sorted and unique.
    """

    side: str
    num_relations: int
    keys: torch.Tensor
    offsets: torch.Tensor
    answers: torch.Tensor

    @classmethod
    def build(cls, triples: torch.Tensor, num_relations: int, side: str,
              device: torch.device = CPU) -> "FilterIndex":
        """Index ``triples`` (N, 3) int64 (h, r, t) for ``side``."""
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {side!r}")
        triples = triples.to(device=device, dtype=torch.long)
        anchor, answer = (triples[:, 0], triples[:, 2]) if side == "tail" else (triples[:, 2], triples[:, 0])
        key = anchor * num_relations + triples[:, 1]
        width = int(answer.max()) + 1 if answer.numel() else 1
        if key.numel() and int(key.max()) < torch.iinfo(torch.long).max // width:
            # one sort of a combined (key, answer) int64: sorted and unique in one pass
            combined = torch.unique(key * width + answer, sorted=True)
            key, answer = combined // width, combined % width
        else:  # lexicographic sort by (key, answer): stable by the minor column, then the major one
            order = torch.argsort(answer, stable=True)
            order = order[torch.argsort(key[order], stable=True)]
            key, answer = key[order], answer[order]
            if key.numel():
                fresh = torch.ones_like(key, dtype=torch.bool)
                fresh[1:] = (key[1:] != key[:-1]) | (answer[1:] != answer[:-1])
                key, answer = key[fresh], answer[fresh]
        keys, counts = torch.unique_consecutive(key, return_counts=True)
        offsets = torch.zeros(keys.numel() + 1, dtype=torch.long, device=device)
        torch.cumsum(counts, 0, out=offsets[1:])
        return cls(side=side, num_relations=num_relations, keys=keys, offsets=offsets, answers=answer)

    @classmethod
    def empty(cls, num_relations: int, side: str, device: torch.device = CPU) -> "FilterIndex":
        return cls.build(torch.empty((0, 3), dtype=torch.long), num_relations, side, device)

    def to(self, device: torch.device) -> "FilterIndex":
        """The same index with its tensors on ``device``."""
        return FilterIndex(side=self.side, num_relations=self.num_relations, keys=self.keys.to(device),
                           offsets=self.offsets.to(device), answers=self.answers.to(device))

    def lookup(self, batch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Known answers of the queries of ``batch`` (B, 3) as flat pairs.

        Returns ``rows`` (M,) batch row indices and ``answers`` (M,) entity ids, grouped by row.
        """
        anchor = batch[:, 0] if self.side == "tail" else batch[:, 2]
        query_keys = anchor * self.num_relations + batch[:, 1]
        n_keys = self.keys.numel()
        device = batch.device
        if n_keys == 0:
            empty = torch.empty(0, dtype=torch.long, device=device)
            return empty, empty
        position = torch.searchsorted(self.keys, query_keys).clamp_(max=n_keys - 1)
        found = self.keys[position] == query_keys
        starts = self.offsets[position]
        lengths = torch.where(found, self.offsets[position + 1] - starts, torch.zeros_like(starts))
        total = int(lengths.sum())
        rows = torch.repeat_interleave(torch.arange(batch.shape[0], device=device), lengths, output_size=total)
        first_of_row = torch.cumsum(lengths, 0) - lengths
        within = torch.arange(total, device=device) - first_of_row[rows]
        return rows, self.answers[starts[rows] + within]
