"""DGL-KE checkpoints: each score function against DGL-KE's formula, id maps, shape checks, the CLI."""
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from openbench.evaluation.evaluate import evaluate
from openbench.models.dglke import dglke_transr, load_dglke
from openbench.compat import Evaluator
from tests.helpers import random_labelled_graph, write_samples
from tests.bases import evaluated

HIDDEN, GAMMA = 4, 12.0


def _dglke_score(model, h, r, t, rel_matrix_dim=None):
    """DGL-KE's score for one triple, written from the spec table (numpy, float64)."""
    if model in ("TransE_l2", "TransE"):
        return GAMMA - np.linalg.norm(h + r - t, 2)
    if model == "TransE_l1":
        return GAMMA - np.abs(h + r - t).sum()
    if model == "DistMult":
        return float((h * r * t).sum())
    if model == "ComplEx":
        hr, hi = np.split(h, 2)
        rr, ri = np.split(r, 2)
        tr, ti = np.split(t, 2)
        return float((hr * rr * tr + hi * rr * ti + hr * ri * ti - hi * ri * tr).sum())
    if model == "RESCAL":
        return float(h @ r.reshape(len(h), len(h)) @ t)
    if model == "RotatE":
        hr, hi = np.split(h, 2)
        tr, ti = np.split(t, 2)
        phase = r / ((GAMMA + 2.0) / HIDDEN / math.pi)
        re = hr * np.cos(phase) - hi * np.sin(phase) - tr
        im = hr * np.sin(phase) + hi * np.cos(phase) - ti
        return GAMMA - np.sqrt(re ** 2 + im ** 2).sum()
    if model == "SimplE":
        hh, ht = np.split(h, 2)
        th, tt = np.split(t, 2)
        r_, r_inv = np.split(r, 2)
        return float(0.5 * (hh * r_ * tt + th * r_inv * ht).sum())
    raise ValueError(model)


SHIFT = {"TransE_l2": GAMMA, "TransE_l1": GAMMA, "RotatE": GAMMA}  # openbench drops DGL-KE's constant γ


def _checkpoint(tmp_path, dataset, model, double_ent=False, double_rel=False, seed=0):
    rng = np.random.default_rng(seed)
    folder = tmp_path / f"{model}_ckpt"
    folder.mkdir()
    entity_width = HIDDEN * (2 if double_ent else 1)
    relation_width = HIDDEN * (2 if double_rel else 1)
    if model == "RESCAL":
        relation_width *= entity_width
    # DGL-KE numbers entities in its own order: a shuffled one, plus an entity the split lacks
    names = list(dataset.entity_labels) + ["EXTRA:1"]
    order = rng.permutation(len(names))
    (folder / "entities.dict").write_text("".join(f"{i}\t{names[j]}\n" for i, j in enumerate(order)))
    relation_order = rng.permutation(dataset.num_relations)
    (folder / "relations.dict").write_text("".join(f"{i}\t{dataset.relation_labels[j]}\n"
                                                   for i, j in enumerate(relation_order)))
    entities = rng.normal(size=(len(names), entity_width)).astype(np.float32)
    relations = rng.normal(size=(dataset.num_relations, relation_width)).astype(np.float32)
    np.save(folder / f"toy_{model}_entity.npy", entities)
    np.save(folder / f"toy_{model}_relation.npy", relations)
    config = {"model_name": model, "dataset": "toy", "hidden_dim": HIDDEN, "gamma": GAMMA,
              "double_ent": double_ent, "double_rel": double_rel}
    (folder / "config.json").write_text(json.dumps(config))
    by_label = {names[j]: entities[i] for i, j in enumerate(order)}
    relation_by_label = {dataset.relation_labels[j]: relations[i] for i, j in enumerate(relation_order)}
    return folder, by_label, relation_by_label


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(3, 9, 2, {"train": 20, "valid": 3, "test": 6})
    return load_dataset(write_samples(tmp_path_factory.mktemp("data"), splits, negatives=False))


@pytest.mark.parametrize("model,double_ent", [("TransE_l2", False), ("TransE_l1", False), ("DistMult", False),
                                              ("ComplEx", True), ("RESCAL", False), ("RotatE", True),
                                              ("SimplE", False)])
def test_scores_equal_dglke_formulas_on_both_sides(tmp_path, dataset, model, double_ent):
    double_rel = model in ("ComplEx", "SimplE") and double_ent or model == "ComplEx"
    folder, entity, relation = _checkpoint(tmp_path, dataset, model, double_ent, double_rel)
    scorer, description = load_dglke(folder, dataset)
    assert description["params"]["gamma"] == GAMMA and description["params"]["dglke_model"] == model
    batch = dataset.triples["test"]
    labels, rels = dataset.entity_labels, dataset.relation_labels
    for side in ("tail", "head"):
        got = scorer.score_all(batch, side).double().numpy() + SHIFT.get(model, 0.0)
        for row, (h, r, t) in enumerate(batch.tolist()):
            for candidate in range(dataset.num_entities):
                head, tail = (h, candidate) if side == "tail" else (candidate, t)
                expected = _dglke_score(model, entity[labels[head]].astype(np.float64),
                                        relation[rels[r]].astype(np.float64), entity[labels[tail]].astype(np.float64))
                assert got[row, candidate] == pytest.approx(expected, rel=1e-5, abs=1e-4)


def test_rotate_phases_depend_on_the_trained_gamma(tmp_path, dataset):
    folder, _, _ = _checkpoint(tmp_path, dataset, "RotatE", double_ent=True)
    trained, _ = load_dglke(folder, dataset)
    config = json.loads((folder / "config.json").read_text())
    config["gamma"] = 0.0  # what dglke_predict --score_func none assumes
    (folder / "config.json").write_text(json.dumps(config))
    wrong, _ = load_dglke(folder, dataset)
    batch = dataset.triples["test"]
    assert not torch.allclose(trained.score_all(batch, "tail"), wrong.score_all(batch, "tail"))


def test_shape_and_map_errors_say_what_was_expected(tmp_path, dataset):
    folder, _, _ = _checkpoint(tmp_path, dataset, "RotatE", double_ent=False)  # RotatE needs -de
    with pytest.raises(InputError, match="trained with -de"):
        load_dglke(folder, dataset)
    (tmp_path / "b").mkdir()
    folder, _, _ = _checkpoint(tmp_path / "b", dataset, "DistMult")
    np.save(folder / "toy_DistMult_entity.npy", np.zeros((10, HIDDEN + 1), dtype=np.float32))
    with pytest.raises(InputError, match=r"expected \(entities, 4\) for DistMult with hidden_dim 4"):
        load_dglke(folder, dataset)
    np.save(folder / "toy_DistMult_entity.npy", np.zeros((10, HIDDEN), dtype=np.float32))
    (folder / "entities.dict").write_text("0\tNOBODY\n")
    with pytest.raises(InputError, match="not in DGL-KE's entity map"):
        load_dglke(folder, dataset)
    (folder / "entities.dict").unlink()
    with pytest.raises(InputError, match=r"\(dglke_data=\)"):
        load_dglke(folder, dataset)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, model_name="TransR")))
    with pytest.raises(InputError, match="projects candidates per relation"):
        load_dglke(folder, dataset)


def test_cli_evaluates_a_checkpoint_like_the_same_embeddings(tmp_path, dataset):
    folder, entity, relation = _checkpoint(tmp_path, dataset, "DistMult")
    data = tmp_path / "data"
    write_samples(data, {s: [tuple(dataset.entity_labels[h] if i != 1 else dataset.relation_labels[h]
                                   for i, h in enumerate(row)) for row in dataset.triples[s].tolist()]
                         for s in ("train", "valid", "test")}, negatives=False)
    runner = CliRunner()
    out = runner.invoke(main, ["evaluate", "--dataset", str(data), "--model-dir", str(folder), "--no-progress",
                               "--format", "json"])
    assert out.exit_code == 0, out.output
    np.save(tmp_path / "e.npy", np.stack([entity[label] for label in dataset.entity_labels]))
    np.save(tmp_path / "r.npy", np.stack([relation[label] for label in dataset.relation_labels]))
    plain = runner.invoke(main, ["evaluate", "--dataset", str(data), "--entity-embeddings", str(tmp_path / "e.npy"),
                                 "--relation-embeddings", str(tmp_path / "r.npy"), "--model", "DistMult",
                                 "--no-progress", "--format", "json"])
    assert plain.exit_code == 0, plain.output
    assert json.loads(out.stdout)["metrics"] == json.loads(plain.stdout)["metrics"]
    assert json.loads(out.stdout)["model"]["params"]["dglke_model"] == "DistMult"


def _transr_checkpoint(tmp_path, dataset):
    folder, entity, relation = _checkpoint(tmp_path, dataset, "TransR")
    rng = np.random.default_rng(7)
    relation_order = [line.split("\t")[1] for line in (folder / "relations.dict").read_text().splitlines()]
    projection = rng.normal(size=(dataset.num_relations, HIDDEN * HIDDEN)).astype(np.float32)
    np.save(folder / "toy_TransRprojection.npy", projection)  # DGL-KE's name: no underscore before projection
    matrices = {label: projection[i].reshape(HIDDEN, HIDDEN).astype(np.float64) for i, label in enumerate(relation_order)}
    return folder, entity, relation, matrices


def _transr_score(h, r, t, matrix):
    return GAMMA - np.abs(h @ matrix + r - t @ matrix).sum()


class _Rows(Evaluator):
    def __init__(self, dataset, rows):
        super().__init__(dataset, device="cpu", progress=False)
        self.rows = rows

    def score_batch(self, batch):
        index = [self.position[tuple(t)] for t in batch.tolist()]
        return self.rows[0][index], self.rows[1][index]


def test_transr_scores_and_ranks_as_dglke_defines(tmp_path, dataset):
    folder, entity, relation, matrices = _transr_checkpoint(tmp_path, dataset)
    scorer = dglke_transr(folder, dataset)
    labels, rels = dataset.entity_labels, dataset.relation_labels
    test = dataset.triples["test"]
    heads, tails = scorer.score_rows(test, "head"), scorer.score_rows(test, "tail")
    reference = [np.zeros((len(test), dataset.num_entities)), np.zeros((len(test), dataset.num_entities))]
    for row, (h, r, t) in enumerate(test.tolist()):
        vectors = [entity[label].astype(np.float64) for label in labels]
        offset, matrix = relation[rels[r]].astype(np.float64), matrices[rels[r]]
        for candidate in range(dataset.num_entities):
            reference[0][row, candidate] = _transr_score(vectors[candidate], offset, vectors[t], matrix)
            reference[1][row, candidate] = _transr_score(vectors[h], offset, vectors[candidate], matrix)
    assert np.allclose(heads.double().numpy() + GAMMA, reference[0], atol=1e-4)
    assert np.allclose(tails.double().numpy() + GAMMA, reference[1], atol=1e-4)
    rows = _Rows(dataset, (torch.tensor(reference[0]), torch.tensor(reference[1])))
    rows.position = {tuple(t): i for i, t in enumerate(test.tolist())}
    expected = rows.evaluate()
    result = evaluate(dataset, scorer, batch_size=2, device="cpu").to_dict()  # grouped by relation, in small batches
    for side in ("head", "tail", "both"):
        assert result["metrics"][side]["realistic"]["mrr"] == pytest.approx(
            expected["metrics"][side]["realistic"]["mrr"], abs=1e-12)
    assert result["model"]["name"] == "TransR" and result["model"]["params"]["dglke_model"] == "TransR"
    assert set(result["per_relation"]) == set(expected["per_relation"])


def test_transr_needs_its_projection_file(tmp_path, dataset):
    folder, _, _, _ = _transr_checkpoint(tmp_path, dataset)
    np.save(folder / "toy_TransRprojection.npy", np.zeros((dataset.num_relations, 3), dtype=np.float32))
    with pytest.raises(InputError, match=r"expected \(relations, 4 x 4\) projection"):
        dglke_transr(folder, dataset)
    (folder / "toy_TransRprojection.npy").unlink()
    with pytest.raises(InputError, match="toy_TransRprojection.npy"):
        dglke_transr(folder, dataset)


def test_dglke_compat_reproduces_dglke_evaluator_quirks(tmp_path, dataset):
    folder, entity, relation = _checkpoint(tmp_path, dataset, "RESCAL")
    correct, _ = load_dglke(folder, dataset)
    compat, description = load_dglke(folder, dataset, compat=True)
    assert description["params"]["dglke_compat"] is True
    batch = dataset.triples["test"]
    labels, rels = dataset.entity_labels, dataset.relation_labels
    got = compat.score_all(batch, "tail").double().numpy()
    for row, (h, r, _) in enumerate(batch.tolist()):
        matrix = relation[rels[r]].astype(np.float64).reshape(HIDDEN, HIDDEN)
        for candidate in range(dataset.num_entities):  # hᵀ Mᵀ t, dglke issue #225
            expected = entity[labels[h]].astype(np.float64) @ matrix.T @ entity[labels[candidate]].astype(np.float64)
            assert got[row, candidate] == pytest.approx(expected, rel=1e-5, abs=1e-4)
    assert torch.equal(compat.score_all(batch, "head"), correct.score_all(batch, "head"))
    (tmp_path / "s").mkdir()
    folder, _, _ = _checkpoint(tmp_path / "s", dataset, "SimplE", double_ent=True, double_rel=True)
    big, _ = load_dglke(folder, dataset)
    big.entities.mul_(40.0)  # scores far beyond ±20
    clamped = type(load_dglke(folder, dataset, compat=True)[0])(big.entities, big.relations)
    assert clamped.score_all(batch, "tail").abs().max() == 20.0 < big.score_all(batch, "tail").abs().max()


def test_compat_scorers_under_exact_ranks(tmp_path, dataset):
    """Exact ranks re-score what the compat scorers score: RESCAL's transposed tails exactly (the
    same counts as fast ranks on the float64 values, which have no near-ties here), SimplE's
    clamped scores as computed (recorded as float32 ranks)."""
    
    folder, _, _ = _checkpoint(tmp_path, dataset, "RESCAL")
    compat, _ = load_dglke(folder, dataset, compat=True)
    wide = type(compat)(compat.entities.double(), compat.relations.double())
    exact = evaluated(dataset, compat)
    reference = evaluated(dataset, wide, ranks="fast")
    assert exact["protocol"]["ranks"] == "exact"
    assert exact["metrics"] == reference["metrics"]
    (tmp_path / "s").mkdir()
    folder, _, _ = _checkpoint(tmp_path / "s", dataset, "SimplE", double_ent=True, double_rel=True)
    clamped, _ = load_dglke(folder, dataset, compat=True)
    result = evaluated(dataset, clamped)
    fast = evaluated(dataset, clamped, ranks="fast")
    assert result["protocol"]["ranks"] == "float32" and result["metrics"] == fast["metrics"]


def test_cli_evaluates_transr_and_compat(tmp_path, dataset):
    folder, _, _, _ = _transr_checkpoint(tmp_path, dataset)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model-dir", str(folder), "--no-progress",
                                     "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["model"]["name"] == "TransR"
    (tmp_path / "r").mkdir()
    rescal, _, _ = _checkpoint(tmp_path / "r", dataset, "RESCAL")
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model-dir", str(rescal),
                                     "--dglke-compat", "--no-progress", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["model"]["params"]["dglke_compat"] is True


def _without_timing(record):
    return {key: value for key, value in record.items() if key != "timing"}


def test_several_models_in_one_run_equal_separate_runs(tmp_path, dataset):
    """Two DGL-KE folders (--model-dir twice) and a sweep file with embeddings and a broken entry:
    each record equals its separate run apart from timing; the broken one is reported, the others
    are written, and the status is 1."""
    data = tmp_path / "data"
    write_samples(data, {s: [tuple(dataset.entity_labels[h] if i != 1 else dataset.relation_labels[h]
                                   for i, h in enumerate(row)) for row in dataset.triples[s].tolist()]
                         for s in ("train", "valid", "test")}, negatives=False)
    first, _, _ = _checkpoint(tmp_path, dataset, "DistMult", seed=1)
    second, _, _ = _checkpoint(tmp_path, dataset, "TransE_l2", seed=2)
    rng = np.random.default_rng(5)
    np.save(tmp_path / "e.npy", rng.normal(size=(dataset.num_entities, 4)).astype(np.float32))
    np.save(tmp_path / "r.npy", rng.normal(size=(dataset.num_relations, 4)).astype(np.float32))
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps([{"name": "plain DistMult", "entity_embeddings": "e.npy",
                                  "relation_embeddings": "r.npy", "model": "DistMult"},
                                 {"name": "broken", "entity_embeddings": "missing.npy",
                                  "relation_embeddings": "r.npy", "model": "DistMult"}]))
    runner = CliRunner()
    result = runner.invoke(main, ["evaluate", "--dataset", str(data), "--model-dir", str(first), "--model-dir",
                                  str(second), "--sweep", str(sweep), "--output", str(tmp_path / "out"),
                                  "--no-progress", "--sides", "tail"])
    assert result.exit_code == 1, result.output
    assert "broken" in result.output and "missing.npy" in result.output and "1 of 4 model(s) failed" in result.output
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert written == ["DistMult_ckpt.json", "TransE_l2_ckpt.json", "plain_DistMult.json"]
    separate = {
        "DistMult_ckpt.json": ["--model-dir", str(first)], "TransE_l2_ckpt.json": ["--model-dir", str(second)],
        "plain_DistMult.json": ["--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                str(tmp_path / "r.npy"), "--model", "DistMult"]}
    for name, model_options in separate.items():
        alone = runner.invoke(main, ["evaluate", "--dataset", str(data), *model_options, "--no-progress",
                                     "--sides", "tail", "--format", "json"])
        assert alone.exit_code == 0, alone.output
        together = json.loads((tmp_path / "out" / name).read_text())
        assert _without_timing(together) == _without_timing(json.loads(alone.stdout)), name
    bad = runner.invoke(main, ["evaluate", "--dataset", str(data), "--model-dir", str(first), "--model-dir",
                               str(first), "--output", str(tmp_path / "twice")])
    assert bad.exit_code == 2 and "given twice: DistMult_ckpt" in bad.output
    bad = runner.invoke(main, ["evaluate", "--dataset", str(data), "--model-dir", str(first), "--model-dir",
                               str(second)])
    assert bad.exit_code == 2 and "--output names the folder" in bad.output
    sweep.write_text(json.dumps([{"name": "x", "modeldir": "a"}]))
    bad = runner.invoke(main, ["evaluate", "--dataset", str(data), "--sweep", str(sweep), "--output",
                               str(tmp_path / "o2")])
    assert bad.exit_code == 1 and "sweep.json: model 1 (x): unknown key(s) modeldir" in bad.output
