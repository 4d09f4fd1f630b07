"""The offline demo: deterministic files, a trained model far above chance, the CLI wrapper."""
import json

import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.demo import planted_graph
from openbench.leaderboard import open_leaderboard

pytest.importorskip("pykeen")


def test_planted_graph_is_seeded_and_leak_free():
    first, again, other = planted_graph(1), planted_graph(1), planted_graph(2)
    assert first == again and first != other
    seen = {e for h, _, t in first["train"] for e in (h, t)}
    for split in ("valid", "test"):
        assert first[split] and all(h in seen and t in seen for h, _, t in first[split])
    assert not set(first["test"]) & set(first["train"])


def _run_twice(tmp_path_factory, *arguments):
    """Two runs of ``openbench demo`` with the same seed, each into its own folder: [(folder, result)]."""
    runs = []
    for name in ("first", "second"):
        out = tmp_path_factory.mktemp(name)
        result = CliRunner().invoke(main, ["demo", *arguments, "--out", str(out), "--no-progress"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs.append((out, result))
    return runs


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    return _run_twice(tmp_path_factory, "--planted", "--epochs", "20")


def test_demo_writes_everything_and_learns(demo_runs):
    out, run = demo_runs[0]
    record = json.loads((out / "result.json").read_text())
    realistic = record["metrics"]["both"]["realistic"]
    assert realistic["amri"] > 0.5, realistic  # a constant or random model sits at 0
    assert record["model"]["name"] == "DistMult" and record["model"]["params"]["trained_by"] == "pykeen"
    assert "openbench evaluate --dataset" in run.stdout  # results on stdout, logs on stderr


def test_same_seed_gives_byte_identical_files(demo_runs):
    (first, _), (second, _) = demo_runs
    for name in ("dataset/train_sample.csv", "dataset/val_sample.csv", "dataset/test_sample.csv",
                 "model/entities.npy", "model/relations.npy"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    records = [json.loads((out / "result.json").read_text()) for out in (first, second)]
    for record in records:
        record.pop("timing")
        record["dataset"].pop("path")
    assert records[0] == records[1]


@pytest.fixture(scope="module")
def pipeline_runs(tmp_path_factory):
    return _run_twice(tmp_path_factory, "--epochs", "30")


def test_pipeline_demo_generates_splits_trains_two_models_and_evaluates(pipeline_runs):
    out, run = pipeline_runs[0]
    assert (out / "graph" / "graph_files" / "edges.csv").is_file()
    assert (out / "split" / "train_sample.csv").is_file() and (out / "split" / "test_sample.csv").is_file()
    for model in ("DistMult", "TransE-L2"):
        record = json.loads((out / "results" / f"{model}.json").read_text())
        assert record["model"]["name"] == model
        assert record["metrics"]["both"]["realistic"]["amri"] > 0.2, model  # learned: chance sits at 0
        assert model in run.stdout
    assert "openbench evaluate --dataset" in run.stdout
    board = open_leaderboard(out / "leaderboard.sqlite")
    submitted = [row for row in board.rows() if not row["published"]]
    board.close()
    assert sorted(row["name"] for row in submitted) == ["DistMult (demo, seed 0)", "TransE-L2 (demo, seed 0)"]
    assert "DistMult (demo, seed 0)" in (out / "leaderboard" / "index.html").read_text()


def test_pipeline_demo_is_byte_identical_for_the_same_seed(pipeline_runs):
    (first, _), (second, _) = pipeline_runs
    names = ["graph/graph_files/edges.csv", "split/train_sample.csv", "split/test_sample.csv",
             "split/val_sample.csv", "models/DistMult/entities.npy", "models/TransE-L2/relations.npy"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
