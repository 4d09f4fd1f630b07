"""Score functions for embedding arrays, in PyKEEN's conventions, computed per entity chunk.

Every model reduces a query to a vector q (B, d') and the candidates to a matrix C (E, d'), so
that one side's score rows are one of

* ``dot``: S = q · Cᵀ (a GEMM): DistMult, ComplEx, RESCAL, SimplE;
* ``l2``:  S = -sqrt(max(‖q‖² + ‖c‖² - 2 q · Cᵀ, 0)): TransE-L2, RotatE;
* ``l1``:  S = -‖q - c‖₁: TransE-L1;
* ``moduli``: S = -Σ_k |q_k - c_k| over complex coordinates: DGL-KE's RotatE (``RotatE-DGLKE``).

Tail queries (h, r, ?) and head queries (?, r, t) use different q and C:

=========  ====================  ===================  ==========
model      tail q                head q               candidates
=========  ====================  ===================  ==========
TransE     h + r                 t - r                entities
DistMult   h ∘ r                 r ∘ t                entities
ComplEx    h ∘ r (complex)       t ∘ conj(r)          [Re | Im]
RotatE     h ∘ r (complex)       t ∘ conj(r)          [Re | Im]
RESCAL     hᵀ M_r                M_r t                entities
SimplE     ½[h_h∘r | h_t∘r⁻]      ½[r∘t_t | r⁻∘t_h]      swapped halves (tail side)
=========  ====================  ===================  ==========

ComplEx scores Re(Σ h r conj(t)); RotatE scores -‖h ∘ r - t‖₂ with unit-modulus relations, which
is what makes the head-side rewrite exact in real arithmetic.
"""
from __future__ import annotations

import hashlib
import math
from typing import Dict, NamedTuple, Optional, Tuple, Type

import numpy as np
import torch

from openbench.errors import InputError, ScoreError
from openbench.models.finite import StoredTable, first_nonfinite, nonfinite_error, refuse_nonfinite
from openbench import vocabulary

__all__ = ["ExactQueries", "SideScores", "COMPLEX_LAYOUTS", "LIST_BLOCK_ELEMENTS", "TRIPLE_BATCH", "FINITE_BOUND", "UNIT_MODULUS_TOLERANCE", "EmbeddingScorer", "check_table_rows", "MODULI_BLOCK_ELEMENTS",
           "TransEL2", "TransEL1", "DistMult", "ComplEx", "RotatE", "RotatEModuli", "RESCAL", "SimplE", "SCORERS",
           "get_scorer_class", "file_sha256", "array_sha256", "state_dict_sha256", "build_scorer", "candidate_scores", "squared_norms"]

COMPLEX_LAYOUTS = vocabulary.COMPLEX_LAYOUTS
LIST_BLOCK_ELEMENTS = 1 << 24  # (queries × candidates × width) values gathered at once by score_candidates
TRIPLE_BATCH = 65536  # triples per score_triples step
# far below float32's largest value (3.4e38): scores bounded by this, and their differences, are finite
FINITE_BOUND = 1e37
_FLOAT64_MAX = float(torch.finfo(torch.float64).max)
UNIT_MODULUS_TOLERANCE = 1e-4


class ExactQueries(NamedTuple):
    """What exact ranks read of one side's B queries (:mod:`openbench.evaluation.counting.exact`),
    given by the scorer as values: the ids its query formula reads and the side it computes
    (:meth:`EmbeddingScorer.exact_ids`), the true answers' stored rows, their candidate vectors
    (None for a candidate formula that rounds), the C kernel's code of the query formula and
    whether the fast pass rewrites it."""

    anchor_ids: torch.Tensor  # (B,)
    relation_ids: torch.Tensor  # (B,)
    side: str
    true_rows: torch.Tensor  # (B, ...)
    truth: Optional[torch.Tensor]  # (B, d') or None
    code: Optional[str]
    rewrites: bool


class SideScores(NamedTuple):
    """One side of a batch as an embedding scorer serves it to the count chain
    (:meth:`EmbeddingScorer.side_scores`)."""

    queries: torch.Tensor  # (B, d')
    finite: bool  # no score of these queries can be NaN or ±inf
    true_scores: torch.Tensor  # (B,) the true answers' keys
    full: Optional[torch.Tensor]  # (B, E') every candidate's key, where one block holds them; else None
    exact: Optional[ExactQueries]  # exact ranks' inputs (None: fast ranks)


class EmbeddingScorer:
    """Base class: subclasses define ``kind`` and the query/candidate vectors of each side.

    :param entities: (E, d) real or complex entity embeddings.
    :param relations: (R, d) relation embeddings, or (R, d, d) matrices for RESCAL.
    """

    name = "embedding"
    kind = "dot"
    complex_valued = False
    # the fast scores are the query and candidate formulas' values (exact ranks re-score those);
    # False for a scorer that post-processes them (a clamp), ranked as computed instead
    exact_keys = True

    model_kind = "embeddings"  # what the record calls this source
    transductive = True  # one row per entity, learnt from the training triples

    def __init__(self, entities: torch.Tensor, relations: torch.Tensor):
        self.entities = entities
        self.relations = relations
        self.model_params: dict = {}  # what the record adds to the parameters (complex layout, training)
        self.source_sha256: Optional[str] = None  # of the files the arrays came from
        # per table ("entities", "relations"): the file it came from (None: an array in memory) and
        # the complex layout of a real file holding complex values (None: real, or complex as stored)
        self.table_files: Dict[str, Tuple[Optional[str], Optional[str]]] = {}
        self._candidates: Dict[str, torch.Tensor] = {}
        self._candidate_norms: Dict[str, torch.Tensor] = {}
        self._candidate_max: Dict[str, float] = {}

    @property
    def num_entities(self) -> int:
        return int(self.entities.shape[0])

    @property
    def device(self) -> torch.device:
        return self.entities.device

    def to(self, device: torch.device) -> "EmbeddingScorer":
        return self.with_tables(self.entities.to(device), self.relations.to(device))

    def with_tables(self, entities: torch.Tensor, relations: torch.Tensor) -> "EmbeddingScorer":
        """The same model over other tables (another device, or an entity shard's rows), with its
        parameters and source kept."""
        other = type(self)(entities, relations)
        other.model_params, other.source_sha256 = dict(self.model_params), self.source_sha256
        other.table_files = self.table_files
        return other

    def stored_tables(self) -> list:
        """The entity (E, ...) and relation (R, ...) tables as :class:`~openbench.models.finite.StoredTable` s
        (every value must be finite: :mod:`openbench.models.finite`)."""
        entity_file, relation_file = (self.table_files.get(name, (None, None)) for name in ("entities", "relations"))
        return [StoredTable("entity embeddings", self.entities, "entity", *entity_file),
                StoredTable("relation embeddings", self.relations, "relation", *relation_file)]

    def described(self, params: Optional[dict] = None, source_sha256: Optional[str] = None) -> "EmbeddingScorer":
        """This scorer with the record's extra parameters and the source files' sha256 set."""
        self.model_params = dict(params or {})
        self.source_sha256 = source_sha256
        return self

    def for_dataset(self, dataset) -> "EmbeddingScorer":
        """This scorer over ``dataset``, its tables checked against the dataset's label maps as
        the command line checks them (:func:`check_table_rows`): a table with a row too few or
        too many is refused, never evaluated."""
        check_table_rows(int(self.entities.shape[0]), int(self.relations.shape[0]), dataset.num_entities,
                         dataset.num_relations, "entity_embeddings", "relation_embeddings")
        return self

    # -- the Scorer protocol (openbench.models.base) ------------------------------------------
    def description(self) -> dict:
        """The scorer's name, ``kind: "embeddings"``, the dimension and dtype with the extra
        parameters, and the files' sha256."""
        params = {"dimension": int(self.entities.shape[1]), "dtype": str(self.entities.dtype)}
        params.update(self.model_params)
        return {"name": self.name, "kind": self.model_kind, "params": params, "source_sha256": self.source_sha256}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) scores of every candidate of the ``side`` queries of ``batch`` (B, 3)."""
        return self.score_chunk(self.query_vectors(batch, side), side, 0, self.num_entities)

    @torch.no_grad()
    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor,
                         entity_offset: int = 0) -> torch.Tensor:
        """(B, W) float64 scores of the ``side`` queries of ``batch`` (B, 3) against their own
        candidate entities ``candidates`` (B, W): each query vector once, only its W candidates
        gathered, in row groups of at most ``LIST_BLOCK_ELEMENTS`` values."""
        batch, candidates = batch.to(self.device), candidates.to(self.device)
        width = candidates.shape[1] * max(1, self._cached_candidates(side).shape[1])
        rows = max(1, LIST_BLOCK_ELEMENTS // max(1, width))
        parts = []
        for first in range(0, batch.shape[0], rows):
            queries = self.query_vectors(batch[first:first + rows], side)
            parts.append(self.score_lists(queries, side, candidates[first:first + rows], entity_offset).double().cpu())
        return torch.cat(parts) if parts else torch.zeros((0, candidates.shape[1]), dtype=torch.float64)

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, entity_offset: int = 0) -> torch.Tensor:
        """(T,) float64 scores of (T, 3) triples, each against its own tail only: O(T · d).

        Computed from the stored values in float64 by the model's definition (distances from
        the differences, never the expanded ‖q‖² + ‖c‖² - 2q·c the ranking pass uses): off by
        float64 rounding only, and a formula that is exact on the stored values (a TransE
        self-loop h + r - h) gives equal scores exactly. Triple classification reads these."""
        out = [self._definition_scores(triples[i:i + TRIPLE_BATCH].cpu(), entity_offset)
               for i in range(0, triples.shape[0], TRIPLE_BATCH)]
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def _definition_scores(self, batch: torch.Tensor, entity_offset: int) -> torch.Tensor:
        """(B,) float64 scores of ``batch`` (B, 3) by :meth:`query_formula` and :meth:`candidate_formula`."""
        def stored(table: torch.Tensor, ids: torch.Tensor) -> np.ndarray:
            rows = torch.index_select(table, 0, ids.to(table.device)).detach().cpu()
            if rows.is_complex():
                rows = torch.cat([rows.real, rows.imag], dim=-1)
            return rows.to(torch.float64).numpy()

        anchor, relation = stored(self.entities, batch[:, 0]), stored(self.relations, batch[:, 1])
        tails = stored(self.entities, batch[:, 2] - entity_offset)
        query = self.query_formula(anchor, relation, "tail", np.subtract)
        candidate = self.candidate_formula(tails, "tail", relation if self.candidate_rounding else None, np.subtract)
        if self.kind == "dot":
            return torch.from_numpy(np.einsum("ij,ij->i", query, candidate))
        difference = query - candidate
        if self.kind == "l2":
            return torch.from_numpy(-np.sqrt(np.einsum("ij,ij->i", difference, difference)))
        if self.kind == "l1":
            return torch.from_numpy(-np.abs(difference).sum(axis=1))
        if self.kind == "moduli":
            half = difference.shape[1] // 2
            return torch.from_numpy(-np.hypot(difference[:, :half], difference[:, half:]).sum(axis=1))
        raise ValueError(f"unknown score kind {self.kind!r}")

    # -- per model ------------------------------------------------------------------------
    def query_vectors(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, d') query vectors of ``batch`` (B, 3) for ``side`` ("head" or "tail")."""
        raise NotImplementedError

    def candidate_vectors(self, side: str) -> torch.Tensor:
        """(E, d') candidate vectors for ``side``."""
        return self.candidate_rows(self.entities, side)

    def candidate_rows(self, rows: torch.Tensor, side: str) -> torch.Tensor:
        """(N, d') candidate vectors of stored entity ``rows`` (N, ...) for ``side``: the rows
        themselves, or their values rearranged (never computed: the values are the stored ones)."""
        return rows

    # -- shared -----------------------------------------------------------------------------
    def _cached_candidates(self, side: str) -> torch.Tensor:
        if side not in self._candidates:
            candidates = self.candidate_vectors(side).contiguous()
            if self.kind == "l2":  # the norms first: a thread that finds the vectors finds their norms too
                self._candidate_norms[side] = squared_norms(candidates)
            self._candidates[side] = candidates
        return self._candidates[side]

    def provably_finite(self, queries: torch.Tensor, side: str, candidate_max: Optional[float] = None) -> bool:
        """True when no score of ``queries`` (B, d') against any candidate can be NaN or ±inf.

        Bounds every score from the largest magnitudes: ``|q·c| <= d·max|q|·max|c|`` (dot),
        ``‖q - c‖² <= d·(max|q| + max|c|)²`` (l2), ``‖q - c‖₁ <= d·(max|q| + max|c|)`` (l1).

        :param candidate_max: max |c| over the candidate vectors of ``side`` where the caller read
            it already (exact ranks' one pass over the table); else it is read here, once.
        """
        if queries.numel() == 0:
            return True
        if side not in self._candidate_max:
            self._candidate_max[side] = (_largest_magnitude(self._cached_candidates(side)) if candidate_max is None
                                         else candidate_max)
        c_max, q_max, dim = self._candidate_max[side], float(queries.abs().max()), queries.shape[1]
        if not (math.isfinite(c_max) and math.isfinite(q_max)):
            if not self._tables_finite():  # a stored infinity or NaN: named, whatever reads it
                refuse_nonfinite(self)
            if queries.dtype == torch.float64:
                self._overflow(math.inf, c_max, dim, math.inf)  # finite tables, infinite float64 queries
            return False
        try:
            bound = {"dot": dim * q_max * c_max, "l2": dim * (q_max + c_max) ** 2, "l1": dim * (q_max + c_max),
                     "moduli": dim * (q_max + c_max)}[self.kind]
        except OverflowError:  # beyond Python's float: beyond every dtype
            bound = math.inf
        if bound >= _FLOAT64_MAX:  # beyond float64, where exact ranks re-score: nothing can rank them
            self._overflow(q_max, c_max, dim, bound)
        return bound < FINITE_BOUND

    def refuse_fast_overflow(self, finite: bool, dtype: torch.dtype) -> None:
        """Fast ranks compare the keys as computed in the tables' precision: where
        :meth:`provably_finite` could not show they stay finite (``finite`` False) in float32, a key
        may overflow to ±inf and tie what the stored values order, so fast ranks refuse (exact ranks
        re-score such keys in float64; a float64 table's keys are bounded by :meth:`_overflow`)."""
        if not finite and dtype not in (torch.float64, torch.complex128):
            raise ScoreError(f"fast ranks: {self.name} scores can overflow the embeddings' precision ({dtype}; "
                             f"|score| is bounded only beyond {FINITE_BOUND:.0e}), and overflowed scores tie at "
                             "infinity; evaluate with exact ranks (the default: keys re-scored in float64), give the "
                             "embeddings as float64, or rescale them")

    def _tables_finite(self) -> bool:
        if "tables" not in self._candidate_max:
            self._candidate_max["tables"] = max(_largest_magnitude(self.entities), _largest_magnitude(self.relations))
        return math.isfinite(self._candidate_max["tables"])

    def _overflow(self, q_max: float, c_max: float, dim: int, bound: float) -> None:
        """Refuse finite tables whose scores can overflow float64: they would tie at infinity, and
        exact ranks, which re-score narrower keys in float64, cannot separate them either."""
        raise ScoreError(
            f"{self.name} scores can overflow float64: query and candidate entries up to {q_max:.3g} and "
            f"{c_max:.3g} in {dim} dimensions bound them by {bound:.3g}, beyond the largest float64 "
            f"({_FLOAT64_MAX:.3g}), and overflowed scores tie at infinity. Rescale the embeddings (divide the "
            "entity rows by one positive factor: DistMult, ComplEx, RESCAL and SimplE rank as before; distance "
            "models need the relation rows divided by it too)")

    def score_chunk(self, queries: torch.Tensor, side: str, start: int, stop: int,
                    out: Optional[torch.Tensor] = None, keys: bool = False) -> torch.Tensor:
        """Scores (B, stop - start) of the queries against candidates ``start .. stop - 1``.

        :param queries: (B, d') from :meth:`query_vectors`.
        :param out: optional contiguous (B, stop - start) buffer to write into.
        :param keys: for L2 distances, return the ranking key -‖q - c‖² instead of the score
            -‖q - c‖ (the same order, without the square root, its clamp and sign passes; exact
            ranks compare keys). Other kinds: the score, which is its own key.
        """
        candidates = self._cached_candidates(side)[start:stop]
        norms = self._candidate_norms[side][start:stop] if self.kind == "l2" else None
        return candidate_scores(self.kind, queries, candidates, norms, out, keys)

    def score_pairs(self, batch: torch.Tensor, entity_offset: int = 0) -> torch.Tensor:
        """(B,) scores of the triples ``batch`` (B, 3) themselves: each tail query against its own
        tail (the formula of :meth:`score_chunk`, row by row). ``entity_offset``: the first entity
        this scorer holds (an entity shard)."""
        queries = self.query_vectors(batch, "tail")
        candidates = self._cached_candidates("tail")[batch[:, 2] - entity_offset]
        if self.kind == "dot":
            return (queries * candidates).sum(dim=1)
        if self.kind == "l2":
            squared = (queries * queries).sum(dim=1) + (candidates * candidates).sum(dim=1) \
                - 2.0 * (queries * candidates).sum(dim=1)
            return squared.clamp(min=0.0).sqrt().neg()
        if self.kind == "l1":
            return (queries - candidates).abs().sum(dim=1).neg()
        if self.kind == "moduli":
            half = queries.shape[1] // 2
            return torch.hypot(queries[:, :half] - candidates[:, :half],
                               queries[:, half:] - candidates[:, half:]).sum(dim=1).neg()
        raise ValueError(f"unknown score kind {self.kind!r}")

    def score_lists(self, queries: torch.Tensor, side: str, ids: torch.Tensor, entity_offset: int = 0,
                    keys: bool = False) -> torch.Tensor:
        """(B, W) scores of each query (B, d') against its own candidates ``ids`` (B, W): the
        formula of :meth:`score_chunk`, with only those candidates gathered (B × W × d').
        ``keys``: L2 distances give the ranking key -‖q - c‖² (as :meth:`score_chunk`)."""
        table = self._cached_candidates(side)
        flat = (ids - entity_offset).reshape(-1)
        candidates = torch.index_select(table, 0, flat).view(ids.shape[0], ids.shape[1], table.shape[1])  # (B, W, d')
        if self.kind == "dot":
            return torch.bmm(candidates, queries[:, :, None]).squeeze(2)
        difference = candidates - queries[:, None, :]
        if self.kind == "l2":
            squared = (difference * difference).sum(dim=2)
            return squared.neg_() if keys else squared.sqrt_().neg_()
        if self.kind == "l1":
            return difference.abs_().sum(dim=2).neg_()
        if self.kind == "moduli":
            half = queries.shape[1] // 2
            return torch.hypot(difference[:, :, :half], difference[:, :, half:]).sum(dim=2).neg_()
        raise ValueError(f"unknown score kind {self.kind!r}")

    def side_scores(self, batch: torch.Tensor, side: str, true_ids: torch.Tensor, scratch: torch.Tensor, width: int,
                    exact: bool, candidate_max: Optional[float] = None, entity_offset: int = 0) -> SideScores:
        """The ``side`` queries of ``batch`` (B, 3) as the count chain needs them, in one call.

        :param true_ids: (B,) the true answers' global ids; ``entity_offset``: this scorer's first entity.
        :param scratch: a contiguous buffer of at least B × ``width`` elements the blocks are written into.
        :param width: candidates per block; the one block of every candidate is computed here
            when ``width`` reaches them all.
        :param exact: exact ranks (keys, not L2 scores; :class:`ExactQueries` given). Their true
            keys are each query against its answer alone, O(B · d) (the window is centred on the
            float64 key, so the fast key need not be the block's bit for bit); fast ranks compute
            the chunks holding the answers, as their blocks will be (the answer is compared with
            the block's own value).
        :param candidate_max: max |c| of the candidate vectors where the caller read it (:meth:`provably_finite`).
        """
        queries = self.query_vectors(batch, side)
        # scores that can overflow float64 are refused here, before any window is computed from them;
        # fast ranks, which compare the keys as computed, refuse keys that may overflow float32 too
        finite = self.provably_finite(queries, side, candidate_max)
        if not exact:
            self.refuse_fast_overflow(finite, queries.dtype)
        rows, total = batch.shape[0], self.num_entities
        local_ids = true_ids - entity_offset
        full = None
        if width >= total:
            full = self.score_chunk(queries, side, 0, total, out=scratch[:rows * total].view(rows, total), keys=exact)
            true_scores = full.gather(1, local_ids[:, None]).squeeze(1)
        elif exact:
            true_scores = self.score_lists(queries, side, true_ids[:, None], entity_offset, keys=True).squeeze(1)
        else:
            true_scores = torch.empty(rows, dtype=self.entities.real.dtype, device=batch.device)
            for start in range(0, total, width):
                stop = min(start + width, total)
                here = ((local_ids >= start) & (local_ids < stop)).nonzero().squeeze(1)
                if here.numel():
                    block = self.score_chunk(queries, side, start, stop,
                                             out=scratch[:rows * (stop - start)].view(rows, stop - start))
                    true_scores[here] = block[here, local_ids[here] - start]
        inputs = self.exact_queries(batch, side, self.entities.index_select(0, local_ids)) if exact else None
        return SideScores(queries, finite, true_scores, full, inputs)

    def score_all(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """Full score rows (B, E) for ``side``; convenient for tests and small graphs."""
        return self.score_chunk(self.query_vectors(batch, side), side, 0, self.num_entities)

    # -- exact ranks (openbench.evaluation.counting.exact) ------------------------------------------
    # The query of each model again, as a formula over real arrays of any element type (float64
    # numpy arrays, or object arrays of exact Decimals), complex numbers as [Re | Im] halves.
    # ``sub`` is the formula's subtraction: np.subtract for the value, np.add on absolute values
    # for its magnitude |q| (the same formula with every term counted positive), which bounds
    # the rounding error of computing q in any precision: |fl(q_k) - q_k| <= γ_n |q|_k with
    # n = ``query_rounding`` (roundings along the longest chain of one component).
    query_rounding = 1
    # stored values multiplied in one term of a query component (the exactness grid, exact.py)
    query_degree = 1

    def exact_ids(self, batch: torch.Tensor, side: str) -> Tuple[torch.Tensor, torch.Tensor, str]:
        """(anchor entity ids (B,), relation ids (B,), side) the query formula reads."""
        return (batch[:, 0] if side == "tail" else batch[:, 2]), batch[:, 1], side

    def exact_queries(self, batch: torch.Tensor, side: str, true_rows: torch.Tensor) -> ExactQueries:
        """What exact ranks read of the ``side`` queries of ``batch`` (B, 3) whose true answers'
        stored rows are ``true_rows`` (B, ...)."""
        anchor_ids, relation_ids, used_side = self.exact_ids(batch, side)
        truth = None if self.candidate_rounding else self.candidate_rows(true_rows, used_side).contiguous()
        return ExactQueries(anchor_ids, relation_ids, used_side, true_rows, truth, self.query_code(used_side),
                            self.rewrites(used_side))

    def exact_inputs(self, batch: torch.Tensor, side: str) -> Tuple[torch.Tensor, torch.Tensor, str]:
        """(anchor entity rows (B, ...), relation rows (B, ...), side) the query formula reads."""
        anchors, relations, side = self.exact_ids(batch, side)
        return torch.index_select(self.entities, 0, anchors), torch.index_select(self.relations, 0, relations), side

    def query_code(self, side: str) -> Optional[str]:
        """The query formula of ``side`` as one of the C kernel's codes (exact.QUERY_CODES:
        ``"add"``, ``"sub"``, ``"mul"``, ``"cmul"``, ``"cmul_conj"``), computed as
        :meth:`query_formula` computes it; None: only :meth:`query_formula` has it."""
        return None

    def query_formula(self, anchor, relation, side: str, sub):
        """(B, d') query vectors from real ``anchor`` (B, w) and ``relation`` rows, any element type."""
        raise NotImplementedError

    # roundings of one candidate component when candidate_formula computes (0: the stored rows)
    candidate_rounding = 0

    def candidate_formula(self, rows, side: str, relation, sub):
        """(P, d') candidate vectors from real entity ``rows`` (P, w) for queries with ``relation``
        rows (P, ...): the rows themselves by default (as :meth:`candidate_vectors`). Only a
        formula that rounds (``candidate_rounding`` > 0) may read ``relation``; the others get None."""
        return rows

    def rewrites(self, side: str) -> bool:
        """Whether the fast pass scores ``side`` queries by a rewritten formula (:meth:`rewrite_error`)."""
        return False

    def fast_query_formula(self, anchor, relation, side: str, sub):
        """(B, d') the query vectors the fast pass computes (:meth:`query_vectors`), as a formula
        like :meth:`query_formula`; they differ only where the fast pass rewrites (:meth:`rewrites`).
        Exact ranks bound the fast query's own rounding by this formula's magnitude."""
        return self.query_formula(anchor, relation, side, sub)

    def rewrite_error(self, relation: torch.Tensor, side: str, anchor: torch.Tensor,
                      candidate_norms: Tuple[float, float]) -> Optional[torch.Tensor]:
        """(B,) float64 bound on |fast-pass formula - exact formula| in the key's units, where the
        fast pass scores a rewritten query (None: it does not).

        :param relation: (B, ...) and ``anchor`` (B, w) the stored rows as real float64;
            ``candidate_norms``: (max ‖c‖₂, max ‖c‖₁) over the candidates."""
        return None


SQUARED_NORM_CHUNK = 1 << 16  # values summed in float64 at a time (a 512 KB temporary the allocator reuses: fresh pages cost more than the sums)


def candidate_scores(kind: str, queries: torch.Tensor, candidates: torch.Tensor,
                     squared: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                     keys: bool = False) -> torch.Tensor:
    """(B, N) scores of queries (B, d') against candidate vectors (N, d') of a score ``kind``:
    :meth:`EmbeddingScorer.score_chunk`'s arithmetic on a candidate table the caller holds (the
    repurposing matrix scores its drugs against its diseases only). ``squared``: the candidates'
    :func:`squared_norms` (L2); ``keys``: for L2, the ranking key -‖q - c‖² instead of the score."""
    if kind == "dot":
        return torch.mm(queries, candidates.T, out=out)
    if kind == "l2":
        assert squared is not None
        if keys:  # 2 q·c - ‖c‖² - ‖q‖²: the GEMM adds the candidates' term, one pass the query's
            scores = torch.addmm(squared.neg(), queries, candidates.T, alpha=2.0, out=out)
            return scores.sub_(squared_norms(queries)[:, None])
        scores = torch.addmm(squared, queries, candidates.T, alpha=-2.0, out=out)
        scores.add_(squared_norms(queries)[:, None])
        return scores.clamp_(min=0.0).sqrt_().neg_()
    if kind == "l1":
        scores = torch.cdist(queries, candidates, p=1.0)
        if out is not None:
            out.copy_(scores)
            scores = out
        return scores.neg_()
    if kind == "moduli":
        return _moduli_scores(queries, candidates, out)
    raise ValueError(f"unknown score kind {kind!r}")


def squared_norms(vectors: torch.Tensor) -> torch.Tensor:
    """(N,) ‖v‖² of the rows of ``vectors`` (N, d), summed in float64 and rounded once to their
    dtype: off by at most u‖v‖² (plus float64's γ_d), where a sum in the vectors' own precision
    could be off by γ_d‖v‖². Exact ranks' L2 window (exact.py) relies on this bound. On the CPU in
    numpy on the calling thread (exact ranks' setup threads call this beside each other, where
    torch's intra-op threads would wait on a busy core at every chunk); elsewhere in torch."""
    if vectors.device.type == "cpu" and vectors.dtype in (torch.float32, torch.float64):
        return _squared_norms_numpy(vectors)
    return _squared_norms_torch(vectors)


def _squared_norms_numpy(vectors: torch.Tensor) -> torch.Tensor:
    """:func:`squared_norms` of CPU float32 or float64 rows, a chunk's float64 copy at a time."""
    rows = vectors.detach().numpy()
    out = np.empty(rows.shape[0], rows.dtype)
    step = max(1, SQUARED_NORM_CHUNK // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        chunk = rows[start:start + step].astype(np.float64)  # a copy: the sums below never write to the table
        with np.errstate(over="ignore"):  # a float32 norm beyond its range is inf, as torch's (keys may overflow)
            out[start:start + step] = np.einsum("ij,ij->i", chunk, chunk)
    return torch.from_numpy(out)


def _squared_norms_torch(vectors: torch.Tensor) -> torch.Tensor:
    """:func:`squared_norms` on any device, a chunk's float64 copy at a time, squared in place."""
    out = torch.empty(vectors.shape[0], dtype=vectors.dtype, device=vectors.device)
    step = max(1, SQUARED_NORM_CHUNK // max(1, vectors.shape[1]))
    for start in range(0, vectors.shape[0], step):
        block = vectors[start:start + step].to(torch.float64, copy=True)
        out[start:start + step] = block.square_().sum(dim=1).to(vectors.dtype)  # in place: no second temporary
    return out


MODULI_BLOCK_ELEMENTS = 1 << 24  # (queries × candidates × half-width) elements per temporary


def _moduli_scores(queries: torch.Tensor, candidates: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    """-Σ_k |q_k - c_k| over complex coordinates given as [Re | Im] halves: (B, 2d), (C, 2d) -> (B, C)."""
    half = queries.shape[1] // 2
    scores = out if out is not None else queries.new_empty((queries.shape[0], candidates.shape[0]))
    step = max(1, MODULI_BLOCK_ELEMENTS // max(1, queries.shape[0] * half))
    q_re, q_im = queries[:, None, :half], queries[:, None, half:]
    for start in range(0, candidates.shape[0], step):
        block = candidates[start:start + step]
        moduli = torch.hypot(q_re - block[None, :, :half], q_im - block[None, :, half:])
        scores[:, start:start + step] = moduli.sum(dim=2)
    return scores.neg_()


def _join(left, right):
    """Columns of ``left`` then ``right``: numpy arrays of any element type."""
    return np.concatenate([left, right], axis=1)


def _as_real(z: torch.Tensor) -> torch.Tensor:
    """[Re | Im] halves of a complex (N, d) tensor: real (N, 2d)."""
    return torch.cat([z.real, z.imag], dim=-1)


class TransEL2(EmbeddingScorer):
    name, kind = "TransE-L2", "l2"

    def query_vectors(self, batch, side):
        """(B, d) query vectors of ``batch`` (B, 3): h + r for tail queries, t - r for head queries."""
        r = self.relations[batch[:, 1]]
        return self.entities[batch[:, 0]] + r if side == "tail" else self.entities[batch[:, 2]] - r

    def query_formula(self, anchor, relation, side, sub):
        """h + r (tail queries) or t - r (head queries), any element type."""
        return anchor + relation if side == "tail" else sub(anchor, relation)

    def query_code(self, side):
        """``"add"`` (h + r) for tail queries, ``"sub"`` (t - r) for head queries."""
        return "add" if side == "tail" else "sub"


class TransEL1(TransEL2):
    name, kind = "TransE-L1", "l1"


class DistMult(EmbeddingScorer):
    name, kind = "DistMult", "dot"

    def query_vectors(self, batch, side):
        """(B, d) query vectors of ``batch`` (B, 3): h ∘ r (tail queries) or r ∘ t (head queries)."""
        anchor = self.entities[batch[:, 0] if side == "tail" else batch[:, 2]]
        return anchor * self.relations[batch[:, 1]]

    query_degree = 2

    def query_formula(self, anchor, relation, side, sub):
        """h ∘ r or r ∘ t: the anchor times the relation, any element type."""
        return anchor * relation

    def query_code(self, side):
        """``"mul"``: the anchor times the relation, both sides."""
        return "mul"


class ComplEx(EmbeddingScorer):
    name, kind, complex_valued = "ComplEx", "dot", True

    def query_vectors(self, batch, side):
        """(B, 2d) real [Re | Im] query vectors of ``batch`` (B, 3): h ∘ r, or t ∘ conj(r) for heads."""
        r = self.relations[batch[:, 1]]
        if side == "tail":
            return _as_real(self.entities[batch[:, 0]] * r)
        # Re(h · w) with w = r ∘ conj(t) equals [Re h | Im h] · [Re w | -Im w] = h · conj(w), conj(w) = t ∘ conj(r)
        return _as_real(self.entities[batch[:, 2]] * torch.conj(r))

    def candidate_rows(self, rows, side):
        """(N, 2d) the rows as real [Re | Im] halves, for both sides."""
        return _as_real(rows)

    query_rounding, query_degree = 2, 2

    def query_formula(self, anchor, relation, side, sub):
        """h ∘ r, or t ∘ conj(r) for heads, on [Re | Im] halves."""
        half = anchor.shape[1] // 2
        a_re, a_im, r_re, r_im = anchor[:, :half], anchor[:, half:], relation[:, :half], relation[:, half:]
        if side == "tail":
            return _join(sub(a_re * r_re, a_im * r_im), a_re * r_im + a_im * r_re)
        return _join(a_re * r_re + a_im * r_im, sub(a_im * r_re, a_re * r_im))

    def query_code(self, side):
        """``"cmul"`` (h ∘ r) for tail queries, ``"cmul_conj"`` (t ∘ conj(r)) for head queries."""
        return "cmul" if side == "tail" else "cmul_conj"


class RotatE(ComplEx):
    """Same query and candidate vectors as ComplEx; the distance of h ∘ r to t instead of the product.

    Head queries are scored as ‖h - t ∘ conj(r)‖, equal to ‖h ∘ r - t‖ only where |r| = 1 exactly;
    stored rotations are unit to within rounding, so exact ranks score heads by the definition
    (:meth:`candidate_formula`) and widen the window by the difference (:meth:`rewrite_error`)."""

    name, kind = "RotatE", "l2"
    candidate_rounding = 2

    def query_formula(self, anchor, relation, side, sub):
        """h ∘ r for tails; for heads t itself, the candidates being rotated instead."""
        if side == "tail":
            return super().query_formula(anchor, relation, side, sub)
        return anchor

    def query_code(self, side):
        """``"cmul"`` (h ∘ r) for tail queries; head queries are the anchors themselves (None)."""
        return "cmul" if side == "tail" else None

    def candidate_formula(self, rows, side, relation, sub):
        """The rows for tail queries; c ∘ r for head queries (the definition ‖c ∘ r - t‖)."""
        if side == "tail":
            return rows
        return super().query_formula(rows, relation, "tail", sub)

    def rewrites(self, side):
        """True for head queries, scored as ‖h - t ∘ conj(r)‖ by the fast pass."""
        return side == "head"

    def fast_query_formula(self, anchor, relation, side, sub):
        """t ∘ conj(r) for head queries (ComplEx's), h ∘ r for tails: what :meth:`query_vectors` computes."""
        return ComplEx.query_formula(self, anchor, relation, side, sub)

    def rewrite_error(self, relation, side, anchor, candidate_norms):
        """|‖c∘r - t‖² - ‖c - t∘conj(r)‖²| = |Σ (|r_k|² - 1)(|c_k|² - |t_k|²)| <= max|ρ - 1| (C₂² + ‖t‖₂²)
        (L2); for the sums of moduli, 2 max|ρ - 1| (C₁ + ‖t‖₁) bounds the difference."""
        if side == "tail":
            return None
        half = relation.shape[1] // 2  # [Re | Im] halves
        squared_modulus = relation[:, :half] ** 2 + relation[:, half:] ** 2
        # |ρ - 1| in float64, widened by its one rounding of ρ (the squares of stored values are exact)
        unit = (squared_modulus - 1).abs().amax(dim=1) * (1 + 2.0 ** -40) + 4 * 2.0 ** -53
        widen = 1 + 2.0 ** -40  # the float64 norms' own rounding
        if self.kind == "l2":
            return unit * (candidate_norms[0] ** 2 + (anchor.norm(dim=1) * widen) ** 2)
        return 2 * unit * (1 + unit) * (candidate_norms[1] + anchor.abs().sum(dim=1) * widen)

    def __init__(self, entities, relations):
        super().__init__(entities, relations)
        found = first_nonfinite(relations)  # named before the modulus check, which NaN passes and inf fails
        if found is not None:
            raise nonfinite_error(StoredTable("relation embeddings", relations, "relation"), *found)
        modulus = relations.abs()
        if modulus.numel() and float((modulus - 1.0).abs().max()) > UNIT_MODULUS_TOLERANCE:
            raise InputError(
                f"RotatE relations must have unit modulus (|r| = 1); found |r| between {float(modulus.min()):.6g} "
                f"and {float(modulus.max()):.6g}. Pass relations as rotations (PyKEEN's RotatE stores them so)")


class RotatEModuli(RotatE):
    """DGL-KE's RotatE: the *sum of the complex moduli* Σ_k |h_k r_k - t_k| instead of PyKEEN's
    Euclidean norm; head queries use t ∘ conj(r), exact because |r_k| = 1."""

    name, kind = "RotatE-DGLKE", "moduli"


class RESCAL(EmbeddingScorer):
    name, kind = "RESCAL", "dot"

    def query_vectors(self, batch, side):
        """(B, d) query vectors of ``batch`` (B, 3): hᵀ M_r (tail queries) or M_r t (head queries)."""
        matrices = self.relations[batch[:, 1]]  # (B, d, d)
        if side == "tail":
            return torch.bmm(self.entities[batch[:, 0]].unsqueeze(1), matrices).squeeze(1)
        return torch.bmm(matrices, self.entities[batch[:, 2]].unsqueeze(2)).squeeze(2)

    query_degree = 2

    def __init__(self, entities, relations):
        super().__init__(entities, relations)
        self.query_rounding = int(entities.shape[1])  # a d-term dot product per component

    def query_formula(self, anchor, relation, side, sub):
        """hᵀ M_r or M_r t per row: (B, d) from (B, d) anchors and (B, d, d) matrices."""
        if side == "tail":
            return np.matmul(anchor[:, None, :], relation)[:, 0, :]
        return np.matmul(relation, anchor[:, :, None])[:, :, 0]


class SimplE(EmbeddingScorer):
    """SimplE (Kazemi & Poole): entities [head role | tail role], relations [r | r_inv];
    score ½ Σ (h_head∘r∘t_tail + t_head∘r_inv∘h_tail), unclamped (DGL-KE clamps to ±20 while
    training and in its evaluator, which creates ties at the clamp)."""

    name, kind = "SimplE", "dot"

    def __init__(self, entities, relations):
        if entities.ndim == 2 and entities.shape[1] % 2:
            raise InputError(f"SimplE embeddings hold two halves (head and tail role); width {entities.shape[1]} is odd")
        super().__init__(entities, relations)

    def query_vectors(self, batch, side):
        """(B, 2d) query vectors of ``batch`` (B, 3) against the (E, 2d) :meth:`candidate_vectors`."""
        half = self.entities.shape[1] // 2
        relation = self.relations[batch[:, 1]]
        r, r_inverse = relation[:, :half], relation[:, half:]
        if side == "tail":  # against [t_tail | t_head]
            h = self.entities[batch[:, 0]]
            return 0.5 * torch.cat([h[:, :half] * r, h[:, half:] * r_inverse], dim=1)
        t = self.entities[batch[:, 2]]  # against [h_head | h_tail]
        return 0.5 * torch.cat([r * t[:, half:], r_inverse * t[:, :half]], dim=1)

    query_degree = 2

    def query_formula(self, anchor, relation, side, sub):
        """½[h_h∘r | h_t∘r⁻] (tail) or ½[r∘t_t | r⁻∘t_h] (head); the ½ is exact in every precision."""
        half = anchor.shape[1] // 2
        r, r_inverse = relation[:, :half], relation[:, half:]
        if side == "tail":
            return _join(anchor[:, :half] * r, anchor[:, half:] * r_inverse) / 2
        return _join(r * anchor[:, half:], r_inverse * anchor[:, :half]) / 2

    def candidate_formula(self, rows, side, relation, sub):
        """The rows (head queries) or their halves swapped (tail queries), as candidate_vectors."""
        if side == "head":
            return rows
        half = rows.shape[1] // 2
        return _join(rows[:, half:], rows[:, :half])

    def candidate_rows(self, rows, side):
        """(N, 2d): [head role | tail role] for head queries, the halves swapped for tail queries."""
        if side == "head":
            return rows
        half = rows.shape[1] // 2
        return torch.cat([rows[:, half:], rows[:, :half]], dim=1)


SCORERS: Dict[str, Type[EmbeddingScorer]] = {
    cls.name: cls for cls in (TransEL1, TransEL2, DistMult, ComplEx, RotatE, RotatEModuli, RESCAL, SimplE)}
vocabulary.check_names("scorer", SCORERS, vocabulary.SCORERS)


def get_scorer_class(name: str) -> Type[EmbeddingScorer]:
    """Look a scorer up by name, case-insensitively; an unknown name lists the valid ones."""
    by_lower = {key.lower(): cls for key, cls in SCORERS.items()}
    cls = by_lower.get(name.strip().lower())
    if cls is None:
        raise InputError(f"unknown model {name!r}; valid models: {', '.join(SCORERS)}")
    return cls


# --------------------------------------------------------------------------------------------
# loading arrays


def array_sha256(*arrays) -> str:
    """sha256 over the ``.npy`` serialisation of each array, in order: what :func:`file_sha256`
    gives for files ``np.save`` wrote from the same arrays (so a model given in memory and the
    same model given as files carry the same ``source_sha256``)."""
    import io

    digest = hashlib.sha256()
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array))
        digest.update(buffer.getvalue())
    return digest.hexdigest()


def _largest_magnitude(values: torch.Tensor) -> float:
    """max |v| of a tensor (NaN if it holds one; 0 when empty); real tables without the copy
    that ``abs()`` would allocate (the size of the whole embedding table)."""
    if not values.numel():
        return 0.0
    if values.is_complex():
        return float(values.abs().max())
    extremes = torch.aminmax(values)
    lowest, highest = float(extremes.min), float(extremes.max)
    return math.nan if math.isnan(lowest) or math.isnan(highest) else max(-lowest, highest)


def state_dict_sha256(state: Dict[str, torch.Tensor]) -> str:
    """sha256 of a torch ``state_dict``: every entry's name, dtype, shape and bytes, names sorted
    (a model in memory and the same weights loaded from a file give the same hash)."""
    digest = hashlib.sha256()
    for name, value in sorted(state.items()):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{name}\t{tensor.dtype}\t{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def file_sha256(*paths) -> str:
    """sha256 over the bytes of the given files, in order."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _real_tensor(array: np.ndarray, path) -> torch.Tensor:
    if np.iscomplexobj(array):
        raise InputError("expected a real-valued array for this model, found complex values", path)
    if not np.issubdtype(array.dtype, np.number):
        raise InputError(f"expected a numeric array, found dtype {array.dtype}", path)
    dtype = np.float64 if array.dtype == np.float64 else np.float32
    return torch.from_numpy(np.ascontiguousarray(array, dtype=dtype))


def _complex_tensor(array: np.ndarray, layout: str, path) -> torch.Tensor:
    if np.iscomplexobj(array):
        dtype = np.complex128 if array.dtype == np.complex128 else np.complex64
        return torch.from_numpy(np.ascontiguousarray(array, dtype=dtype))
    if layout not in COMPLEX_LAYOUTS:
        raise InputError(f"unknown complex layout {layout!r}; expected one of {', '.join(COMPLEX_LAYOUTS)}")
    real = _real_tensor(array, path)
    if real.ndim != 2 or real.shape[1] % 2:
        raise InputError(f"a real array holding complex numbers needs an even width, found shape {tuple(real.shape)}",
                         path)
    half = real.shape[1] // 2
    if layout == "halves":
        return torch.complex(real[:, :half].contiguous(), real[:, half:].contiguous())
    return torch.view_as_complex(real.reshape(real.shape[0], half, 2).contiguous())


def check_table_rows(entity_rows: int, relation_rows: int, num_entities: int, num_relations: int,
                     entity_source=None, relation_source=None) -> None:
    """One row per entity and per relation of the dataset's label maps: the one check of the
    command line (files) and the Python API (arrays) alike. ``*_source``: the file, or how the
    caller names the table."""
    if entity_rows != num_entities:
        raise InputError(f"expected {num_entities} rows, one per entity of the dataset's entity map, "
                         f"found {entity_rows}", entity_source)
    if relation_rows != num_relations:
        raise InputError(f"expected {num_relations} rows, one per relation of the dataset's relation map, "
                         f"found {relation_rows}", relation_source)


def build_scorer(name: str, entity_array: np.ndarray, relation_array: np.ndarray, num_entities: int,
                 num_relations: int, complex_layout: str = "halves", entity_path=None,
                 relation_path=None) -> EmbeddingScorer:
    """Check shapes against the dataset's label maps and build the scorer for ``name``."""
    cls = get_scorer_class(name)
    if cls.complex_valued:
        entities = _complex_tensor(entity_array, complex_layout, entity_path)
        relations = _complex_tensor(relation_array, complex_layout, relation_path)
    else:
        entities = _real_tensor(entity_array, entity_path)
        relations = _real_tensor(relation_array, relation_path)
    if entities.ndim != 2:
        raise InputError(f"expected a 2-d array (entities, dimension), found shape {tuple(entities.shape)}",
                         entity_path)
    check_table_rows(int(entities.shape[0]), int(relations.shape[0]), num_entities, num_relations, entity_path,
                     relation_path)
    dim = entities.shape[1]
    if cls is RESCAL:
        if relations.ndim == 2 and relations.shape[1] == dim * dim:
            relations = relations.reshape(num_relations, dim, dim)
        if tuple(relations.shape[1:]) != (dim, dim):
            raise InputError(f"RESCAL relations must be (R, {dim}, {dim}) or (R, {dim * dim}) for entity dimension "
                             f"{dim}, found {tuple(relation_array.shape)}", relation_path)
    elif relations.ndim != 2 or relations.shape[1] != dim:
        raise InputError(f"expected relation shape ({num_relations}, {dim}) to match the entity dimension, "
                         f"found {tuple(relations.shape)}", relation_path)
    if entities.dtype != relations.dtype:
        wide = torch.promote_types(entities.dtype, relations.dtype)
        entities, relations = entities.to(wide), relations.to(wide)
    scorer = cls(entities, relations)
    scorer.table_files = {name: (None if path is None else str(path),
                                 complex_layout if cls.complex_valued and not np.iscomplexobj(array) else None)
                          for name, path, array in (("entities", entity_path, entity_array),
                                                    ("relations", relation_path, relation_array))}
    return scorer
