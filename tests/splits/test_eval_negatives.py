"""--eval-negatives: seeded, filtered, typed negatives per evaluation triple, read back by the evaluator."""
import json

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from openbench.datasets.negatives import read_negatives, write_negatives
from openbench._io import load_npz
from splits.eval_negatives import draw_eval_negatives
from splits.random_split import random_split
from tests.bases import sample_graph


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return sample_graph(tmp_path_factory.mktemp("graph"))


@pytest.fixture(scope="module")
def split(graph, tmp_path_factory):
    folder = tmp_path_factory.mktemp("split") / "tt"
    random_split(*graph, folder, seed=3, test_frac=0.2, val=0.1, eval_negatives=4, typed_negatives=True)
    return folder


def _rows(folder, name):
    text = (folder / name).read_text().strip()
    return [tuple(line.split("\t")[:3]) for line in text.splitlines()] if text else []


def test_negatives_are_typed_filtered_and_never_the_answer(graph, split):
    _, _, nodes = graph
    node_type = dict(nodes.select(pl.col("id").cast(pl.String), "node_type").iter_rows())
    known = set()
    for name in ("train_sample.csv", "val_sample.csv", "test_sample.csv"):
        known |= set(_rows(split, name))
    training_entities = {e for h, _, t in _rows(split, "train_sample.csv") for e in (h, t)}
    for split_name, sample in (("test", "test_sample.csv"), ("valid", "val_sample.csv")):
        arrays = load_npz(split / f"{split_name}_negatives.npz")
        triples, head, tail = arrays["triples"], arrays["head"], arrays["tail"]
        assert sorted(map(tuple, triples.tolist())) == sorted(_rows(split, sample))
        assert head.shape == tail.shape == (len(triples), 4)
        for (h, r, t), heads, tails in zip(triples.tolist(), head.tolist(), tail.tolist()):
            assert len(set(heads)) == len(heads) and len(set(tails)) == len(tails)  # distinct
            for negative in heads:
                assert negative != h and (negative, r, t) not in known and negative in training_entities
                assert node_type[negative] == node_type[h]
            for negative in tails:
                assert negative != t and (h, r, negative) not in known and negative in training_entities
                assert node_type[negative] == node_type[t]
    info = json.loads((split / "split_info.json").read_text())
    assert info["split"]["test_negatives"] == {"per_side": 4, "typed": True, "queries": len(_rows(split, "test_sample.csv"))}


def test_same_seed_same_bytes(graph, tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        random_split(*graph, tmp_path / name, seed=seed, test_frac=0.2, eval_negatives=4)
    assert (tmp_path / "a" / "test_negatives.npz").read_bytes() == (tmp_path / "b" / "test_negatives.npz").read_bytes()
    assert (tmp_path / "a" / "test_negatives.npz").read_bytes() != (tmp_path / "c" / "test_negatives.npz").read_bytes()


def test_the_evaluator_reads_them_row_by_row(split):
    dataset = load_dataset(split)
    assert set(dataset.sampled) == {"valid", "test"}
    negatives = dataset.sampled["test"]
    arrays = load_npz(split / "test_negatives.npz")
    by_triple = {tuple(t): list(h) for t, h in zip(arrays["triples"].tolist(), arrays["head"].tolist())}
    for row, (h, r, t) in enumerate(dataset.triples["test"].tolist()):
        labels = (dataset.entity_labels[h], dataset.relation_labels[r], dataset.entity_labels[t])
        assert [dataset.entity_labels[i] for i in negatives.head[row].tolist()] == by_triple[labels]


def test_bad_archives_are_refused(split, tmp_path):
    dataset = load_dataset(split)
    arrays = load_npz(split / "test_negatives.npz")
    path = tmp_path / "test_negatives.npz"
    write_negatives(path, arrays["triples"][1:], arrays["head"][1:], arrays["tail"][1:])
    with pytest.raises(InputError, match="have no negatives row"):
        read_negatives(path, dataset, "test")
    head = arrays["head"].copy()
    head[0, 0] = "NOT:AN_ENTITY"
    write_negatives(path, arrays["triples"], head, arrays["tail"])
    with pytest.raises(InputError, match="negative head label.*NOT:AN_ENTITY"):
        read_negatives(path, dataset, "test")
    write_negatives(path, arrays["triples"], arrays["head"][:, :0], arrays["tail"])
    with pytest.raises(InputError, match=r"expected triples \(T, 3\)"):
        read_negatives(path, dataset, "test")


def test_impossible_requests_say_which_triple():
    """Every candidate tail of (A, R, ?) is a known answer: no admissible negative exists."""
    def frame(rows):
        return pl.DataFrame(rows, schema=["id1", "relation", "id2"], orient="row")

    training = frame([("A", "R", "B"), ("B", "R", "A"), ("A", "R", "A")])
    evaluation = frame([("A", "R", "B")])
    nodes = pl.DataFrame({"id": ["A", "B"], "node_type": ["GENE", "GENE"]})
    with pytest.raises(InputError, match=r"cannot draw 1 distinct tail negatives for the test triple \(A, R, B\)"):
        draw_eval_negatives(evaluation, pl.concat([training, evaluation]), training, nodes, 1, False, 0, "test")
    only = frame([("A", "R", "B")])  # the one admissible head is B, the one admissible tail A
    triples, head, tail = draw_eval_negatives(only, only, only, nodes, 1, False, 0, "test")
    assert triples.tolist() == [["A", "R", "B"]] and head.tolist() == [["B"]] and tail.tolist() == [["A"]]
    with pytest.raises(InputError, match="cannot draw 2 distinct head negatives"):  # one admissible, two asked
        draw_eval_negatives(only, only, only, nodes, 2, False, 0, "test")
def test_cli_split_then_both_protocols(tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--no-progress"]).exit_code == 0
    graph_files = tmp_path / "graph_files"
    split_args = ["split", "rand", "--edges", str(graph_files / "edges.csv"), "--tn-edges",
                  str(graph_files / "TN_edges.csv"), "--nodes", str(graph_files / "ALL_nodes.csv"), "--output",
                  str(tmp_path / "tt"), "--test-frac", "0.2", "--eval-negatives", "20"]
    result = runner.invoke(main, split_args)
    assert result.exit_code == 0, result.output
    dataset = load_dataset(tmp_path / "tt")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "e.npy", rng.normal(size=(dataset.num_entities, 8)).astype(np.float32))
    np.save(tmp_path / "r.npy", rng.normal(size=(dataset.num_relations, 8)).astype(np.float32))
    base = ["evaluate", "--dataset", str(tmp_path / "tt"), "--model", "DistMult", "--entity-embeddings",
            str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"), "--no-progress"]
    records = {}
    for protocol in ("sampled", "full"):
        out = tmp_path / f"{protocol}.json"
        result = runner.invoke(main, base + ["--protocol", protocol, "--output", str(out)])
        assert result.exit_code == 0, result.output
        records[protocol] = json.loads(out.read_text())
    sampled, full = records["sampled"], records["full"]
    assert sampled["protocol"]["candidates"] == "sampled" and sampled["protocol"]["filter_sets"] == []
    assert sampled["protocol"]["negatives_per_query"]["head"] == 20
    assert full["protocol"]["candidates"] == "all" and full["protocol"]["filter_sets"] == ["train", "valid", "test"]
    # 21 candidates against every entity: the sampled MRR of the same model is far higher
    assert sampled["metrics"]["both"]["realistic"]["mrr"] > full["metrics"]["both"]["realistic"]["mrr"]
    refused = runner.invoke(main, base + ["--protocol", "sampled", "--filter", "train"])
    assert refused.exit_code == 2 and "--filter does not apply" in refused.output
    typed_alone = runner.invoke(main, split_args[:-2] + ["--typed", "--output", str(tmp_path / "t2")])
    assert typed_alone.exit_code == 2 and "--typed applies to --eval-negatives" in typed_alone.output


def test_the_sampled_protocol_needs_negatives(graph, tmp_path):
    random_split(*graph, tmp_path / "plain", seed=2, test_frac=0.2)
    dataset = load_dataset(tmp_path / "plain")
    assert dataset.sampled == {}
    rng = np.random.default_rng(0)
    np.save(tmp_path / "e.npy", rng.normal(size=(dataset.num_entities, 4)).astype(np.float32))
    np.save(tmp_path / "r.npy", rng.normal(size=(dataset.num_relations, 4)).astype(np.float32))
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(tmp_path / "plain"), "--model", "DistMult",
                                       "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                       str(tmp_path / "r.npy"), "--no-progress", "--protocol", "sampled"])
    assert result.exit_code == 2 and "needs negatives per test triple" in result.output
