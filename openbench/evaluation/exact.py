"""Exact ranks: better and tied candidates as exact real arithmetic on the stored embeddings decides.

Floating-point scores of two candidates within rounding of each other may compare either way,
depending on the GEMM's blocking, the batch size, the device or the sharding. Exact ranks remove
that dependence in four steps, each cheaper than the next and needed far less often:

1. **Fast pass with a window.** Every candidate is scored in the embeddings' precision, as
   before, and the counting kernel compares it with a window [low, high] around the true answer's
   key (recomputed in float64) instead of the true fast score. The half-width bounds the rounding
   error of *any* candidate's fast score (standard forward error bounds, γ_n = n·u / (1 - n·u),
   u the unit roundoff; see :meth:`ExactRanks.window`). A candidate beyond the window is better
   (or worse) in exact arithmetic; only those inside it are undecided, and the C kernel records
   where they are in the same pass.
2. **Identical stored rows** score identically: a tie, without arithmetic.
3. **float64 re-scoring** of the other undecided candidates, from the stored values, against the
   true answer's float64 key, with per-pair rounding bounds; nearly all are decided here. When
   every stored value lies on a common binary grid coarse enough that float64 computes the key
   without any rounding (integer embeddings, say), the bound is 0 and float64 decides exact ties
   too; when that holds for the fast precision itself, the fast counts are exact as they stand.
4. **Exact decimal arithmetic** (Python's ``decimal`` with the Inexact condition trapped, so an
   operation that would round raises instead) for what remains. For RotatE-DGLKE, whose score is
   a sum of square roots, exact arithmetic is not available: the sums are compared at 100
   significant digits with an error bound, equal multisets of squared moduli are ties, and any
   pair still undecided (none has been observed) is counted as a tie and reported.

Scores compared by the key they are ranked by: the score itself (dot products, L1 distances,
sums of moduli) or the squared distance (TransE-L2, RotatE), which orders candidates as the
square root does. Subnormal results are covered by an absolute term per operation.
"""
from __future__ import annotations

import decimal
import logging
from dataclasses import dataclass, fields
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np
import torch

__all__ = ["RANK_MODES", "ExactStats", "ExactRanks", "unit_roundoff", "gamma", "real_rows", "fraction_bits"]

logger = logging.getLogger(__name__)

RANK_MODES = ("exact", "fast")
UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24,
                 torch.float64: 2.0 ** -53}
# the spacing of subnormal numbers: the absolute error one operation may add near underflow
SUBNORMAL_SPACING = {torch.float16: 2.0 ** -24, torch.bfloat16: 2.0 ** -133, torch.float32: 2.0 ** -149,
                     torch.float64: 2.0 ** -1074}
U64 = 2.0 ** -53
# float64 computes a key exactly when its abs-evaluation, on the values' common grid, stays below
# 2**50: three bits below float64's 53 leave room for SimplE's ½ and L2's factor 2
EXACT_GRID_LIMIT = 2.0 ** 50
PAIR_CHUNK_ELEMENTS = 1 << 22  # (pairs × width) float64 elements per re-scoring chunk
NORM_CHUNK_ELEMENTS = 1 << 22  # candidate-table values converted to float64 at a time
POSITIONS_PER_ROW = 32  # window columns the C counting pass records per row (more: the row is scanned again)
DECIMAL_EXACT = decimal.Context(prec=100_000, traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation])
MODULI_DIGITS = 100


def unit_roundoff(dtype: torch.dtype) -> float:
    """u of a floating dtype (complex: of its real part)."""
    return UNIT_ROUNDOFF[torch.empty(0, dtype=dtype).real.dtype]


def gamma(n: float, u: float) -> float:
    """γ_n = n·u / (1 - n·u): bounds the relative error of n roundings (Higham, §3.1)."""
    return n * u / (1.0 - n * u)


def real_rows(rows: torch.Tensor) -> np.ndarray:
    """Stored rows as a float64 numpy array (exact); complex rows as [Re | Im] halves on the last axis."""
    rows = rows.detach().cpu()
    if rows.is_complex():
        rows = torch.cat([rows.real, rows.imag], dim=-1)
    return rows.to(torch.float64).numpy()


def fraction_bits(*tables: torch.Tensor, chunk: int = 1 << 20) -> Optional[int]:
    """The fewest binary fraction digits f such that every value of ``tables`` is a multiple of 2^-f
    (0 for integers); None when a value is not finite. Reads ``chunk`` values at a time."""
    bits = 0
    for table in tables:
        flat = table.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        for start in range(0, flat.numel(), chunk):
            values = flat[start:start + chunk].cpu().to(torch.float64).numpy()
            if not np.isfinite(values).all():
                return None
            values = values[values != 0]
            if not values.size:
                continue
            mantissa, exponent = np.frexp(values)  # value = mantissa · 2^exponent, 0.5 <= |mantissa| < 1
            integer = np.abs(mantissa * 2.0 ** 53).astype(np.int64)  # exact: 53 significant bits
            lowest = integer & -integer  # the lowest set bit, a power of two
            _, lowest_exponent = np.frexp(lowest.astype(np.float64))
            # value = integer · 2^(exponent - 53), and integer's lowest bit is 2^(lowest_exponent - 1)
            bits = max(bits, int((53 - exponent - (lowest_exponent - 1)).max()))
    return bits


class _Queries(NamedTuple):
    """One batch side's queries in float64, from :meth:`ExactRanks.window` for its re-scoring.
    Rows are the batch's: anchor, relation (stored, real), query (B, d'), the norms of its
    magnitude, the true answers' stored rows, their keys and bounds."""

    anchor: np.ndarray
    relation: np.ndarray
    side: str
    query: torch.Tensor
    norms: Tuple[torch.Tensor, torch.Tensor]
    true_stored: np.ndarray
    true_key: torch.Tensor
    true_bound: torch.Tensor


@dataclass
class ExactStats:
    """How the undecided candidates of the fast pass were settled (pairs of query and candidate)."""

    rescored: int = 0
    float64: int = 0
    identical: int = 0
    decimal: int = 0
    unresolved: int = 0

    def as_tensor(self) -> torch.Tensor:
        return torch.tensor([getattr(self, f.name) for f in fields(self)], dtype=torch.long)

    def set_from(self, values: torch.Tensor) -> None:
        for f, value in zip(fields(self), values.tolist()):
            setattr(self, f.name, int(value))

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class ExactRanks:
    """Exact counting for one :class:`~openbench.evaluation.scorers.EmbeddingScorer`.

    :param scorer: the evaluator's scorer (its candidate rows: all entities, or a shard).
    :param lower_is_better: rank lower keys first (the embedding scores are higher-is-better).
    :param reduce_max: applied to this process's (2,) float64 largest candidate norms; entity
        shards pass an all_reduce(MAX) so that every window bounds every rank's candidates.
    :param entity_offset: the global id of the scorer's first entity row (an entity shard's start).
    """

    def __init__(self, scorer, lower_is_better: bool = False,
                 reduce_max: Optional[Callable[[torch.Tensor], torch.Tensor]] = None, entity_offset: int = 0):
        self.kind = scorer.kind
        dtype = scorer.entities.dtype
        self.unit = unit_roundoff(dtype)
        self.tiny = SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]
        self.lower_is_better = lower_is_better
        self._tables = (scorer.entities, scorer.relations)
        self._grid_bits: Optional[int] = None
        self._grid_known = False
        self.reduce_max = reduce_max
        self._scorer = scorer  # whose candidate rows this process holds: entities entity_offset ..
        self.entity_offset = entity_offset
        self._norms: dict = {}
        self._entity_norms: dict = {}
        self._queries: Optional[_Queries] = None
        self.stats = ExactStats()

    @property
    def grid_bits(self) -> Optional[int]:
        """:func:`fraction_bits` of the scorer's tables, computed on first use."""
        if not self._grid_known:
            self._grid_bits, self._grid_known = fraction_bits(*self._tables), True
        return self._grid_bits

    # -- step 1: the window ----------------------------------------------------------------
    def entity_norms(self, side: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """(‖c‖₂ (E,), ‖c‖₁ (E,)) in float64 of this process's candidate vectors of ``side`` (the
        evaluator's scorer's, never a query scorer's), computed once, in chunks."""
        if side not in self._entity_norms:
            candidates = self._scorer._cached_candidates(side)
            rows = candidates.shape[0]
            norms = (torch.zeros(rows, dtype=torch.float64, device=candidates.device),
                     torch.zeros(rows, dtype=torch.float64, device=candidates.device))
            step = max(1, NORM_CHUNK_ELEMENTS // max(1, candidates.shape[1]))
            for start in range(0, rows, step):
                block = candidates[start:start + step].double()
                norms[0][start:start + step] = block.norm(dim=1)
                norms[1][start:start + step] = block.abs().sum(dim=1)
            # float64 norms of float32 (or float64) rows round too: a relative 2**-40 more covers them
            self._entity_norms[side] = (norms[0] * (1 + 2.0 ** -40), norms[1] * (1 + 2.0 ** -40))
        return self._entity_norms[side]

    def candidate_norms(self, side: str) -> Tuple[float, float]:
        """(max ‖c‖₂, max ‖c‖₁) over the candidate vectors of ``side`` (all ranks' under sharding)."""
        if side not in self._norms:
            two, one = self.entity_norms(side)
            norms = torch.zeros(2, dtype=torch.float64, device=two.device)
            if two.numel():
                norms[0], norms[1] = two.max(), one.max()
            if self.reduce_max is not None:
                norms = self.reduce_max(norms)
            self._norms[side] = tuple(float(x) for x in norms.cpu())
        return self._norms[side]

    def window(self, scorer, batch: torch.Tensor, side: str, queries: torch.Tensor, true_scores: torch.Tensor,
               true_rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(lows (B,), highs (B,)) in the block's dtype: a candidate whose fast score lies beyond
        [low, high] compares with the true answer as it would in exact arithmetic.

        :param scorer: the scorer that built ``queries`` (B, d') from ``batch`` (B, 3).
        :param true_scores: (B,) the true answers' fast scores, read from the block.
        :param true_rows: (B, ...) the true answers' stored entity rows.

        The window is centred on the true answer's key recomputed in float64 (off by a bound far
        below float32's), and is as wide as one fast score's error bound δ. With n roundings per
        query component (``query_rounding``), |q| the query's magnitude (its formula on absolute
        values), e = γ_n |q| the query's own error, q̂ the computed query, C₂ and C₁ the largest
        candidate norms:

        * dot products: δ = γ_{n+d} ‖|q|‖₂ C₂ (Cauchy-Schwarz on Σ |q_k c_k|);
        * L1 distances: δ = γ_{d+2} (‖q̂‖₁ + C₁) + ‖e‖₁; sums of moduli: γ_{d+4} instead;
        * L2 distances, on the squared distance D = ‖q̂‖² + ‖c‖² - 2 q̂·c the block is computed
          from: δ_D = γ_{d+4} (‖q̂‖₂ + C₂)² + ‖e‖₂ (2 (‖q̂‖₂ + C₂) + ‖e‖₂), carried through the
          (monotone, correctly rounded) square root with relative margins of 8u.

        A scorer whose fast pass scores a rewritten formula adds the difference
        (:meth:`~openbench.evaluation.scorers.EmbeddingScorer.rewrite_error`); subnormal results
        add 4·(d + n + 8) times the smallest subnormal.
        """
        dtype = true_scores.dtype
        u = self.unit
        anchor, relation, used_side = scorer.exact_inputs(batch, side)
        anchor, relation = real_rows(anchor), real_rows(relation)
        magnitude = torch.from_numpy(np.ascontiguousarray(
            scorer.query_formula(np.abs(anchor), np.abs(relation), used_side, np.add)))
        query = torch.from_numpy(np.ascontiguousarray(scorer.query_formula(anchor, relation, used_side, np.subtract)))
        true_stored = real_rows(true_rows)
        truth, truth_norms = self._candidates(scorer, true_stored, used_side, relation)
        query_norms = (magnitude.norm(dim=1), magnitude.sum(dim=1))
        true_key, true_bound = self._keys(scorer, query, query_norms, truth, truth_norms)
        # what resolve needs of these queries, kept for the blocks of this batch and side
        self._queries = _Queries(anchor, relation, used_side, query, query_norms, true_stored, true_key, true_bound)
        width = queries.shape[1]
        # the fast queries' norms, computed in their own precision and widened by that rounding
        widen = 1 + gamma(width + 2, u)
        fast_two = queries.norm(dim=1).double().cpu() * widen
        fast_one = queries.abs().sum(dim=1).double().cpu() * widen
        error = gamma(scorer.query_rounding, u) * magnitude
        c2, c1 = self.candidate_norms(side)
        anchor64 = torch.from_numpy(anchor)
        rewrite = scorer.rewrite_error(torch.from_numpy(relation), used_side,
                                       (anchor64.norm(dim=1), anchor64.abs().sum(dim=1)), (c2, c1))
        if self.kind == "dot":
            delta = gamma(scorer.query_rounding + width, u) * magnitude.norm(dim=1) * c2
        elif self.kind in ("l1", "moduli"):
            extra = 2 if self.kind == "l1" else 4
            delta = gamma(width + extra, u) * (fast_one + c1) + error.sum(dim=1)
        else:
            reach = fast_two + c2
            own = error.norm(dim=1)
            delta = gamma(width + 4, u) * reach ** 2 + own * (2 * reach + own)
        if rewrite is not None:
            delta = delta + rewrite
        # the bounds' own float64 evaluation, the true key's bound, and subnormal results
        delta = delta * (1 + 2.0 ** -30) + true_bound + 4 * (width + scorer.query_rounding + 8) * self.tiny
        if self.kind == "l2":
            lows, highs = _distance_window(-true_key, delta, u)
        else:
            margin = delta + 4 * U64 * true_key.abs()
            lows, highs = true_key - margin, true_key + margin
        lows, highs = lows.to(true_scores.device), highs.to(true_scores.device)
        # rows the fast pass computes without any rounding (values on a coarse enough grid): their
        # fast counts are exact, ties included, and the window is the true score itself
        finite = torch.isfinite(true_scores)
        computed_exactly = ~finite | self._fast_is_exact(scorer, magnitude, c2, c1, dtype).to(finite.device)
        lows = torch.where(computed_exactly, true_scores, _round_down(lows, dtype))
        highs = torch.where(computed_exactly, true_scores, _round_up(highs, dtype))
        return lows, highs

    def _fast_is_exact(self, scorer, magnitude: torch.Tensor, c2: float, c1: float, dtype) -> torch.Tensor:
        """(B,) bool: the fast pass computes every score of the row exactly (the grid criterion
        with the fast precision's significand; dot products and L1 distances, which no square
        root follows)."""
        rows = magnitude.shape[0]
        if self.grid_bits is None or self.kind not in ("dot", "l1"):
            return torch.zeros(rows, dtype=torch.bool, device=magnitude.device)
        significand = 53 if dtype == torch.float64 else 24
        if self.kind == "dot":
            size, degree = magnitude.norm(dim=1) * c2, scorer.query_degree + 1
        else:
            size, degree = magnitude.sum(dim=1) + c1, scorer.query_degree
        if degree * self.grid_bits >= 1000:
            return torch.zeros(rows, dtype=torch.bool, device=magnitude.device)
        return size * 2.0 ** (degree * self.grid_bits) < 2.0 ** (significand - 3)

    # -- steps 2 to 4: settle the undecided ------------------------------------------------
    def settle(self, block: torch.Tensor, start: int, counts: Tuple[torch.Tensor, torch.Tensor],
               window: Tuple[torch.Tensor, torch.Tensor], true_ids: torch.Tensor,
               filter_pairs: Tuple[torch.Tensor, torch.Tensor], num_entities: int, scorer,
               entity_rows: Callable[[torch.Tensor], torch.Tensor],
               positions: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """(n_greater, n_equal) (B,) of one block, exact: ``counts`` (beyond the window, inside it)
        from :func:`~openbench.evaluation.ranking.count_block` with ``window``, the inside ones
        re-scored against the queries of the last :meth:`window` (the same batch and side).

        :param block: (B, w) fast scores of candidates ``start .. start + w - 1``.
        :param entity_rows: stored entity rows of global entity ids (P,) -> (P, ...).
        :param positions: (B, K) window columns the C kernel recorded (-1: none), or None.
        """
        greater, inside = counts
        lows, highs = window
        point = lows == highs  # computed exactly (or a non-finite true score): the ties are exact
        exact_ties = torch.where(point, inside, torch.zeros_like(inside))
        rows = ((inside > 0) & ~point).nonzero().squeeze(1)
        if not rows.numel():
            return greater, exact_ties
        pair_rows, pair_ids = self._window_pairs(block, rows, lows, highs, positions)
        pair_ids = pair_ids + start
        keep = pair_ids != true_ids[pair_rows]
        filter_rows, filter_cols = filter_pairs
        if filter_rows.numel():
            keep &= ~torch.isin(pair_rows * num_entities + pair_ids, filter_rows * num_entities + filter_cols)
        pair_rows, pair_ids = pair_rows[keep], pair_ids[keep]
        expected = int(inside[rows].sum())
        if pair_rows.numel() != expected:  # both count the same set: a mismatch is a bug
            raise AssertionError(f"exact ranks: {pair_rows.numel()} undecided pairs found, {expected} counted")
        better, same = self.resolve(scorer, pair_rows, entity_rows(pair_ids), pair_ids - self.entity_offset)
        size = inside.shape[0]
        greater = greater + torch.bincount(pair_rows, weights=better.double().to(pair_rows.device),
                                           minlength=size).to(torch.long)
        tied = torch.bincount(pair_rows, weights=same.double().to(pair_rows.device), minlength=size).to(torch.long)
        return greater, exact_ties + tied

    @staticmethod
    def positions_buffer(block: torch.Tensor) -> Optional[torch.Tensor]:
        """(B, K) int64 of -1 for the C kernel to record window columns in (None off the CPU)."""
        if block.device.type != "cpu":
            return None
        return torch.full((block.shape[0], POSITIONS_PER_ROW), -1, dtype=torch.long)

    @staticmethod
    def _window_pairs(block, rows, lows, highs, positions):
        """(batch rows (P,), block columns (P,)) of every candidate of ``rows`` inside its window:
        from the columns the counting pass recorded where it recorded them all, else by a scan."""
        scan = rows
        parts = []
        if positions is not None:
            recorded = positions[rows]
            filled = (recorded >= 0).sum(dim=1)
            complete = (filled > 0) & (filled < recorded.shape[1])
            local, slot = (recorded[complete] >= 0).nonzero(as_tuple=True)
            direct = rows[complete]
            parts.append((direct[local], recorded[complete][local, slot]))
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

    def resolve(self, scorer, pair_rows: torch.Tensor, candidate_rows: torch.Tensor,
                local_ids: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """(better (P,), tied (P,)) bool: each candidate against its query's true answer, exactly,
        for the queries of the last :meth:`window`.

        :param pair_rows: (P,) batch row of each pair; ``candidate_rows`` (P, ...) the candidates'
            stored rows; ``local_ids`` (P,) their rows in this process's table (their norms are
            then looked up instead of computed).
        """
        self.stats.rescored += int(pair_rows.numel())
        if self._queries is None:
            raise RuntimeError("resolve() needs the window() of the same batch and side first")
        anchor, relation, used_side, query, query_norms, true_stored, true_key, true_bound = self._queries
        position = pair_rows.cpu()
        candidates_all = real_rows(candidate_rows)
        known_norms = None
        if local_ids is not None and not scorer.candidate_rounding:
            local = local_ids.to(self.entity_norms(used_side)[0].device)
            known_norms = tuple(n[local].cpu() for n in self.entity_norms(used_side))
        better = torch.zeros(position.numel(), dtype=torch.bool)
        tied = torch.zeros(position.numel(), dtype=torch.bool)
        step = max(1, PAIR_CHUNK_ELEMENTS // max(1, query.shape[1]))
        for first in range(0, position.numel(), step):
            at = position[first:first + step]
            stored = candidates_all[first:first + step]
            # identical stored rows score identically: ties, without arithmetic (checked first:
            # every candidate of a constant table is one)
            flat = stored.reshape(stored.shape[0], -1)
            identical = torch.from_numpy((flat == true_stored[at.numpy()].reshape(flat.shape)).all(axis=1))
            self.stats.identical += int(identical.sum())
            up = torch.zeros(at.numel(), dtype=torch.bool)
            same = identical.clone()
            rest = (~identical).nonzero().squeeze(1)
            if rest.numel():
                here = at[rest]
                candidates, norms = self._candidates(scorer, stored[rest.numpy()], used_side, relation[here.numpy()],
                                                     None if known_norms is None else
                                                     tuple(n[first:first + step][rest] for n in known_norms))
                key, bound = self._keys(scorer, query[here], tuple(n[here] for n in query_norms), candidates, norms)
                difference, margin = key - true_key[here], bound + true_bound[here]
                rest_up = difference > margin
                rest_same = (margin == 0) & (difference == 0)
                open_ = ~(rest_up | (difference < -margin) | rest_same)
                self.stats.float64 += int((~open_).sum())
                for index in open_.nonzero().squeeze(1).tolist():
                    sign = self._exact_sign(scorer, anchor[here[index]], relation[here[index]], used_side,
                                            stored[int(rest[index])], true_stored[here[index]])
                    rest_up[index], rest_same[index] = sign > 0, sign == 0
                up[rest], same[rest] = rest_up, rest_same
            if self.lower_is_better:
                up = ~(up | same)
            better[first:first + step], tied[first:first + step] = up, same
        device = pair_rows.device
        return better.to(device), tied.to(device)

    @staticmethod
    def _candidates(scorer, rows: np.ndarray, side: str, relation: np.ndarray, norms=None):
        """(candidate vectors (P, d') float64, (‖|c|‖₂ (P,), ‖|c|‖₁ (P,))) from stored ``rows``:
        the norms of the candidates' magnitudes (their formula on absolute values), or ``norms``
        where the caller has them."""
        vectors = torch.from_numpy(np.ascontiguousarray(scorer.candidate_formula(rows, side, relation, np.subtract)))
        if norms is not None:
            return vectors, norms
        if not scorer.candidate_rounding:
            size = vectors.abs()
        else:
            size = torch.from_numpy(np.ascontiguousarray(
                scorer.candidate_formula(np.abs(rows), side, np.abs(relation), np.add)))
        return vectors, (size.norm(dim=1), size.sum(dim=1))

    def _keys(self, scorer, query: torch.Tensor, query_norms, candidates: torch.Tensor, candidate_norms):
        """(key (P,), bound (P,)) in float64: higher keys rank first; |key - exact key| <= bound,
        and bound is 0 where float64 computed the key without rounding (the grid criterion).

        :param query: (P, d'); ``query_norms`` (‖|q|‖₂, ‖|q|‖₁) (P,) of the queries' magnitudes;
            ``candidates`` (P, d') and ``candidate_norms`` likewise. The bounds use only these
            norms (Cauchy-Schwarz and the triangle inequality), so they cost O(P) past the key:
            ‖e‖ <= γ_nq ‖|q|‖ + γ_nc ‖|c|‖ bounds the inputs' own error, and each computed
            difference x̂ is off by at most e + 2u|x̂|."""
        width = query.shape[1]
        gq, gc = gamma(scorer.query_rounding, U64), gamma(scorer.candidate_rounding, U64)
        (q2, q1), (c2, c1) = query_norms, candidate_norms
        if self.kind == "dot":
            key = (query * candidates).sum(dim=1)
            size = q2 * c2
            bound = gamma(scorer.query_rounding + scorer.candidate_rounding + width + 2, U64) * size
            degree = scorer.query_degree + 1
        else:
            difference = query - candidates
            if self.kind == "l2":
                squared = (difference * difference).sum(dim=1)
                length = squared.sqrt()
                off = gq * q2 + gc * c2 + 2 * U64 * length
                key, bound = -squared, off * (2 * length + off) + gamma(width + 2, U64) * squared
                size, degree = (q2 + c2) ** 2, 2 * scorer.query_degree
            elif self.kind == "l1":
                total = difference.abs().sum(dim=1)
                key, bound = -total, gq * q1 + gc * c1 + gamma(width + 3, U64) * total
                size, degree = q1 + c1, scorer.query_degree
            else:
                half = width // 2
                total = torch.hypot(difference[:, :half], difference[:, half:]).sum(dim=1)
                # Σ(|x_re| + |x_im|) <= √2 Σ|x_k|: the differences' rounding, then the moduli's
                key, bound = -total, gq * q1 + gc * c1 + gamma(half + 8, U64) * total
                size, degree = None, None
        bound = 2 * bound + 4 * (width + scorer.query_rounding + 8) * 2.0 ** -1074
        if size is not None and self.grid_bits is not None and degree * self.grid_bits < 1000:
            exact = size * 2.0 ** (degree * self.grid_bits) < EXACT_GRID_LIMIT
            bound = torch.where(exact, torch.zeros_like(bound), bound)
        return key, bound

    def _exact_sign(self, scorer, anchor: np.ndarray, relation: np.ndarray, side: str, candidate: np.ndarray,
                    truth: np.ndarray) -> int:
        """sign(key(candidate) - key(truth)) for one query, in exact decimal arithmetic; the
        candidate and the truth are stored entity rows."""
        self.stats.decimal += 1
        try:
            with decimal.localcontext(DECIMAL_EXACT):
                relation_row = _decimals(relation)[None]
                query = scorer.query_formula(_decimals(anchor)[None], relation_row, side, np.subtract)[0]
                candidate, truth = (scorer.candidate_formula(_decimals(row)[None], side, relation_row, np.subtract)[0]
                                    for row in (candidate, truth))
                if self.kind == "moduli":
                    return self._moduli_sign(query, candidate, truth)
                difference = _exact_key(self.kind, query, candidate) - _exact_key(self.kind, query, truth)
        except (decimal.Inexact, decimal.Overflow, decimal.InvalidOperation) as error:  # pragma: no cover
            return self._unresolved(f"exact arithmetic failed ({type(error).__name__})")
        return (difference > 0) - (difference < 0)

    def _moduli_sign(self, query, candidate, truth) -> int:
        """Sums of square roots: compared at 100 digits with an error bound; equal multisets of
        squared moduli are ties; anything closer is unresolved (counted as a tie, and reported)."""
        half = query.shape[0] // 2
        squares = [(query[:half] - c[:half]) ** 2 + (query[half:] - c[half:]) ** 2 for c in (candidate, truth)]
        if sorted(squares[0]) == sorted(squares[1]):
            return 0
        with decimal.localcontext(decimal.Context(prec=MODULI_DIGITS)):
            sums = [-sum(x.sqrt() for x in square) for square in squares]
            difference = sums[0] - sums[1]
            bound = (half + 2) * decimal.Decimal(10) ** (2 - MODULI_DIGITS) * (abs(sums[0]) + abs(sums[1]))
        if abs(difference) > bound:
            return 1 if difference > 0 else -1
        return self._unresolved("two sums of square roots agree to 100 digits")

    def _unresolved(self, why: str) -> int:
        self.stats.unresolved += 1
        logger.warning("exact ranks: %s; counted as a tie", why)
        return 0


def _decimals(values: np.ndarray) -> np.ndarray:
    """An object array of exact Decimals (every float64 converts exactly)."""
    return np.array([decimal.Decimal(float(x)) for x in values.ravel()], dtype=object).reshape(values.shape)


def _exact_key(kind: str, query, candidate):
    if kind == "dot":
        return (query * candidate).sum()
    difference = query - candidate
    if kind == "l2":
        return -(difference * difference).sum()
    return -np.abs(difference).sum()


def _distance_window(squared: torch.Tensor, delta: torch.Tensor, u: float):
    """(lows, highs) in float64 of the scores -r whose squares r² (the fast pass's squared distance
    before its square root) lie within ``delta`` (B,) of the true squared distances ``squared``
    (B,), with 8u relative margins for the square root's rounding."""
    margin = 8 * u
    nearest = torch.sqrt(torch.clamp(squared * (1 - margin) - delta, min=0.0) / (1 + margin)) * (1 - margin)
    farthest = torch.sqrt((squared * (1 + margin) + delta) / (1 - margin)) * (1 + margin)
    return -farthest, -nearest


def _round_down(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``values`` in ``dtype``, rounded towards -inf."""
    rounded = values.to(dtype)
    if dtype == torch.float64:
        return rounded
    return torch.where(rounded.double() > values, torch.nextafter(rounded, torch.full_like(rounded, -np.inf)),
                       rounded)


def _round_up(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    rounded = values.to(dtype)
    if dtype == torch.float64:
        return rounded
    return torch.where(rounded.double() < values, torch.nextafter(rounded, torch.full_like(rounded, np.inf)),
                       rounded)
