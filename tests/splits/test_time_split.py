"""The time-slice split on the sample graph and an older version of it."""
import json

import polars as pl
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from graphgen.graph_files import read_edges, read_nodes
import splits.time_split
from splits.time_split import time_split
from tests.splits.reference import SplitRecorder, check_fold_against_reference


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    out = tmp_path_factory.mktemp("now")
    assert CliRunner().invoke(main, ["generate", "--sample", "--output", str(out), "--no-progress"]).exit_code == 0
    folder = out / "graph_files"
    positives, tn = read_edges(folder / "edges.csv", "1"), read_edges(folder / "TN_edges.csv", "0")
    nodes = read_nodes(folder / "ALL_nodes.csv")
    # the t-1 graph: every third positive and TN missing, plus one edge that has since vanished
    tmo_positives = positives.filter(pl.int_range(pl.len()) % 3 != 0)
    vanished = pl.DataFrame([("NCBIGENE:1001", "GENE_GENE", "NCBIGENE:1003", "999", "1", "STRING")],
                            schema=positives.schema, orient="row")
    tmo_positives = pl.concat([tmo_positives, vanished])
    tmo_tn = tn.filter(pl.int_range(pl.len()) % 3 != 0)
    tmo_ids = pl.concat([tmo_positives["id1"], tmo_positives["id2"], tmo_tn["id1"], tmo_tn["id2"]]).unique()
    tmo_nodes = nodes.filter(pl.col("id").is_in(tmo_ids.implode()))
    return positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, folder


def _rows(path):
    text = path.read_text()
    return [tuple(line.split("\t")) for line in text.splitlines()] if text else []


def _against_reference(graphs, output, **options):
    """Both sides against the loop reference: the validation and test files hold exactly what it
    keeps of the sets the split drew, and split_info's cleaning counts equal its counts."""
    positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, _ = graphs
    with pytest.MonkeyPatch.context() as patch:
        recorder = SplitRecorder(patch, splits.time_split)
        info = time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, output, **options)
    (fold,) = recorder.folds
    check_fold_against_reference(dict(fold, folder=output), info["split"], options.get("seen_nodes", "positives"))
    assert sum(info["split"]["test_cleaning"].values()) > 0  # the reference compared real removals


def test_time_split_invariants(graphs, tmp_path):
    positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, _ = graphs
    info = time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, tmp_path / "ts", seed=1)
    _against_reference(graphs, tmp_path / "ts_ref", seed=1)
    _against_reference(graphs, tmp_path / "ts_val", seed=2, val=0.2)
    _against_reference(graphs, tmp_path / "ts_any", seed=2, val=0.2, seen_nodes="any", directed=False)
    train, test = _rows(tmp_path / "ts" / "train_sample.csv"), _rows(tmp_path / "ts" / "test_sample.csv")
    test_negatives = _rows(tmp_path / "ts" / "negative_test_sample.csv")
    tmo_keys = set(tmo_positives.select("id1", "relation", "id2").rows())
    assert test and all(row[:3] not in tmo_keys for row in test)
    assert {row[:3] for row in train} <= tmo_keys
    assert all(row[4] == "1" for row in test) and all(row[4] == "0" for row in test_negatives)
    all_positive_pairs = {(frozenset((a, b)), r) for a, r, b, *_ in pl.concat([positives, tmo_positives]).rows()}
    assert not any((frozenset((a, b)), r) in all_positive_pairs for a, r, b, *_ in test_negatives)
    tmo_node_ids = set(tmo_nodes["id"])
    assert all(a in tmo_node_ids and b in tmo_node_ids for a, _, b, *_ in test)
    assert _rows(tmp_path / "ts" / "vanished_edges.csv")[0][:3] == ("NCBIGENE:1001", "GENE_GENE", "NCBIGENE:1003")
    assert info["input"]["vanished"] == 1  # exactly the one planted
    again = time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, tmp_path / "ts2", seed=1)
    assert again == info
    assert (tmp_path / "ts" / "test_sample.csv").read_bytes() == (tmp_path / "ts2" / "test_sample.csv").read_bytes()
    with pytest.raises(InputError, match=r"--val must lie in \[0, 1\)"):
        time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, tmp_path / "bad", val=2)


def test_cli_split_time(graphs, tmp_path):
    positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, folder = graphs
    tmo = tmp_path / "tmo"
    tmo.mkdir()
    for name, frame in (("edges.csv", tmo_positives), ("TN_edges.csv", tmo_tn)):
        frame.select("id1", "relation", "id2", "qscore", "source").write_csv(tmo / name, include_header=False,
                                                                             separator="\t")
    tmo_nodes.write_csv(tmo / "nodes.csv", include_header=False, separator="\t")
    result = CliRunner().invoke(main, [
        "split", "time", "--edges", str(folder / "edges.csv"), "--tn-edges", str(folder / "TN_edges.csv"),
        "--nodes", str(folder / "ALL_nodes.csv"), "--tmo-edges", str(tmo / "edges.csv"), "--tmo-tn-edges",
        str(tmo / "TN_edges.csv"), "--tmo-nodes", str(tmo / "nodes.csv"), "--output", str(tmp_path / "out"),
        "--val", "0.1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "val_sample.csv").exists() and (tmp_path / "out" / "vanished_edges.csv").exists()


def test_every_split_evaluates_with_default_maps_and_no_warning(graphs, tmp_path):
    """The split/evaluate seam: with the default --seen-nodes positives, every validation and test
    node is in a training positive, so the evaluator's default maps know all of them."""
    from openbench.datasets.loader import load_dataset
    from splits.random_split import random_split

    positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, _ = graphs
    written = {"time": tmp_path / "time", "random": tmp_path / "random", "crossval": tmp_path / "cv"}
    time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, written["time"], val=0.2, seed=3)
    random_split(positives, tn, nodes, written["random"], test_frac=0.2, val=0.2, seed=3)
    random_split(positives, tn, nodes, written["crossval"], test_frac=0.2, val=0.34, crossval=True, seed=3)
    folders = [written["time"], written["random"], written["crossval"]] + sorted(written["crossval"].glob("fold_*"))
    for folder in folders:
        for split in ("test", "valid"):
            dataset = load_dataset(folder, evaluation_split=split) if split == "test" or \
                (folder / "val_sample.csv").exists() else None
            if dataset is not None:
                assert dataset.warnings == [] and dataset.dropped == {}, (folder, split, dataset.warnings)
    info = json.loads((written["random"] / "split_info.json").read_text())
    assert info["parameters"]["seen_nodes"] == "positives" and "unseen_nodes" in info["split"]["test_cleaning"]
    # OpenBioLink's rule keeps nodes seen only in training negatives: with it, the same graph leaves some
    loose = random_split(positives, tn, nodes, tmp_path / "loose", test_frac=0.2, val=0.2, seed=3, seen_nodes="any")
    assert loose["parameters"]["seen_nodes"] == "any"


def _positive_keys(frame):
    return set(frame.select("id1", "relation", "id2").cast(pl.String).rows())


def _family_pairs(frame):
    from splits.negatives import _family

    pairs = set()
    for a, r, b in frame.select("id1", "relation", "id2").cast(pl.String).rows():
        pairs |= {(frozenset((a, b)), member) for member in _family(r)}
    return pairs


def _check_negatives_never_contradict(folder, versions):
    """No row of any negative file is a positive of either version (its pair, in its relation's
    family), and no triple is a negative in one file and a positive in another."""
    forbidden = set().union(*(_family_pairs(v) for v in versions))
    files = {name: _rows(folder / name) for name in ("train_sample.csv", "val_sample.csv", "test_sample.csv",
                                                     "negative_train_sample.csv", "negative_val_sample.csv",
                                                     "negative_test_sample.csv") if (folder / name).exists()}
    negative_rows = [row for name, rows in files.items() if name.startswith("negative") for row in rows]
    positive_keys = {row[:3] for name, rows in files.items() if not name.startswith("negative") for row in rows}
    bad = [row[:3] for row in negative_rows if (frozenset((row[0], row[2])), row[1]) in forbidden]
    assert not bad, bad[:5]
    assert not {row[:3] for row in negative_rows} & positive_keys


def test_training_negatives_avoid_the_positives_of_both_versions(graphs, tmp_path):
    """The issue's case: t-1 is the sample graph with every 8th edge and every 5th true negative
    missing; before, 3 of the 404 training negatives were positives at t."""
    positives, tn, nodes, *_ = graphs
    tmo_positives = positives.filter(pl.int_range(pl.len()) % 8 != 0)
    tmo_tn = tn.filter(pl.int_range(pl.len()) % 5 != 0)
    info = time_split(positives, tn, nodes, tmo_positives, tmo_tn, nodes, tmp_path / "ts", seed=42)
    t_keys = _positive_keys(positives)
    train_negatives = _rows(tmp_path / "ts" / "negative_train_sample.csv")
    assert train_negatives and not [row for row in train_negatives if row[:3] in t_keys]
    _check_negatives_never_contradict(tmp_path / "ts", [positives, tmo_positives])
    counts = info["negatives"]["negative_train_sample.csv and negative_val_sample.csv"]
    assert counts["redrawn_for_known"] >= 1 and set(counts) == {"redrawn_for_known", "true_negatives_dropped"}


GENES = [f"NCBIGENE:{i}" for i in range(8)]
DRUGS = [f"PUBCHEM.COMPOUND:{i}" for i in range(5)]
version_edges = st.lists(st.one_of(
    st.tuples(st.sampled_from(GENES), st.sampled_from(["GENE_GENE", "GENE_BINDING_GENE"]), st.sampled_from(GENES)),
    st.tuples(st.sampled_from(GENES), st.just("GENE_DRUG"), st.sampled_from(DRUGS)),
    st.tuples(st.sampled_from(DRUGS), st.sampled_from(["DRUG_BINDING_GENE", "DRUG_INHIBITION_GENE"]),
              st.sampled_from(GENES))), min_size=4, max_size=40)


def _frame(rows, value):
    rows = [r for r in dict.fromkeys(rows) if r[0] != r[2]]
    return pl.DataFrame([(a, r, b, "", value, "S") for a, r, b in rows],
                        schema={c: pl.String for c in ("id1", "relation", "id2", "qscore", "value", "source")},
                        orient="row")


@settings(max_examples=30, deadline=None)
@example(now=[("NCBIGENE:0", "GENE_GENE", "NCBIGENE:1")] * 2 + [("NCBIGENE:2", "GENE_DRUG", "PUBCHEM.COMPOUND:0")],
         older=[("NCBIGENE:2", "GENE_DRUG", "PUBCHEM.COMPOUND:0"), ("NCBIGENE:3", "GENE_GENE", "NCBIGENE:4")],
         true_negatives=[("NCBIGENE:0", "GENE_GENE", "NCBIGENE:1"), ("PUBCHEM.COMPOUND:0", "DRUG_BINDING_GENE",
                                                                     "NCBIGENE:2")], seed=0)
@given(version_edges, version_edges, st.lists(st.tuples(st.sampled_from(GENES), st.just("GENE_GENE"),
                                                        st.sampled_from(GENES)), max_size=10), st.integers(0, 3))
def test_no_negative_contradicts_a_positive_of_either_version(tmp_path_factory, now, older, true_negatives, seed):
    positives, tmo_positives = _frame(now, "1"), _frame(older, "1")
    assume(tmo_positives.height)
    tn = _frame(true_negatives, "0")
    nodes = pl.DataFrame({"id": GENES + DRUGS, "node_type": ["GENE"] * len(GENES) + ["DRUG"] * len(DRUGS)})
    folder = tmp_path_factory.mktemp("versions") / "ts"
    info = time_split(positives, tn, nodes, tmo_positives, tn, nodes, folder, seed=seed, val=0.3)
    _check_negatives_never_contradict(folder, [positives, tmo_positives])
    assert all(set(v) == {"redrawn_for_known", "true_negatives_dropped"} for v in info["negatives"].values())


def test_eval_negatives_of_the_time_split_are_read_by_the_evaluator(graphs, tmp_path):
    """--eval-negatives on the time split: one row per test triple, never a known answer of t or t-1."""
    from openbench.datasets.loader import load_dataset

    positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, _ = graphs
    time_split(positives, tn, nodes, tmo_positives, tmo_tn, tmo_nodes, tmp_path / "ts", seed=1, val=0.2,
               eval_negatives=3)
    dataset = load_dataset(tmp_path / "ts")
    assert set(dataset.sampled) == {"valid", "test"}
    known = {tuple(row) for split in ("train", "valid", "test") for row in dataset.triples[split].tolist()}
    negatives = dataset.sampled["test"]
    assert negatives.tail.shape == (dataset.triples["test"].shape[0], 3)
    for (h, r, t), heads, tails in zip(dataset.triples["test"].tolist(), negatives.head.tolist(),
                                       negatives.tail.tolist()):
        assert all((x, r, t) not in known for x in heads) and all((h, r, x) not in known for x in tails)
