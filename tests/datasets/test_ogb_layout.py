"""OGB split files: read as plain arrays; a file that asks to run code is refused, and nothing runs."""
import numpy as np
import pytest
import torch

from openbench.errors import InputError
from openbench.datasets.ogb import load_split_file


def test_a_split_file_of_arrays_loads(tmp_path):
    split = {"head": np.arange(6), "relation": np.zeros(6, dtype=np.int64), "tail": np.arange(6)[::-1].copy(),
             "head_neg": np.ones((6, 4), dtype=np.int64), "tail_neg": np.full((6, 4), 2, dtype=np.int64),
             "head_type": ["protein"] * 6, "tail_type": ["drug"] * 6}
    torch.save(split, tmp_path / "test.pt")
    loaded = load_split_file(tmp_path / "test.pt")
    assert set(loaded) == set(split) and loaded["head_type"] == split["head_type"]
    for key in ("head", "relation", "tail", "head_neg", "tail_neg"):
        assert np.array_equal(loaded[key], split[key]) and loaded[key].dtype == split[key].dtype


class _Payload:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.sentinel}",)


def test_a_file_that_asks_to_run_code_is_refused_and_nothing_runs(tmp_path):
    sentinel = tmp_path / "ran"
    torch.save({"head": np.arange(3), "relation": np.arange(3), "tail": _Payload(sentinel)}, tmp_path / "test.pt")
    with pytest.raises(InputError, match=r"test\.pt: not a plain OGB split file \(it asks to run .*system"):
        load_split_file(tmp_path / "test.pt")
    assert not sentinel.exists()


@pytest.mark.parametrize("content, message", [
    (b"not a pickle at all", "not a plain OGB split file"),
    (None, "no such OGB split file"),
])
def test_broken_or_missing_files(tmp_path, content, message):
    path = tmp_path / "train.pt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_split_file(path)


def test_a_dict_without_the_triple_arrays_is_refused(tmp_path):
    torch.save({"edge": np.arange(4)}, tmp_path / "valid.pt")
    with pytest.raises(InputError, match=r"the split has no 'head' array; it holds edge"):
        load_split_file(tmp_path / "valid.pt")
