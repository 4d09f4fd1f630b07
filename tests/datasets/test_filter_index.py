"""The CSR filter index against plain dictionaries."""
import numpy as np
import pytest
import torch

from openbench.datasets.filter_index import FilterIndex
from tests.helpers import known_answers


@pytest.mark.parametrize("seed", range(3))
def test_lookup_matches_dictionaries(seed):
    rng = np.random.default_rng(seed)
    triples = rng.integers(0, [15, 4, 15], size=(200, 3))
    triples = np.concatenate([triples, triples[:20]])  # duplicates are indexed once
    heads, tails = known_answers(triples.tolist())
    batch = torch.tensor(np.concatenate([triples[:30], rng.integers(0, [15, 4, 15], size=(10, 3))]))
    for side, reference in (("tail", tails), ("head", heads)):
        index = FilterIndex.build(torch.tensor(triples), 4, side)
        rows, answers = index.lookup(batch)
        for i, (h, r, t) in enumerate(batch.tolist()):
            key = (h, r) if side == "tail" else (r, t)
            got = answers[rows == i].tolist()
            assert got == sorted(reference.get(key, set()))


def test_empty_index_and_empty_batch():
    index = FilterIndex.empty(3, "tail")
    rows, answers = index.lookup(torch.tensor([[0, 1, 2]]))
    assert rows.numel() == 0 and answers.numel() == 0
    full = FilterIndex.build(torch.tensor([[0, 1, 2]]), 3, "head")
    rows, answers = full.lookup(torch.empty((0, 3), dtype=torch.long))
    assert rows.numel() == 0


def test_unknown_side_is_rejected():
    with pytest.raises(ValueError, match="side must be one of"):
        FilterIndex.build(torch.tensor([[0, 0, 0]]), 1, "relation")


def test_ids_too_large_for_one_combined_key_use_the_two_sort_path():
    rng = np.random.default_rng(5)
    small = rng.integers(0, [9, 3, 9], size=(60, 3))
    big = small * np.array([2 ** 31, 1, 2 ** 31])  # key * width would overflow int64
    for side in ("head", "tail"):
        reference = FilterIndex.build(torch.tensor(small), 3, side)
        index = FilterIndex.build(torch.tensor(big), 3, side)
        assert torch.equal(index.keys % 3, reference.keys % 3)
        assert torch.equal(index.keys // 3, (reference.keys // 3) * 2 ** 31)
        assert torch.equal(index.offsets, reference.offsets)
        assert torch.equal(index.answers, reference.answers * 2 ** 31)
