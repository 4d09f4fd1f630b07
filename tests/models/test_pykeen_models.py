"""openbench train / evaluate --model-dir on PyKEEN's bundled Nations, cross-checked with PyKEEN's evaluator."""
import json

import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from tests.helpers import needs_module, write_samples

pykeen = needs_module("pykeen")


@pytest.fixture(scope="module")
def nations(tmp_path_factory):
    from pykeen.datasets import Nations

    data = Nations()
    splits = {name: [tuple(row) for row in factory.triples.tolist()]
              for name, factory in (("train", data.training), ("valid", data.validation), ("test", data.testing))}
    return write_samples(tmp_path_factory.mktemp("nations"), splits, negatives=False)


@pytest.fixture(scope="module")
def trained(nations, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "transe"
    result = CliRunner().invoke(main, ["train", "--dataset", str(nations), "--model", "TransE", "--dim", "16",
                                       "--epochs", "10", "--seed", "1", "--no-early-stopping", "--device", "cpu",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_train_writes_pykeen_layout_and_a_description(trained):
    assert (trained / "trained_model.pkl").is_file()
    assert (trained / "training_triples" / "entity_to_id.tsv.gz").is_file()
    description = json.loads((trained / "openbench-model.json").read_text())
    assert description["model"] == "TransE" and description["epochs_run"] == 10 and description["seed"] == 1


@pytest.mark.slow
def test_pickles_load_only_when_trusted(nations, trained):
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(nations), "--model-dir", str(trained)])
    assert result.exit_code == 1 and "--trust-pickle" in result.output and "runs code" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("dataset_name", ["Nations", "UMLS"])
@pytest.mark.parametrize("model_name", ["TransE", "DistMult"])
def test_metrics_equal_pykeens_evaluator(tmp_path, dataset_name, model_name):
    import pykeen.datasets
    import torch
    from pykeen.evaluation import RankBasedEvaluator

    from openbench.models.pykeen import read_pykeen_map

    data = getattr(pykeen.datasets, dataset_name)()  # bundled inside the pykeen package: no download
    splits = {name: [tuple(row) for row in factory.triples.tolist()]
              for name, factory in (("train", data.training), ("valid", data.validation), ("test", data.testing))}
    folder = write_samples(tmp_path / "data", splits, negatives=False)
    model_dir = tmp_path / "model"
    runner = CliRunner()
    trained = runner.invoke(main, ["train", "--dataset", str(folder), "--model", model_name, "--dim", "16",
                                   "--epochs", "5", "--no-early-stopping", "--device", "cpu", "--output", str(model_dir)])
    assert trained.exit_code == 0, trained.output
    result = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--model-dir", str(model_dir),
                                  "--trust-pickle", "--no-progress", "--hits-at", "1,3,10", "--format", "json"])
    assert result.exit_code == 0, result.output
    ours = json.loads(result.stdout)["metrics"]

    model = torch.load(model_dir / "trained_model.pkl", weights_only=False)
    entity_map = read_pykeen_map(model_dir / "training_triples" / "entity_to_id.tsv.gz")
    relation_map = read_pykeen_map(model_dir / "training_triples" / "relation_to_id.tsv.gz")

    def mapped(factory):
        return torch.tensor([[entity_map[h], relation_map[r], entity_map[t]] for h, r, t in factory.triples.tolist()])

    theirs = RankBasedEvaluator(filtered=True).evaluate(
        model, mapped(data.testing), additional_filter_triples=[mapped(data.training), mapped(data.validation)],
        batch_size=64, use_tqdm=False)
    for side in ("both", "head", "tail"):
        for rank_type in ("realistic", "optimistic", "pessimistic"):
            assert ours[side][rank_type]["mrr"] == pytest.approx(
                theirs.get_metric(f"{side}.{rank_type}.inverse_harmonic_mean_rank"), abs=1e-6)
            for k in (1, 3, 10):
                assert ours[side][rank_type][f"hits@{k}"] == pytest.approx(
                    theirs.get_metric(f"{side}.{rank_type}.hits_at_{k}"), abs=1e-6)


@pytest.mark.slow
def test_the_datasets_id_order_does_not_matter(nations, trained, tmp_path):
    from openbench.models.pykeen import read_pykeen_map

    labels = sorted(read_pykeen_map(trained / "training_triples" / "entity_to_id.tsv.gz"), reverse=True)
    entity_map = tmp_path / "entities.tsv"
    entity_map.write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(labels)))  # reversed ids
    base = ["evaluate", "--dataset", str(nations), "--model-dir", str(trained), "--trust-pickle", "--no-progress",
            "--format", "json"]
    runs = [CliRunner().invoke(main, base), CliRunner().invoke(main, base + ["--entity-map", str(entity_map)])]
    assert all(run.exit_code == 0 for run in runs), [run.output for run in runs]
    records = [json.loads(run.stdout) for run in runs]
    assert records[0]["dataset"]["id_map_sha256"] != records[1]["dataset"]["id_map_sha256"]
    assert records[0]["metrics"]["both"]["realistic"] == pytest.approx(records[1]["metrics"]["both"]["realistic"])


def test_train_refuses_an_unknown_model_and_writes_nothing(nations, tmp_path):
    out = tmp_path / "model"
    result = CliRunner().invoke(main, ["train", "--dataset", str(nations), "--model", "NoSuchModel", "--epochs", "1",
                                       "--output", str(out)])
    assert result.exit_code == 1 and "unknown model 'NoSuchModel'" in result.output
    assert not out.exists()


@pytest.mark.slow
def test_train_says_when_early_stopping_ended_it_and_where_popularity_stands(nations, tmp_path):
    """Issue 54: `train --epochs 100` said `trained TransE for 15 epochs`, early stopping unannounced,
    and the model scored below popularity without a word."""
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.popularity import popularity_model

    out = tmp_path / "model"
    done = CliRunner().invoke(main, ["train", "--dataset", str(nations), "--model", "TransE", "--dim", "8",
                                     "--epochs", "60", "--lr", "0.5", "--seed", "1", "--device", "cpu", "--output",
                                     str(out)])
    assert done.exit_code == 0, done.output
    description = json.loads((out / "openbench-model.json").read_text())
    stopping = description["stopping"]
    assert stopping["criterion"].startswith("PyKEEN's validation hits@10")
    if stopping["stopped_early"]:
        assert description["epochs_run"] < 60 and stopping["best_epoch"] <= description["epochs_run"]
        assert (f"trained TransE for {description['epochs_run']} of 60 epochs: early stopping ended training "
                f"(best epoch {stopping['best_epoch']}") in done.output
    else:
        assert description["epochs_run"] == 60 and "did not stop it" in done.output
    dataset = load_dataset(nations)
    popularity = evaluate(dataset, popularity_model(dataset), evaluation_split="valid", device="cpu")
    assert description["validation"]["popularity_mrr"] == popularity.metric("both.realistic.mrr")
    assert 0 < description["validation"]["model_mrr"] <= 1
    assert f"against the popularity baseline's {popularity.metric('both.realistic.mrr'):.4f}" in done.output


def test_the_training_lines_announce_early_stopping():
    from openbench.cli.train import trained_lines

    description = {"model": "TransE", "epochs": 100, "epochs_run": 15,
                   "stopping": {"stopped_early": True, "epochs_run": 15, "best_epoch": 5,
                                "best_validation_hits@10": 0.1, "criterion": "C"},
                   "validation": {"model_mrr": 0.04, "popularity_mrr": 0.11}}
    first, second = trained_lines(description)
    assert first.startswith("trained TransE for 15 of 100 epochs: early stopping ended training (best epoch 5, "
                            "validation hits@10 0.1000; criterion: C")
    assert second == ("validation MRR 0.0400 (filtered, realistic rank) against the popularity baseline's 0.1100: not "
                      "above what the training degree alone scores")
    description["validation"]["model_mrr"] = 0.2
    assert trained_lines(description)[1].endswith(": above what the training degree alone scores")
    assert trained_lines({"model": "M", "epochs": 5, "epochs_run": 5}) == ["trained M for 5 epochs"]


@pytest.mark.parametrize("name, norm", [("TransE-L1", 1), ("TransE-L2", 2), ("DistMult", None), ("ComplEx", None),
                                        ("RotatE", None)])
def test_train_takes_the_names_evaluate_offers_and_its_folder_evaluates_without_a_pickle(nations, tmp_path, name,
                                                                                          norm):
    """Issue 66: `train --model TransE-L2` failed although evaluate offers it. TransE-L1/L2 choose
    the norm; the folder holds the arrays with their score function named, so `evaluate --model-dir`
    reads it without --trust-pickle, and its numbers are the pickled PyKEEN model's."""
    out = tmp_path / "model"
    done = CliRunner().invoke(main, ["train", "--dataset", str(nations), "--model", name, "--dim", "6", "--epochs",
                                     "3", "--no-early-stopping", "--device", "cpu", "--output", str(out)])
    assert done.exit_code == 0, done.output
    assert "--trust-pickle" not in done.output.splitlines()[-1]
    description = json.loads((out / "openbench-model.json").read_text())
    assert description["scorer"] == name
    if norm is not None:
        assert description["model_kwargs"] == {"scoring_fct_norm": norm}
    base = ["evaluate", "--dataset", str(nations), "--model-dir", str(out), "--no-progress", "--format", "json"]
    arrays, pickled = CliRunner().invoke(main, base), CliRunner().invoke(main, base + ["--trust-pickle"])
    assert arrays.exit_code == 0 and pickled.exit_code == 0, (arrays.output, pickled.output)
    ours, theirs = json.loads(arrays.stdout), json.loads(pickled.stdout)
    assert ours["model"]["kind"] == "embeddings" and ours["model"]["params"]["model_dir"] == str(out)
    assert theirs["model"]["kind"] != "embeddings"
    for rank_type in ("realistic", "optimistic", "pessimistic"):
        assert ours["metrics"]["both"][rank_type]["mrr"] == pytest.approx(
            theirs["metrics"]["both"][rank_type]["mrr"], abs=1e-6)


@pytest.mark.parametrize("name", ["popularity", "neighbours", "RotatE-DGLKE"])
def test_train_says_which_models_it_does_not_train(nations, tmp_path, name):
    done = CliRunner().invoke(main, ["train", "--dataset", str(nations), "--model", name, "--output",
                                     str(tmp_path / "m")])
    assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1
    assert ("needs no training" in done.output) or ("train --model RotatE" in done.output)
    assert not (tmp_path / "m").exists()


def test_a_folder_of_arrays_names_its_score_function_or_asks_for_it(nations, tmp_path):
    import numpy as np

    dataset = load_dataset(nations)
    rng = np.random.default_rng(0)
    folder = tmp_path / "arrays"
    folder.mkdir()
    np.save(folder / "entities.npy", rng.normal(size=(dataset.num_entities, 4)).astype(np.float32))
    np.save(folder / "relations.npy", rng.normal(size=(dataset.num_relations, 4)).astype(np.float32))
    base = ["evaluate", "--dataset", str(nations), "--model-dir", str(folder), "--no-progress"]
    asked = CliRunner().invoke(main, base)
    assert asked.exit_code == 2 and "--model" in asked.output and "openbench-model.json" in asked.output
    named = CliRunner().invoke(main, base + ["--model", "DistMult", "--format", "json"])
    assert named.exit_code == 0, named.output
    (folder / "openbench-model.json").write_text(json.dumps({"scorer": "DistMult"}))
    described = CliRunner().invoke(main, base + ["--format", "json"])
    assert described.exit_code == 0 and json.loads(described.stdout)["metrics"] == json.loads(named.stdout)["metrics"]
    clash = CliRunner().invoke(main, base + ["--model", "TransE-L2"])
    assert clash.exit_code == 1 and "names the score function 'DistMult'" in clash.output
