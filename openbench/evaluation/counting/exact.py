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

The rooms: this module holds the steps (:class:`ExactRanks`); the keys in float64 and in exact
arithmetic are in :mod:`~openbench.evaluation.counting.exact_keys`, their rounding bounds in
:mod:`~openbench.evaluation.counting.key_bounds`, what is read of a candidate table once in
:mod:`~openbench.evaluation.counting.table_facts`, and the floating-point facts they all rest on in
:mod:`~openbench.evaluation.counting.rounding`.
"""
from __future__ import annotations

import decimal
import logging
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from openbench.errors import ScoreError
from openbench.evaluation.counting.exact_keys import (DECIMAL_EXACT, QueryRows, decimals, exact_key, norm_bounds,
                                                      pair_keys, query_rows, real_rows)
from openbench.evaluation.counting.key_bounds import (UnboundedKeys, fast_key_bound, float64_key_bound,
                                                      window_margin)
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY
from openbench.evaluation.counting.rounding import on_exact_grid, round_outwards, subnormal_spacing, unit_roundoff
from openbench.evaluation.counting.table_facts import TableSummary, fraction_bits, table_summary
from openbench.evaluation.counting.tally import Blocks, TallyPlan, count_blocks
from openbench.models.finite import refuse_nonfinite
from openbench.models.scorers import ExactQueries

if TYPE_CHECKING:
    from openbench.evaluation.candidates import SideCandidates

__all__ = ["RANK_MODES", "ExactStats", "ExactRanks"]

logger = logging.getLogger(__name__)

RANK_MODES = ("exact", "fast")
PAIR_CHUNK_ELEMENTS = 1 << 22  # (pairs × width) float64 elements per re-scoring chunk
MODULI_DIGITS = 100


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
        margin = window_margin(delta, true_bound, true_key, 4 * (width + scorer.query_rounding + 8) * self.tiny)
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
                    relation_row = decimals(relation)[None]
                    query = scorer.query_formula(decimals(anchor)[None], relation_row, side, np.subtract)[0]
                    candidate, truth = (scorer.candidate_formula(decimals(row)[None], side, relation_row,
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


def _tensor(values: np.ndarray) -> torch.Tensor:
    """A float64 numpy array as a contiguous torch tensor (shared memory where already contiguous)."""
    return torch.from_numpy(np.ascontiguousarray(values))
