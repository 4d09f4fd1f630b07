"""Exact ranks: better and tied candidates as exact real arithmetic on the stored embeddings decides.

Floating-point scores of two candidates within rounding of each other may compare either way,
depending on the GEMM's blocking, the batch size, the device or the sharding. Exact ranks remove
that dependence in four steps, each cheaper than the next and needed far less often:

1. **Fast pass with a window.** Every candidate's key (below) is computed in the embeddings'
   precision, as the fast scores are, and the counting kernel compares it with a window [low,
   high] around the true answer's key (recomputed in float64) instead of the true fast key. The
   half-width bounds the rounding error of *any* candidate's fast key (standard forward error
   bounds, γ_n = n·u / (1 - n·u),
   u the unit roundoff; see :meth:`ExactRanks.prepare`). A candidate beyond the window is better
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
sums of moduli) or the negated squared distance (TransE-L2, RotatE), which orders candidates as
the distance does; the fast pass computes that key too (``score_chunk(..., keys=True)``), which
spares it the square root and its clamp and sign passes over every block. Subnormal results are
covered by an absolute term per operation.
"""
from __future__ import annotations

import ctypes
import decimal
import functools
import logging
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY, LOOKUP, split_rows
from openbench.evaluation.counting.rounding import (SUBNORMAL_SPACING, U64, gamma, on_exact_grid,
                                                    round_outwards, subnormal_spacing, unit_roundoff, widened)
from openbench.evaluation.counting.tally import Blocks, TallyPlan, count_blocks
from openbench.models.finite import refuse_nonfinite
from openbench.models.scorers import ExactQueries

if TYPE_CHECKING:
    from openbench.evaluation.candidates import SideCandidates

__all__ = ["RANK_MODES", "ExactStats", "ExactRanks", "PairKeys", "QueryRows", "unit_roundoff", "gamma",
           "fast_key_bound", "fast_key_bound_terms", "centred_l2_bound_terms", "float64_key_bound", "exact_key",
           "round_outwards",
           "real_rows", "fraction_bits", "norm_bounds", "pair_keys", "query_rows", "TableSummary", "table_summary",
           "UnboundedKeys", "finite_bounds"]

logger = logging.getLogger(__name__)

RANK_MODES = ("exact", "fast")
ctypes_double, ctypes_int64, ctypes_address = ctypes.c_double, ctypes.c_int64, ctypes.addressof
# float64 computes a key exactly when its abs-evaluation, on the values' common grid, stays below
# 2**50: three bits below float64's 53 leave room for SimplE's ½ and L2's factor 2
EXACT_GRID_LIMIT = 2.0 ** 50
PAIR_CHUNK_ELEMENTS = 1 << 22  # (pairs × width) float64 elements per re-scoring chunk
NORM_CHUNK_ELEMENTS = 1 << 22  # candidate-table values converted to float64 at a time
DECIMAL_EXACT = decimal.Context(prec=100_000, traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation])
MODULI_DIGITS = 100


class UnboundedKeys(ScoreError):
    """A rounding bound (or the key it bounds) that is not finite: no window built from it may
    decide anything, so the evaluation stops. ``row``: the first such key's row in the bound's
    arrays (None: the bound's arithmetic itself overflowed)."""

    def __init__(self, what: str, row: Optional[int]):
        self.what, self.row = what, row
        at = "" if row is None else f" (row {row})"
        super().__init__(f"exact ranks: {what}{at} is not finite, so no window built from it can decide any "
                         "comparison; the stored values reach the end of float64's range, or a query overflowed "
                         "the embeddings' precision: rescale the embeddings (or give them as float64)")


def finite_bounds(function: Callable) -> Callable:
    """Decorates a bound function: its arithmetic runs under ``np.errstate`` that raises (no NumPy
    warning reaches a terminal), and every array it returns must be finite; either failure is
    :class:`UnboundedKeys` (one line), never a NaN or infinite window."""

    @functools.wraps(function)
    def checked(*args, **kwargs):
        what = f"the rounding bound of {function.__name__.replace('_', ' ')}"
        try:
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                found = function(*args, **kwargs)
        except FloatingPointError:
            raise UnboundedKeys(what, None) from None
        for values in (found if isinstance(found, tuple) else (found,)):
            bad = ~np.isfinite(np.asarray(values, dtype=np.float64))
            if bad.any():
                raise UnboundedKeys(what, int(np.flatnonzero(bad.reshape(-1))[0]))
        return found

    return checked


def real_rows(rows: torch.Tensor) -> np.ndarray:
    """Stored rows as a float64 numpy array (exact); complex rows as [Re | Im] halves on the last axis."""
    rows = rows.detach().cpu()
    if rows.is_complex():
        rows = torch.cat([rows.real, rows.imag], dim=-1)
    return rows.to(torch.float64).numpy()


KEY_KINDS = {"dot": 0, "l2": 1, "l1": 2}  # the C kernel's codes; "moduli" keys are computed by torch


class PairKeys(NamedTuple):
    """:func:`pair_keys` of P pairs: float64 ``keys`` (P,) (higher ranks first), upper bounds
    ``norm2``/``norm1`` (P,) on the exact norms of the candidate vectors, and ``identical`` (P,)
    bool (the candidate vector equals the true answer's; None when no truths were given)."""

    keys: torch.Tensor
    norm2: torch.Tensor
    norm1: torch.Tensor
    identical: Optional[torch.Tensor]


def _widened(two: torch.Tensor, one: torch.Tensor, width: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Norms summed in float64 over ``width`` values (the C helpers', or torch's), widened by that
    sum's rounding: upper bounds on the exact norms."""
    widen = 1 + gamma(width + 2, U64)
    return two * widen, one * widen


def norm_bounds(vectors: torch.Tensor, library=LOOKUP) -> Tuple[torch.Tensor, torch.Tensor]:
    """(‖v‖₂ (N,), ‖v‖₁ (N,)) float64 upper bounds on the exact norms of the rows of ``vectors``
    (N, d): float64 sums widened by their rounding, and a subnormal term per square (which may
    underflow to 0 for float64 values below 2^-537). On the same device as ``vectors``.
    ``library``: the C helpers as the caller resolved them (default: looked up here)."""
    width = vectors.shape[1]
    library = COUNTING_LIBRARY.get() if library is LOOKUP else library
    if (library is not None and vectors.device.type == "cpu" and vectors.dtype in (torch.float32, torch.float64)
            and vectors.shape[0] and (width <= 1 or vectors.stride(1) == 1)):
        two, one = (torch.empty(vectors.shape[0], dtype=torch.float64) for _ in range(2))
        function = library.openbench_row_norms_f32 if vectors.dtype == torch.float32 else library.openbench_row_norms_f64
        function(vectors.data_ptr(), vectors.stride(0), width, vectors.shape[0], two.data_ptr(), one.data_ptr())
        return _widened(two, one, width)
    values = vectors.to(torch.float64)
    two = ((values * values).sum(dim=1) + width * SUBNORMAL_SPACING[torch.float64]).sqrt()
    return _widened(two, values.abs().sum(dim=1), width)


def pair_keys(kind: str, queries: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
              truths: Optional[torch.Tensor] = None, library=LOOKUP) -> PairKeys:
    """float64 keys of the pairs (queries[rows[p]], table[cols[p]]), p < P, read in one pass.

    :param kind: ``"dot"`` (q·c), ``"l2"`` (-‖q - c‖²), ``"l1"`` (-‖q - c‖₁) or ``"moduli"``
        (-Σ|q_k - c_k| over complex coordinates given as [Re | Im] halves).
    :param queries: (B, d') float64 on the CPU; ``table`` (N, d') candidate vectors of any
        floating dtype and device (converted to float64 exactly); ``rows``, ``cols`` (P,) int64.
    :param truths: optional (B, d') (the true answers' candidate vectors): ``identical[p]`` tells
        whether table[cols[p]] equals truths[rows[p]] value for value.

    The C kernel (``_counting.c``) does it without gathering the rows; the torch path is the
    same arithmetic up to the order of the additions, which the bounds of :class:`ExactRanks`
    allow (``OPENBENCH_KERNEL=torch`` forces it); ``library`` as for :func:`norm_bounds`."""
    library = COUNTING_LIBRARY.get() if library is LOOKUP else library
    usable = (library is not None and kind in KEY_KINDS and table.device.type == "cpu"
              and table.dtype in (torch.float32, torch.float64) and table.shape[0] and table.stride(1) == 1
              and (truths is None or (truths.dtype == table.dtype and truths.device.type == "cpu")))
    width = queries.shape[1]
    if not usable:
        candidates = table[cols.to(table.device)].to(torch.float64).cpu()
        picked = queries[rows]
        if kind == "dot":
            keys = (picked * candidates).sum(dim=1)
        elif kind == "l2":
            difference = picked - candidates
            keys = -(difference * difference).sum(dim=1)
        elif kind == "l1":
            keys = -(picked - candidates).abs().sum(dim=1)
        else:
            half = width // 2
            difference = picked - candidates
            keys = -torch.hypot(difference[:, :half], difference[:, half:]).sum(dim=1)
        two, one = norm_bounds(candidates, library)
        identical = None if truths is None else (candidates == truths.cpu()[rows].to(torch.float64)).all(dim=1)
        return PairKeys(keys, two, one, identical)
    count = rows.shape[0]
    queries, rows, cols = queries.contiguous(), rows.contiguous(), cols.contiguous()
    keys, two, one = (torch.empty(count, dtype=torch.float64) for _ in range(3))
    identical = None if truths is None else torch.empty(count, dtype=torch.uint8)
    assert library is not None  # usable
    function = library.openbench_pair_keys_f32 if table.dtype == torch.float32 else library.openbench_pair_keys_f64
    if truths is not None:
        truths = truths.contiguous()
    truths_pointer = None if truths is None else truths.data_ptr()

    def run(bounds):  # pairs begin .. end - 1 (the OpenMP workers of the score GEMMs sleep: OMP_WAIT_POLICY)
        begin, end = bounds
        function(KEY_KINDS[kind], queries.data_ptr(), truths_pointer, width, table.data_ptr(), table.stride(0),
                 rows.data_ptr() + 8 * begin, cols.data_ptr() + 8 * begin, end - begin, keys.data_ptr() + 8 * begin,
                 two.data_ptr() + 8 * begin, one.data_ptr() + 8 * begin,
                 None if identical is None else identical.data_ptr() + begin)

    split_rows(count, count * width, run)
    return PairKeys(keys, *_widened(two, one, width), None if identical is None else identical.bool())


@finite_bounds
def fast_key_bound(kind: str, scorer, u: float, width: int, query_norms, fast_norms, fast_magnitudes,
                   candidate_norms: Tuple[float, float], rewrite: Optional[np.ndarray] = None,
                   chain: Optional[int] = None) -> np.ndarray:
    """(B,) float64 bound δ on |fast key - exact key| of any candidate of B queries whose keys the
    fast pass computes in the precision of unit roundoff ``u`` (the formulas of
    :meth:`ExactRanks.prepare_queries`, before its margin for the bound's own evaluation).

    :param query_norms: bounds (‖|q|‖₂, ‖|q|‖₁) (B,) on the exact queries' magnitudes;
        ``fast_norms`` (‖q̂‖₂, ‖q̂‖₁) (B,) on the computed queries' norms; ``fast_magnitudes`` the
        magnitudes the query's own error is relative to (``query_norms``, or the rewritten
        formula's); ``candidate_norms`` (C₂, C₁) the largest candidate norms; ``rewrite`` (B,) the
        rewritten formula's difference, where the fast pass scores one.
    :param chain: the most roundings a term of the fast dot products goes through, where the pass
        sums in a known order (the matrix's fused pass: ``chunk + ceil(width / chunk) - 1``); None:
        ``width``, the bound for a sum in any order (a GEMM's)."""
    own = gamma(scorer.query_rounding, u)  # |q̂_k - q_k| <= own · |q|_k, the query's own error
    (c2, c1), fast_one = candidate_norms, fast_norms[1]
    if kind in ("l1", "moduli"):
        extra = 2 if kind == "l1" else 4
        delta = gamma(width + extra, u) * (fast_one + c1) + own * fast_magnitudes[1]
    else:
        quadratic, linear, constant = fast_key_bound_terms(kind, scorer, u, width, query_norms, fast_norms,
                                                           fast_magnitudes, chain)
        delta = (quadratic * c2 + linear) * c2 + constant
    return delta + rewrite if rewrite is not None else delta


@finite_bounds
def fast_key_bound_terms(kind: str, scorer, u: float, width: int, query_norms, fast_norms, fast_magnitudes,
                         chain: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, C) (B,) each: :func:`fast_key_bound` of dot and L2 keys as a polynomial in the
    candidate's norm bound C₂, δ = (A·C₂ + B)·C₂ + C, every coefficient >= 0; so a pass can bound
    each pair's own rounding from its own candidate's norm (the fused matrix pass narrows its
    windows pair by pair). The arguments are :func:`fast_key_bound`'s.

    dot: δ = γ(n_q + chain)·‖|q|‖₂·C₂. L2, the key 2 q̂·c - ‖c‖² - ‖q̂‖² with f = ‖q̂‖₂ and e the
    query's own error: δ = γ(chain + 2)(C₂² + 2fC₂) + η(f² + C₂²) + 2u(f + C₂)² + e(2(f + C₂) + e),
    η = u + 2γ_d(float64) the squared norms' rounding (scorers.squared_norms)."""
    own = gamma(scorer.query_rounding, u)
    chain = width if chain is None else chain
    fast_two = np.asarray(fast_norms[0], dtype=np.float64)
    zero = np.zeros_like(fast_two)
    if kind == "dot":
        return zero, gamma(scorer.query_rounding + chain, u) * np.asarray(query_norms[0], np.float64), zero
    if kind != "l2":
        raise ValueError(f"no polynomial bound for {kind!r} keys")
    g = gamma(chain + 2, u)
    error = own * np.asarray(fast_magnitudes[0], np.float64)
    norm_error = u + 2 * gamma(width, U64)
    quadratic = zero + (g + norm_error + 2 * u)
    linear = 2 * g * fast_two + 4 * u * fast_two + 2 * error
    constant = (norm_error + 2 * u) * fast_two ** 2 + 2 * error * fast_two + error ** 2
    return quadratic, linear, constant


@finite_bounds
def centred_l2_bound_terms(u: float, width: int, chain: int, shifted, centre: float, exact_two, exact_error
                           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, C) (B,) each, δ = (A·C₂ + B)·C₂ + C: the bound on |fast key - exact key| of L2 keys
    (-‖Q - c‖², Q the exact query) counted centred on a vector m shared by every row (the fused
    matrix pass): key = fl(fl(2·D + T) + R) with D the chain-ordered dot product of ŝ = fl(Q̃ - m)
    and c (Q̃ the float64 query, m float32), T = fl(2 m·c - ‖c‖²) and R = -fl(‖Q̃‖²), both summed
    in float64 and rounded once. The query's own fast rounding never enters; the dot product's
    error scales with ‖ŝ‖, not ‖Q‖ (a relation vector every row carries drops out).

    :param shifted: (B,) bounds on ‖ŝ‖₂; ``centre`` a bound on ‖m‖₂; ``exact_two`` (B,) bounds on
        ‖Q̃‖₂; ``exact_error`` (B,) bounds on ‖Q̃ - Q‖₂ (the float64 query's own rounding).

    The terms, with s, M, F, e those norms, η = γ_{d+2} in float64:
    2(γ_chain + γ₂)·s·C₂ + 2e·C₂ (the dot product: its sum, ŝ's double rounding, Q̃'s error);
    (u + 2η)(2M·C₂ + C₂²) (T's); (u + 2η)F² + e(2F + e) (R's); and the two additions' roundings,
    u|2D + T| and u|fl(2D + T) + R|, with |2D + T| <= 2s·C₂(1 + γ_chain) + (1 + 2u)(2M·C₂ + C₂²)
    and |R| <= (1 + 2u)F²."""
    s = np.asarray(shifted, np.float64)
    f = np.asarray(exact_two, np.float64)
    e = np.asarray(exact_error, np.float64)
    eta = gamma(width + 2, U64)
    g = gamma(chain, u)
    rounded = u + 2 * eta
    sum_linear = 2 * s * (1 + g) + (1 + 2 * u) * 2 * centre  # |2D + T| <= sum_linear·C₂ + (1 + 2u)·C₂²
    sum_quadratic = 1 + 2 * u
    first, second = u, u * (1 + u)  # the first addition's rounding, the second's (|V| <= (1 + u)|2D + T|)
    quadratic = np.zeros_like(s) + rounded + (first + second) * sum_quadratic
    linear = 2 * (g + gamma(2, u)) * s + 2 * e + rounded * 2 * centre + (first + second) * sum_linear
    constant = rounded * f ** 2 + e * (2 * f + e) + u * (1 + 2 * u) * f ** 2
    return quadratic, linear, constant


@finite_bounds
def float64_key_bound(kind: str, scorer, grid_bits: Optional[int], key: np.ndarray, width: int, query_norms,
                      candidate_norms) -> np.ndarray:
    """(P,) float64 numpy bound on |key - exact key| for keys computed in float64 (:func:`pair_keys`)
    from float64 queries and candidate vectors of ``width`` components; 0 where float64
    computed the key without rounding (the grid criterion, with the tables' ``grid_bits``).

    :param query_norms: bounds (‖|q|‖₂, ‖|q|‖₁) (P,) on the queries' magnitudes;
        ``candidate_norms`` likewise. The bounds use only these norms (Cauchy-Schwarz and
        the triangle inequality), so they cost O(P): ‖e‖ <= γ_nq ‖|q|‖ + γ_nc ‖|c|‖ bounds
        the inputs' own error, and each computed difference x̂ is off by at most e + 2u|x̂|."""
    gq, gc = gamma(scorer.query_rounding, U64), gamma(scorer.candidate_rounding, U64)
    (q2, q1), (c2, c1) = query_norms, candidate_norms
    if kind == "dot":
        size = q2 * c2
        bound = gamma(scorer.query_rounding + scorer.candidate_rounding + width + 2, U64) * size
        degree = scorer.query_degree + 1
    elif kind == "l2":
        squared = -key
        length = np.sqrt(squared)
        off = gq * q2 + gc * c2 + 2 * U64 * length
        bound = off * (2 * length + off) + gamma(width + 2, U64) * squared
        size, degree = (q2 + c2) ** 2, 2 * scorer.query_degree
    elif kind == "l1":
        total = -key
        bound = gq * q1 + gc * c1 + gamma(width + 3, U64) * total
        size, degree = q1 + c1, scorer.query_degree
    else:
        # Σ(|x_re| + |x_im|) <= √2 Σ|x_k|: the differences' rounding, then the moduli's
        bound = gq * q1 + gc * c1 + gamma(width // 2 + 8, U64) * -key
        size, degree = None, None
    bound = 2 * bound + 4 * (width + scorer.query_rounding + 8) * 2.0 ** -1074
    if size is not None and grid_bits is not None and degree * grid_bits < 1000:
        with np.errstate(over="ignore"):  # a size beyond float64 is simply not on an exact grid
            exact = size * 2.0 ** (degree * grid_bits) < EXACT_GRID_LIMIT
        bound = np.where(exact, 0.0, bound)
    return bound


def exact_key(scorer, kind: str, anchor: np.ndarray, relation: np.ndarray, side: str, candidate: np.ndarray):
    """The exact key (a Decimal) of one query (its stored anchor and relation rows, float64) on
    ``side`` against one stored candidate row, by the scorer's own formulas in exact decimal
    arithmetic (an operation that would round raises decimal.Inexact); dot, L2 and L1 kinds."""
    with decimal.localcontext(DECIMAL_EXACT):
        relation_row = _decimals(relation)[None]
        query = scorer.query_formula(_decimals(anchor)[None], relation_row, side, np.subtract)[0]
        vector = scorer.candidate_formula(_decimals(candidate)[None], side, relation_row, np.subtract)[0]
        return _exact_key(kind, query, vector)


QUERY_CODES = {"add": 0, "sub": 1, "mul": 2, "cmul": 3, "cmul_conj": 4}  # the C kernel's formula codes


class QueryRows(NamedTuple):
    """:func:`query_rows` of B queries: float64 ``query`` vectors (B, d'), bounds ``norms``
    (‖|q|‖₂, ‖|q|‖₁) (B,) on the norms of their magnitudes, and, when the true answers' candidate
    vectors were given, their float64 keys ``true_key`` (B,) and norm bounds ``truth_norms``."""

    query: torch.Tensor
    norms: Tuple[torch.Tensor, torch.Tensor]
    true_key: Optional[torch.Tensor]
    truth_norms: Optional[Tuple[torch.Tensor, torch.Tensor]]


def query_rows(scorer, side: str, anchor_ids: torch.Tensor, relation_ids: torch.Tensor, kind: str = "dot",
               truths: Optional[torch.Tensor] = None, library=LOOKUP, code=LOOKUP) -> Optional[QueryRows]:
    """The ``side`` queries with anchors ``anchor_ids`` and relations ``relation_ids`` (B,),
    computed by the C kernel as ``scorer.query_formula`` computes them (:meth:`~openbench.
    evaluation.scorers.EmbeddingScorer.query_code`), and with ``truths`` (B, d') (the true answers'
    candidate vectors, in the tables' real precision) their ``kind`` keys, in the same pass.
    None where the scorer has no code, the kernel is not built or the tables are not
    float32/float64 (or complex) on the CPU. ``library`` as for :func:`norm_bounds`; ``code``:
    ``scorer.query_code(side)`` where the caller has it."""
    code = scorer.query_code(side) if code is LOOKUP else code
    library = COUNTING_LIBRARY.get() if library is LOOKUP else library
    entities, relations = scorer.entities, scorer.relations
    if code is None or library is None or entities.device.type != "cpu" or relations.device.type != "cpu":
        return None
    complex_rows = QUERY_CODES[code] >= 3
    if complex_rows != entities.is_complex() or entities.dtype != relations.dtype:
        return None
    if complex_rows:
        entities, relations = torch.view_as_real(entities), torch.view_as_real(relations)
    if entities.dtype not in (torch.float32, torch.float64) or not (entities.is_contiguous()
                                                                   and relations.is_contiguous()):
        return None
    count, width = anchor_ids.shape[0], scorer.entities.shape[1]
    out_width = 2 * width if complex_rows else width
    if truths is not None and (kind not in KEY_KINDS or truths.dtype != entities.dtype
                               or tuple(truths.shape) != (count, out_width)):
        return None
    anchor_ids, relation_ids = anchor_ids.cpu().contiguous(), relation_ids.cpu().contiguous()
    if count and not (0 <= int(anchor_ids.min()) and int(anchor_ids.max()) < entities.shape[0]
                      and 0 <= int(relation_ids.min()) and int(relation_ids.max()) < relations.shape[0]):
        raise IndexError("exact ranks: an anchor or relation id outside the embedding tables")
    query = torch.empty((count, out_width), dtype=torch.float64)
    two, one, key, true_two, true_one = (torch.empty(count, dtype=torch.float64) for _ in range(5))
    truths = None if truths is None else truths.cpu().contiguous()
    function = library.openbench_query_rows_f32 if entities.dtype == torch.float32 else library.openbench_query_rows_f64
    if count:
        function(QUERY_CODES[code], entities.data_ptr(), entities.stride(0), relations.data_ptr(), relations.stride(0),
                 anchor_ids.data_ptr(), relation_ids.data_ptr(), count, width, query.data_ptr(), two.data_ptr(),
                 one.data_ptr(), KEY_KINDS.get(kind, 0), None if truths is None else truths.data_ptr(),
                 key.data_ptr(), true_two.data_ptr(), true_one.data_ptr())
    norms = _widened(two, one, out_width)
    if truths is None:
        return QueryRows(query, norms, None, None)
    return QueryRows(query, norms, key, _widened(true_two, true_one, out_width))


def fraction_bits(*tables: torch.Tensor, chunk: int = 1 << 20) -> Optional[int]:
    """The fewest binary fraction digits f such that every value of ``tables`` is a multiple of 2^-f
    (0 for integers); None when a value is not finite. Reads ``chunk`` values at a time."""
    bits = 0
    library = COUNTING_LIBRARY.get()
    for table in tables:
        flat = table.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        if (library is not None and flat.device.type == "cpu" and flat.dtype in (torch.float32, torch.float64)
                and flat.is_contiguous()):  # one pass over the bit patterns
            function = (library.openbench_fraction_bits_f32 if flat.dtype == torch.float32
                        else library.openbench_fraction_bits_f64)
            found = int(function(flat.data_ptr(), flat.numel())) if flat.numel() else 0
            if found < 0:
                return None
            bits = max(bits, found)
            continue
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


class TableSummary(NamedTuple):
    """What evaluation needs of a candidate table once, from :func:`table_summary`: bounds
    ``norm2``/``norm1`` (N,) float64 on each row's norms (as :func:`norm_bounds`), the
    ``largest`` magnitude (NaN when a value is NaN) and the table's :func:`fraction_bits`."""

    norm2: torch.Tensor
    norm1: torch.Tensor
    largest: float
    bits: Optional[int]


def table_summary(table: torch.Tensor) -> TableSummary:
    """:class:`TableSummary` of the rows of ``table`` (N, d): one read of the table by the C
    kernel (rows split over threads), else :func:`norm_bounds` in chunks, a min/max pass and
    :func:`fraction_bits`."""
    rows, width = table.shape
    library = COUNTING_LIBRARY.get()
    if (library is None or table.device.type != "cpu" or table.dtype not in (torch.float32, torch.float64)
            or not rows or (width > 1 and table.stride(1) != 1)):
        norm2 = torch.zeros(rows, dtype=torch.float64, device=table.device)
        norm1 = torch.zeros_like(norm2)
        step = max(1, NORM_CHUNK_ELEMENTS // max(1, width))
        for start in range(0, rows, step):
            norm2[start:start + step], norm1[start:start + step] = norm_bounds(table[start:start + step])
        if not table.numel():
            largest = 0.0
        else:
            extremes = torch.aminmax(table)
            low, high = float(extremes.min), float(extremes.max)
            largest = float("nan") if np.isnan(low) or np.isnan(high) else max(-low, high)
        return TableSummary(norm2, norm1, largest, fraction_bits(table.contiguous()))
    norm2, norm1 = torch.empty(rows, dtype=torch.float64), torch.empty(rows, dtype=torch.float64)
    function = library.openbench_table_summary_f32 if table.dtype == torch.float32 else library.openbench_table_summary_f64
    parts: list = []

    def run(bounds):
        largest, bits = ctypes_double(), ctypes_int64()
        function(table.data_ptr(), table.stride(0) if rows > 1 else width, width, bounds[0], bounds[1],
                 norm2.data_ptr(), norm1.data_ptr(), ctypes_address(largest), ctypes_address(bits))
        parts.append((largest.value, bits.value))

    split_rows(rows, rows * width, run)
    largest = float("nan") if any(np.isnan(part[0]) for part in parts) else max(part[0] for part in parts)
    bits = None if any(part[1] < 0 for part in parts) else max(part[1] for part in parts)
    two, one = _widened(norm2, norm1, width)
    return TableSummary(two, one, largest, bits)


@dataclass
class _Queries:
    """One batch side's queries in float64, from :meth:`ExactRanks.prepare` for its re-scoring.
    Rows are the batch's: the query vectors (B, d'), bounds on the norms of their magnitudes, the
    true answers' stored rows (B, ...), their candidate vectors in the tables' precision (B, d')
    (None for a candidate formula that rounds), keys and bounds. The stored rows as real float64
    are made on demand (:meth:`rows`, :meth:`stored_truth`)."""

    scorer: Any
    anchor_ids: torch.Tensor
    relation_ids: torch.Tensor
    side: str
    true_rows: torch.Tensor
    truth: Optional[torch.Tensor] = None
    query: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    norms: Tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))
    true_key: np.ndarray = field(default_factory=lambda: np.empty(0))
    true_bound: np.ndarray = field(default_factory=lambda: np.empty(0))
    anchor: Optional[np.ndarray] = None
    relation: Optional[np.ndarray] = None
    true_stored: Optional[np.ndarray] = None

    def rows(self) -> Tuple[np.ndarray, np.ndarray]:
        """(anchor rows (B, w), relation rows (B, ...)) as real float64."""
        if self.anchor is None or self.relation is None:
            scorer = self.scorer
            self.anchor = real_rows(torch.index_select(scorer.entities, 0, self.anchor_ids))
            self.relation = real_rows(torch.index_select(scorer.relations, 0, self.relation_ids))
        return self.anchor, self.relation

    def stored_truth(self) -> np.ndarray:
        """The true answers' stored rows (B, w) as real float64."""
        if self.true_stored is None:
            self.true_stored = real_rows(self.true_rows)
        return self.true_stored


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
    """Exact counting for one :class:`~openbench.models.scorers.EmbeddingScorer`.

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
        self.tiny = subnormal_spacing(dtype)
        self.lower_is_better = lower_is_better
        self._tables = (scorer.entities, scorer.relations)
        self._grid_bits: Optional[int] = None
        self._grid_known = False
        self.reduce_max = reduce_max
        self._scorer = scorer  # whose candidate rows this process holds: entities entity_offset ..
        self.entity_offset = entity_offset
        self._norms: dict = {}
        self._summaries: dict = {}
        self._candidate_tables: Dict[str, torch.Tensor] = {}  # per side, the scorer's candidate vectors
        self._queries: Optional[_Queries] = None
        self._window: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None
        self.stats = ExactStats()
        self.library = COUNTING_LIBRARY.get()  # the C helpers, resolved once for this evaluation

    @property
    def grid_bits(self) -> Optional[int]:
        """:func:`fraction_bits` of the scorer's tables, computed on first use: the entity table's
        from its candidate vectors' summary (the stored values, rearranged), the relations' apart."""
        if not self._grid_known:
            entity_bits = self.summary("tail").bits
            relation_bits = fraction_bits(self._tables[1])
            self._grid_bits = None if entity_bits is None or relation_bits is None else max(entity_bits, relation_bits)
            self._grid_known = True
        return self._grid_bits

    def ready(self, sides) -> Dict[str, float]:
        """Read, for each of ``sides``, what every batch's window needs of the candidate table (its
        summary, the largest norms over all ranks' candidates, the tables' grid) once, before the
        first batch; {side: :meth:`candidate_max`}."""
        self.grid_bits  # noqa: B018 (computed and kept on first use)
        for side in sides:
            self.candidate_norms(side)
        return {side: self.candidate_max(side) for side in sides}

    # -- step 1: the window ----------------------------------------------------------------
    def summary(self, side: str) -> TableSummary:
        """:func:`table_summary` of this process's candidate vectors of ``side`` (the evaluator's
        scorer's, never a query scorer's): one pass over the table, shared by the sides whose
        candidate vectors are the same tensor."""
        candidates = self.candidate_table(side)
        key = (candidates.data_ptr(), tuple(candidates.shape), tuple(candidates.stride()), candidates.dtype)
        if key not in self._summaries:
            self._summaries[key] = table_summary(candidates)
        return self._summaries[key]

    def candidate_table(self, side: str) -> torch.Tensor:
        """(E, d') this process's candidate vectors of ``side`` (the evaluator's scorer's), read
        from the scorer once (at :meth:`ready`) and kept for every batch's settling."""
        if side not in self._candidate_tables:
            self._candidate_tables[side] = self._scorer._cached_candidates(side)
        return self._candidate_tables[side]

    def entity_norms(self, side: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """Bounds (‖c‖₂ (E,), ‖c‖₁ (E,)) in float64 on the norms of this process's candidate vectors
        of ``side`` (from :meth:`summary`)."""
        found = self.summary(side)
        return found.norm2, found.norm1

    def candidate_max(self, side: str) -> float:
        """The largest magnitude of this process's candidate vectors of ``side`` (NaN: one is NaN)."""
        return self.summary(side).largest

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

    def finish(self, true_scores: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(lows (B,), highs (B,)) of the last :meth:`prepare`, on the device of ``true_scores``
        (B,), the true answers' fast keys: rows the fast pass computes without rounding get the fast
        key itself (a point window: the fast counts are exact there)."""
        if self._window is None:
            raise RuntimeError("finish() needs the prepare() of the same batch and side first")
        lows, highs, computed_exactly = self._window
        computed_exactly = computed_exactly.to(true_scores.device)
        lows = torch.where(computed_exactly, true_scores, lows.to(true_scores.device))
        highs = torch.where(computed_exactly, true_scores, highs.to(true_scores.device))
        return lows, highs

    def overflowed(self, true_scores: torch.Tensor) -> torch.Tensor:
        """(B,) bool: the true answer's fast key (``true_scores``) is not finite while its float64
        key of the last :meth:`prepare` is (the embeddings' precision overflowed)."""
        queries = self._require_queries()
        finite = torch.from_numpy(np.isfinite(queries.true_key)).to(true_scores.device)
        return finite & ~torch.isfinite(true_scores)

    def prepare(self, scorer, batch: torch.Tensor, side: str, queries: torch.Tensor, true_rows: torch.Tensor) -> None:
        """:meth:`prepare_queries` of the ``side`` queries of ``batch`` (B, 3), their inputs read
        from ``scorer`` (the one that built ``queries`` (B, d')); ``true_rows`` (B, ...): the true
        answers' stored entity rows."""
        self.prepare_queries(scorer, side, scorer.exact_queries(batch, side, true_rows), queries)

    def side_window(self, scorer, side: str, given: ExactQueries, queries: torch.Tensor, true_scores: torch.Tensor,
                    excluding: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """(lows (B,), highs (B,)) of B ``side`` queries in one call: :meth:`prepare_queries` of
        ``given`` and ``queries`` (B, d'), then :meth:`finish` with their fast true keys
        ``true_scores`` (B,). ``excluding``: some candidates are written the fill value ±inf (typed
        candidates, an entity scope), which a true key that overflowed to ±inf cannot be told
        from: such a batch is refused."""
        self.prepare_queries(scorer, side, given, queries)
        return self.finish_checked(true_scores, excluding)

    def finish_checked(self, true_scores: torch.Tensor, excluding: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """:meth:`finish`, a batch refused first where ``excluding`` (see :meth:`side_window`) and a
        true key (B,) overflowed the embeddings' precision."""
        if excluding and bool(self.overflowed(true_scores).any()):
            raise ScoreError("typed candidates with exact ranks: some scores overflow the embeddings' precision "
                             f"({self._tables[0].dtype}); give the embeddings as float64, or use --fast")
        return self.finish(true_scores)

    def prepare_queries(self, scorer, side: str, given: ExactQueries, queries: torch.Tensor) -> None:
        """:meth:`windows` of the queries, refused in one line where a bound or a key is not finite:
        naming the first non-finite stored value where there is one (:mod:`openbench.models.finite`),
        else the first query whose bound is not."""
        try:
            self.windows(scorer, side, given, queries)
        except UnboundedKeys as error:
            refuse_nonfinite(self._scorer)
            refuse_nonfinite(scorer)
            raise UnboundedKeys(f"the window of the {side} queries' answers", error.row) from None

    def windows(self, scorer, side: str, given: ExactQueries, queries: torch.Tensor) -> None:
        """The window of each of B ``side`` queries (whose candidates are ``side``'s), from what the scorer gave of them (``given``, :class:`~
        openbench.models.scorers.ExactQueries`) and their fast query vectors ``queries`` (B, d');
        :meth:`finish` completes it with the true answers' fast keys. A candidate whose fast key
        lies beyond [low, high] compares with the true answer as it would in exact arithmetic.

        The window is centred on the true answer's key recomputed in float64 (off by a bound far
        below float32's), and is as wide as one fast score's error bound δ. With n roundings per
        query component (``query_rounding``), |q| the query's magnitude (its formula on absolute
        values), e = γ_n |q| the query's own error, q̂ the computed query, C₂ and C₁ the largest
        candidate norms:

        * dot products: δ = γ_{n+d} ‖|q|‖₂ C₂ (Cauchy-Schwarz on Σ |q_k c_k|);
        * L1 distances: δ = γ_{d+2} (‖q̂‖₁ + C₁) + ‖e‖₁; sums of moduli: γ_{d+4} instead;
        * L2 distances, on the key -D = 2 q̂·c - ‖c‖² - ‖q̂‖² the block holds (``addmm`` with the
          candidates' squared norms, then one subtraction of the query's; both norms summed in
          float64 and rounded once, off by η ≤ u + 2γ_d(float64) relatively):
          δ_D = γ_{d+2} (C₂² + 2 ‖q̂‖₂ C₂) + η (‖q̂‖₂² + C₂²) + 2u (‖q̂‖₂ + C₂)²
          + ‖e‖₂ (2 (‖q̂‖₂ + C₂) + ‖e‖₂), the GEMM's sum taken in any order with the candidate's
          norm as one more term.

        A scorer whose fast pass scores a rewritten formula adds the difference
        (:meth:`~openbench.models.scorers.EmbeddingScorer.rewrite_error`), takes e from the
        magnitude of the query the fast pass computes (``fast_query_formula``), and never counts
        its fast keys as exact; subnormal results add 4·(d + n + 8) times the smallest subnormal.
        """
        dtype = queries.dtype  # the block's: keys are computed in the queries' precision
        u = self.unit
        anchor_ids, relation_ids, used_side = given.anchor_ids, given.relation_ids, given.side
        inputs = _Queries(scorer, anchor_ids, relation_ids, used_side, given.true_rows)
        inputs.truth = given.truth  # None where the candidate formula rounds (else the stored values, rearranged)
        built = query_rows(scorer, used_side, anchor_ids, relation_ids, self.kind, inputs.truth, self.library,
                           given.code)
        if built is None:
            anchor, relation = inputs.rows()
            query = _tensor(scorer.query_formula(anchor, relation, used_side, np.subtract))
            norms = norm_bounds(_tensor(scorer.query_formula(np.abs(anchor), np.abs(relation), used_side, np.add)),
                                self.library)
            built = QueryRows(query, norms, None, None)
        inputs.query = built.query
        # O(B) arithmetic in numpy: fewer overheads
        query_norms = inputs.norms = (built.norms[0].numpy(), built.norms[1].numpy())
        if built.true_key is not None and built.truth_norms is not None:
            true_key, truth_norms = built.true_key.numpy(), (built.truth_norms[0].numpy(), built.truth_norms[1].numpy())
        else:
            true_key, truth_norms = self._true_keys(scorer, inputs)
        true_bound = self._bound(scorer, true_key, built.query.shape[1], query_norms, truth_norms)
        # what resolve needs of these queries, kept for the blocks of this batch and side
        inputs.true_key, inputs.true_bound = true_key, true_bound
        self._queries = inputs
        width = queries.shape[1]
        # the computed queries' norms (their fast values, exactly in float64)
        fast_two, fast_one = (n.numpy() for n in norm_bounds(queries.detach().cpu(), self.library))
        c2, c1 = self.candidate_norms(side)
        rewrite, fast_magnitudes = None, query_norms
        if given.rewrites:
            anchor, relation = inputs.rows()
            rewrite = scorer.rewrite_error(torch.from_numpy(relation), used_side, torch.from_numpy(anchor),
                                           (c2, c1)).numpy()
            # the fast pass rounds the rewritten query: its own error is relative to that one's magnitude
            rewritten = scorer.fast_query_formula(np.abs(anchor), np.abs(relation), used_side, np.add)
            rewritten_two, rewritten_one = norm_bounds(_tensor(rewritten), self.library)
            fast_magnitudes = (rewritten_two.numpy(), rewritten_one.numpy())
        delta = fast_key_bound(self.kind, scorer, u, width, query_norms, (fast_two, fast_one), fast_magnitudes,
                               (c2, c1), rewrite)
        margin = _window_margin(delta, true_bound, true_key, 4 * (width + scorer.query_rounding + 8) * self.tiny)
        lows, highs = true_key - margin, true_key + margin
        lows, highs = round_outwards(lows, highs, dtype)
        # rows the fast pass computes without any rounding (values on a coarse enough grid): their
        # fast counts are exact, ties included, and the window is the true score itself
        computed_exactly = self._fast_is_exact(scorer, query_norms, c2, c1, dtype)
        if rewrite is not None:  # exactly computed, but a rewritten formula: its order need not be the definition's
            computed_exactly[:] = False
        # (a fast key that overflowed while the float64 one did not is re-scored like any other)
        self._window = (lows, highs, torch.from_numpy(computed_exactly))

    def _require_queries(self) -> _Queries:
        """The queries of the last :meth:`prepare` (resolve and finish need the same batch and side)."""
        if self._queries is None:
            raise RuntimeError("resolve() needs the prepare() of the same batch and side first")
        return self._queries

    def _true_keys(self, scorer, inputs: _Queries) -> Tuple[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
        """(true keys (B,), bounds on the norms of the true answers' candidate magnitudes) from the
        stored rows in float64, where :func:`query_rows` did not compute them."""
        true_stored = inputs.stored_truth()
        relation = inputs.rows()[1] if scorer.candidate_rounding else None
        truth = _tensor(scorer.candidate_formula(true_stored, inputs.side, relation, np.subtract))
        everyone = torch.arange(truth.shape[0])
        keys = pair_keys(self.kind, inputs.query, truth, everyone, everyone, library=self.library)
        norms = (keys.norm2, keys.norm1)
        if scorer.candidate_rounding:
            norms = self._magnitude_norms(scorer, true_stored, inputs.side, relation)
        return keys.keys.numpy(), (norms[0].numpy(), norms[1].numpy())

    def _fast_is_exact(self, scorer, query_norms: Tuple[np.ndarray, np.ndarray], c2: float, c1: float,
                       dtype) -> np.ndarray:
        """(B,) bool: the fast pass computes every key of the row exactly (the grid criterion
        with the fast precision's significand, on the norms of the queries' magnitudes; dot
        products, squared L2 distances and L1 distances, not sums of moduli)."""
        rows = query_norms[0].shape[0]
        if self.grid_bits is None or self.kind not in ("dot", "l2", "l1"):
            return np.zeros(rows, dtype=bool)
        if self.kind == "dot":
            size, degree = query_norms[0] * c2, scorer.query_degree + 1
        elif self.kind == "l2":  # ‖q‖² + ‖c‖² - 2 q·c: every partial sum below (‖|q|‖ + C₂)²
            size, degree = (query_norms[0] + c2) ** 2, 2 * scorer.query_degree
        else:
            size, degree = query_norms[1] + c1, scorer.query_degree
        return np.broadcast_to(on_exact_grid(size, degree, self.grid_bits, dtype), (rows,)).copy()

    # -- one batch: the window, the count, the settling -------------------------------------
    def count_batch(self, scorer, side: str, given: ExactQueries, queries: torch.Tensor, true_scores: torch.Tensor,
                    blocks: Blocks, plan: TallyPlan,
                    candidates: "SideCandidates") -> Tuple[torch.Tensor, torch.Tensor, int]:
        """(n_greater (B,), n_equal (B,), the most window columns a fused count recorded in one row)
        of B ``side`` queries, exact, in one call: the window (:meth:`side_window` of ``given``,
        ``queries`` (B, d') and the fast true keys ``true_scores`` (B,)), the count of ``blocks``
        against it (:func:`~openbench.evaluation.counting.tally.count_blocks` as ``plan`` says), and
        the settling of the candidates left inside it (:meth:`settle_pairs`: once, of the pairs a
        fused count recorded; block by block, as the block-by-block tally counts each block).
        ``scorer`` built the queries (an entity shard's query scorer); ``candidates`` are the
        side's (:class:`~openbench.evaluation.candidates.SideCandidates`)."""
        window = self.side_window(scorer, side, given, queries, true_scores, candidates.exclusion is not None)

        def settle(counts, pair_rows, pair_ids):  # a block's pairs, or a fused count's of the batch
            return self.settle_pairs(counts, window, pair_rows, pair_ids, candidates.true_ids, candidates.filter_pairs,
                                     plan.num_entities, scorer)

        tallied = count_blocks(blocks, plan, candidates, true_scores, window, settle)
        if tallied.pairs is None:  # settled block by block
            return tallied.greater, tallied.equal, tallied.most_recorded
        greater, equal = settle((tallied.greater, tallied.equal), *tallied.pairs)
        return greater, equal, tallied.most_recorded

    # -- steps 2 to 4: settle the undecided ------------------------------------------------
    def settle_pairs(self, counts: Tuple[torch.Tensor, torch.Tensor], window: Tuple[torch.Tensor, torch.Tensor],
                     pair_rows: torch.Tensor, pair_ids: torch.Tensor, true_ids: torch.Tensor,
                     filter_pairs: Tuple[torch.Tensor, torch.Tensor], num_entities: int,
                     scorer) -> Tuple[torch.Tensor, torch.Tensor]:
        """(n_greater, n_equal) (B,), exact, from ``counts`` (beyond the window, inside it) (B,)
        and every candidate inside a window that is not a point: ``pair_rows`` (P,) their batch
        rows, ``pair_ids`` (P,) their global entity ids (each pair once; the true and the known
        answers among them only where the window reaches the worst value they were given; pairs of
        rows whose window is a point, where given, are left out: their ties are exact)."""
        greater, inside = counts
        lows, highs = window
        point = lows == highs  # computed exactly: the ties are exact
        exact_ties = torch.where(point, inside, torch.zeros_like(inside))
        rows = ((inside > 0) & ~point).nonzero().squeeze(1)
        if not rows.numel():
            return greater, exact_ties
        if pair_rows.numel():  # a point window's candidates, where given, are exact ties already
            undecided = ~point.to(pair_rows.device)[pair_rows]
            pair_rows, pair_ids = pair_rows[undecided], pair_ids[undecided]
        # count_block gave the true and the known answers the worst value: inside a window only
        # where the window reaches it (an unbounded one); drop them there
        worst = float("inf") if self.lower_is_better else float("-inf")
        if bool(((lows[rows] <= worst) & (highs[rows] >= worst)).any()):
            keep = pair_ids != true_ids[pair_rows]
            filter_rows, filter_cols = filter_pairs
            if filter_rows.numel():  # (row, entity) keys looked up in the sorted filter keys
                known = (filter_rows * num_entities + filter_cols).sort().values
                keys = pair_rows * num_entities + pair_ids
                found = known[torch.searchsorted(known, keys).clamp_(max=known.numel() - 1)]
                keep &= found != keys
            pair_rows, pair_ids = pair_rows[keep], pair_ids[keep]
        expected = int(inside[rows].sum())
        if pair_rows.numel() != expected:  # both count the same set: a mismatch is a bug
            raise AssertionError(f"exact ranks: {pair_rows.numel()} undecided pairs found, {expected} counted")
        better, same = self.resolve(scorer, pair_rows, pair_ids - self.entity_offset)
        size = inside.shape[0]
        greater = greater + torch.bincount(pair_rows, weights=better.double().to(pair_rows.device),
                                           minlength=size).to(torch.long)
        tied = torch.bincount(pair_rows, weights=same.double().to(pair_rows.device), minlength=size).to(torch.long)
        return greater, exact_ties + tied

    def resolve(self, scorer, pair_rows: torch.Tensor, local_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(better (P,), tied (P,)) bool: each candidate against its query's true answer, exactly,
        for the queries of the last :meth:`prepare`.

        :param pair_rows: (P,) batch row of each pair; ``local_ids`` (P,) the candidates' rows in
            this process's entity table (global id - ``entity_offset``).

        Where the scorer's candidate vectors are its stored rows (``candidate_rounding`` 0), the
        keys are read straight from the evaluator's candidate table (:func:`pair_keys`), and a
        candidate vector equal to the true answer's is a tie; otherwise the stored rows are
        gathered and the candidate formula applied in float64 first."""
        self.stats.rescored += int(pair_rows.numel())
        queries = self._require_queries()
        position = pair_rows.cpu()
        table = None if scorer.candidate_rounding else self.candidate_table(queries.side)
        better = torch.zeros(position.numel(), dtype=torch.bool)
        tied = torch.zeros(position.numel(), dtype=torch.bool)
        step = max(1, PAIR_CHUNK_ELEMENTS // max(1, queries.query.shape[1]))
        for first in range(0, position.numel(), step):
            at, ids = position[first:first + step], local_ids[first:first + step]
            stored = None if table is not None else real_rows(self._scorer.entities[ids])
            keys, norms, identical = self._pair_keys(scorer, table, at, ids, stored)
            where = at.numpy()
            keys, identical = keys.numpy(), identical.numpy()
            bound = self._bound(scorer, keys, queries.query.shape[1], tuple(n[where] for n in queries.norms),
                                tuple(n.numpy() for n in norms))
            difference, margin = keys - queries.true_key[where], bound + queries.true_bound[where]
            up = (difference > margin) & ~identical
            same = identical | ((margin == 0) & (difference == 0))
            open_ = ~(up | same | (difference < -margin))
            self.stats.identical += int(identical.sum())
            self.stats.float64 += int((~open_ & ~identical).sum())
            for index in np.flatnonzero(open_).tolist():
                row = int(at[index])
                candidate = stored[index] if stored is not None else real_rows(self._scorer.entities[ids[index]])
                anchor, relation = queries.rows()
                sign = self._exact_sign(scorer, anchor[row], relation[row], queries.side, candidate,
                                        queries.stored_truth()[row])
                up[index], same[index] = sign > 0, sign == 0
            if self.lower_is_better:
                up = ~(up | same)
            better[first:first + step], tied[first:first + step] = torch.from_numpy(up), torch.from_numpy(same)
        device = pair_rows.device
        return better.to(device), tied.to(device)

    def _pair_keys(self, scorer, table: Optional[torch.Tensor], at: torch.Tensor, ids: torch.Tensor,
                   stored: Optional[np.ndarray]):
        """(keys (P,), (‖|c|‖₂, ‖|c|‖₁) (P,), identical (P,)) of the pairs (batch row ``at``, local
        entity ``ids``): from the candidate ``table``, or from the ``stored`` rows (P, w) float64."""
        queries = self._require_queries()
        if table is not None:
            keys, two, one, identical = pair_keys(self.kind, queries.query, table, at, ids.to(table.device),
                                                  queries.truth, self.library)
            return keys, (two, one), identical
        assert stored is not None  # no candidate table: the stored rows
        count = stored.shape[0]
        relation = queries.rows()[1][at.numpy()] if scorer.candidate_rounding else None
        vectors = _tensor(scorer.candidate_formula(stored, queries.side, relation, np.subtract))
        keys, two, one, _ = pair_keys(self.kind, queries.query, vectors, at, torch.arange(count), library=self.library)
        norms = (two, one)
        if scorer.candidate_rounding:
            norms = self._magnitude_norms(scorer, stored, queries.side, relation)
        flat = stored.reshape(count, -1)
        truth = queries.stored_truth()[at.numpy()]
        identical = torch.from_numpy((flat == truth.reshape(flat.shape)).all(axis=1))
        return keys, norms, identical

    def _magnitude_norms(self, scorer, rows: np.ndarray, side: str, relation: Optional[np.ndarray]):
        """Bounds (‖|c|‖₂ (P,), ‖|c|‖₁ (P,)) on the norms of the candidates' magnitudes: their
        formula on absolute values (which bounds the rounding of computing them)."""
        assert relation is not None  # only formulas that round read the relation rows
        return norm_bounds(_tensor(scorer.candidate_formula(np.abs(rows), side, np.abs(relation), np.add)),
                           self.library)

    def _bound(self, scorer, key: np.ndarray, width: int, query_norms, candidate_norms) -> np.ndarray:
        """:func:`float64_key_bound` of this scorer's kind and tables' grid."""
        return float64_key_bound(self.kind, scorer, self.grid_bits, key, width, query_norms, candidate_norms)

    def _exact_sign(self, scorer, anchor: np.ndarray, relation: np.ndarray, side: str, candidate: np.ndarray,
                    truth: np.ndarray) -> int:
        """sign(key(candidate) - key(truth)) for one query, in exact decimal arithmetic; the
        candidate and the truth are stored entity rows."""
        self.stats.decimal += 1
        try:
            if self.kind == "moduli":
                with decimal.localcontext(DECIMAL_EXACT):
                    relation_row = _decimals(relation)[None]
                    query = scorer.query_formula(_decimals(anchor)[None], relation_row, side, np.subtract)[0]
                    candidate, truth = (scorer.candidate_formula(_decimals(row)[None], side, relation_row,
                                                                 np.subtract)[0] for row in (candidate, truth))
                return self._moduli_sign(query, candidate, truth)
            with decimal.localcontext(DECIMAL_EXACT):
                difference = (exact_key(scorer, self.kind, anchor, relation, side, candidate)
                              - exact_key(scorer, self.kind, anchor, relation, side, truth))
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


@finite_bounds
def _window_margin(delta: np.ndarray, true_bound: np.ndarray, true_key: np.ndarray, subnormal: float) -> np.ndarray:
    """(B,) the half-width of each window around its true key (B,): the fast keys' bound ``delta``
    (B,) widened for its own float64 evaluation, the true key's float64 bound (B,), the
    ``subnormal`` term and the true key's own rounding; a true key that is not finite is refused."""
    return widened(delta) + true_bound + subnormal + 4 * U64 * np.abs(true_key)


def _tensor(values: np.ndarray) -> torch.Tensor:
    """A float64 numpy array as a contiguous torch tensor (shared memory where already contiguous)."""
    return torch.from_numpy(np.ascontiguousarray(values))


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
