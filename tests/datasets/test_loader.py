"""Dataset layouts, label maps, fingerprints and every loading error path."""
import pytest
import torch

from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from tests.helpers import SAMPLE_NAMES, random_labelled_graph, write_samples

SPLITS = {"train": [("A", "R1", "B"), ("B", "R2", "C"), ("C", "R1", "A")],
          "valid": [("B", "R1", "C")], "test": [("A", "R2", "C"), ("C", "R1", "B")]}


def test_sample_layout_keeps_value_1_rows_and_sorts_labels(tmp_path):
    dataset = load_dataset(write_samples(tmp_path, SPLITS))
    assert dataset.entity_labels == ["A", "B", "C"]  # NEGATIVE:ONLY from value-0 rows is ignored
    assert dataset.relation_labels == ["R1", "R2"]
    assert dataset.triples["test"].tolist() == [[0, 1, 2], [2, 0, 1]]
    assert dataset.counts() == {"entities": 3, "relations": 2, "train": 3, "valid": 1, "test": 2}


def test_three_column_files_and_missing_validation_split(tmp_path):
    (tmp_path / "train_sample.csv").write_text("A\tR1\tB\nB\tR1\tA\n")
    (tmp_path / "test_sample.csv").write_text("A\tR1\tA\r\n")
    dataset = load_dataset(tmp_path)
    assert dataset.triples["valid"].shape == (0, 3)
    assert dataset.triples["test"].tolist() == [[0, 0, 0]]


def test_archive_layout_and_folds(tmp_path):
    write_samples(tmp_path / "train_test_data", SPLITS)
    assert load_dataset(tmp_path).counts()["test"] == 2
    other = dict(SPLITS, test=[("A", "R1", "B")])
    write_samples(tmp_path / "cv" / "train_test_data" / "fold_0", SPLITS)
    write_samples(tmp_path / "cv" / "train_test_data" / "fold_1", other)
    assert load_dataset(tmp_path / "cv", fold=1).counts()["test"] == 1
    with pytest.raises(InputError, match="fold 7 not found; available: fold_0, fold_1"):
        load_dataset(tmp_path / "cv", fold=7)


def test_fingerprint_ignores_row_order_and_layout(tmp_path):
    splits = random_labelled_graph(0, 20, 3, {"train": 60, "valid": 5, "test": 5})
    first = load_dataset(write_samples(tmp_path / "a", splits))
    shuffled = {split: list(reversed(triples)) for split, triples in splits.items()}
    second = load_dataset(write_samples(tmp_path / "b", shuffled, negatives=False))
    assert first.fingerprint == second.fingerprint
    ids = tmp_path / "ids"
    ids.mkdir()
    (ids / "entities.tsv").write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(first.entity_labels)))
    (ids / "relations.tsv").write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(first.relation_labels)))
    for split, name in (("train", "train.tsv"), ("valid", "valid.tsv"), ("test", "test.tsv")):
        (ids / name).write_text("".join("\t".join(map(str, row)) + "\n" for row in first.triples[split].tolist()))
    third = load_dataset(ids)
    assert third.layout == "ids" and third.fingerprint == first.fingerprint
    assert third.id_map_sha256 == first.id_map_sha256
    assert torch.equal(third.triples["test"], first.triples["test"])
    moved = dict(splits, test=splits["test"][1:], valid=splits["valid"] + splits["test"][:1])
    assert load_dataset(write_samples(tmp_path / "c", moved)).fingerprint != first.fingerprint


def test_explicit_maps(tmp_path):
    write_samples(tmp_path, SPLITS)
    (tmp_path / "ent.tsv").write_text("0\tC\n1\tB\n2\tA\n3\tD\n")
    (tmp_path / "rel.tsv").write_text("1\tR1\n0\tR2\n")
    dataset = load_dataset(tmp_path, entity_map=tmp_path / "ent.tsv", relation_map=tmp_path / "rel.tsv")
    assert dataset.entity_labels == ["C", "B", "A", "D"]
    assert dataset.triples["test"].tolist() == [[2, 0, 0], [0, 1, 1]]


def test_unknown_evaluation_labels_fail_or_drop(tmp_path):
    splits = dict(SPLITS, test=SPLITS["test"] + [("A", "R1", "Z"), ("Q", "R9", "B")])
    write_samples(tmp_path, splits)
    with pytest.raises(InputError) as info:
        load_dataset(tmp_path)
    message = str(info.value)
    assert "test_sample.csv" in message and "2 test triple(s) use labels missing from the training split" in message
    assert "A\tR1\tZ" in message and "--drop-unknown" in message
    dataset = load_dataset(tmp_path, drop_unknown=True)
    assert dataset.counts()["test"] == 2 and dataset.dropped == {"test": 2}
    assert any("dropped 2 test triple(s)" in warning for warning in dataset.warnings)


@pytest.mark.parametrize("content,line,expected", [
    ("A\tR1\tB\t700\t1\tSTRING\nA\tR1\t\t700\t1\tSTRING\n", 2, "column 3 is empty"),
    ("A\tR1\tB\t700\t1\tSTRING\nA\tR1\tB\t700\tyes\tSTRING\n", 2, "column 5 (value) is 'yes'; expected 0 or 1"),
    ("A\tR1\tB\t700\t1\tSTRING\nA\tR1\tB\n", 2, "expected 6 tab-separated columns like the first line, found 3"),
    ("A\tR1\tB\nA\tR1\n", 2, "expected 3 tab-separated columns like the first line, found 2"),
    ("A\tR1\nA\tR1\n", 1, "expected 3 or 6 tab-separated columns, found 2"),
    ("A\tR1\tB\t1\nA\tR1\tB\t1\n", 1, "expected 3 or 6 tab-separated columns, found 4"),
])
def test_malformed_sample_rows_name_file_and_line(tmp_path, content, line, expected):
    write_samples(tmp_path, SPLITS)
    (tmp_path / SAMPLE_NAMES["train"]).write_text(content)
    with pytest.raises(InputError) as info:
        load_dataset(tmp_path)
    assert info.value.line == line and info.value.path.endswith("train_sample.csv")
    assert expected in str(info.value)


def test_missing_dataset_pieces(tmp_path):
    with pytest.raises(InputError, match="nowhere: no such folder, and not a dataset name of the registry"):
        load_dataset(tmp_path / "nowhere")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(InputError, match="dataset path is not a directory"):
        load_dataset(tmp_path / "a_file")
    with pytest.raises(InputError, match="no dataset found: expected train_sample.csv and test_sample.csv"):
        load_dataset(tmp_path)
    write_samples(tmp_path, dict(SPLITS, train=[]))
    with pytest.raises(InputError, match="training file holds no triples"):
        load_dataset(tmp_path)


def _id_layout(folder, entities="0\tA\n1\tB\n", relations="0\tR\n", train="0\t0\t1\n", test="1\t0\t0\n"):
    folder.mkdir(exist_ok=True)
    for name, text in (("entities.tsv", entities), ("relations.tsv", relations), ("train.tsv", train),
                       ("valid.tsv", ""), ("test.tsv", test)):
        (folder / name).write_text(text)
    return folder


def test_id_layout_errors(tmp_path):
    assert load_dataset(_id_layout(tmp_path / "ok")).triples["test"].tolist() == [[1, 0, 0]]
    with pytest.raises(InputError, match=r"train\.tsv, line 2: expected integer ids head < 2"):
        load_dataset(_id_layout(tmp_path / "a", train="0\t0\t1\n0\t0\t2\n"))
    with pytest.raises(InputError, match=r"entities\.tsv, line 2: id 0 is out of range or repeated"):
        load_dataset(_id_layout(tmp_path / "b", entities="0\tA\n0\tB\n"))
    with pytest.raises(InputError, match=r"entities\.tsv, line 2: label 'A' appears more than once"):
        load_dataset(_id_layout(tmp_path / "c", entities="0\tA\n1\tA\n"))
    with pytest.raises(InputError, match=r"relations\.tsv, line 1: expected an integer id and a label"):
        load_dataset(_id_layout(tmp_path / "d", relations="x\tR\n"))
    with pytest.raises(InputError, match="--fold applies to OpenBioLink sample folders"):
        load_dataset(_id_layout(tmp_path / "e"), fold=0)
    with pytest.raises(InputError, match="do not apply"):
        load_dataset(_id_layout(tmp_path / "f"), entity_map=tmp_path / "f" / "entities.tsv")


def test_map_file_errors(tmp_path):
    write_samples(tmp_path, SPLITS)
    with pytest.raises(InputError, match="entity map file does not exist"):
        load_dataset(tmp_path, entity_map=tmp_path / "missing.tsv")
    (tmp_path / "bad.tsv").write_text("0\tA\n1\tB\t3\n")
    with pytest.raises(InputError, match=r"bad\.tsv, line 2: expected 2 tab-separated columns like the first line, found 3"):
        load_dataset(tmp_path, entity_map=tmp_path / "bad.tsv")


def test_fingerprint_is_sha256_of_the_documented_canonical_form(tmp_path):
    import hashlib

    splits = random_labelled_graph(4, 15, 3, {"train": 40, "valid": 4, "test": 6})
    dataset = load_dataset(write_samples(tmp_path, splits))
    # one line per distinct triple of a split: a repeated row counts once
    lines = sorted({f"{split}\t{h}\t{r}\t{t}\n" for split, triples in splits.items() for h, r, t in triples})
    assert dataset.fingerprint == hashlib.sha256("".join(lines).encode()).hexdigest()


def test_no_test_triples_is_an_error(tmp_path):
    write_samples(tmp_path, dict(SPLITS, test=[]))
    with pytest.raises(InputError, match=r"test_sample\.csv: no test triples to evaluate"):
        load_dataset(tmp_path)


def test_repeated_test_rows_count_once_with_a_warning(tmp_path):
    splits = dict(SPLITS, test=SPLITS["test"] + [SPLITS["test"][0]] * 2)
    dataset = load_dataset(write_samples(tmp_path, splits))
    assert dataset.counts()["test"] == len(SPLITS["test"])
    assert any("removed 2 repeated test triple(s) of test_sample.csv" in warning for warning in dataset.warnings)
    again = load_dataset(write_samples(tmp_path / "once", SPLITS))
    assert dataset.fingerprint == again.fingerprint  # the canonical form holds each triple once


def test_a_byte_order_mark_is_not_part_of_the_first_label(tmp_path):
    folder = write_samples(tmp_path, SPLITS)
    for name in SAMPLE_NAMES.values():
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    dataset = load_dataset(folder)
    assert dataset.fingerprint == load_dataset(write_samples(tmp_path / "plain", SPLITS)).fingerprint
    assert not any(label.startswith("\ufeff") for label in dataset.entity_labels)
