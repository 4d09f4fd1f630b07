"""Exact ranks: counts equal an exact rational reference, and do not depend on the kernel, the
batch size, the entity chunking or the embeddings' dtype (the shards: test_distributed.py)."""
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench.evaluation.counting import kernels
from openbench.datasets.loader import Dataset, load_dataset
from openbench.evaluation.candidates import RankingSetup
from openbench.evaluation.evaluate import evaluate
from openbench.evaluation.producers.full import FullRanking
from openbench.evaluation.counting.table_facts import fraction_bits
from openbench.models.scorers import build_scorer
from tests.bases import COMPLEX_MODELS, near_tie_embeddings as near_tie_embeddings_for, near_tie_scorer
from tests.bases import exact_score_key, exact_stats, fractions as _fractions, rational_counts as reference_counts
from tests.bases import record_counts, stored_rows as _stored
from tests.helpers import known_answers, needs_module, random_labelled_graph, write_samples

MODELS = ("DistMult", "ComplEx", "RESCAL", "SimplE", "TransE-L1", "TransE-L2", "RotatE", "RotatE-DGLKE")


def _run(dataset, scorer, **options):
    """The record of ``scorer`` on ``dataset`` through the one door, on the CPU."""
    return evaluate(dataset, scorer, device="cpu", **options)


def _counts(record):
    return record_counts(record)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(11, 90, 3, {"train": 300, "valid": 10, "test": 24})
    return load_dataset(write_samples(tmp_path_factory.mktemp("graph"), splits))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed, dim", [(0, 4), (1, 16)])
def test_exact_counts_equal_the_rational_reference(dataset, model, seed, dim):
    scorer = near_tie_scorer(dataset, model, seed=seed, dim=dim)
    evaluator = _run(dataset, scorer)
    assert _counts(evaluator) == reference_counts(dataset, scorer, model)
    assert exact_stats(evaluator)["rescored"] > 0  # near-ties reached the re-scoring
    assert exact_stats(evaluator)["unresolved"] == 0


def test_fast_ranks_differ_where_exact_ranks_do_not(dataset):
    """The test has teeth: on these near-ties float32 counting itself gets some counts wrong."""
    wrong = 0
    for model in ("DistMult", "TransE-L1", "ComplEx"):
        for seed in range(3):
            scorer = near_tie_scorer(dataset, model, seed=seed)
            fast = _run(dataset, scorer, ranks="fast")
            wrong += _counts(fast) != reference_counts(dataset, scorer, model)
    assert wrong > 0


def _metrics(result):
    return json.dumps({key: result[key] for key in ("metrics", "per_relation", "macro_relation")}, sort_keys=True)


def _triton_on_cpu(monkeypatch):
    """Route CPU blocks through the Triton kernel (its interpreter, set by tests/conftest.py)."""
    needs_module("triton")
    from openbench.evaluation.counting import _triton
    monkeypatch.setattr(kernels, "_triton", _triton)
    monkeypatch.setattr(kernels, "kernel_name", lambda scores: "triton")


@pytest.mark.parametrize("model", ["DistMult", "TransE-L1", "RotatE"])
def test_the_same_metrics_from_every_kernel_batch_size_chunking_and_dtype(dataset, model, monkeypatch):
    scorer = near_tie_scorer(dataset, model)
    results = {}

    def run(label, evaluator_scorer=scorer, batch_size=None, **options):
        results[label] = _metrics(_run(dataset, evaluator_scorer, batch_size=batch_size, **options).to_dict())

    for batch_size in (None, 1, 7):
        run(f"batch {batch_size}", batch_size=batch_size)
    run("chunks of 13 entities", entity_chunk=13, batch_size=5)
    wide = near_tie_scorer(dataset, model, dtype=np.float64)  # the same values, stored as float64
    assert torch.equal(wide.entities.to(scorer.entities.dtype), scorer.entities)
    run("float64 embeddings", evaluator_scorer=wide)
    with monkeypatch.context() as patch:
        patch.setenv("OPENBENCH_KERNEL", "torch")
        kernels.COUNTING_LIBRARY.reset()
        run("torch kernel")
    kernels.COUNTING_LIBRARY.reset()
    with monkeypatch.context() as patch:
        _triton_on_cpu(patch)
        run("triton kernel (interpreter)", batch_size=16)
    assert len(set(results.values())) == 1, {label: value[:80] for label, value in results.items()}


def test_the_protocol_says_how_ranks_were_counted(dataset):
    scorer = near_tie_scorer(dataset, "DistMult")
    exact = _run(dataset, scorer).to_dict()
    fast = _run(dataset, scorer, ranks="fast").to_dict()
    assert exact["protocol"]["ranks"] == "exact" and fast["protocol"]["ranks"] == "float32"
    assert exact["protocol"]["embedding_precision"] == "float32"
    stats = exact["timing"]["exact_ranks"]
    assert stats["rescored"] == stats["float64"] + stats["identical"] + stats["decimal"] > 0
    assert "exact_ranks" not in fast["timing"]


def test_ties_stay_ties(dataset):
    """Integer embeddings, duplicated rows and constant scores: exactly equal values tie."""
    rng = np.random.default_rng(3)
    entities = rng.integers(-2, 3, (dataset.num_entities, 3)).astype(np.float32)
    entities[10:20] = entities[0]  # duplicated rows
    relations = rng.integers(-2, 3, (dataset.num_relations, 3)).astype(np.float32)
    for model in ("DistMult", "TransE-L2", "TransE-L1"):
        scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
        exact = _run(dataset, scorer)
        counts = _counts(exact)
        assert counts == _counts(_run(dataset, scorer, ranks="fast"))
        assert counts == reference_counts(dataset, scorer, model)
        assert exact_stats(exact)["decimal"] == 0  # integers: float64 decides ties exactly (the grid)
    constant = build_scorer("DistMult", np.ones((dataset.num_entities, 3), np.float32),
                            np.zeros((dataset.num_relations, 3), np.float32), dataset.num_entities,
                            dataset.num_relations)
    counts = _counts(_run(dataset, constant))
    assert all(g == 0 and e == c - 1 for side in counts.values() for g, e, c in side)


def test_fraction_bits():
    assert fraction_bits(torch.tensor([1.0, -3.0, 0.0])) == 0
    assert fraction_bits(torch.tensor([0.5, 0.75])) == 2
    assert fraction_bits(torch.tensor([2.0 ** -30], dtype=torch.float64)) == 30
    assert fraction_bits(torch.tensor([math.inf])) is None


# -- near-ties drawn on purpose -------------------------------------------------------------------

def _tiny_dataset(entities, test):
    labels = [f"E:{i}" for i in range(entities)]
    triples = {"train": torch.zeros((0, 3), dtype=torch.long), "valid": torch.zeros((0, 3), dtype=torch.long),
               "test": torch.tensor(test, dtype=torch.long)}
    return Dataset(path="memory", layout="samples", entity_labels=labels, relation_labels=["R:0", "R:1"],
                   triples=triples, fingerprint="memory", id_map_sha256="memory")


finite32 = st.floats(-4, 4, width=32, allow_subnormal=False)


@pytest.mark.parametrize("model", ["TransE-L2", "DistMult", "TransE-L1"])
def test_a_subnormal_difference_is_not_a_tie(model):
    """Found by the property below: entries 0 and the smallest float32 subnormal lie on a common
    binary grid, but the squared distance between them (2^-298) underflows in float32, so the grid
    criterion must not declare the fast keys exact below float32's subnormal spacing."""
    tiny = np.nextafter(np.float32(0), np.float32(np.inf))
    entities = np.array([[0.0], [tiny], [0.0], [1.0 if model == "DistMult" else 0.0]], dtype=np.float32)
    relations = np.array([[0.0], [tiny]] if model != "DistMult" else [[tiny], [1.0]], dtype=np.float32)
    dataset = _tiny_dataset(4, [[3, 0, 0], [0, 1, 3]])
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    assert _counts(_run(dataset, scorer, filter_sets=())) == reference_counts(dataset, scorer, model, filter_sets=())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_candidates_one_ulp_from_the_true_score(data):
    """Candidates built from the true answer's row by one-ulp moves (and exact copies): exact
    counts equal the rational reference whatever float32 makes of them."""
    model = data.draw(st.sampled_from(["DistMult", "TransE-L1", "TransE-L2", "ComplEx", "RotatE", "SimplE"]))
    dim = data.draw(st.integers(1, 5))
    width = 2 * dim if model in COMPLEX_MODELS or model == "SimplE" else dim
    true_row = np.array(data.draw(st.lists(finite32, min_size=width, max_size=width)), dtype=np.float32)
    rows = [true_row]
    for _ in range(data.draw(st.integers(2, 7))):
        row = true_row.copy()
        for _ in range(data.draw(st.integers(0, 2))):
            k = data.draw(st.integers(0, width - 1))
            row[k] = np.nextafter(row[k], np.float32(data.draw(st.sampled_from([np.inf, -np.inf]))))
        rows.append(row)
    anchor = np.array(data.draw(st.lists(finite32, min_size=width, max_size=width)), dtype=np.float32)
    entities = np.stack(rows + [anchor])
    if model == "RotatE":
        angles = np.array(data.draw(st.lists(st.floats(-3.1, 3.1), min_size=2 * dim, max_size=2 * dim))).reshape(2, dim)
        relations = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    else:
        relations = np.array(data.draw(st.lists(finite32, min_size=2 * width, max_size=2 * width)),
                             dtype=np.float32).reshape(2, width)
    anchor_id = len(rows)
    dataset = _tiny_dataset(len(entities), [[anchor_id, 0, 0], [0, 1, anchor_id]])  # tail and head queries on row 0
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    evaluator = _run(dataset, scorer, filter_sets=())
    assert _counts(evaluator) == reference_counts(dataset, scorer, model, filter_sets=())


@pytest.mark.parametrize("model", ["DistMult", "TransE-L2", "RotatE-DGLKE"])
def test_float64_near_ties_are_settled_in_exact_decimal_arithmetic(dataset, model):
    """float64 embeddings one float64 ulp apart: float64 re-scoring cannot decide them, the exact
    decimal step (or, for sums of moduli, the 100-digit comparison) does."""
    scorer = near_tie_scorer(dataset, model, dtype=np.float64)
    entities = _stored(scorer.entities)
    rng = np.random.default_rng(5)
    for row in range(60, dataset.num_entities):  # copies of earlier rows, one coordinate one float64 ulp away
        entities[row] = entities[rng.integers(0, 60)]
        column = rng.integers(0, entities.shape[1])
        entities[row, column] = np.nextafter(entities[row, column], np.inf)
    relations = _stored(scorer.relations)
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    evaluator = _run(dataset, scorer)
    assert _counts(evaluator) == reference_counts(dataset, scorer, model)
    assert exact_stats(evaluator)["decimal"] > 0 and exact_stats(evaluator)["unresolved"] == 0


@pytest.mark.parametrize("model", ["DistMult", "TransE-L1", "TransE-L2"])
def test_scores_that_cancel_are_ranked_by_their_exact_values(dataset, model):
    """Large terms that cancel to small scores: float32's error is then far above an ulp of the
    score, so only a bound on the terms (not on the score) finds the undecided candidates."""
    rng = np.random.default_rng(8)
    big = rng.uniform(-1e4, 1e4, (dataset.num_entities, 2))
    if model == "DistMult":  # rows (x, x + ε, y), r = (1, -1, 1): h·r·c = x_h x_c - x'_h x'_c + y_h y_c
        x = big[:, :1]
        entities = np.concatenate([x, x + rng.uniform(-1e-2, 1e-2, x.shape), rng.uniform(-1, 1, x.shape)],
                                  axis=1).astype(np.float32)
        relations = np.tile(np.array([1.0, -1.0, 1.0], np.float32), (dataset.num_relations, 1))
    else:  # every entity near one large point: distances far below the coordinates
        entities = (np.float32(5e3) + rng.uniform(-1e-2, 1e-2, (dataset.num_entities, 3))).astype(np.float32)
        relations = rng.uniform(-1e-3, 1e-3, (dataset.num_relations, 3)).astype(np.float32)
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    evaluator = _run(dataset, scorer)
    assert _counts(evaluator) == reference_counts(dataset, scorer, model)


def _float64_reference(dataset, entities, relations, model):
    """{side: [(n_greater, n_equal)]} with every score computed in float64 by numpy (independent
    of openbench's code): exact here, since float32 inputs one float32 ulp apart differ far above
    float64's rounding."""
    e, r = entities.astype(np.float64), relations.astype(np.float64)
    known = [tuple(row) for split in ("train", "valid", "test") for row in dataset.triples[split].tolist()]
    heads, tails = known_answers(known)
    counts = {"head": [], "tail": []}
    for h, rel, t in dataset.triples["test"].tolist():
        for side in ("head", "tail"):
            if model == "DistMult":
                scores = e @ (r[rel] * e[t]) if side == "head" else e @ (e[h] * r[rel])
            else:  # TransE-L1: -Σ|h + r - t|
                scores = -np.abs(e + r[rel] - e[t]).sum(axis=1) if side == "head" else \
                    -np.abs(e[h] + r[rel] - e).sum(axis=1)
            true = h if side == "head" else t
            removed = (heads.get((rel, t), set()) if side == "head" else tails.get((h, rel), set())) - {true}
            keep = np.ones(len(scores), dtype=bool)
            keep[list(removed | {true})] = False
            counts[side].append((int((scores[keep] > scores[true]).sum()), int((scores[keep] == scores[true]).sum())))
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("model, entities, test, dim", [("TransE-L1", 3000, 600, 16), ("DistMult", 2000, 400, 16)])
def test_the_cases_that_differed_before_agree_with_a_float64_reference(tmp_path, seed, model, entities, test, dim):
    """The issue's measurements: continuous TransE-L1 (3,000 entities, 600 test triples, d=16) and
    DistMult with near-duplicate entity rows one ulp apart (2,000 entities, 400 test triples)."""
    splits = random_labelled_graph(seed, entities, 4, {"train": 4 * entities, "valid": 50, "test": test})
    dataset = load_dataset(write_samples(tmp_path, splits))
    rng = np.random.default_rng(seed)
    if model == "DistMult":
        values = near_tie_embeddings_for(seed, dataset.num_entities, dim)
    else:
        values = rng.standard_normal((dataset.num_entities, dim)).astype(np.float32)
    relations = rng.standard_normal((dataset.num_relations, dim)).astype(np.float32)
    scorer = build_scorer(model, values, relations, dataset.num_entities, dataset.num_relations)
    expected = _float64_reference(dataset, values, relations, model)
    for batch_size in (None, 1, 7):
        produced = _counts(_run(dataset, scorer, batch_size=batch_size))
        counts = {side: [(g, e) for g, e, _ in produced[side]] for side in ("head", "tail")}
        assert counts == expected, batch_size


def test_windows_that_reach_infinity_still_drop_the_true_and_known_answers(dataset):
    """DistMult scores beyond float32's range: every fast key is -inf, so each window reaches the
    worst value, where count_block also put the true and known answers; settle drops those and
    re-scores the rest in float64. The counts equal fast ranks on the same values as float64."""
    rng = np.random.default_rng(5)
    entities = (np.abs(rng.standard_normal((dataset.num_entities, 8))) * 2.0 ** 62).astype(np.float32)
    relations = (-np.abs(rng.standard_normal((dataset.num_relations, 8))) * 2.0 ** 62).astype(np.float32)
    scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    wide = build_scorer("DistMult", entities.astype(np.float64), relations.astype(np.float64), dataset.num_entities,
                        dataset.num_relations)
    exact = _run(dataset, scorer)
    block = scorer.score_all(dataset.triples["test"], "tail")
    assert bool(torch.isneginf(block).all())  # the fast pass decides nothing here
    assert _counts(exact) == _counts(_run(dataset, wide, ranks="fast"))
    assert exact_stats(exact)["float64"] > 0


# -- issue 43: the window is at least the stated bound ------------------------------------------

def _gamma(n, u):
    return n * u / (1 - n * u)


def _complex_product_magnitude(a, r):
    """|a| ∘ |r| as the fast pass's complex product rounds it, on [Re | Im] halves: both components
    of (a_re r_re ∓ a_im r_im, a_re r_im ± a_im r_re) with every term counted positive (the same for
    r and conj(r))."""
    half = a.shape[1] // 2
    a_re, a_im, r_re, r_im = np.abs(a[:, :half]), np.abs(a[:, half:]), np.abs(r[:, :half]), np.abs(r[:, half:])
    return np.concatenate([a_re * r_re + a_im * r_im, a_re * r_im + a_im * r_re], axis=1)


def _query_magnitude(model, anchor, relation, side):
    """(the magnitude |q| (B, w) of the query the fast pass computes, its roundings per component n),
    from each model's definition on the stored float64 rows ``anchor`` (B, ·), ``relation`` (B, ·)."""
    a, r = np.abs(anchor), np.abs(relation)
    if model == "DistMult":
        return a * r, 1
    if model in ("TransE-L1", "TransE-L2"):  # h + r, or t - r for heads
        return a + r, 1
    if model in ("ComplEx", "RotatE", "RotatE-DGLKE"):  # h ∘ r, or t ∘ conj(r) for heads (RotatE too)
        return _complex_product_magnitude(a, r), 2
    if model == "RESCAL":  # hᵀ M_r or M_r t: a d-term dot product per component
        d = a.shape[1]
        matrices = r.reshape(-1, d, d)
        magnitude = np.einsum("bi,bij->bj", a, matrices) if side == "tail" else np.einsum("bij,bj->bi", matrices, a)
        return magnitude, d
    half = a.shape[1] // 2  # SimplE: ½[h_h∘r | h_t∘r⁻] or ½[r∘t_t | r⁻∘t_h] (the ½ exact)
    first, second = (a[:, :half], a[:, half:]) if side == "tail" else (a[:, half:], a[:, :half])
    return np.concatenate([first * r[:, :half], second * r[:, half:]], axis=1) / 2, 1


def _stated_bound(model, anchor, relation, side, queries, candidates, u):
    """δ of ExactRanks.prepare's docstring (the README's), computed here from the stored rows in
    float64: ``anchor``/``relation`` (B, ·) rows, ``queries`` (B, w) the computed (fast) queries,
    ``candidates`` (E, w) the stored candidate rows (the fast pass's candidates are these, rearranged:
    the same norms)."""
    magnitude, n = _query_magnitude(model, anchor, relation, side)
    w = queries.shape[1]
    c2 = np.sqrt((candidates ** 2).sum(axis=1)).max()
    c1 = np.abs(candidates).sum(axis=1).max()
    q1, q2 = np.abs(queries).sum(axis=1), np.sqrt((queries ** 2).sum(axis=1))
    own = _gamma(n, u)  # |q̂ - q| <= γ_n |q| per component
    if model in ("DistMult", "ComplEx", "RESCAL", "SimplE"):
        delta = _gamma(n + w, u) * np.sqrt((magnitude ** 2).sum(axis=1)) * c2
    elif model in ("TransE-L1", "RotatE-DGLKE"):
        delta = _gamma(w + (2 if model == "TransE-L1" else 4), u) * (q1 + c1) + own * magnitude.sum(axis=1)
    else:
        eta = u + 2 * _gamma(w, 2.0 ** -53)  # the squared norms' one rounding (summed in float64)
        e2 = own * np.sqrt((magnitude ** 2).sum(axis=1))
        delta = (_gamma(w + 2, u) * (c2 ** 2 + 2 * q2 * c2) + eta * (q2 ** 2 + c2 ** 2) + 2 * u * (q2 + c2) ** 2
                 + e2 * (2 * (q2 + c2) + e2))
    if model in ("RotatE", "RotatE-DGLKE") and side == "head":
        # heads are scored as ‖h - t∘conj(r)‖, the definition being ‖h∘r - t‖: their difference
        half = relation.shape[1] // 2
        off = np.abs(relation[:, :half] ** 2 + relation[:, half:] ** 2 - 1).max(axis=1)  # max_k | |r_k|² - 1 |
        if model == "RotatE":
            delta = delta + off * (c2 ** 2 + (anchor ** 2).sum(axis=1))
        else:
            delta = delta + 2 * off * (1 + off) * (c1 + np.abs(anchor).sum(axis=1))
    return delta


def _bound_test_scorer(dataset, model, scale, rng):
    """``model`` over random rows (width 6) times ``scale``; RotatE: float32-rounded rotations."""
    entities = (rng.normal(size=(dataset.num_entities, 6)) * scale).astype(np.float32)
    if model in ("RotatE", "RotatE-DGLKE"):
        angles = rng.uniform(-np.pi, np.pi, (dataset.num_relations, 3))
        relations = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    else:
        relations = (rng.normal(size=(dataset.num_relations, 36 if model == "RESCAL" else 6)) * scale).astype(np.float32)
    return build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_the_window_is_at_least_the_stated_bound(dataset, model, scale):
    """Property: around each true key the window reaches at least the error bound δ that
    ExactRanks.prepare states (the README's), for tail and head queries of every scorer, δ
    computed here from each model's definition. Outcome tests cannot see a window a constant
    factor too narrow (float32's actual errors stay far below the worst case), so the bound itself
    is checked against its statement."""
    scorer = _bound_test_scorer(dataset, model, scale, np.random.default_rng(21))
    producer = FullRanking(scorer)  # the exact-ranks machinery itself, bound as the door binds it
    producer.bind(RankingSetup(dataset, device="cpu", progress=False))
    exact, batch = producer.exact, dataset.triples["test"]
    entities, relations = _stored(scorer.entities), _stored(scorer.relations)
    for side in ("tail", "head"):
        true_ids = batch[:, 2] if side == "tail" else batch[:, 0]
        anchor_ids = (batch[:, 0] if side == "tail" else batch[:, 2]).numpy()
        queries = scorer.query_vectors(batch, side)
        exact.prepare(scorer, batch, side, queries, scorer.entities[true_ids])
        lows, highs, _ = exact._window
        true_key = exact._queries.true_key
        bound = _stated_bound(model, entities[anchor_ids], relations[batch[:, 1].numpy()], side,
                              _stored(queries), entities, 2.0 ** -24)
        assert (true_key - lows.double().numpy() >= bound * (1 - 1e-9)).all(), (model, side)
        assert (highs.double().numpy() - true_key >= bound * (1 - 1e-9)).all(), (model, side)
        # and not needlessly wide (every pair inside it is re-scored in float64)
        assert (highs.double().numpy() - true_key <= 2 * bound + 1e-6 * np.abs(true_key) + 1e-30).all(), (model, side)


def _rows_at_key_offsets(key, true_row, offsets, rng):
    """float32 rows near ``true_row`` (w,) whose exact key, ``key`` of Fractions, lies about
    ``offsets`` away from the true row's: moved along one random direction by the key's slope
    there (exact for dot products, to first order for distances), then rounded to float32."""
    direction = rng.normal(size=true_row.shape)
    step = 1e-3 * (np.abs(true_row).max() + 1e-30)
    ahead = key(_fractions(true_row + step * direction))
    behind = key(_fractions(true_row - step * direction))
    slope = float(ahead - behind) / (2 * step)
    return np.stack([(true_row + (offset / slope) * direction).astype(np.float32) for offset in offsets])


def _near_bound_scorer(model, seed):
    """Tail query (E:0, R:0, E:1) and head query (E:1, R:1, E:0) whose other candidates are built
    around the true answer E:1 at exact key offsets k·δ/4, k = -12..12, δ the stated bound."""
    rng = np.random.default_rng(seed)
    width = 16 if model == "RESCAL" else 4  # RESCAL: 4 × 4 matrices over width-4 entities
    if model in ("RotatE", "RotatE-DGLKE"):
        angles = rng.uniform(-np.pi, np.pi, (2, 2))
        relations = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    else:
        relations = rng.normal(size=(2, width)).astype(np.float32)
    anchor, truth = rng.normal(size=(2, 4)).astype(np.float32)
    stored = np.stack([anchor, truth]).astype(np.float64)
    table, stored_relations = stored, relations.astype(np.float64)
    blocks = [np.stack([anchor, truth])]
    for side, relation in (("tail", 0), ("head", 1)):
        probe = build_scorer(model, np.stack([anchor, truth]), relations, 2, 2)
        query = probe.query_vectors(torch.tensor([[0, relation, 1] if side == "tail" else [1, relation, 0]]), side)
        delta = float(_stated_bound(model, table[:1], stored_relations[relation:relation + 1], side,
                                    _stored(query), table, 2.0 ** -24)[0])
        r = _fractions(stored_relations[relation])
        a = _fractions(anchor)

        def key(c, r=r, a=a, side=side):
            return exact_score_key(model, a, r, c) if side == "tail" else exact_score_key(model, c, r, a)
        blocks.append(_rows_at_key_offsets(key, truth.astype(np.float64), [k * delta / 4 for k in range(-12, 13)], rng))
    entities = np.concatenate(blocks)
    dataset = _tiny_dataset(len(entities), [[0, 0, 1], [1, 1, 0]])
    return dataset, build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_candidates_built_within_a_few_bounds_of_the_true_key_are_ranked_exactly(model, seed):
    """Constructed, not drawn: around the true answer of a tail and a head query, candidates whose
    exact keys lie k·δ/4 from the true key (k = -12..12, δ the stated bound): half inside the
    window, half just outside. Exact counts equal the rational reference for every scorer."""
    dataset, scorer = _near_bound_scorer(model, seed)
    evaluator = _run(dataset, scorer, filter_sets=())
    assert _counts(evaluator) == reference_counts(dataset, scorer, model, filter_sets=())
    # the construction did what it says: keys within a few bounds, on both sides of the window's edge
    entities, relations = _stored(scorer.entities), _stored(scorer.relations)
    for side, relation, block in (("tail", 0, slice(2, 27)), ("head", 1, slice(27, 52))):
        batch = torch.tensor([[0, relation, 1] if side == "tail" else [1, relation, 0]])
        delta = float(_stated_bound(model, entities[:1], relations[relation:relation + 1], side,
                                    _stored(scorer.query_vectors(batch, side)), entities, 2.0 ** -24)[0])
        r, a = _fractions(relations[relation]), _fractions(entities[0])
        keys = [exact_score_key(model, a, r, c) if side == "tail" else exact_score_key(model, c, r, a)
                for c in (_fractions(row) for row in entities[block])]
        true_key = exact_score_key(model, a, r, _fractions(entities[1])) if side == "tail" else \
            exact_score_key(model, _fractions(entities[1]), r, a)
        offsets = np.array([abs(float(k - true_key)) / delta for k in keys])
        assert offsets.max() <= 5 and (offsets <= 1).sum() >= 5 and (offsets > 1).sum() >= 5, (side, offsets)
    assert exact_stats(evaluator)["rescored"] > 0 and exact_stats(evaluator)["unresolved"] == 0


@pytest.mark.parametrize("model", ["RotatE", "RotatE-DGLKE"])
def test_rotate_heads_on_a_grid_are_ranked_by_the_definition_not_the_rewrite(model):
    """float64 values on a binary grid: the fast pass computes ‖h - t∘conj(r)‖ without rounding,
    but with |r| = 1 only to within 8e-6 that rewrite ties two heads the definition ‖h∘r - t‖
    orders (it found a tie here, counting (1, 1) instead of (2, 0))."""
    unit, step = 2.0 ** -8, 2.0 ** -4
    entities = np.array([[1, 0], [1 + step, -unit], [1 - step, -unit]], dtype=np.float64)  # [Re | Im], d = 1
    relations = np.array([[1, unit], [1, 0]], dtype=np.float64)  # |r|² = 1 + 2^-16
    dataset = _tiny_dataset(3, [[1, 0, 0]])
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    evaluator = _run(dataset, scorer, filter_sets=())
    counts = _counts(evaluator)
    assert counts == reference_counts(dataset, scorer, model, filter_sets=())
    assert counts["head"] == [(2, 0, 3)]
