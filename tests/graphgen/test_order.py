"""The edge output order: the C radix sort and the polars path agree with a plain stable lexsort."""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen import order
from tests.helpers import missing_implementation, use_native


def _reference(code1, code2, rank_of, type_code, passenger=None):
    rank1, rank2 = rank_of[code1], rank_of[code2]
    rows = np.lexsort((rank2, type_code, rank1))  # stable: equal keys keep their row order
    return rows, rank1[rows], type_code[rows], rank2[rows], None if passenger is None else passenger[rows]


def _sorted(implementation, monkeypatch, *arrays, passenger=None, threads=None):
    use_native(monkeypatch, order.SORT_LIBRARY, "OPENBENCH_SORT", implementation)
    if order.sort_name() != implementation:
        pytest.skip("the C edge sort is not built")
    return order.sort_edges(*arrays, passenger=passenger, threads=threads)


def _check(result, expected):
    for got, want in zip((result.order, result.rank1, result.type_code, result.rank2), expected):
        np.testing.assert_array_equal(got, want)
    assert (result.order.dtype, result.rank1.dtype, result.type_code.dtype, result.rank2.dtype) == \
        (np.uint32, np.uint32, np.uint8, np.uint32)
    if expected[4] is None:
        assert result.passenger is None
    else:
        np.testing.assert_array_equal(result.passenger, expected[4])
        assert result.passenger.dtype == np.uint32


def _check_implementations(monkeypatch, code1, code2, rank_of, type_code, passenger):
    """The C sort (where built) and the polars path both give the reference's result."""
    expected = _reference(code1, code2, rank_of, type_code, passenger)
    for implementation in ("c", "polars"):
        try:
            result = _sorted(implementation, monkeypatch, code1, code2, rank_of, type_code, passenger=passenger)
        except pytest.skip.Exception:
            missing_implementation("the C edge sort")
            continue
        _check(result, expected)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_both_implementations_match_a_stable_lexsort(data):
    rows = data.draw(st.integers(0, 300))
    nodes = data.draw(st.integers(1, 50))
    rank_of = np.array(data.draw(st.permutations(range(nodes))), dtype=np.uint32)
    codes = st.lists(st.integers(0, nodes - 1), min_size=rows, max_size=rows)
    code1 = np.array(data.draw(codes), dtype=np.uint32)
    code2 = np.array(data.draw(codes), dtype=np.uint32)
    type_code = np.array(data.draw(st.lists(st.integers(0, 31), min_size=rows, max_size=rows)), dtype=np.uint8)
    passenger = None
    if data.draw(st.booleans()):  # any width up to the full 32 bits: in the key's spare bits or gathered
        passenger = np.array(data.draw(st.lists(st.integers(0, 2 ** data.draw(st.integers(0, 32)) - 1),
                                                min_size=rows, max_size=rows)), dtype=np.uint32)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _check_implementations(monkeypatch, code1, code2, rank_of, type_code, passenger)


@pytest.mark.parametrize("threads", [1, 3])
def test_large_inputs_split_into_buckets_and_keep_ties_in_row_order(monkeypatch, threads):
    """Hub heads fill top-digit buckets past the C sort's small-bucket size, so they are split
    again by the next digit; few tails give many equal keys."""
    rng = np.random.default_rng(0)
    rows, nodes = 200_000, 70_000
    rank_of = rng.permutation(nodes).astype(np.uint32)
    hubs = np.sort(rng.integers(0, 20, rows // 2))  # grouped, as source files are
    code1 = np.concatenate([hubs, rng.integers(0, nodes, rows - len(hubs))]).astype(np.uint32)
    code2 = rng.integers(0, 40, rows).astype(np.uint32)  # few tails: many repeated keys
    type_code = rng.integers(0, 3, rows).astype(np.uint8)
    passenger = rng.integers(0, 2 ** 20, rows).astype(np.uint32)
    expected = _reference(code1, code2, rank_of, type_code, passenger)
    _check(_sorted("c", monkeypatch, code1, code2, rank_of, type_code, passenger=passenger, threads=threads),
           expected)


def test_a_passenger_without_room_in_the_key_is_gathered(monkeypatch):
    """Node ranks of 20 bits and edge types of 5 leave 19 bits; a 32-bit passenger is gathered."""
    rng = np.random.default_rng(1)
    rows, nodes = 5_000, 2 ** 20
    rank_of = rng.permutation(nodes).astype(np.uint32)
    code1, code2 = (rng.integers(0, nodes, rows).astype(np.uint32) for _ in range(2))
    type_code = rng.integers(0, 32, rows).astype(np.uint8)
    passenger = rng.integers(2 ** 31, 2 ** 32, rows, dtype=np.uint64).astype(np.uint32)
    _check_implementations(monkeypatch, code1, code2, rank_of, type_code, passenger)


def test_bad_arguments_are_refused():
    one = np.zeros(1, dtype=np.uint32)
    with pytest.raises(ValueError, match="differ in length"):
        order.sort_edges(one, np.zeros(2, dtype=np.uint32), one, one.astype(np.uint8))
    with pytest.raises(ValueError, match="64-bit sort key"):
        order.sort_edges(one, one, np.array([2 ** 31], dtype=np.uint32), one.astype(np.uint8))



def test_c_sort_is_built_where_a_compiler_is(monkeypatch):
    if os.environ.get("CI") != "true":
        pytest.skip("only required in CI, which installs with a compiler")
    use_native(monkeypatch, order.SORT_LIBRARY, "OPENBENCH_SORT")
    assert order.sort_name() == "c"
