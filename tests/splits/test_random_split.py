"""The random split on the generated sample graph and on random graphs: leakage invariants, files."""
import json

import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from graphgen.edge_types import EDGE_TYPES
from openbench.errors import InputError
from graphgen.graph_files import check_nodes_known, read_edges, read_nodes
import splits.random_split
from splits.random_split import random_split
from tests.bases import sample_graph
from tests.splits.reference import SplitRecorder, check_fold_against_reference, loop_clean

PARENT = {name: edge.parent for name, edge in EDGE_TYPES.items()}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return sample_graph(tmp_path_factory.mktemp("graph"))


def _read(folder, name):
    path = folder / name
    if not path.exists() or not path.read_text():
        return []
    return [tuple(line.split("\t")) for line in path.read_text().splitlines()]


def _check_invariants(folder, positives, directed=True):
    splits = {name: _read(folder, f"{name}_sample.csv") for name in ("train", "val", "test")}
    negatives = {name: _read(folder, f"negative_{name}_sample.csv") for name in ("train", "val", "test")}
    keys = {name: {r[:3] for r in rows} for name, rows in splits.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["val"] and not keys["val"] & keys["test"]
    train_pairs = {(a, r, b) for a, r, b, *_ in splits["train"]}
    train_unordered = {(frozenset((a, b)), r) for a, r, b, *_ in splits["train"]}
    # the default rule: every evaluation node (positive or negative rows) is in a training positive
    train_nodes = {n for a, _, b, *_ in splits["train"] for n in (a, b)}
    for name in ("val", "test"):
        for a, _, b, *_ in negatives[name]:
            assert a in train_nodes and b in train_nodes
        for a, r, b, *_ in splits[name]:
            if directed:
                assert (b, r, a) not in train_pairs
            for (pair, tr) in ((frozenset((a, b)), other) for other in EDGE_TYPES):
                if (pair, tr) in train_unordered and tr != r:
                    assert tr != PARENT[r] and PARENT[tr] != r, (a, r, b, tr)
            assert a in train_nodes and b in train_nodes
    positive_pairs = {(frozenset((a, b)), r) for a, r, b, *_ in positives.rows()}
    for rows in negatives.values():
        for a, r, b, *_ in rows:
            assert (frozenset((a, b)), r) not in positive_pairs
    return splits, negatives


def _split_against_reference(output, positives, tn, nodes, **options):
    """Run the random split, recording what it drew, and check both sides against the loop
    reference: the first cleaning pass of the test set, then every fold's files and counts."""
    with pytest.MonkeyPatch.context() as patch:
        recorder = SplitRecorder(patch, splits.random_split)
        info = random_split(positives, tn, nodes, output, **options)
    train_val, test_drawn = recorder.carves[0]
    seen_rule = options.get("seen_nodes", "positives")
    directed = options.get("directed", True)
    kept, removed = loop_clean(test_drawn, train_val, directed, seen_rule)
    root = recorder.folds[0]["folder"]
    fold_infos = [info["split"]] + info.get("folds", [])
    assert len(recorder.folds) == len(fold_infos)
    for fold, fold_info in zip(recorder.folds, fold_infos):
        assert fold["test"] == kept and fold["test_removed"] == removed
        check_fold_against_reference(dict(fold, folder=output / fold["folder"].relative_to(root)), fold_info,
                                     seen_rule, patterns_from="train_and_validation")
    return info


def test_sample_graph_split(graph, tmp_path):
    positives, tn, nodes = graph
    info = _split_against_reference(tmp_path / "tt", positives, tn, nodes, test_frac=0.2, val=0.1, seed=5)
    splits, negatives = _check_invariants(tmp_path / "tt", positives)
    total = sum(len(rows) for rows in splits.values())
    assert 0.1 < len(splits["test"]) / total < 0.25 and negatives["train"]
    assert sorted(p.name for p in (tmp_path / "tt").iterdir()) == [
        ".openbench-output.json", "negative_test_sample.csv", "negative_train_sample.csv", "negative_val_sample.csv",
        "removed_test_nodes.csv",
        "removed_val_nodes.csv", "split_info.json", "test_nodes.csv", "test_sample.csv", "train_nodes.csv",
        "train_sample.csv", "val_nodes.csv", "val_sample.csv"]
    assert json.loads((tmp_path / "tt" / "split_info.json").read_text())["parameters"]["seed"] == 5
    assert info["split"]["train"]["positives"] == len(splits["train"])
    # fractions hold exactly, up to rounding, once the cleaning steps' removals are added back
    n = info["input"]["after_inconsistent"]
    test_rows = len(splits["test"]) + len(negatives["test"])
    cleaned_test = sum(info["split"]["test_cleaning"].values())
    assert test_rows + cleaned_test == int(n * 0.2)
    val_rows = len(splits["val"]) + len(negatives["val"])
    assert val_rows + sum(info["split"]["val_cleaning"].values()) == int((n - int(n * 0.2)) * 0.1)
    line = (tmp_path / "tt" / "train_sample.csv").read_text().splitlines()[0].split("\t")
    assert len(line) == 6 and line[4] == "1"


def test_same_seed_same_bytes_other_seed_differs(graph, tmp_path):
    positives, tn, nodes = graph
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        random_split(positives, tn, nodes, tmp_path / name, seed=seed, test_frac=0.2)
    for file in ("train_sample.csv", "test_sample.csv", "negative_train_sample.csv", "split_info.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
    assert (tmp_path / "a" / "test_sample.csv").read_bytes() != (tmp_path / "c" / "test_sample.csv").read_bytes()


def test_crossval_folds_each_filtered_against_their_own_training(graph, tmp_path):
    positives, tn, nodes = graph
    _split_against_reference(tmp_path / "cv", positives, tn, nodes, val=0.25, crossval=True, test_frac=0.2, seed=3)
    folds = sorted(p.name for p in (tmp_path / "cv").iterdir() if p.name.startswith("fold_"))
    assert folds == ["fold_0", "fold_1", "fold_2", "fold_3"]
    top = {p.name for p in (tmp_path / "cv").iterdir() if p.is_file()}
    assert {"train_sample.csv", "train_val_nodes.csv", "test_sample.csv", "removed_test_nodes.csv"} <= top
    _check_invariants(tmp_path / "cv", positives)
    for fold in folds:
        _check_invariants(tmp_path / "cv" / fold, positives)


GENES = [f"NCBIGENE:{i}" for i in range(12)]
DRUGS = [f"PUBCHEM.COMPOUND:{i}" for i in range(8)]
edge_rows = st.lists(st.one_of(
    st.tuples(st.sampled_from(GENES), st.sampled_from(["GENE_GENE", "GENE_BINDING_GENE", "GENE_ACTIVATION_GENE"]),
              st.sampled_from(GENES)),
    st.tuples(st.sampled_from(GENES), st.just("GENE_DRUG"), st.sampled_from(DRUGS)),
    st.tuples(st.sampled_from(DRUGS), st.just("DRUG_BINDING_GENE"), st.sampled_from(GENES))), min_size=5, max_size=60)


@settings(max_examples=25, deadline=None)
@given(edge_rows, st.integers(0, 3), st.booleans(), st.sampled_from(["positives", "any"]))
def test_invariants_on_random_graphs(tmp_path_factory, rows, seed, directed, seen_nodes):
    rows = [r for r in dict.fromkeys(rows) if r[0] != r[2]]
    assume(rows)  # a graph without edges is refused (tests/test_malformed_inputs.py)
    positives = pl.DataFrame([(a, r, b, "", "1", "S") for a, r, b in rows],
                             schema={c: pl.String for c in ["id1", "relation", "id2", "qscore", "value", "source"]},
                             orient="row")
    nodes = pl.DataFrame({"id": GENES + DRUGS, "node_type": ["GENE"] * 12 + ["DRUG"] * 8})
    folder = tmp_path_factory.mktemp("random") / "tt"
    _split_against_reference(folder, positives, positives.clear(), nodes, test_frac=0.3, val=0.2, seed=seed,
                             directed=directed, seen_nodes=seen_nodes)
    if seen_nodes == "positives":
        _check_invariants(folder, positives, directed)


def test_bad_inputs(tmp_path, graph):
    positives, tn, nodes = graph
    with pytest.raises(InputError, match=r"--test-frac must lie in \(0, 1\)"):
        random_split(positives, tn, nodes, tmp_path / "x", test_frac=1.5)
    edges = tmp_path / "edges.csv"
    edges.write_text("NCBIGENE:1\tGENE_GENE\tNCBIGENE:2\t900\tSTRING\nNCBIGENE:1\tGENE_FOO\tNCBIGENE:3\t\tX\n")
    with pytest.raises(InputError, match=r"edges\.csv, line 2: unknown relation 'GENE_FOO'"):
        read_edges(edges, "1")
    node_file = tmp_path / "nodes.csv"
    node_file.write_text("NCBIGENE:1\tGENE\nUMLS:C1\tDIS\n")
    with pytest.raises(InputError, match=r"nodes\.csv, line 2: node 'UMLS:C1' of type 'DIS'"):
        read_nodes(node_file)
    node_file.write_text("NCBIGENE:1\tGENE\n")
    edges.write_text("NCBIGENE:1\tGENE_GENE\tNCBIGENE:2\t900\tSTRING\n")
    with pytest.raises(InputError, match=r"edges\.csv, line 1: node 'NCBIGENE:2' is missing from the nodes file"):
        check_nodes_known(read_edges(edges, "1"), read_nodes(node_file), edges)
    assert not (tmp_path / "x").exists()


def test_cli_split_rand(tmp_path):
    from click.testing import CliRunner

    from openbench.cli import main

    runner = CliRunner()
    assert runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--no-progress"]).exit_code == 0
    graph_files = tmp_path / "graph_files"
    args = ["split", "rand", "--edges", str(graph_files / "edges.csv"), "--tn-edges", str(graph_files / "TN_edges.csv"),
            "--nodes", str(graph_files / "ALL_nodes.csv"), "--output", str(tmp_path / "tt"), "--test-frac", "0.2"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tt" / "train_sample.csv").exists() and (tmp_path / "tt" / "negative_test_sample.csv").exists()
    # the split feeds the evaluator directly
    from openbench.datasets.loader import load_dataset

    dataset = load_dataset(tmp_path / "tt", drop_unknown=True)
    assert dataset.counts()["test"] > 0
    bad = runner.invoke(main, args[:-2] + ["--test-frac", "0"])
    assert bad.exit_code == 2 and "0 is outside (0, 1)" in bad.output


def test_fraction_options_are_checked(graph, tmp_path):
    positives, tn, nodes = graph
    with pytest.raises(InputError, match=r"--val must lie in \[0, 1\), got 1.2"):
        random_split(positives, tn, nodes, tmp_path / "x", val=1.2)
    with pytest.raises(InputError, match="--crossval needs 0 < --val < 1"):
        random_split(positives, tn, nodes, tmp_path / "x", val=0, crossval=True)
    assert not (tmp_path / "x").exists()


def test_repeated_input_edges_count_once(graph, tmp_path):
    positives, tn, nodes = graph
    doubled = pl.concat([positives, positives.head(10)])
    once = random_split(positives, tn, nodes, tmp_path / "once", seed=3)
    twice = random_split(doubled, pl.concat([tn, tn]), nodes, tmp_path / "twice", seed=3)
    assert twice["input"]["repeated_positives"] == 10 and twice["input"]["repeated_true_negatives"] == tn.height
    assert once["input"]["negatives_sampled"] == twice["input"]["negatives_sampled"]  # not doubled
    for name in ("train_sample.csv", "negative_train_sample.csv", "test_sample.csv"):
        assert (tmp_path / "once" / name).read_bytes() == (tmp_path / "twice" / name).read_bytes()


def test_an_empty_graph_is_refused_naming_the_edge_file(tmp_path):
    from splits.pipeline import split_random

    graph = tmp_path / "graph"
    graph.mkdir()
    for name in ("edges.csv", "TN_edges.csv"):
        (graph / name).write_text("")
    (graph / "nodes.csv").write_text("NCBIGENE:1\tGENE\n")
    with pytest.raises(InputError, match=r"edges\.csv: the graph has no positive edges: nothing to split"):
        split_random(graph / "edges.csv", graph / "TN_edges.csv", graph / "nodes.csv", tmp_path / "out")
    assert not (tmp_path / "out").exists()


_ROW_IDS = st.sampled_from(["GENE:1", "GENE:10", "GENE:2", "A", "a", "Z", "é", "DOID:9", "DOID:10"])


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_ROW_IDS, st.sampled_from(["R_B", "R_A", "Q", "r"]), _ROW_IDS,
                               st.sampled_from(["0", "1"])), max_size=40, unique=True),
       categorical=st.booleans(), one_key=st.booleans())
def test_file_order_is_the_text_order_of_relation_ids_value(rows, categorical, one_key):
    """The split files' row order (``_sorted``) is the plain text order of (relation, id1, id2,
    value), whatever the categorical codes, whether the key fits one int64 or not: the reference
    sorts the text rows in Python."""
    frame = pl.DataFrame(rows, schema=["id1", "relation", "id2", "value"], orient="row")
    if categorical:  # codes in a scrambled order: the first ids the process sees are the last in text order
        pl.Series(sorted({r[0] for r in rows} | {r[2] for r in rows}, reverse=True)).cast(pl.Categorical)
        frame = frame.with_columns(pl.col("id1").cast(pl.Categorical), pl.col("id2").cast(pl.Categorical))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(splits.random_split, "SINGLE_KEY_LIMIT", 2 ** 62 if one_key else 0)
        ordered = splits.random_split.in_file_order(frame)
    got = list(ordered.select(pl.col("relation"), pl.col("id1").cast(pl.String), pl.col("id2").cast(pl.String),
                              "value").iter_rows())
    assert got == sorted((r, a, b, v) for a, r, b, v in rows)
