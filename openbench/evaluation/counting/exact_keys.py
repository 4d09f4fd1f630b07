"""Keys in float64 and in exact arithmetic, read from the stored embeddings: the queries' vectors
(:func:`query_rows`), the keys of chosen (query, candidate) pairs (:func:`pair_keys`), bounds on
row norms (:func:`norm_bounds`) and one key in exact decimal arithmetic (:func:`exact_key`). The C
kernel (``csrc/exact_keys.c``) computes the float64 ones in one read of the rows; the torch and numpy
paths are the same arithmetic up to the order of the additions, which the bounds of
:mod:`openbench.evaluation.counting.key_bounds` allow (``OPENBENCH_KERNEL=torch`` forces them)."""
from __future__ import annotations

import ctypes
import decimal
from typing import NamedTuple, Optional, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.c_structs import PairKeysArgs, QueryRowsArgs
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY, LOOKUP, split_rows
from openbench.evaluation.counting.rounding import SUBNORMAL_SPACING, U64, gamma

__all__ = ["KEY_KINDS", "QUERY_CODES", "DECIMAL_EXACT", "PairKeys", "QueryRows", "real_rows", "norm_bounds",
           "widened_norms", "pair_keys", "query_rows", "exact_key", "decimals"]

DECIMAL_EXACT = decimal.Context(prec=100_000, traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation])


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


def widened_norms(two: torch.Tensor, one: torch.Tensor, width: int) -> Tuple[torch.Tensor, torch.Tensor]:
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
        return widened_norms(two, one, width)
    values = vectors.to(torch.float64)
    two = ((values * values).sum(dim=1) + width * SUBNORMAL_SPACING[torch.float64]).sqrt()
    return widened_norms(two, values.abs().sum(dim=1), width)


def pair_keys(kind: str, queries: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
              truths: Optional[torch.Tensor] = None, library=LOOKUP) -> PairKeys:
    """float64 keys of the pairs (queries[rows[p]], table[cols[p]]), p < P, read in one pass.

    :param kind: ``"dot"`` (q·c), ``"l2"`` (-‖q - c‖²), ``"l1"`` (-‖q - c‖₁) or ``"moduli"``
        (-Σ|q_k - c_k| over complex coordinates given as [Re | Im] halves).
    :param queries: (B, d') float64 on the CPU; ``table`` (N, d') candidate vectors of any
        floating dtype and device (converted to float64 exactly); ``rows``, ``cols`` (P,) int64.
    :param truths: optional (B, d') (the true answers' candidate vectors): ``identical[p]`` tells
        whether table[cols[p]] equals truths[rows[p]] value for value.

    The C kernel (``csrc/exact_keys.c``) does it without gathering the rows; the torch path is the
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
        function(ctypes.byref(PairKeysArgs(
            kind=KEY_KINDS[kind], queries=queries.data_ptr(), truths=truths_pointer, width=width,
            table=table.data_ptr(), stride=table.stride(0), rows=rows.data_ptr() + 8 * begin,
            cols=cols.data_ptr() + 8 * begin, count=end - begin, keys=keys.data_ptr() + 8 * begin,
            norm2=two.data_ptr() + 8 * begin, norm1=one.data_ptr() + 8 * begin,
            identical=None if identical is None else identical.data_ptr() + begin)))

    split_rows(count, count * width, run)
    return PairKeys(keys, *widened_norms(two, one, width), None if identical is None else identical.bool())


def exact_key(scorer, kind: str, anchor: np.ndarray, relation: np.ndarray, side: str, candidate: np.ndarray):
    """The exact key (a Decimal) of one query (its stored anchor and relation rows, float64) on
    ``side`` against one stored candidate row, by the scorer's own formulas in exact decimal
    arithmetic (an operation that would round raises decimal.Inexact); dot, L2 and L1 kinds."""
    with decimal.localcontext(DECIMAL_EXACT):
        relation_row = decimals(relation)[None]
        query = scorer.query_formula(decimals(anchor)[None], relation_row, side, np.subtract)[0]
        vector = scorer.candidate_formula(decimals(candidate)[None], side, relation_row, np.subtract)[0]
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
        function(ctypes.byref(QueryRowsArgs(
            code=QUERY_CODES[code], entities=entities.data_ptr(), entity_stride=entities.stride(0),
            relations=relations.data_ptr(), relation_stride=relations.stride(0), anchors=anchor_ids.data_ptr(),
            relation_ids=relation_ids.data_ptr(), count=count, width=width, queries=query.data_ptr(),
            norm2=two.data_ptr(), norm1=one.data_ptr(), kind=KEY_KINDS.get(kind, 0),
            truths=None if truths is None else truths.data_ptr(), true_keys=key.data_ptr(),
            true_norm2=true_two.data_ptr(), true_norm1=true_one.data_ptr())))
    norms = widened_norms(two, one, out_width)
    if truths is None:
        return QueryRows(query, norms, None, None)
    return QueryRows(query, norms, key, widened_norms(true_two, true_one, out_width))


def decimals(values: np.ndarray) -> np.ndarray:
    """An object array of exact Decimals (every float64 converts exactly)."""
    return np.array([decimal.Decimal(float(x)) for x in values.ravel()], dtype=object).reshape(values.shape)


def _exact_key(kind: str, query, candidate):
    if kind == "dot":
        return (query * candidate).sum()
    difference = query - candidate
    if kind == "l2":
        return -(difference * difference).sum()
    return -np.abs(difference).sum()
