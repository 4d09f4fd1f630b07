"""rank_counts against a slow loop reference, and the edge cases of pitfalls P1, P2, P6, P7, P20."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench.errors import ScoreError
from openbench.evaluation.statistics.metrics import task_values
from openbench.evaluation.counting.counts import count_block, rank_counts
from tests.helpers import slow_counts


def _filter_pairs(removed_per_row):
    rows = [i for i, removed in enumerate(removed_per_row) for _ in removed]
    cols = [c for removed in removed_per_row for c in sorted(removed)]
    return torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)


def _check_against_reference(scores, true_ids, removed_per_row, lower_is_better=False):
    rows, cols = _filter_pairs(removed_per_row)
    counts = rank_counts(torch.tensor(scores), torch.tensor(true_ids), rows, cols, lower_is_better)
    for i, row in enumerate(scores):
        expected = slow_counts(list(row), true_ids[i], removed_per_row[i] - {true_ids[i]}, lower_is_better)
        got = (int(counts.n_greater[i]), int(counts.n_equal[i]), int(counts.n_candidates[i]))
        assert got == expected, (i, got, expected)
    return counts


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lower_is_better", [False, True])
def test_random_integer_scores_match_loop_reference(seed, lower_is_better):
    rng = np.random.default_rng(seed)
    batch, entities = 17, 23
    scores = rng.integers(-3, 4, size=(batch, entities)).astype(np.float32)  # many exact ties
    true_ids = rng.integers(entities, size=batch).tolist()
    removed = [set(rng.choice(entities, size=rng.integers(0, 8), replace=False).tolist()) for _ in range(batch)]
    removed[0].add(true_ids[0])  # the true answer listed among known answers must stay a candidate
    _check_against_reference(scores, true_ids, removed, lower_is_better)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_counts_match_reference(data):
    entities = data.draw(st.integers(1, 12))
    batch = data.draw(st.integers(1, 6))
    values = st.sampled_from([-math.inf, -1.0, 0.0, 0.5, 1.0, math.inf])
    scores = [[data.draw(values) for _ in range(entities)] for _ in range(batch)]
    true_ids = [data.draw(st.integers(0, entities - 1)) for _ in range(batch)]
    removed = [set(data.draw(st.lists(st.integers(0, entities - 1), max_size=entities))) for _ in range(batch)]
    lower = data.draw(st.booleans())
    _check_against_reference(np.array(scores, dtype=np.float32), true_ids, removed, lower)


def test_constant_scores_give_middle_realistic_rank():
    counts = rank_counts(torch.zeros(1, 101), torch.tensor([40]))
    assert counts.n_greater.item() == 0 and counts.n_equal.item() == 100 and counts.n_candidates.item() == 101
    values = task_values(counts, hits_at=(1, 51))
    assert values["realistic.mr"].item() == 51.0 == values["random.mr"].item()  # the middle of 101
    assert (values["optimistic.mr"].item(), values["pessimistic.mr"].item()) == (1.0, 101.0)
    assert values["expected.hits@51"].item() == 51 / 101


def test_true_column_excluded_by_index_not_by_value():
    # P2: another candidate ties with the true answer; a perfect-but-tied model is not rank 3
    counts = rank_counts(torch.tensor([[0.9, 0.9, 0.5]]), torch.tensor([0]))
    assert (counts.n_greater.item(), counts.n_equal.item()) == (0, 1)


def test_everything_filtered_but_the_answer():
    scores = torch.tensor([[5.0, 1.0, 7.0, 9.0]])
    rows, cols = torch.tensor([0, 0, 0, 0]), torch.tensor([0, 1, 2, 3])
    counts = rank_counts(scores, torch.tensor([1]), rows, cols)
    assert (counts.n_greater.item(), counts.n_equal.item(), counts.n_candidates.item()) == (0, 0, 1)


def test_single_entity():
    counts = rank_counts(torch.tensor([[3.0]]), torch.tensor([0]))
    assert (counts.n_greater.item(), counts.n_equal.item(), counts.n_candidates.item()) == (0, 0, 1)


def test_infinities_rank_by_value_and_equal_infinities_tie():
    scores = torch.tensor([[math.inf, math.inf, 1.0, -math.inf],
                           [-math.inf, -math.inf, 1.0, math.inf],
                           [2.0, math.inf, -math.inf, 2.0]])
    counts = rank_counts(scores, torch.tensor([0, 0, 0]))
    assert counts.n_greater.tolist() == [0, 2, 1]
    assert counts.n_equal.tolist() == [1, 1, 1]


def test_nan_candidate_raises_naming_the_row():
    scores = torch.tensor([[1.0, 2.0], [1.0, math.nan]])
    with pytest.raises(ScoreError, match="NaN score") as info:
        rank_counts(scores, torch.tensor([0, 0]))
    assert info.value.row == 1


def test_nan_true_score_raises():
    with pytest.raises(ScoreError, match="NaN score"):
        rank_counts(torch.tensor([[math.nan, 2.0]]), torch.tensor([0]))


def test_nan_with_infinite_true_score_raises():
    with pytest.raises(ScoreError, match="NaN"):
        rank_counts(torch.tensor([[math.inf, math.nan]]), torch.tensor([0]))


def test_counts_add_across_chunks():
    rng = np.random.default_rng(3)
    scores = torch.tensor(rng.integers(0, 5, size=(9, 30)).astype(np.float32))
    true_ids = torch.tensor(rng.integers(30, size=9))
    rows, cols = _filter_pairs([set(rng.choice(30, 5, replace=False).tolist()) - {int(t)} for t in true_ids])
    whole = rank_counts(scores, true_ids, rows, cols)
    true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
    greater = torch.zeros(9, dtype=torch.long)
    equal = torch.zeros(9, dtype=torch.long)
    for start in range(0, 30, 7):
        gt, eq, differs = count_block(scores[:, start:start + 7].clone(), start, true_ids, true_scores, rows, cols)
        assert not differs.any()
        greater += gt
        equal += eq
    assert torch.equal(greater, whole.n_greater) and torch.equal(equal, whole.n_equal)


def test_scores_left_untouched_unless_in_place():
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    rank_counts(scores, torch.tensor([1]))
    assert scores.tolist() == [[1.0, 2.0, 3.0]]


def test_half_precision_and_integer_scores():
    half = torch.tensor([[1.0, 2.0, 2.0, 0.5]], dtype=torch.float16)
    assert rank_counts(half, torch.tensor([1])).n_equal.item() == 1
    big = torch.tensor([[2 ** 40, 2 ** 40 + 1, 3]], dtype=torch.int64)
    assert rank_counts(big, torch.tensor([0])).n_greater.item() == 1


@pytest.mark.parametrize("kernel", ["default", "torch"])
def test_windowed_counts_pass_over_the_excluded_entries_and_still_report_their_nan(kernel, monkeypatch):
    """With a window (exact ranks), the true and the known answers' entries are overwritten by the
    worst value before counting: the counts equal the plain filtered counts, no recorded position
    points at them, and a NaN hidden there still stops the run with its row."""
    from openbench.evaluation.counting import kernels

    if kernel == "torch":
        monkeypatch.setenv("OPENBENCH_KERNEL", "torch")
    kernels.COUNTING_LIBRARY.reset()
    try:
        scores = torch.tensor([[1.0, 2.0, 2.0, 3.0, 0.5], [4.0, 1.0, 4.0, 4.0, 9.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
        true_ids = torch.tensor([1, 0, 4])
        rows, cols = _filter_pairs([{2}, {3, 4}, {0}])
        true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
        plain = count_block(scores.clone(), 0, true_ids, true_scores, rows, cols)
        positions = torch.full((3, 8), -1, dtype=torch.long) if kernels.kernel_name(scores) == "c" else None
        windowed = count_block(scores.clone(), 0, true_ids, true_scores, rows, cols, window=(true_scores, true_scores),
                               positions=positions)
        assert torch.equal(windowed[0], plain[0]) and torch.equal(windowed[1], plain[1])
        if positions is not None:
            recorded = {(i, int(c)) for i in range(3) for c in positions[i] if c >= 0}
            assert recorded == {(1, 2), (2, 1), (2, 2), (2, 3)}  # the ties, never a true or filtered column
        for row, col in ((2, 0), (1, 0)):  # a filtered entry, then a true answer's entry
            broken = scores.clone()
            broken[row, col] = math.nan
            with pytest.raises(ScoreError, match="NaN") as raised:
                count_block(broken, 0, true_ids, true_scores, rows, cols, window=(true_scores, true_scores))
            assert raised.value.row == row
    finally:
        kernels.COUNTING_LIBRARY.reset()
