"""The repurposing matrix's fused pass (``openbench_matrix_fused_f32``): its keys are summed in the
order its rounding bound assumes, the bound covers every key, and what it counts is the
definition's and the plain pass's, record for record."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from openbench.evaluation.counting import matrix
from openbench.evaluation.counting.exact import ExactRanks
from openbench.evaluation.counting.key_bounds import UnboundedKeys
from openbench.evaluation.counting.matrix import MatrixSpec, count_matrix, fused_chain, fused_chunk
from openbench.models.scorers import build_scorer
from tests.bases import (assert_matrix_counts_are_the_definition, counted_in_parts, exact_embedding_key,
                         fused_matrix_pass_available, near_tie_matrix)


needs_fused = pytest.mark.skipif(not fused_matrix_pass_available(), reason="the fused pass needs AVX-512 and the C helper")


def _round32(value: Fraction) -> np.float32:
    """``value`` rounded to the nearest float32, ties to even (IEEE round to nearest)."""
    best = np.float32(float(value))
    for other in (np.nextafter(best, np.float32(-np.inf)), np.nextafter(best, np.float32(np.inf))):
        gap, best_gap = abs(Fraction(float(other)) - value), abs(Fraction(float(best)) - value)
        if gap < best_gap or (gap == best_gap and int(other.view(np.int32)) % 2 == 0):
            best = other
    return best


def _emulated_key(query, column, chunk, l2_terms=None) -> np.float32:
    """The key as the fused pass's docstring defines it: each chunk of ``chunk`` dimensions summed
    by fused multiply-adds from 0 (one rounding each, the exact product and sum rounded once), the
    chunks' sums added in order in float32; L2: ((2 t + col_term) + row_term)."""
    total = np.float32(0.0)
    for k0 in range(0, len(query), chunk):
        part = np.float32(0.0)
        for k in range(k0, min(k0 + chunk, len(query))):
            part = _round32(Fraction(float(query[k])) * Fraction(float(column[k])) + Fraction(float(part)))
        total = np.float32(total + part)
    if l2_terms is not None:
        col_term, row_term = l2_terms
        total = np.float32(np.float32(np.float32(total + total) + col_term) + row_term)
    return total


def _fused_of(scorer, spec):
    blocks = matrix.blocks._EmbeddingBlocks(scorer, spec)
    windows = matrix.windows._Windows(torch.zeros(1), torch.zeros(1), True)
    return blocks, matrix.fused._FusedPass(matrix.passes._BlockPass(windows, False, matrix.passes._library()), blocks)


def _tables(drugs, diseases, dim, seed, spread=0.0, relation_scale=1.0):
    """Seeded float32 tables; ``spread`` > 0: magnitudes over 10^±spread (sums with cancellation);
    ``relation_scale``: the relation that many times the entities' scale (TransE's queries h + r
    then share a large r, the case the fused pass's centring is for)."""
    rng = np.random.default_rng(seed)
    entities = rng.normal(size=(drugs + diseases, dim)) * 10.0 ** rng.uniform(-spread, spread, (drugs + diseases, dim))
    relations = rng.normal(size=(1, dim)) * 10.0 ** rng.uniform(-spread, spread, (1, dim)) * relation_scale
    return entities.astype(np.float32), relations.astype(np.float32)


@needs_fused
@pytest.mark.parametrize("name, dim, pairs", [("DistMult", 37, None), ("TransE-L2", 37, None),
                                              ("DistMult", 200, 60), ("TransE-L2", 5, None)])
def test_the_fused_keys_are_summed_in_the_order_the_bound_assumes(name, dim, pairs):
    """Bit for bit, every key of a matrix with partial tiles (13 rows, 35 columns: tiles are 6 ×
    32) equals the order written out in exact arithmetic: chunks of ⌊√d⌋ fused multiply-adds from
    0, the chunks' sums added in order (and L2's finishing in candidate_scores' order)."""
    drugs, diseases = 13, 35
    entities, relations = _tables(drugs, diseases, dim, seed=dim)
    scorer = build_scorer(name, entities, relations, drugs + diseases, 1)
    spec = MatrixSpec(torch.arange(drugs), torch.arange(drugs, drugs + diseases), 0, True)
    blocks, fused = _fused_of(scorer, spec)
    keys = fused.keys(0, drugs).numpy()
    chunk = fused_chunk(dim)
    assert fused.chunk == chunk
    queries, columns = fused.queries.numpy(), blocks.columns.numpy()  # L2's queries centred (_fused_inputs)
    chosen = [(i, j) for i in range(drugs) for j in range(diseases)]
    if pairs is not None:
        picks = np.random.default_rng(0).choice(len(chosen), pairs, replace=False)
        chosen = [chosen[p] for p in picks] + [(drugs - 1, diseases - 1), (12, 32)]  # the partial tiles' corner
    for i, j in chosen:
        terms = None
        if name == "TransE-L2":
            terms = (fused.col_terms.numpy()[j], fused.row_terms.numpy()[i])
        want = _emulated_key(queries[i], columns[j], chunk, terms)
        assert keys[i, j].view(np.int32) == want.view(np.int32), (i, j, keys[i, j], want)


def test_the_fused_chain_is_the_most_roundings_a_term_goes_through():
    """fused_chain(d) against the order counted term by term: a term's product is rounded by its
    own fused multiply-add, then once by each later one of its chunk, then once by each addition
    of chunk sums it takes part in (the first chunk's sum is added to 0 exactly)."""
    for dims in list(range(1, 80)) + [128, 199, 200, 201, 256, 1000]:
        chunk = fused_chunk(dims)
        starts = list(range(0, dims, chunk))
        worst = 0
        for m, k0 in enumerate(starts):
            length = min(chunk, dims - k0)
            additions = len(starts) - 1 if m == 0 else len(starts) - m
            for position in range(length):
                worst = max(worst, (length - position) + additions)
        assert fused_chain(dims) == worst, dims
    assert fused_chain(200) == 28 and fused_chunk(200) == 14


@needs_fused
@pytest.mark.parametrize("name, spread, relation_scale", [("DistMult", 3.0, 1.0), ("TransE-L2", 3.0, 1.0),
                                                          ("DistMult", 0.0, 1.0), ("TransE-L2", 0.0, 16.0)])
def test_the_fused_bound_covers_every_key_and_is_narrower_than_a_gemm_s(name, spread, relation_scale):
    """|fused key - exact key| <= each pair's own bound (its row's polynomial at its column's
    norm, which the fused pass narrows its windows to) <= the matrix's bound the fused windows use,
    for every pair of a matrix whose values span six orders of magnitude (sums with cancellation),
    or whose TransE queries share a relation 16 times the entities' scale (the centred form's
    case), d = 64; that bound is several times narrower than the GEMM's."""
    drugs, diseases, dim = 13, 40, 64
    entities, relations = _tables(drugs, diseases, dim, seed=11, spread=spread, relation_scale=relation_scale)
    scorer = build_scorer(name, entities, relations, drugs + diseases, 1)
    spec = MatrixSpec(torch.arange(drugs), torch.arange(drugs, drugs + diseases), 0, True)
    blocks, fused = _fused_of(scorer, spec)
    grid_bits = ExactRanks(scorer).grid_bits
    inputs = matrix.fused._fused_inputs(blocks, grid_bits)
    bound, gemm = inputs.delta, blocks.fast_bound(grid_bits)
    assert 0 < bound < gemm / 2 and inputs.centred == (name == "TransE-L2")
    terms, norms = inputs.terms, blocks.column_norms()
    keys = fused.keys(0, drugs).numpy()
    slack = []
    for i in range(drugs):
        for j in range(diseases):
            exact = exact_embedding_key(name, entities[i], relations[0], entities[drugs + j])
            error = abs(Fraction(float(keys[i, j])) - exact)
            own = (terms[i, 0] * norms[j] + terms[i, 1]) * norms[j] + terms[i, 2]
            assert error <= Fraction(own) and own <= bound, (i, j)
            slack.append(float(error) / own)
    assert max(slack) > 0.02  # the keys were rounded, and the bound is not vacuous


def _wide(name):
    """near_tie_matrix's 29 × 300 matrix (partial tiles both ways) and special pairs on every side of
    the tiles."""
    scorer, spec, keys = near_tie_matrix(name, 29)
    return scorer, spec, keys, np.array([0, 4, 8, 2, 2, 5, 1, 28, 13]), np.array([3, 200, 150, 299, 128, 127, 3, 3, 31])


@needs_fused
@pytest.mark.parametrize("name", ["DistMult", "TransE-L2"])
def test_the_fused_pass_counts_what_the_definition_counts_in_parts(name, monkeypatch):
    """On 29 rows × 300 columns (partial tiles both ways), ties across tiles and a near-tie one
    float32 step away, in passes of at most three rows' keys (COUNTER_LIMIT) over blocks of five
    rows: every count and the best pairs are the definition's, and the fused pass ran."""
    monkeypatch.delenv(matrix.PASS_VARIABLE, raising=False)
    monkeypatch.setenv(matrix.BLOCK_VARIABLE, str(5 * 300))
    scorer, spec, keys, rows, cols = _wide(name)
    counted, sizes = counted_in_parts(monkeypatch, "openbench_matrix_fused_f32", lambda a: a.rows * a.width, 3 * 300,
                                      scorer, spec, rows, cols, np.ones(rows.size, bool), top_k=5)
    assert counted.stats["pass"] == "fused C on cpu"
    assert sizes and max(sizes) <= 3 * 300 and sum(sizes) >= 29 * 300  # rows * width a call
    assert_matrix_counts_are_the_definition(counted, keys, rows, cols)


@needs_fused
def test_a_nan_in_the_fused_pass_s_tables_is_one_error_naming_its_place(monkeypatch):
    """A NaN stored in a column's row: one line naming it; past that check, the pair windows'
    bounds refuse it; the pass's own check of its keys: the next test."""
    from openbench.errors import InputError

    monkeypatch.delenv(matrix.PASS_VARIABLE, raising=False)
    scorer, spec, _, rows, cols = _wide("DistMult")
    count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool))  # the tables' summaries, taken finite
    scorer.entities[spec.shape[0] + 130, 0] = float("nan")
    with pytest.raises(InputError, match=rf"entity embeddings, row {spec.shape[0] + 130}, column 0, holds NaN"):
        count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool))  # named as a stored value
    monkeypatch.setattr(type(scorer), "stored_tables", lambda self: [])  # past that check: no window from it
    with pytest.raises(UnboundedKeys, match="is not finite"):
        count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool))


@needs_fused
def test_the_fused_pass_needs_avx512_chosen(monkeypatch):
    """With another scan chosen (OPENBENCH_SCAN, or a CPU without AVX-512) the plain pass counts."""
    from openbench.evaluation.counting.kernels import chunk_scan

    scorer, spec, _, rows, cols = _wide("DistMult")
    monkeypatch.delenv(matrix.PASS_VARIABLE, raising=False)
    before = chunk_scan()
    try:
        chunk_scan("avx2")
        assert count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool)).stats["pass"] == "C on cpu"
    finally:
        chunk_scan(before)
    assert count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool)).stats["pass"] == "fused C on cpu"


@needs_fused
def test_a_nan_key_the_probe_did_not_see_is_still_an_error(monkeypatch):
    """The fused pass checks every tile for NaN keys itself (the probe and the tables' summaries
    may not have met them): a NaN planted in the packed columns after the setup ends the pass with
    a ScoreError, nothing counted."""
    from openbench.errors import ScoreError

    monkeypatch.delenv(matrix.PASS_VARIABLE, raising=False)
    scorer, spec, _, rows, cols = _wide("DistMult")
    blocks, fused = _fused_of(scorer, spec)
    fused.packed[3, 5, 7] = np.nan  # column 3 * 32 + 7, dimension 5
    with pytest.raises(ScoreError, match="NaN score"):
        fused(0, spec.shape[0], None)


@needs_fused
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_best_pairs_survive_the_probe_s_other_rounding(monkeypatch, seed):
    """The first floor of the best pairs comes from the probe's GEMM keys, the pass's keys from its
    own order of sums: every K from 1 to 40, the best K pairs of a 24 × 60 matrix (d = 64, no ties)
    are the exact keys' best K, the cut included, though the two roundings differ in the last bits."""
    monkeypatch.delenv(matrix.PASS_VARIABLE, raising=False)
    drugs, diseases, dim = 24, 60, 64
    entities, relations = _tables(drugs, diseases, dim, seed=100 + seed)
    scorer = build_scorer("DistMult", entities, relations, drugs + diseases, 1)
    spec = MatrixSpec(torch.arange(drugs), torch.arange(drugs, drugs + diseases), 0, True)
    exact = {(i, j): exact_embedding_key("DistMult", entities[i], relations[0], entities[drugs + j]) for i in range(drugs)
             for j in range(diseases)}
    ranked = sorted(exact, key=exact.get, reverse=True)
    blocks, fused = _fused_of(scorer, spec)
    gemm = blocks.keys(0, drugs, torch.empty((drugs, diseases))).numpy()
    assert (fused.keys(0, drugs).numpy() != gemm).any()  # the two roundings differ somewhere
    for k in range(1, 41):
        counted = count_matrix(scorer, spec, np.array([0]), np.array([0]), np.array([True]), top_k=k)
        assert counted.stats["pass"] == "fused C on cpu"
        assert [tuple(pair) for pair in counted.top.tolist()] == ranked[:k], k


def test_the_matrix_s_columns_are_the_stored_rows_whatever_their_ids():
    """A run of ascending ids is read as a view, any other ids gathered: the same rows either way."""
    table = torch.arange(60.0).reshape(20, 3)
    for ids in ([4, 5, 6, 7], [4, 6, 7, 8], [7, 6, 5, 4], [4, 4, 5, 6], [9], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                                             12, 13, 14, 15, 16, 17, 18, 19]):
        index = torch.tensor(ids)
        assert torch.equal(matrix.core._stored_rows(table, index), table[index]), ids
    assert matrix.core._stored_rows(table, torch.tensor([4, 5, 6])).data_ptr() == table[4].data_ptr()  # no copy


def test_the_bound_polynomials_are_their_stated_sums():
    """Each row's bound polynomial, evaluated at a column norm, equals the sum of the error terms
    its docstring states, written out here term by term (for the centred L2 form: the chunked dot
    product, ŝ's double rounding, the float64 query's error, T's and R's roundings, the two
    additions'); and fast_key_bound's dot polynomial is γ(n_q + chain)·‖|q|‖·C₂."""
    from openbench.evaluation.counting.key_bounds import centred_l2_bound_terms, fast_key_bound_terms
    from openbench.evaluation.counting.rounding import U64, gamma

    u, width, chain = 2.0 ** -24, 200, 28
    g, g2, eta = gamma(chain, u), gamma(2, u), gamma(width + 2, U64)
    s, centre, f, e = np.array([3.5, 0.2]), 14.1, np.array([14.6, 9.0]), np.array([1e-15, 3e-16])
    quadratic, linear, constant = centred_l2_bound_terms(u, width, chain, s, centre, f, e)
    for c in (0.0, 1.0, 4.2, 30.0):
        dot_sum = 2 * s * c * (1 + g) + (1 + 2 * u) * (2 * centre * c + c * c)  # |2D + T|
        stated = (2 * (g + g2) * s * c + 2 * e * c  # the dot product, ŝ, Q̃
                  + (u + 2 * eta) * (2 * centre * c + c * c)  # T
                  + (u + 2 * eta) * f ** 2 + e * (2 * f + e)  # R
                  + u * dot_sum + u * (1 + u) * dot_sum + u * (1 + 2 * u) * f ** 2)  # the two additions
        assert np.allclose((quadratic * c + linear) * c + constant, stated, rtol=1e-12, atol=0), c

    class Scorer:
        query_rounding = 1

    quadratic, linear, constant = fast_key_bound_terms("dot", Scorer(), u, width, (np.array([2.0]), None),
                                                       (np.array([2.0]), None), (np.array([2.0]), None), chain)
    assert quadratic[0] == 0 and constant[0] == 0 and linear[0] == gamma(1 + chain, u) * 2.0
