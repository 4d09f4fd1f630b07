"""The sample layout's coded load (labels hashed to codes, :mod:`openbench.datasets.coding`)
against the text path it replaced: the same dataset, field for field, on labels that share
prefixes, sort around the tab, repeat, are unknown to training or come from given maps; and the
text path taken where two labels share a hash; the C helper (hash grouping, line rendering)
against the polars path it speeds up."""
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench.datasets import coding, loader
from openbench.datasets.loader import triples_fingerprint
from tests.helpers import use_native

NATIVE = pytest.mark.skipif(coding.CODING_LIBRARY.get() is None, reason="the C helper _coding.c is not built")

# prefixes of each other, a space before and after, a byte below the tab, non-ASCII, case
LABELS = ["a", "ab", "a b", "b ", " c", "a\x01", "é", "Z", "Q1", "Q12", "Q1\x08x"]
RELATIONS = ["r", "r2", "R", "r\x02"]


def _write(folder, splits):
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        if rows is not None:
            (folder / f"{split}_sample.csv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows),
                                                        encoding="utf-8")


def _load(folder, coded: bool, native=None, **options):
    """The sample layout loaded coded or by text; ``native`` "polars" keeps the C helper out."""
    with pytest.MonkeyPatch.context() as patch:
        use_native(patch, coding.CODING_LIBRARY, "OPENBENCH_CODING", native)
        if not coded:
            patch.setattr(loader, "code_splits", lambda frames: None)
        return loader._load_sample_layout(folder, folder, options.get("entity_map"), options.get("relation_map"),
                                          options.get("drop_unknown", True), "test", options.get("all_entities", False))


def _fields(dataset):
    return {"entities": dataset.entity_labels, "relations": dataset.relation_labels,
            "triples": {split: ids.tolist() for split, ids in dataset.triples.items()},
            "fingerprint": dataset.fingerprint, "id_map_sha256": dataset.id_map_sha256,
            "dropped": dataset.dropped, "warnings": dataset.warnings}


triple = st.tuples(st.sampled_from(LABELS), st.sampled_from(RELATIONS), st.sampled_from(LABELS))


@settings(max_examples=60, deadline=None)
@given(train=st.lists(triple, min_size=1, max_size=25), valid=st.lists(triple, max_size=8),
       test=st.lists(triple, min_size=1, max_size=8), all_entities=st.booleans(),
       native=st.sampled_from([None, "polars"]))
def test_the_coded_load_is_the_text_load(tmp_path_factory, train, valid, test, all_entities, native):
    folder = tmp_path_factory.mktemp("split")
    _write(folder, {"train": train, "val": valid, "test": test})
    try:
        expected = _fields(_load(folder, False, all_entities=all_entities))
    except Exception as error:  # e.g. no test triple left: the coded load must refuse alike
        with pytest.raises(type(error), match=str(error)[:40].replace("(", r"\(").replace(")", r"\)")):
            _load(folder, True, native, all_entities=all_entities)
        return
    assert _fields(_load(folder, True, native, all_entities=all_entities)) == expected


def test_given_maps_unknown_labels_and_repeats(tmp_path, monkeypatch):
    folder = tmp_path / "split"
    rows = [("a", "r", "ab"), ("ab", "r2", "a b"), ("a", "r", "ab"), ("é", "r", "Z")]
    _write(folder, {"train": rows, "val": [("Z", "r", "a")], "test": [("a", "r", "é"), ("a", "r", "é"),
                                                                        ("new", "r", "a"), ("a", "R", "ab")]})
    (tmp_path / "entities.tsv").write_text("0\tZ\n1\ta\n2\tab\n3\ta b\n4\té\n", encoding="utf-8")
    (tmp_path / "relations.tsv").write_text("0\tr2\n1\tr\n", encoding="utf-8")
    maps = {"entity_map": tmp_path / "entities.tsv", "relation_map": tmp_path / "relations.tsv"}
    for options in ({}, maps):
        expected = _fields(_load(folder, False, **options))
        got = _fields(_load(folder, True, **options))
        assert got == expected
        assert got["dropped"] == {"test": 2} and any("repeated test" in w for w in got["warnings"])
    assert got["entities"][:2] == ["Z", "a"] and got["triples"]["test"] == [[1, 1, 4]]


def test_a_label_below_the_tab_takes_the_text_sort_for_the_fingerprint():
    """'a\\x01' sorts after 'a' but its line 'a\\x01\\t…' before 'a\\t…': the codes' order is not the
    lines' order, so the coded fingerprint declines and the text one is used."""
    frames = {"train": pl.DataFrame({"h": ["a", "a\x01"], "r": ["r", "r"], "t": ["b", "b"]})}
    coded = coding.code_splits(frames)
    assert coded is not None and coding.coded_fingerprint(coded, {"train": coded.key("train")}) is None
    plain = {"train": pl.DataFrame({"h": ["a", "ab", "é"], "r": ["r", "r", "s"], "t": ["b", "b", "a"]})}
    coded = coding.code_splits(plain)
    assert coding.coded_fingerprint(coded, {"train": coded.key("train")}) == triples_fingerprint(plain)


def test_labels_that_share_a_hash_are_not_coded(monkeypatch):
    """Every label hashed alike: the check of each row's label against its code's label fails and
    the caller is told to map by text (the load then equals the text path: tested above)."""
    monkeypatch.setattr(pl.Series, "hash", lambda self, seed=0, *rest: pl.Series([7] * len(self), dtype=pl.UInt64))
    assert coding.code_labels([pl.Series(["a", "b", "a"])]) is None
    assert coding.code_labels([pl.Series(["a", "a"]), pl.Series(["a"])])[1][1].tolist() == [0]


def test_a_collision_falls_back_to_the_text_path(tmp_path, monkeypatch):
    folder = tmp_path / "split"
    _write(folder, {"train": [("a", "r", "b"), ("b", "r", "c")], "test": [("a", "r", "c")]})
    expected = _fields(_load(folder, False))
    monkeypatch.setattr(pl.Series, "hash", lambda self, seed=0, *rest: pl.Series([7] * len(self), dtype=pl.UInt64))
    assert _fields(_load(folder, True)) == expected


@NATIVE
@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.integers(0, 2 ** 64 - 1) | st.sampled_from([0, 1, 2 ** 63, 2 ** 64 - 1]), max_size=300),
       repeat=st.integers(1, 3))
def test_the_c_grouping_numbers_keys_as_polars_does(keys, repeat):
    """group_keys: the C hash table (grown from 2**16 slots) and polars' arg_unique and join give
    the same groups, numbered by first occurrence, the same first rows."""
    array = np.array(keys * repeat, dtype=np.uint64)
    with pytest.MonkeyPatch.context() as patch:
        use_native(patch, coding.CODING_LIBRARY, "OPENBENCH_CODING")
        native = coding.group_keys(array)
        use_native(patch, coding.CODING_LIBRARY, "OPENBENCH_CODING", "polars")
        reference = coding.group_keys(array)
    assert native[0].tolist() == reference[0].tolist() and native[1].tolist() == reference[1].tolist()
    if keys:
        assert native[1].tolist() == sorted(set(native[1].tolist()))  # first rows: in order of first occurrence
        assert np.array_equal(array[native[1]][native[0]], array)  # each row's group holds its key


@NATIVE
def test_the_c_grouping_grows_its_table_past_many_groups():
    """300,000 distinct keys (the table doubles from 65,536 slots to 1,048,576), each seen twice."""
    distinct = np.random.default_rng(3).permutation(300_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    array = np.concatenate([distinct, distinct[::-1]])
    groups, first = coding.group_keys(array)
    assert first.tolist() == list(range(300_000))
    assert groups[300_000:].tolist() == list(range(299_999, -1, -1))


@NATIVE
@pytest.mark.parametrize("buffer_bytes", [8, 64, 1 << 20])
def test_the_c_rendered_fingerprint_is_the_text_fingerprint(monkeypatch, buffer_bytes):
    """Lines rendered by the C helper into buffers smaller than one line (the buffer grows),
    than a few lines, and than all of them, hashed on a thread: the text path's fingerprint."""
    monkeypatch.setattr(coding, "RENDER_BYTES", buffer_bytes)
    frames = {"train": pl.DataFrame({"h": ["a", "ab", "é" * 40, "a"], "r": ["r", "r", "s", "s"],
                                     "t": ["b", "b", "a", "é" * 40]}),
              "test": pl.DataFrame({"h": ["b"], "r": ["s"], "t": ["a"]})}
    coded = coding.code_splits(frames)
    keys = {split: coded.key(split) for split in frames}
    assert coding.coded_fingerprint(coded, keys) == triples_fingerprint(frames)
