"""The matrix's best pairs: :class:`_Tops` keeps the candidates above a floor that only rises, and
:func:`_final_tops` cuts them at the K-th place, through the end of its tie group."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.matrix.core import Shard, TOP_SLACK

__all__ = []


class _Tops:
    """The best pairs seen so far (positions as codes row * width + col), kept with a floor that
    only rises; excluded codes never enter."""

    def __init__(self, wanted: int, excluded: np.ndarray, slack: float):
        self.wanted, self.excluded, self.slack = wanted, np.sort(excluded), slack
        self.codes = np.zeros(0, np.int64)
        self.keys = np.zeros(0, np.float64)
        self.floor: Optional[float] = -np.inf if wanted else None

    def prime(self, keys: torch.Tensor, rows: np.ndarray, width: int, slack: Optional[float] = None) -> None:
        """Before the first block is counted: a floor from some rows' keys (B, width), the rows
        ``rows`` (B,) of the matrix (the first block's, or the fused pass's probe), so that the pass
        records a few candidates instead of the whole block. The (K + e)-th largest key, e the
        excluded pairs these rows hold, is at most the K-th largest of the others; so is the
        (K + e)-th largest of any K + e of their keys, here the maxima of some 4 (K + e) equal
        segments of them (one pass, and close to their own: the best keys mostly lie in segments of
        their own). ``slack``: the floor's margin where these keys were computed otherwise than the
        pass's (default: :attr:`slack`)."""
        if not self.wanted or self.floor is None or self.floor > -np.inf:
            return
        inside = int(np.count_nonzero(np.isin(self.excluded // width, rows)))
        rank = self.wanted + inside
        flat = keys.reshape(-1)
        segment = max(1, flat.numel() // (4 * rank))
        maxima = flat[:flat.numel() - flat.numel() % segment].view(-1, segment).amax(dim=1)
        if maxima.numel() >= rank:
            kth = float(torch.topk(maxima, rank, sorted=False).values.min())
            self.floor = kth - (self.slack if slack is None else slack)

    def add(self, codes: np.ndarray, keys: np.ndarray) -> None:
        if not self.wanted or codes.size == 0:
            return
        if self.excluded.size:  # membership in the sorted excluded codes, by binary search
            at = np.minimum(np.searchsorted(self.excluded, codes), self.excluded.size - 1)
            keep = self.excluded[at] != codes
            codes, keys = codes[keep], keys[keep]
        self.codes, self.keys = np.concatenate([self.codes, codes]), np.concatenate([self.keys, keys])
        if self.keys.size > 4 * self.wanted:
            kth = np.partition(self.keys, -self.wanted)[-self.wanted]
            keep = self.keys >= kth - self.slack
            self.codes, self.keys = self.codes[keep], self.keys[keep]
        if self.keys.size >= self.wanted:
            kth = float(np.partition(self.keys, -self.wanted)[-self.wanted])
            self.floor = max(self.floor if self.floor is not None else -np.inf, kth - self.slack)


def _gathered_tops(tops: "_Tops", shard: Shard) -> "_Tops":
    """Every rank's best-pair candidates in one :class:`_Tops` (each rank's floor came from its own
    blocks, so each kept every pair of its own at least as good as the matrix's K-th)."""
    merged = _Tops(tops.wanted, tops.excluded, tops.slack)
    for codes, keys in shard.gather((tops.codes, tops.keys)):
        merged.add(codes, keys)
    return merged


def _suffix(histogram: np.ndarray) -> np.ndarray:
    """(T,) for each sorted threshold t: the keys counted at positions above t (t + 1 .. T)."""
    totals = np.cumsum(histogram[::-1])[::-1]  # totals[i] = sum of histogram[i:]
    return totals[1:]


def _dense_groups(values: np.ndarray) -> np.ndarray:
    """Dense ranks from the lowest value (equal values: one group)."""
    if values.size == 0:
        return np.zeros(0, np.int64)
    _, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1)


def _final_tops(tops: _Tops, top_k: int, width: int, keys_of) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best pairs through the end of the tie group at place ``top_k``, best first."""
    if not top_k or tops.codes.size == 0:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    codes = np.unique(tops.codes)
    keys, groups = keys_of(codes)
    if groups is None:
        groups = _dense_groups(keys)
    order = np.lexsort((codes, -groups))  # best group first; within a group by position
    codes, keys, groups = codes[order], keys[order], groups[order]
    if codes.size > top_k:
        cut_group = groups[top_k - 1]
        end = int(np.searchsorted(-groups, -cut_group, "right"))
        end = min(end, TOP_SLACK * top_k)
        codes, keys, groups = codes[:end], keys[:end], groups[:end]
    return np.stack([codes // width, codes % width], axis=1), groups, keys
