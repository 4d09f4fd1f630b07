"""The Python API (``import openbench``): the same engine as the command line, on objects in memory."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.errors import UsageError
from tests.helpers import integer_embeddings, needs_module, random_labelled_graph, write_samples


def _without_timing(record: dict) -> dict:
    record = dict(record)
    record.pop("timing")
    return record


@pytest.fixture()
def files(tmp_path):
    """(split folder, entity .npy, relation .npy) of a 25-entity, 3-relation dataset."""
    splits = random_labelled_graph(3, 25, 3, {"train": 120, "valid": 10, "test": 15})
    folder = write_samples(tmp_path / "data", splits)
    np.save(tmp_path / "ent.npy", integer_embeddings(0, 25, 4).astype(np.float32))
    np.save(tmp_path / "rel.npy", integer_embeddings(1, 3, 4).astype(np.float32))
    return folder, tmp_path / "ent.npy", tmp_path / "rel.npy"


def _cli_record(tmp_path, *args) -> dict:
    output = tmp_path / "cli.json"
    result = CliRunner().invoke(main, ["evaluate", *map(str, args), "--no-progress", "--output", str(output)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(output.read_text())


def test_arrays_in_memory_give_the_record_the_cli_gives_for_their_files(files, tmp_path):
    folder, entities, relations = files
    expected = _cli_record(tmp_path, "--dataset", folder, "--model", "DistMult", "--entity-embeddings", entities,
                           "--relation-embeddings", relations)
    dataset = openbench.load_dataset(str(folder))
    model = openbench.embedding_model("DistMult", np.load(entities), np.load(relations))
    record = openbench.evaluate(dataset, model)
    assert isinstance(record, openbench.ResultRecord)
    assert _without_timing(record.to_dict()) == _without_timing(expected)  # source_sha256 included
    as_tensors = openbench.evaluate(str(folder), openbench.embedding_model(
        "DistMult", torch.from_numpy(np.load(entities)), torch.from_numpy(np.load(relations))))
    assert _without_timing(as_tensors.to_dict()) == _without_timing(expected)


def test_complex_tensors_equal_their_halves_layout(files):
    folder, _, _ = files
    dataset = openbench.load_dataset(str(folder))
    rng = np.random.default_rng(4)
    real = rng.normal(size=(25, 6)).astype(np.float32)
    relation = rng.normal(size=(3, 6)).astype(np.float32)
    halves = openbench.evaluate(dataset, openbench.embedding_model("ComplEx", real, relation))
    complex_rows = torch.complex(torch.from_numpy(real[:, :3]), torch.from_numpy(real[:, 3:]))
    complex_relations = torch.complex(torch.from_numpy(relation[:, :3]), torch.from_numpy(relation[:, 3:]))
    complex_record = openbench.evaluate(dataset, openbench.embedding_model("ComplEx", complex_rows, complex_relations))
    assert complex_record.metrics == halves.metrics and complex_record.per_relation == halves.per_relation


def test_a_scoring_function_ranks_as_the_built_in_scorer_of_the_same_formula(files):
    folder, entities, relations = files
    dataset = openbench.load_dataset(str(folder))
    E, R = torch.from_numpy(np.load(entities)).double(), torch.from_numpy(np.load(relations)).double()

    def distmult(batch, side):  # integer embeddings: every score exact in float64, ties included
        anchor = E[batch[:, 0] if side == "tail" else batch[:, 2]]
        return (anchor * R[batch[:, 1]]) @ E.T

    function = openbench.evaluate(dataset, openbench.score_function(distmult, dataset.num_entities, name="mine",
                                                                    params={"dim": 4}))
    built_in = openbench.evaluate(dataset, openbench.embedding_model("DistMult", np.load(entities),
                                                                     np.load(relations)))
    assert function.metrics == built_in.metrics and function.per_relation == built_in.per_relation
    assert function.model == {"name": "mine", "kind": "score_function", "params": {"dim": 4}, "source_sha256": None}


def test_classification_from_python_equals_the_cli(files, tmp_path):
    folder, entities, relations = files
    for name in ("val_sample.csv", "test_sample.csv"):  # negatives of known entities: corrupted tails
        path = folder / name
        rows = [line.split("\t") for line in path.read_text().splitlines() if "NEGATIVE:ONLY" not in line]
        negatives = [f"{h}\t{r}\tNCBIGENE:{(int(t.split(':')[1]) + 3) % 25}\t\t0\tGENERATED"
                     for h, r, t, *_ in rows]
        path.write_text("\n".join(["\t".join(row) for row in rows] + negatives) + "\n")
    expected = _cli_record(tmp_path, "--dataset", folder, "--model", "DistMult", "--entity-embeddings", entities,
                           "--relation-embeddings", relations, "--task", "classification")
    classified = openbench.evaluate(str(folder), openbench.embedding_model("DistMult", np.load(entities),
                                                                           np.load(relations)), task="classification")
    assert _without_timing(classified.to_dict()) == _without_timing(expected)
    assert classified.task == "classification" and 0.0 <= classified.metric("test.overall.auroc") <= 1.0


def test_a_scoring_function_of_the_wrong_shape_is_an_error_naming_the_shape(files):
    folder, _, _ = files
    dataset = openbench.load_dataset(str(folder))
    wrong = openbench.score_function(lambda batch, side: torch.zeros(batch.shape[0], 3), dataset.num_entities)
    with pytest.raises(openbench.errors.ScoreError, match=r"shape \(\d+, 3\); expected \(\d+, 25\)"):
        openbench.evaluate(dataset, wrong)


def test_an_object_with_the_scorer_methods_is_a_model_and_anything_else_is_refused(files):
    folder, _, _ = files
    dataset = openbench.load_dataset(str(folder))

    class Constant:  # no RowScorer base, no .to(): the Scorer protocol only
        num_entities = dataset.num_entities

        def description(self):
            return {"name": "constant", "kind": "custom", "params": {}, "source_sha256": None}

        def score_rows(self, batch, side):
            return torch.zeros(batch.shape[0], self.num_entities)

        def score_candidates(self, batch, side, candidates):
            return torch.zeros(candidates.shape, dtype=torch.float64)

        def score_triples(self, triples):
            return torch.zeros(triples.shape[0], dtype=torch.float64)

    record = openbench.evaluate(dataset, Constant())
    # every candidate tied: the realistic rank is the middle of the unfiltered candidates
    assert record.metric("both.optimistic.mr") == 1.0 and record.metric("both.pessimistic.mr") > 1.0
    with pytest.raises(UsageError, match="lacks num_entities, description, score_rows"):
        openbench.evaluate(dataset, np.zeros((25, 4)))


def test_metric_reads_dotted_paths_and_names_the_choices(files):
    folder, entities, relations = files
    record = openbench.evaluate(str(folder), openbench.embedding_model("DistMult", np.load(entities),
                                                                       np.load(relations)))
    data = record.to_dict()
    assert record.metric("both.realistic.mrr") == data["metrics"]["both"]["realistic"]["mrr"]
    assert record.metric("tail.pessimistic.hits@10") == data["metrics"]["tail"]["pessimistic"]["hits@10"]
    assert record.metric("per_relation.REL_B.head.realistic.mr") == \
        data["per_relation"]["REL_B"]["head"]["realistic"]["mr"]
    assert record.metric("macro_relation.both.realistic.mrr") == data["macro_relation"]["both"]["realistic"]["mrr"]
    with pytest.raises(KeyError, match="no 'hits@11' after both.realistic; choices: .*hits@10"):
        record.metric("both.realistic.hits@11")
    with pytest.raises(KeyError, match="choices: both, head, tail"):
        record.metric("either.realistic.mrr")
    assert openbench.ResultRecord.from_dict(data).to_dict() == data
    assert list(openbench.ResultRecord.from_dict(data).to_dict()) == list(data)  # key order kept


def test_import_openbench_stays_light_and_names_its_api():
    import subprocess
    import sys

    code = ("import sys, openbench; print(sorted(m for m in ('torch', 'polars', 'pykeen') if m in sys.modules)); "
            "print(sorted(openbench.__all__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, names = done.stdout.splitlines()
    assert loaded == "[]"
    for name in ("load_dataset", "embedding_model", "from_pykeen", "score_function", "load_model", "evaluate",
                 "ResultRecord", "Dataset"):
        assert name in names and callable(getattr(openbench, name))


@pytest.mark.slow
def test_a_pykeen_model_in_memory_gives_the_record_of_its_saved_folder(files, tmp_path):
    needs_module("pykeen")
    from pykeen.pipeline import pipeline

    folder, _, _ = files
    dataset = openbench.load_dataset(str(folder))
    result = pipeline(training=dataset.triples_factory("train"), testing=dataset.triples_factory("test"),
                      model="TransE", model_kwargs={"embedding_dim": 8}, epochs=2, random_seed=0,
                      training_kwargs={"use_tqdm": False}, evaluator_kwargs={"batch_size": 64}, device="cpu")
    saved = tmp_path / "model"
    result.save_to_directory(saved)
    in_memory = openbench.evaluate(dataset, openbench.from_pykeen(result.model, result.training))
    expected = _cli_record(tmp_path, "--dataset", folder, "--model-dir", saved, "--trust-pickle")
    assert _without_timing(in_memory.to_dict()) == _without_timing(expected)
    loaded = openbench.evaluate(dataset, openbench.load_model(dataset, str(saved), trust_pickle=True))
    assert _without_timing(loaded.to_dict()) == _without_timing(expected)
    assert in_memory.model["source_sha256"] == expected["model"]["source_sha256"]
    with pytest.raises(openbench.errors.InputError, match="--trust-pickle"):
        openbench.load_model(dataset, str(saved))


def test_errors_name_the_keyword_from_python_and_the_flag_on_the_command_line(files, tmp_path):
    folder, entities, relations = files
    model = openbench.embedding_model("DistMult", np.load(entities), np.load(relations))
    scope = {"relations": ["REL_A"], "entities": ["NCBIGENE:24"]}  # no REL_A test answer is NCBIGENE:24 alone
    dataset = openbench.load_dataset(str(folder))
    answers = {dataset.entity_labels[int(t)] for h, r, t in dataset.triples["test"].tolist()
               if dataset.relation_labels[r] == "REL_A"} | {dataset.entity_labels[int(h)] for h, r, t in
                                                              dataset.triples["test"].tolist()
                                                              if dataset.relation_labels[r] == "REL_A"}
    assert "NCBIGENE:24" not in answers
    with pytest.raises(openbench.errors.InputError, match=r"chosen scope \(relations=, entities=\)"):
        openbench.evaluate(dataset, model, **scope)
    with pytest.raises(UsageError, match="threshold_metric='recall': expected one of"):
        openbench.evaluate(dataset, model, task="classification", threshold_metric="recall")
    (tmp_path / "entities.txt").write_text("NCBIGENE:24\n")
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult",
                                       "--entity-embeddings", str(entities), "--relation-embeddings", str(relations),
                                       "--relations", "REL_A", "--entities", str(tmp_path / "entities.txt"),
                                       "--no-progress"])
    assert result.exit_code == 1 and "chosen scope (--relations, --entities)" in result.output, result.output
    assert openbench.errors.option("filter_sets") == "filter_sets="  # the command's context ended with it


# -- issue 49: the API checks what the CLI checks ---------------------------------------------

from openbench.errors import InputError, ScoreError


@pytest.mark.parametrize("table, rows", [("relation", -1), ("relation", +2), ("relation", -2), ("entity", -1),
                                         ("entity", +5)])
def test_tables_of_the_wrong_row_count_are_refused_from_python_as_on_the_command_line(files, tmp_path, table, rows):
    folder, entities, relations = files
    arrays = {"entity": np.load(entities), "relation": np.load(relations)}
    original = arrays[table]
    arrays[table] = original[:rows] if rows < 0 else np.concatenate([original, original[:rows]])
    model = openbench.embedding_model("DistMult", arrays["entity"], arrays["relation"])
    with pytest.raises(InputError) as from_python:
        openbench.evaluate(str(folder), model)
    np.save(tmp_path / "changed.npy", arrays[table])
    paths = {"entity": entities, "relation": relations, table: tmp_path / "changed.npy"}
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult", "--entity-embeddings",
                                     str(paths["entity"]), "--relation-embeddings", str(paths["relation"]),
                                     "--no-progress"])
    assert done.exit_code == 1 and from_python.value.reason in done.output
    assert from_python.value.path == f"{table}_embeddings" and "one per" in from_python.value.reason


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e110), (np.float64, 1e200)])
def test_overflowing_scores_are_one_clear_error_naming_the_model_and_the_remedy(files, tmp_path, dtype, scale):
    """Scores beyond float64 (narrower keys past their range are re-scored in float64 by exact
    ranks, a case tests/evaluation/test_exact_ranks.py covers)."""
    folder, entities, relations = files
    big_entities = (np.load(entities).astype(np.float64) * scale + scale).astype(dtype)
    big_relations = (np.load(relations).astype(np.float64) * scale + scale).astype(dtype)
    assert np.isfinite(big_entities).all() and np.isfinite(big_relations).all()
    with pytest.raises(ScoreError, match=r"DistMult scores can overflow .*Rescale the embeddings"):
        openbench.evaluate(str(folder), openbench.embedding_model("DistMult", big_entities, big_relations))
    np.save(tmp_path / "e.npy", big_entities)
    np.save(tmp_path / "r.npy", big_relations)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult", "--entity-embeddings",
                                     str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
                                     "--no-progress"])
    assert done.exit_code == 1 and "DistMult scores can overflow" in done.output
    assert "internal error" not in done.output and "Traceback" not in done.output
