"""Disease-ranking metrics: the spec's worked examples M1–M5 (text_evaluators.md C.6)."""
import pytest

from openbench.text.disease_ranking.metrics import CaseRank, case_rank, rank_metrics


def _case(rank, truth=("X",), candidates=100):
    return CaseRank(rank, rank, candidates, tuple(truth))


def test_m1_rank_of_the_best_true_disease():
    case = case_rank([("d3", 0.9), ("d1", 0.8), ("d2", 0.7), ("d4", 0.6)], ["d2", "d4"])
    assert case.rank() == 3
    metrics = rank_metrics([case], ks=(1, 3, 10))
    assert (metrics["top1"], metrics["top3"], metrics["top10"], metrics["mrr"]) == (0.0, 1.0, 1.0, pytest.approx(1 / 3))


def test_m2_four_cases():
    metrics = rank_metrics([_case(r) for r in (1, 3, 10, 2)], ks=(1, 3, 10))
    assert (metrics["top1"], metrics["top3"], metrics["top10"]) == (0.25, 0.75, 1.0)
    assert metrics["median_rank"] == 2.5
    assert metrics["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 10 + 1 / 2) / 4)
    assert metrics["mrr"] == pytest.approx(0.4833, abs=1e-4)


def test_m3_tie_policies():
    jaccard = [("d1", 0.75), ("d2", 0.75), ("d4", 0.60), ("d3", 0.20)]
    case = case_rank(jaccard, ["d2"])
    assert (case.rank("optimistic"), case.rank("pessimistic"), case.rank("mean")) == (1, 2, 1.5)
    assert rank_metrics([case], ks=(1,), ties="pessimistic")["top1"] == 0.0
    assert rank_metrics([case], ks=(1,), ties="optimistic")["top1"] == 1.0
    with pytest.raises(ValueError, match="tie policy"):
        case.rank("random")


def test_m4_a_missing_disease_gets_the_middle_rank_and_no_hits():
    case = case_rank([(f"d{i}", 1.0 / (i + 1)) for i in range(9260)], ["absent"])
    assert case.missing and case.rank() == 4630
    metrics = rank_metrics([case], ks=(1, 10, 5000))
    assert metrics["missing"] == 1 and metrics["top5000"] == 0.0  # a miss for every k, even past 4630


def test_m5_macro_averages_over_true_id_sets():
    cases = [_case(1, ("X",)), _case(50, ("X",)), _case(1, ("Y", "Z"))]
    metrics = rank_metrics(cases, ks=(1,))
    assert metrics["top1"] == pytest.approx(2 / 3) and metrics["macro_top1"] == pytest.approx(0.75)
