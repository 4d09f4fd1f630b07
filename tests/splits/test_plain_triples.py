"""Issue 66: a researcher's own graph. ``split rand|time|entity|inductive`` and ``audit`` read a plain
``head, relation, tail`` file (PyKEEN's and LibKGE's format: TSV or CSV, header optional), true
negatives optional (every negative then drawn), node types optional (``--nodes``); the split is
the same whichever way the file is written; mistakes are one line naming the file and line."""
import json
import re

import polars as pl
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset

DRUGS = [f"drug{i}" for i in range(12)]
DISEASES = [f"disease{i}" for i in range(10)]
GENES = [f"gene{i}" for i in range(30)]


def _triples():
    """A small drug-gene-disease graph: every entity in several triples, three relations."""
    rows = [(GENES[i], "interacts", GENES[(i * k + 1) % len(GENES)]) for k in (3, 7) for i in range(len(GENES))]
    rows += [(DRUGS[i], "targets", GENES[(i * 5 + k) % len(GENES)]) for k in range(3) for i in range(len(DRUGS))]
    rows += [(DRUGS[i], "treats", DISEASES[(i + k) % len(DISEASES)]) for k in range(2) for i in range(len(DRUGS))]
    rows += [(GENES[(j * 3 + k) % len(GENES)], "associated_with", DISEASES[j]) for k in range(3)
             for j in range(len(DISEASES))]
    return [row for row in dict.fromkeys(rows) if row[0] != row[2]]


def _write(path, rows, separator="\t", header=None):
    lines = ([separator.join(header)] if header else []) + [separator.join(row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _split(args, tmp_path):
    done = CliRunner().invoke(main, ["split", *args])
    assert done.exit_code == 0, done.output
    return done


def _rows(path):
    return pl.read_csv(path, separator="\t", has_header=False,
                       schema={c: pl.String for c in ("id1", "relation", "id2", "qscore", "value", "source")})


def _files(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*.csv"))}


def test_a_pykeen_style_file_splits_without_true_negatives_or_nodes(tmp_path):
    triples = _write(tmp_path / "triples.tsv", _triples())
    _split(["rand", "--edges", str(triples), "--output", str(tmp_path / "out"), "--seed", "3"], tmp_path)
    dataset = load_dataset(tmp_path / "out")
    assert dataset.triples["train"].shape[0] > 0 and dataset.triples["test"].shape[0] > 0
    train = _rows(tmp_path / "out" / "train_sample.csv")
    negatives = _rows(tmp_path / "out" / "negative_train_sample.csv")
    assert set(train["value"]) == {"1"} and set(negatives["value"]) == {"0"} and negatives.height > 0
    relations = set(train["relation"])
    assert relations == {"interacts", "targets", "treats", "associated_with"}
    info = json.loads((tmp_path / "out" / "split_info.json").read_text())
    assert info["input"]["true_negatives"] == 0


@pytest.mark.parametrize("separator, header", [("\t", ("head", "relation", "tail")), (",", None),
                                               (",", ("subject", "predicate", "object")), ("\t", ("h", "r", "t"))])
def test_the_split_is_the_same_whichever_way_the_file_is_written(tmp_path, separator, header):
    rows = _triples()
    plain = _write(tmp_path / "plain.tsv", rows)
    other = _write(tmp_path / "other.txt", rows, separator, header)
    _split(["rand", "--edges", str(plain), "--output", str(tmp_path / "a")], tmp_path)
    _split(["rand", "--edges", str(other), "--output", str(tmp_path / "b")], tmp_path)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_a_quoted_csv_label_holding_a_comma_is_one_field(tmp_path):
    rows = _triples()
    text = "head,relation,tail\n" + "".join(f'"{h}, the first",{r},{t}\n' if i == 0 else f"{h},{r},{t}\n"
                                             for i, (h, r, t) in enumerate(rows))
    (tmp_path / "quoted.csv").write_text(text)
    done = CliRunner().invoke(main, ["audit", str(tmp_path / "quoted.csv"), "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["input"]["triples"]["graph"] == len(rows)


def test_node_types_from_a_file_type_the_negatives(tmp_path):
    """With --nodes every drawn negative keeps its relation's end types (a treats negative joins a
    drug and a disease)."""
    triples = _write(tmp_path / "triples.tsv", _triples())
    kinds = {**{d: "drug" for d in DRUGS}, **{d: "disease" for d in DISEASES}, **{g: "gene" for g in GENES}}
    nodes = _write(tmp_path / "nodes.csv", list(kinds.items()), ",", ("id", "type"))
    _split(["rand", "--edges", str(triples), "--nodes", str(nodes), "--output", str(tmp_path / "out")], tmp_path)
    negatives = _rows(tmp_path / "out" / "negative_train_sample.csv").filter(pl.col("relation") == "treats")
    assert negatives.height > 0
    assert all(kinds[h] == "drug" and kinds[t] == "disease" for h, t in zip(negatives["id1"], negatives["id2"]))


def test_true_negatives_as_plain_triples_are_kept(tmp_path):
    triples = _write(tmp_path / "triples.tsv", _triples())
    known = _write(tmp_path / "negatives.tsv", [(DRUGS[0], "treats", DISEASES[7]), (DRUGS[1], "treats", DISEASES[8])])
    _split(["rand", "--edges", str(triples), "--tn-edges", str(known), "--output", str(tmp_path / "out")], tmp_path)
    info = json.loads((tmp_path / "out" / "split_info.json").read_text())
    assert info["input"]["true_negatives"] == 2


def test_entity_inductive_and_time_splits_read_plain_triples(tmp_path):
    rows = _triples()
    triples = _write(tmp_path / "triples.tsv", rows)
    older = _write(tmp_path / "older.tsv", rows[: len(rows) * 4 // 5])
    _split(["entity", "--edges", str(triples), "--node-type", "entity", "--fraction", "0.1", "--output",
            str(tmp_path / "entity")], tmp_path)
    assert (tmp_path / "entity" / "test_sample.csv").is_file()
    _split(["inductive", "--edges", str(triples), "--inference-fraction", "0.4", "--test-fraction", "0.2",
            "--output", str(tmp_path / "inductive")], tmp_path)
    assert (tmp_path / "inductive" / "inference.txt").is_file()
    _split(["time", "--edges", str(triples), "--tmo-edges", str(older), "--output", str(tmp_path / "time")],
           tmp_path)
    assert (tmp_path / "time" / "test_sample.csv").is_file()


@pytest.mark.parametrize("content, message, line", [
    ("a\tr\tb\nc\tr\n", "expected 3", 2),
    ("a\tr\tb\tx\ty\tz\tw\n", "expected", 1),
    ("", "no (triples|positive edges)", None),
    ("head\trelation\ttail\n", "holds a header and no triples", None),
    ("a\tr\tb\n\tr\tc\n", "empty", 2),
])
def test_a_bad_triples_file_is_one_line_naming_file_and_line(tmp_path, content, message, line):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    for command in (["split", "rand", "--edges", str(path), "--output", str(tmp_path / "out")], ["audit", str(path)]):
        done = CliRunner().invoke(main, command)
        assert done.exit_code != 0
        text = done.output.strip()
        assert str(path) in text and re.search(message, text), text
        if line is not None:
            assert f"line {line}" in text, text
        assert "Traceback" not in text and "bug" not in text
    assert not (tmp_path / "out").exists()


def test_a_node_missing_from_the_node_file_names_its_line(tmp_path):
    triples = _write(tmp_path / "triples.tsv", _triples())
    nodes = _write(tmp_path / "nodes.tsv", [(d, "drug") for d in DRUGS])
    done = CliRunner().invoke(main, ["split", "rand", "--edges", str(triples), "--nodes", str(nodes), "--output",
                                     str(tmp_path / "out")])
    assert done.exit_code != 0 and "missing from the nodes file" in done.output and "line 1" in done.output
    assert not (tmp_path / "out").exists()


def test_the_help_marks_only_the_edges_as_needed():
    done = CliRunner().invoke(main, ["split", "rand", "--help"])
    words = " ".join(done.output.split())
    assert "plain head, relation, tail" in words and "(optional" in words
    missing = CliRunner().invoke(main, ["split", "rand", "--output", "x"])
    assert missing.exit_code == 2 and "--edges FILE" in missing.output


def test_a_node_listed_with_two_types_in_a_plain_node_file_is_refused_naming_both_lines(tmp_path):
    """A plain ``id, type`` file that types one node twice: one error naming the node, both types
    and lines, the file; nothing written (the same check as OpenBioLink's node files)."""
    triples = _write(tmp_path / "triples.tsv", _triples())
    kinds = [*((d, "drug") for d in DRUGS), *((d, "disease") for d in DISEASES), *((g, "gene") for g in GENES),
             (DRUGS[2], "disease")]
    nodes = _write(tmp_path / "nodes.tsv", kinds)
    done = CliRunner().invoke(main, ["split", "rand", "--edges", str(triples), "--nodes", str(nodes), "--output",
                                     str(tmp_path / "out")])
    assert done.exit_code == 1, done.output
    assert (f"node '{DRUGS[2]}' is listed with two types, 'drug' (line 3) and 'disease'" in done.output
            and f"line {len(kinds)}" in done.output), done.output
    assert not (tmp_path / "out").exists()
