"""Metrics from counts against slow references: brute force over tie orders, plain loops."""
import itertools
import math

import pytest
import torch

from openbench.evaluation.statistics.metrics import harmonic, summarize, task_values
from openbench.evaluation.counting.counts import RankCounts


def _counts(greater, equal, candidates):
    as_long = lambda values: torch.tensor(values, dtype=torch.long)  # noqa: E731
    return RankCounts(as_long(greater), as_long(equal), as_long(candidates))


def _brute_force_expectation(g, k, hits):
    """Average reciprocal rank and hits@K over every order of the k tied candidates."""
    positions = list(itertools.permutations(range(k)))
    rr = sum(1.0 / (g + 1 + order.index(0)) for order in positions) / len(positions)
    hit = sum((g + 1 + order.index(0)) <= hits for order in positions) / len(positions)
    return rr, hit


@pytest.mark.parametrize("g,k", [(0, 1), (0, 3), (2, 4), (8, 4), (9, 1), (0, 6), (12, 2)])
def test_expected_values_match_enumeration_of_tie_orders(g, k):
    values = task_values(_counts([g], [k - 1], [100]), hits_at=[1, 3, 10])
    rr, hit10 = _brute_force_expectation(g, k, 10)
    assert values["expected.mrr"].item() == pytest.approx(rr, abs=1e-12)
    assert values["expected.hits@10"].item() == pytest.approx(hit10, abs=1e-12)
    assert values["expected.hits@1"].item() == pytest.approx(_brute_force_expectation(g, k, 1)[1], abs=1e-12)


def test_rank_types_on_a_tie():
    # P3 example: true tied with 2 others at the top
    values = task_values(_counts([0], [2], [10]), hits_at=[1])
    assert values["optimistic.mr"].item() == 1 and values["pessimistic.mr"].item() == 3
    assert values["realistic.mr"].item() == 2 and values["realistic.mrr"].item() == 0.5
    assert values["realistic.hits@1"].item() == 0
    assert values["expected.mrr"].item() == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_fractional_rank_is_not_a_hit():
    values = task_values(_counts([8], [3], [50]), hits_at=[10])  # realistic rank 10.5 (P18)
    assert values["realistic.hits@10"].item() == 0.0
    assert values["expected.hits@10"].item() == 0.5


def test_harmonic_numbers():
    for n in range(0, 30):
        assert harmonic(torch.tensor(float(n), dtype=torch.float64)).item() == pytest.approx(
            sum(1 / i for i in range(1, n + 1)), abs=1e-12)


def _slow_metrics(greater, equal, candidates, k):
    ranks = [g + (e + 2) / 2 for g, e in zip(greater, equal)]
    n = len(ranks)
    mr = sum(ranks) / n
    expected = sum((c + 1) / 2 for c in candidates) / n
    return {"mrr": sum(1 / r for r in ranks) / n, "mr": mr, f"hits@{k}": sum(r <= k for r in ranks) / n,
            "amri": None if expected == 1 else 1 - (mr - 1) / (expected - 1)}


def test_summarize_sides_relations_and_macro_against_loops():
    head = ([0, 3, 1, 7, 0], [0, 1, 0, 2, 4], [10, 12, 9, 20, 10])
    tail = ([2, 0, 0, 1, 5], [1, 0, 3, 0, 0], [11, 10, 10, 8, 30])
    relations = torch.tensor([0, 1, 0, 2, 1])
    labels = ["A", "B", "C", "D"]
    metrics, per_relation, macro = summarize(_counts(*head), _counts(*tail), relations, labels, [3])
    both = tuple(h + t for h, t in zip(head, tail))
    for side, data in (("head", head), ("tail", tail), ("both", both)):
        expected = _slow_metrics(*data, 3)
        for name, value in expected.items():
            assert metrics[side]["realistic"][name] == pytest.approx(value, abs=1e-12)
    assert set(per_relation) == {"A", "B", "C"}  # D has no queries
    for relation, label in enumerate(labels[:3]):
        idx = [i for i, r in enumerate(relations.tolist()) if r == relation]
        pick = lambda data, idx=idx: tuple([column[i] for i in idx] for column in data)  # noqa: E731
        rel_both = tuple(h + t for h, t in zip(pick(head), pick(tail)))
        expected = _slow_metrics(*rel_both, 3)
        assert per_relation[label]["both"]["realistic"]["mrr"] == pytest.approx(expected["mrr"], abs=1e-12)
    mean_of = lambda side, name: sum(per_relation[l][side]["realistic"][name] for l in "ABC") / 3  # noqa: E731
    assert macro["both"]["realistic"]["mrr"] == pytest.approx(mean_of("both", "mrr"), abs=1e-12)
    assert macro["tail"]["realistic"]["hits@3"] == pytest.approx(mean_of("tail", "hits@3"), abs=1e-12)


def test_amri_undefined_when_every_query_has_one_candidate():
    one = _counts([0, 0], [0, 0], [1, 1])
    metrics, per_relation, macro = summarize(one, one, torch.tensor([0, 0]), ["A"], [1])
    assert metrics["both"]["realistic"]["amri"] is None
    assert metrics["both"]["realistic"]["mrr"] == 1.0
    assert macro["both"]["realistic"]["amri"] is None
    for value in metrics["both"]["realistic"].values():
        assert value is None or math.isfinite(value)
