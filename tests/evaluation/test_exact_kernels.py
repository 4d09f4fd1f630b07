"""The C helpers of exact ranks (query rows, pair keys, row norms) against the numpy/torch
formulas they replace: the same float64 queries bit for bit, keys within float64 rounding, and
norms that bound the exact ones (tiny float64 values included)."""
import math
import os
from fractions import Fraction

import numpy as np
import pytest
import torch

from openbench.evaluation.counting import kernels
from openbench.datasets.loader import load_dataset
from openbench.evaluation.counting.exact_keys import norm_bounds, pair_keys, query_rows, real_rows
from openbench.evaluation.counting.table_facts import fraction_bits
from openbench.models.scorers import DistMult, build_scorer
from tests.helpers import missing_implementation, random_labelled_graph, write_samples
from tests.bases import evaluated

CODED_MODELS = ("TransE-L1", "TransE-L2", "DistMult", "ComplEx", "RotatE")
COMPLEX = ("ComplEx", "RotatE")


@pytest.fixture
def c_library():
    if kernels.COUNTING_LIBRARY.get() is None:
        missing_implementation("the C counting kernel")
        pytest.skip("the C helpers are not built here")


def _scorer(model, dtype=np.float32, entities=40, relations=5, dim=7, seed=0):
    rng = np.random.default_rng(seed)
    width = 2 * dim if model in COMPLEX else dim
    rows = rng.standard_normal((entities, width)) * rng.uniform(0.1, 10, (entities, 1))
    if model == "RotatE":
        angles = rng.uniform(-np.pi, np.pi, (relations, dim))
        rel = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    else:
        rel = rng.standard_normal((relations, width))
    return build_scorer(model, rows.astype(dtype), rel.astype(dtype), entities, relations)


def _exact_norms(vectors: np.ndarray):
    """(‖v‖₂², ‖v‖₁) of each row, exactly, as Fractions."""
    squares = [sum(Fraction(float(x)) ** 2 for x in row) for row in vectors]
    return squares, [sum(abs(Fraction(float(x))) for x in row) for row in vectors]


def _assert_bounds(two, one, vectors):
    squares, ones = _exact_norms(vectors)
    for bound2, bound1, square, total in zip(two.tolist(), one.tolist(), squares, ones):
        assert Fraction(bound2) ** 2 >= square and Fraction(bound1) >= total


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("model", CODED_MODELS)
def test_query_rows_compute_the_query_formula_bit_for_bit(c_library, model, dtype):
    scorer = _scorer(model, dtype)
    rng = np.random.default_rng(1)
    anchors, relations = torch.from_numpy(rng.integers(0, 40, 30)), torch.from_numpy(rng.integers(0, 5, 30))
    for side in ("head", "tail"):
        if scorer.query_code(side) is None:
            assert query_rows(scorer, side, anchors, relations) is None
            continue
        truths = scorer.candidate_rows(scorer.entities[torch.from_numpy(rng.integers(0, 40, 30))], side).contiguous()
        built = query_rows(scorer, side, anchors, relations, scorer.kind, truths)
        anchor, relation = real_rows(scorer.entities[anchors]), real_rows(scorer.relations[relations])
        expected = scorer.query_formula(anchor, relation, side, np.subtract)
        assert built.query.numpy().tobytes() == np.ascontiguousarray(expected).tobytes()
        _assert_bounds(*built.norms, scorer.query_formula(np.abs(anchor), np.abs(relation), side, np.add))
        everyone = torch.arange(30)
        reference = pair_keys(scorer.kind, built.query, truths.double(), everyone, everyone)
        assert np.allclose(built.true_key.numpy(), reference.keys.numpy(), rtol=1e-12, atol=1e-300)
        _assert_bounds(*built.truth_norms, truths.double().numpy())


def test_query_rows_refuse_what_they_cannot_compute(c_library):
    scorer = _scorer("DistMult")
    ids = torch.zeros(3, dtype=torch.long)
    half = DistMult(torch.ones((4, 3), dtype=torch.float16), torch.ones((2, 3), dtype=torch.float16))
    assert query_rows(half, "tail", ids, ids) is None  # float16 tables: the numpy formulas instead
    rescal = build_scorer("RESCAL", np.ones((4, 2), np.float32), np.ones((2, 2, 2), np.float32), 4, 2)
    assert query_rows(rescal, "tail", ids, ids) is None  # no formula code
    with pytest.raises(IndexError):
        query_rows(scorer, "tail", torch.tensor([0, 40]), torch.tensor([0, 0]))


@pytest.mark.parametrize("kind", ["dot", "l2", "l1", "moduli"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pair_keys_c_and_torch_agree(kind, dtype, monkeypatch):
    rng = np.random.default_rng(2)
    queries = torch.from_numpy(rng.standard_normal((6, 10)))
    table = torch.from_numpy(rng.standard_normal((50, 10))).to(dtype)
    table[7] = table[3]
    rows, cols = torch.from_numpy(rng.integers(0, 6, 200)), torch.from_numpy(rng.integers(0, 50, 200))
    cols[:6] = 7
    truths = table[torch.tensor([3, 3, 9, 3, 1, 0])].contiguous()
    found = {}
    for name in ("default", "torch"):
        if name == "torch":
            monkeypatch.setenv("OPENBENCH_KERNEL", "torch")
        kernels.COUNTING_LIBRARY.reset()
        found[name] = pair_keys(kind, queries, table, rows, cols, truths)
    kernels.COUNTING_LIBRARY.reset()
    c, t = found["default"], found["torch"]
    assert np.allclose(c.keys.numpy(), t.keys.numpy(), rtol=1e-13)
    assert torch.equal(c.identical, t.identical)
    expected_identical = torch.tensor([bool((table[j] == truths[i]).all()) for i, j in zip(rows.tolist(),
                                                                                           cols.tolist())])
    assert torch.equal(c.identical, expected_identical) and bool(c.identical.any())
    for keys in (c, t):
        _assert_bounds(keys.norm2, keys.norm1, table[cols].double().numpy())


@pytest.mark.parametrize("use_c", [True, False])
def test_norms_of_tiny_float64_values_stay_bounds(use_c, monkeypatch):
    """x * x underflows to 0 below 2^-537: the bounds must still cover the exact norms."""
    if not use_c:
        monkeypatch.setenv("OPENBENCH_KERNEL", "torch")
    kernels.COUNTING_LIBRARY.reset()
    try:
        vectors = torch.tensor([[1e-170, -3e-171, 2e-200], [0.0, 5e-324, 0.0], [1.0, 1e-300, 0.0]],
                               dtype=torch.float64)
        assert float((vectors * vectors).sum(dim=1)[0]) == 0.0  # the squares underflow
        _assert_bounds(*norm_bounds(vectors), vectors.numpy())
        keys = pair_keys("dot", torch.zeros(1, 3, dtype=torch.float64), vectors, torch.zeros(3, dtype=torch.long),
                         torch.arange(3))
        _assert_bounds(keys.norm2, keys.norm1, vectors.numpy())
    finally:
        kernels.COUNTING_LIBRARY.reset()


def test_rotate_head_windows_use_the_relations_modulus():
    """The rewrite term of RotatE's head queries is max|ρ - 1| for the squared modulus ρ of each
    relation coordinate (tiny for stored rotations); reading the [Re | Im] halves as separate
    moduli made it about 1 and every candidate undecided."""
    scorer = _scorer("RotatE", entities=300, relations=3, dim=16)
    relation = torch.from_numpy(real_rows(scorer.relations[torch.tensor([0, 1, 2, 0])]))
    anchor = torch.from_numpy(real_rows(scorer.entities[:4]))
    rewrite = scorer.rewrite_error(relation, "head", anchor, (10.0, 40.0))
    squared_modulus = relation[:, :16] ** 2 + relation[:, 16:] ** 2
    largest = float((squared_modulus - 1).abs().max())
    assert largest < 1e-6  # float32 rotations: unit to within rounding
    assert float(rewrite.max()) <= 2 * (largest + 1e-15) * (100 + float(anchor.norm(dim=1).max()) ** 2)


def test_exact_ranks_of_rotate_heads_rescore_few_candidates(tmp_path):
    splits = random_labelled_graph(3, 300, 3, {"train": 900, "valid": 10, "test": 60})
    dataset = load_dataset(write_samples(tmp_path, splits))
    scorer = _scorer("RotatE", entities=dataset.num_entities, relations=dataset.num_relations, dim=16, seed=3)
    record = evaluated(dataset, scorer, sides=("head",))
    assert record["timing"]["exact_ranks"]["rescored"] < 0.05 * 60 * dataset.num_entities


def _reference_fraction_bits(values) -> int:
    """The fewest fraction digits of every value, from exact fractions (obviously correct)."""
    bits = 0
    for value in values:
        denominator = Fraction(float(value)).denominator  # a power of two
        bits = max(bits, denominator.bit_length() - 1)
    return bits


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fraction_bits_c_and_numpy_agree_with_exact_fractions(dtype, monkeypatch):
    """The one-pass C reading of the bit patterns and the numpy path give what exact fractions
    give: subnormals, negative zero, integers, large and tiny values; None for inf and NaN."""
    rng = np.random.default_rng(3)
    tiny = np.finfo(np.float32 if dtype == torch.float32 else np.float64).smallest_subnormal
    cases = [rng.standard_normal(1000), np.array([3.0, -0.0, 2.0 ** 40, -7.0]), np.array([0.5, -0.25, 0.0]),
             np.array([tiny, -tiny * 3, 1.0]), np.array([2.0 ** -30, 1.5 * 2.0 ** 20]),
             np.round(rng.standard_normal(500) * 64) / 64, np.zeros(5)]
    for values in cases:
        table = torch.from_numpy(values).to(dtype)
        expected = _reference_fraction_bits(table.tolist())
        found = {}
        for name in ("c", "numpy"):
            if name == "numpy":
                monkeypatch.setenv("OPENBENCH_KERNEL", "torch")
            kernels.COUNTING_LIBRARY.reset()
            found[name] = fraction_bits(table.reshape(-1, 1 if table.numel() % 2 else 2), table[:1])
            monkeypatch.delenv("OPENBENCH_KERNEL", raising=False)
        kernels.COUNTING_LIBRARY.reset()
        assert found == {"c": expected, "numpy": expected}, values[:5]
    for bad in (math.inf, -math.inf, math.nan):
        table = torch.tensor([1.0, bad, 0.5], dtype=dtype)
        assert fraction_bits(table) is None
    if os.environ.get("CI"):
        assert kernels.COUNTING_LIBRARY.get() is not None, "the C helpers are not built"
