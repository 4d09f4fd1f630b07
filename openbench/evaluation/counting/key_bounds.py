"""Rounding bounds of exact ranks' keys: how far a key computed in floating point may lie from the
exact key, for the fast pass's keys (:func:`fast_key_bound`, its polynomial form
:func:`fast_key_bound_terms` and the matrix's centred L2 form :func:`centred_l2_bound_terms`), for
float64 keys (:func:`float64_key_bound`) and for a window's half-width (:func:`window_margin`).
Every bound is checked finite (:func:`finite_bounds`): a bound that is not is :class:`UnboundedKeys`,
never a window that decides nothing. The arithmetic facts they rest on live in
:mod:`openbench.evaluation.counting.rounding`; :mod:`openbench.evaluation.counting.exact` explains
the windows they build."""
from __future__ import annotations

import functools
from typing import Callable, Optional, Tuple

import numpy as np

from openbench.errors import ScoreError
from openbench.evaluation.counting.rounding import U64, gamma, widened

__all__ = ["EXACT_GRID_LIMIT", "UnboundedKeys", "finite_bounds", "fast_key_bound", "fast_key_bound_terms",
           "centred_l2_bound_terms", "float64_key_bound", "window_margin"]

# float64 computes a key exactly when its abs-evaluation, on the values' common grid, stays below
# 2**50: three bits below float64's 53 leave room for SimplE's ½ and L2's factor 2
EXACT_GRID_LIMIT = 2.0 ** 50


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


@finite_bounds
def window_margin(delta: np.ndarray, true_bound: np.ndarray, true_key: np.ndarray, subnormal: float) -> np.ndarray:
    """(B,) the half-width of each window around its true key (B,): the fast keys' bound ``delta``
    (B,) widened for its own float64 evaluation, the true key's float64 bound (B,), the
    ``subnormal`` term and the true key's own rounding; a true key that is not finite is refused."""
    return widened(delta) + true_bound + subnormal + 4 * U64 * np.abs(true_key)
