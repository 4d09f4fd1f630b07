"""DGL-KE checkpoints: each score function against DGL-KE's formula, id maps, shape checks, the CLI."""
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.evaluation.dataset import load_dataset
from openbench.evaluation.dglke import load_dglke
from tests.helpers import random_labelled_graph, write_samples

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
    with pytest.raises(InputError, match="--dglke-data"):
        load_dglke(folder, dataset)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, model_name="TransR")))
    with pytest.raises(InputError, match="TransR checkpoints are not supported yet"):
        load_dglke(folder, dataset)


def test_cli_evaluates_a_checkpoint_like_the_same_embeddings(tmp_path, dataset):
    folder, entity, relation = _checkpoint(tmp_path, dataset, "DistMult")
    data = tmp_path / "data"
    write_samples(data, {s: [tuple(dataset.entity_labels[h] if i != 1 else dataset.relation_labels[h]
                                   for i, h in enumerate(row)) for row in dataset.triples[s].tolist()]
                         for s in ("train", "valid", "test")}, negatives=False)
    runner = CliRunner()
    out = runner.invoke(main, ["evaluate", "--dataset", str(data), "--model-dir", str(folder), "--no-progress"])
    assert out.exit_code == 0, out.output
    np.save(tmp_path / "e.npy", np.stack([entity[label] for label in dataset.entity_labels]))
    np.save(tmp_path / "r.npy", np.stack([relation[label] for label in dataset.relation_labels]))
    plain = runner.invoke(main, ["evaluate", "--dataset", str(data), "--entity-embeddings", str(tmp_path / "e.npy"),
                                 "--relation-embeddings", str(tmp_path / "r.npy"), "--model", "DistMult",
                                 "--no-progress"])
    assert plain.exit_code == 0, plain.output
    assert json.loads(out.stdout)["metrics"] == json.loads(plain.stdout)["metrics"]
    assert json.loads(out.stdout)["model"]["params"]["dglke_model"] == "DistMult"
