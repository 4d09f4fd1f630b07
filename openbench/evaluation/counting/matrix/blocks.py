"""The keys of a block of rows against every column: :class:`_EmbeddingBlocks` (an embedding scorer's
fast keys, and what exact decisions need of them: float64 queries, norm bounds, the fast keys'
rounding bound), :class:`_ValueBlocks` (any scorer's values as computed), and :func:`_run_blocks`,
which computes each block's keys and counts its rows' parts on every core."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.exact_keys import exact_key, norm_bounds, pair_keys, query_rows, real_rows
from openbench.evaluation.counting.key_bounds import fast_key_bound, fast_key_bound_terms, float64_key_bound
from openbench.evaluation.counting.rounding import on_exact_grid, subnormal_slack, unit_roundoff
from openbench.evaluation.counting.matrix.core import MatrixSpec, _stored_rows
from openbench.models.scorers import candidate_scores, squared_norms

__all__ = []


def _matrix_columns(scorer, spec: MatrixSpec) -> torch.Tensor:
    """(S, d') the candidate vectors of the matrix's columns (read as a view where their ids run in
    order)."""
    return scorer.candidate_rows(_stored_rows(scorer.entities, spec.cols), spec.side).contiguous()


class _EmbeddingBlocks:
    """Fast keys of a block of rows against every column (:func:`candidate_scores`), and what the
    exact decisions need: float64 queries with their magnitude bounds, the columns' stored rows."""

    def __init__(self, scorer, spec: MatrixSpec, columns: Optional[torch.Tensor] = None):
        """``columns``: :func:`_matrix_columns` where the caller has them."""

        self.scorer, self.spec, self.kind = scorer, spec, scorer.kind
        side = spec.side
        self.columns = _matrix_columns(scorer, spec) if columns is None else columns
        self.squared = squared_norms(self.columns) if self.kind == "l2" else None
        triples = spec.queries(0, spec.shape[0])
        self.fast_queries = scorer.query_vectors(triples, side).contiguous()  # (D, d') the blocks' queries
        ids = triples[:, 0] if spec.rows_are_heads else triples[:, 2]
        relations = triples[:, 1]
        built = query_rows(scorer, side, ids, relations, self.kind)
        if built is None:

            anchor = real_rows(scorer.entities[ids])
            relation = real_rows(scorer.relations[relations])
            query = torch.from_numpy(np.ascontiguousarray(scorer.query_formula(anchor, relation, side, np.subtract)))
            magnitude = scorer.query_formula(np.abs(anchor), np.abs(relation), side, np.add)
            norms = norm_bounds(torch.from_numpy(np.ascontiguousarray(magnitude)))
        else:
            query, norms = built.query, built.norms
        self.exact_queries = query  # (D, d') float64
        self.query_norms = (norms[0].numpy(), norms[1].numpy())
        self.anchor_ids, self.relation_ids = ids, relations
        self.rewritten = scorer.rewrites(spec.side)  # the fast pass scores a rewritten query formula

    device = torch.device("cpu")  # where the blocks' keys are computed (:meth:`on`)
    _device_tables: Optional[tuple] = None  # the fast tables copied there

    def keys(self, first: int, last: int, out: torch.Tensor) -> torch.Tensor:

        queries, columns, squared = self.fast_tables()
        return candidate_scores(self.kind, queries[first:last], columns, squared, out, keys=True)

    def keys_at(self, rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """(B, S) the fast keys of the rows ``rows`` (B,) int64 (matrix indexes)."""

        queries, columns, squared = self.fast_tables()
        return candidate_scores(self.kind, queries[rows.to(queries.device)], columns, squared, out, keys=True)

    def fast_tables(self) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """(queries, columns, squared norms) of the fast pass on :attr:`device` (copied there once)."""
        if self.device.type == "cpu":
            return self.fast_queries, self.columns, self.squared
        if self._device_tables is None:
            self._device_tables = tuple(None if t is None else t.to(self.device)
                                        for t in (self.fast_queries, self.columns, self.squared))
        return self._device_tables

    def on(self, device: torch.device) -> "_EmbeddingBlocks":
        """The same blocks whose keys are computed on ``device`` (the exact steps stay on the host)."""
        other = object.__new__(_EmbeddingBlocks)
        other.__dict__.update(self.__dict__)
        other.device, other._device_tables = device, None
        return other

    def in_float64(self) -> "_EmbeddingBlocks":
        """The same matrix whose fast pass runs in float64 from the exact queries (the query formula
        in float64, not a rewritten one) and the stored columns: twice a float32 GEMM's work, but
        windows some 10^9 times narrower, for a matrix whose float32 windows hold many keys."""

        other = object.__new__(_EmbeddingBlocks)
        other.__dict__.update(self.__dict__)
        other.fast_queries = self.exact_queries.contiguous()
        other.columns = self.columns.to(torch.float64).contiguous()
        other.squared = squared_norms(other.columns) if self.kind == "l2" else None
        other.rewritten = False
        other._device_tables = None
        other._bound_cache = other._column_norms = None  # other tables: other norms and bounds
        return other

    def fast_bound(self, grid_bits: Optional[int], chain: Optional[int] = None) -> float:
        """The largest bound on a fast key's rounding over the matrix's rows (0 where the grid
        criterion says the fast pass computes every key exactly); ``chain``: the fused pass's
        roundings per term (:func:`fused_chain`), None for a GEMM's sum in any order."""

        inputs = self._bound_inputs(grid_bits)
        if inputs is None:
            return 0.0
        u, width, fast, magnitudes, (c2, c1), rewrite, tiny = inputs
        delta = fast_key_bound(self.kind, self.scorer, u, width, self.query_norms, fast, magnitudes, (c2, c1),
                               rewrite, chain)
        return float(delta.max(initial=0.0)) + tiny

    def pair_bound_terms(self, grid_bits: Optional[int], chain: int) -> Optional[np.ndarray]:
        """(D, 3) float64 each row's bound on its fast keys' rounding as a polynomial in the
        column's norm bound (:func:`~openbench.evaluation.counting.exact.fast_key_bound_terms`,
        the subnormal term in the constant): a pair's own bound, at most :meth:`fast_bound`'s. None
        where the keys are exact, or the fast pass scores a rewritten query formula (its error is
        bounded for the largest column only)."""

        inputs = self._bound_inputs(grid_bits)
        if inputs is None or self.rewritten or self.kind not in ("dot", "l2"):
            return None
        u, width, fast, magnitudes, _, _, tiny = inputs
        quadratic, linear, constant = fast_key_bound_terms(self.kind, self.scorer, u, width, self.query_norms, fast,
                                                           magnitudes, chain)
        return np.ascontiguousarray(np.stack([quadratic, linear, constant + tiny], axis=1))

    def column_norms(self) -> np.ndarray:
        """(S,) float64 upper bounds on the columns' 2-norms (computed once)."""
        return self.column_norm_bounds()[0]

    def column_norm_bounds(self) -> Tuple[np.ndarray, np.ndarray]:
        """((S,), (S,)) float64 upper bounds on the columns' 2-norms and 1-norms (computed once; two
        setup threads that ask at once may both compute them, to the same values)."""

        found = self._column_norms
        if found is None:
            found = self._column_norms = tuple(n.numpy() for n in norm_bounds(self.columns))
        return found

    _column_norms: Optional[tuple] = None
    _bound_cache: Optional[tuple] = None

    def _bound_inputs(self, grid_bits: Optional[int]):
        """What the fast keys' bounds are computed from (None where every fast key is exact): u,
        the width, the fast queries' norms, the magnitudes their own error is relative to, the
        largest column norms (C₂, C₁), the rewritten formula's error (or None), the subnormal
        term. Computed once per grid."""

        if self._bound_cache is not None and self._bound_cache[0] == grid_bits:
            return self._bound_cache[1]
        scorer, dtype = self.scorer, self.fast_queries.dtype
        u = unit_roundoff(dtype)
        width = self.fast_queries.shape[1]
        c2, c1 = (float(n.max()) if n.size else 0.0 for n in self.column_norm_bounds())
        inputs = None
        if not self._fast_exact(grid_bits, c2, c1, dtype):
            fast_two, fast_one = (n.numpy() for n in norm_bounds(self.fast_queries))
            rewrite, magnitudes = None, self.query_norms
            if self.rewritten:

                anchor = real_rows(scorer.entities[self.anchor_ids])
                relation = real_rows(scorer.relations[self.relation_ids])
                rewrite = scorer.rewrite_error(torch.from_numpy(relation), self.spec.side, torch.from_numpy(anchor),
                                               (c2, c1)).numpy()
                rewritten = scorer.fast_query_formula(np.abs(anchor), np.abs(relation), self.spec.side, np.add)
                two, one = norm_bounds(torch.from_numpy(np.ascontiguousarray(rewritten)))
                magnitudes = (two.numpy(), one.numpy())
            tiny = subnormal_slack(width, scorer.query_rounding, dtype)
            inputs = (u, width, (fast_two, fast_one), magnitudes, (c2, c1), rewrite, tiny)
        self._bound_cache = (grid_bits, inputs)
        return inputs

    def _fast_exact(self, grid_bits: Optional[int], c2: float, c1: float, dtype) -> bool:
        """Every fast key computed without rounding (the ranking engine's grid criterion)."""
        if grid_bits is None or self.kind not in ("dot", "l2", "l1") or self.rewritten:
            return False
        degree = self.scorer.query_degree + 1 if self.kind == "dot" else (
            2 * self.scorer.query_degree if self.kind == "l2" else self.scorer.query_degree)
        q2, q1 = self.query_norms
        size = {"dot": q2 * c2, "l2": (q2 + c2) ** 2, "l1": q1 + c1}[self.kind]
        return bool(np.all(on_exact_grid(size, degree, grid_bits, dtype)))

    def pair_keys(self, rows: np.ndarray, cols: np.ndarray, grid_bits: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
        """(float64 keys (P,), bounds (P,)) of the pairs (rows, cols) (matrix indexes)."""

        computed = pair_keys(self.kind, self.exact_queries, self.columns, torch.from_numpy(rows),
                             torch.from_numpy(cols))
        keys = computed.keys.numpy()
        bound = float64_key_bound(self.kind, self.scorer, grid_bits, keys, self.exact_queries.shape[1],
                                  (self.query_norms[0][rows], self.query_norms[1][rows]),
                                  (computed.norm2.numpy(), computed.norm1.numpy()))
        return keys, bound

    def decimal_key(self, row: int, col: int):
        """The exact key of pair (row, col) in decimal arithmetic."""

        anchor = real_rows(self.scorer.entities[self.anchor_ids[row]][None])[0]
        relation = real_rows(self.scorer.relations[self.relation_ids[row]][None])[0]
        candidate = real_rows(self.scorer.entities[self.spec.cols[col]][None])[0]
        return exact_key(self.scorer, self.kind, anchor, relation, self.spec.side, candidate)


class _ValueBlocks:
    """Scores as a scorer computes them (float64, higher first): any scorer, or fast ranks."""

    def __init__(self, scorer, spec: MatrixSpec, lower_is_better: bool, fast: bool):
        self.scorer, self.spec, self.sign = scorer, spec, -1.0 if lower_is_better else 1.0
        self.fast = fast and hasattr(scorer, "query_vectors") and hasattr(scorer, "candidate_rows")
        if self.fast:

            self.columns = _matrix_columns(scorer, spec)
            self.squared = squared_norms(self.columns) if scorer.kind == "l2" else None
            queries = scorer.query_vectors(spec.queries(0, spec.shape[0]), spec.side)  # (D, d'): every row's
            scorer.refuse_fast_overflow(scorer.provably_finite(queries, spec.side), queries.dtype)

    def keys(self, first: int, last: int, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.fast:

            queries = self.scorer.query_vectors(self.spec.queries(first, last), self.spec.side)
            return candidate_scores(self.scorer.kind, queries, self.columns, self.squared, out, keys=True)
        count = last - first
        candidates = self.spec.cols[None].expand(count, -1)
        scores = self.scorer.score_candidates(self.spec.queries(first, last), self.spec.side, candidates)
        scores = scores.to(torch.float64)
        return scores.neg_() if self.sign < 0 else scores


def _run_blocks(make_keys: Callable, count_part: Callable, blocks: List[Tuple[int, int]], workers: int,
                progress: Optional[Callable], on_result: Callable) -> None:
    """For every block: its keys ``make_keys(first, last)`` (B, S) computed on the calling thread
    (the GEMM on every torch thread; None where the pass computes its own), then counted by
    ``count_part(keys[r0:r1], first + r0, first + r1)`` on ``workers`` threads, a share of its
    rows each (the C passes release the GIL), and ``on_result`` called with each part's result in
    row order before the next block: what it learns (the floor of the best pairs) serves the next
    blocks."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openbench-matrix") if workers > 1 else None
    try:
        for first, last in blocks:
            keys = make_keys(first, last)
            rows = last - first
            step = -(-rows // workers) if pool is not None else rows
            parts = [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]

            def run(part: Tuple[int, int]):
                return count_part(None if keys is None else keys[part[0]:part[1]], first + part[0], first + part[1])

            results = [run(part) for part in parts] if pool is None or len(parts) == 1 else list(pool.map(run, parts))
            for result in results:
                on_result(result)
            if progress:
                progress(rows)
    finally:
        if pool is not None:
            pool.shutdown()
