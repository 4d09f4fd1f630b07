"""The dictionary-coded row writer: C loop, polars fallback and a plain reference agree byte for byte."""
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen.writers import coded
from tests.helpers import missing_implementation, use_native


def _reference(columns, order, separator):
    rows = range(len(columns[0][0])) if order is None else order
    lines = [separator.join(coded.quote_entry(dictionary[codes[r]], separator) for codes, dictionary in columns)
             for r in rows]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _write(tmp_path, implementation, monkeypatch, columns, order, separator, name):
    use_native(monkeypatch, coded.ROWS_LIBRARY, "OPENBENCH_WRITER", implementation)
    if implementation == "c" and coded.writer_name() != "c":
        pytest.skip("the C row formatter is not built")
    path = tmp_path / name
    coded.write_coded(path, columns, order, separator)
    return path.read_bytes()


entries = st.one_of(st.none(), st.text(alphabet=st.sampled_from('ab\t,"\n\r é:'), max_size=6))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_both_implementations_match_the_reference(tmp_path_factory, data):
    tmp_path = tmp_path_factory.mktemp("coded")
    separator = data.draw(st.sampled_from(["\t", ","]))
    rows = data.draw(st.integers(0, 40))
    columns = []
    for _ in range(data.draw(st.integers(1, 4))):
        dictionary = data.draw(st.lists(entries, min_size=1, max_size=8))
        codes = np.array(data.draw(st.lists(st.integers(0, len(dictionary) - 1), min_size=rows, max_size=rows)),
                         dtype=np.uint32)
        columns.append((codes, dictionary))
    order = None
    if data.draw(st.booleans()) and rows:
        order = np.array(data.draw(st.lists(st.integers(0, rows - 1), max_size=2 * rows)), dtype=np.uint32)
    expected = _reference(columns, order, separator)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for implementation in ("c", "polars"):
            try:
                got = _write(tmp_path, implementation, monkeypatch, columns, order, separator, implementation)
            except pytest.skip.Exception:
                missing_implementation("the C row formatter")
                continue
            assert got == expected, implementation


def test_c_writer_is_built_where_a_compiler_is(monkeypatch):
    import os
    if os.environ.get("CI") != "true":
        pytest.skip("only required in CI, which installs with a compiler")
    use_native(monkeypatch, coded.ROWS_LIBRARY, "OPENBENCH_WRITER")
    assert coded.writer_name() == "c"


def test_chunks_and_threads_keep_the_order(tmp_path, monkeypatch):
    monkeypatch.setattr(coded, "CHUNK_BYTES", 64)  # many small chunks in flight
    rng = np.random.default_rng(0)
    dictionary = [f"NCBIGENE:{i}" for i in range(500)]
    codes = rng.integers(0, 500, 5000).astype(np.uint32)
    order = rng.permutation(5000).astype(np.uint32)
    columns = [(codes, dictionary), (codes[::-1].copy(), dictionary)]
    got = _write(tmp_path, "c", monkeypatch, columns, order, "\t", "chunked")
    assert got == _reference(columns, order, "\t")


def test_quoting_matches_polars_write_csv(tmp_path):
    values = ["", None, "a,b", 'q"', "x\ty", "line\nbreak", " lead", "plain"]
    for separator in ("\t", ","):
        polars_text = pl.DataFrame({"v": values}).write_csv(include_header=False, separator=separator,
                                                             quote_style="necessary", null_value="")
        ours = "".join(coded.quote_entry(v, separator) + "\n" for v in values)
        assert ours == polars_text


def test_bad_arguments_are_refused(tmp_path):
    dictionary = ["a", "b"]
    with pytest.raises(ValueError, match="exceeds its dictionary"):
        coded.write_coded(tmp_path / "x", [(np.array([0, 2], dtype=np.uint32), dictionary)])
    with pytest.raises(ValueError, match="past the last row"):
        coded.write_coded(tmp_path / "x", [(np.array([0, 1], dtype=np.uint32), dictionary)], np.array([2]))
    with pytest.raises(ValueError, match="one ASCII character"):
        coded.write_coded(tmp_path / "x", [(np.array([0], dtype=np.uint32), dictionary)], separator="||")


def test_parts_share_one_set_of_columns(tmp_path, monkeypatch):
    """write_coded_parts writes each file as write_coded would, in both implementations."""
    rng = np.random.default_rng(2)
    dictionary = [f"NCBIGENE:{i}" for i in range(50)] + [None, "a,b"]
    codes = rng.integers(0, len(dictionary), 300).astype(np.uint32)
    columns = [(codes, dictionary), (codes[::-1].copy(), dictionary)]
    orders = [rng.permutation(300)[:120].astype(np.uint32), None, np.zeros(0, dtype=np.uint32)]
    for implementation in ("c", "polars"):
        use_native(monkeypatch, coded.ROWS_LIBRARY, "OPENBENCH_WRITER", implementation)
        if coded.writer_name() != implementation:
            continue
        parts = [(tmp_path / f"{implementation}{i}", order) for i, order in enumerate(orders)]
        assert coded.write_coded_parts(parts, columns, ",") == [120, 300, 0]
        for (path, order) in parts:
            assert path.read_bytes() == _reference(columns, order, ","), implementation
