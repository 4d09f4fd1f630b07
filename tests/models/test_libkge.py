"""LibKGE checkpoints: read without kge and without running pickled code, scored as LibKGE defines."""
import json
import sys
import types
from collections import OrderedDict

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from openbench.compat import Evaluator
from openbench.models.libkge import load_libkge, read_checkpoint
from tests.helpers import random_labelled_graph, write_samples

DIM = 6


def _libkge_score(model, l_norm, s, p, o):
    """LibKGE's score of one (s, p, o) from its own row layouts (plain numpy, one triple at a time)."""
    if model == "distmult":
        return float((s * p * o).sum())
    if model == "rescal":
        return float(s @ p.reshape(DIM, DIM) @ o)
    if model == "transe":
        return -float(np.linalg.norm(s + p - o, ord=l_norm))
    half = DIM // 2
    s_re, s_im, o_re, o_im = s[:half], s[half:], o[:half], o[half:]
    if model == "complex":
        p_re, p_im = p[:half], p[half:]
        return float((s_re * p_re * o_re + s_re * p_im * o_im + s_im * p_re * o_im - s_im * p_im * o_re).sum())
    if model == "rotate":
        rotated = (s_re + 1j * s_im) * np.exp(1j * p)
        return -float(np.linalg.norm(np.abs(rotated - (o_re + 1j * o_im)), ord=l_norm))
    raise AssertionError(model)


def _save_checkpoint(path, model, reciprocal, entity_weights, relation_weights, l_norm=None):
    """A checkpoint laid out as LibKGE's TrainingJob.save writes it, with a kge.config.Config in it."""
    kge, config_module = types.ModuleType("kge"), types.ModuleType("kge.config")

    class Config:
        pass

    Config.__module__, Config.__qualname__ = "kge.config", "Config"
    config_module.Config = Config
    sys.modules["kge"], sys.modules["kge.config"] = kge, config_module
    try:
        config = Config()
        options = {"model": "reciprocal_relations_model" if reciprocal else model, "job": {"device": "cpu"},
                   "lookup_embedder": {"dim": 100, "normalize": {"p": -1.0}}}
        key_options = {"entity_embedder": {"type": "lookup_embedder"}, "relation_embedder": {"type": "lookup_embedder"}}
        if l_norm is not None:
            key_options["l_norm"] = l_norm
        if reciprocal:
            options["reciprocal_relations_model"] = {"base_model": {"type": model, **key_options}}
        else:
            options[model] = key_options
        config.options, config.folder = options, str(path.parent)
        prefix = "_base_model." if reciprocal else ""
        state = OrderedDict([(f"{prefix}_entity_embedder._embeddings.weight", torch.tensor(entity_weights)),
                             (f"{prefix}_relation_embedder._embeddings.weight", torch.tensor(relation_weights))])
        torch.save({"type": "train", "epoch": 7, "valid_trace": [{"mrr": np.float64(0.25)}], "model": (state, {}),
                    "optimizer_state_dict": {}, "job_id": "abc", "config": config}, path)
    finally:
        del sys.modules["kge"], sys.modules["kge.config"]


class _RowsEvaluator(Evaluator):
    def __init__(self, dataset, rows, **options):
        super().__init__(dataset, **options)
        self.rows = rows

    def score_batch(self, batch):
        index = [self.position[tuple(t)] for t in batch.tolist()]
        return self.rows["head"][index], self.rows["tail"][index]


@pytest.fixture()
def graph(tmp_path):
    splits = random_labelled_graph(4, 20, 3, {"train": 80, "valid": 8, "test": 15})
    return load_dataset(write_samples(tmp_path / "data", splits, negatives=False))


def _model_folder(tmp_path, dataset, model, reciprocal, l_norm=None, seed=0):
    """A LibKGE folder whose id order is a shuffle of the dataset's; returns (folder, score function)."""
    rng = np.random.default_rng(seed)
    folder = tmp_path / f"libkge-{model}-{reciprocal}-{l_norm}"
    folder.mkdir()
    entity_order = rng.permutation(dataset.num_entities)
    relation_order = rng.permutation(dataset.num_relations)
    (folder / "entity_ids.del").write_text("".join(f"{i}\t{dataset.entity_labels[e]}\n"
                                                   for i, e in enumerate(entity_order)))
    (folder / "relation_ids.del").write_text("".join(f"{i}\t{dataset.relation_labels[r]}\n"
                                                     for i, r in enumerate(relation_order)))
    relation_width = {"rescal": DIM * DIM, "rotate": DIM // 2}.get(model, DIM)
    n_relations = dataset.num_relations * (2 if reciprocal else 1)
    entity_weights = rng.normal(size=(dataset.num_entities, DIM)).astype(np.float32)
    relation_weights = rng.normal(size=(n_relations, relation_width)).astype(np.float32)
    _save_checkpoint(folder / "checkpoint_best.pt", model, reciprocal, entity_weights, relation_weights, l_norm)
    entity_row = {e: i for i, e in enumerate(entity_order)}
    relation_row = {r: i for i, r in enumerate(relation_order)}
    norm = 1.0 if l_norm is None else l_norm

    def score(h, r, t, side):
        """Score of dataset ids (h, r, t) for a query of ``side``, as LibKGE computes it."""
        if reciprocal and side == "head":  # (?, r, t) is answered as (t, r^-1, ?)
            h, t, relation = t, h, relation_row[r] + dataset.num_relations
        else:
            relation = relation_row[r]
        return _libkge_score(model, norm, entity_weights[entity_row[h]].astype(np.float64),
                             relation_weights[relation].astype(np.float64),
                             entity_weights[entity_row[t]].astype(np.float64))

    return folder, score


def _reference(dataset, score):
    test = dataset.triples["test"].tolist()
    rows = {"head": torch.tensor([[score(e, r, t, "head") for e in range(dataset.num_entities)] for h, r, t in test]),
            "tail": torch.tensor([[score(h, r, e, "tail") for e in range(dataset.num_entities)] for h, r, t in test])}
    evaluator = _RowsEvaluator(dataset, rows, device="cpu", progress=False)
    evaluator.position = {tuple(t): i for i, t in enumerate(test)}
    return evaluator.evaluate(batch_size=len(test))


CASES = [("distmult", False, None), ("complex", False, None), ("rescal", False, None), ("transe", False, None),
         ("transe", False, 2.0), ("rotate", False, None), ("rotate", False, 2.0), ("complex", True, None),
         ("distmult", True, None), ("transe", True, 1.0)]


@pytest.mark.parametrize("model,reciprocal,l_norm", CASES)
def test_checkpoint_scores_as_libkge_defines(tmp_path, graph, model, reciprocal, l_norm):
    folder, score = _model_folder(tmp_path, graph, model, reciprocal, l_norm)
    out = tmp_path / "result.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", graph.path, "--model-dir", str(folder), "--no-progress",
                                     "--device", "cpu", "--output", str(out)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text())
    reference = _reference(graph, score)
    for side in ("head", "tail", "both"):
        for name, value in reference["metrics"][side]["realistic"].items():
            assert result["metrics"][side]["realistic"][name] == pytest.approx(value, abs=1e-9), (side, name)
    assert result["model"]["params"]["libkge_model"] == model
    assert result["model"]["params"]["reciprocal"] is reciprocal


def test_no_code_from_the_pickle_runs(tmp_path, graph):
    folder, _ = _model_folder(tmp_path, graph, "distmult", False)
    checkpoint = read_checkpoint(folder / "checkpoint_best.pt")
    config = checkpoint["config"]
    assert type(config).__module__ == "kge.config" and "kge" not in sys.modules
    assert config.options["model"] == "distmult" and checkpoint["epoch"] == 7

    class Blocked:  # a pickle that would call os.system when loaded by plain pickle: torch refuses it
        def __reduce__(self):
            import os
            return os.system, ("touch " + str(tmp_path / "pwned"),)

    class Inert:  # a pickle that would call a function of this module: it becomes a stand-in, never called
        def __reduce__(self):
            return _touch, (str(tmp_path / "pwned"),)

    torch.save({"model": ({}, {}), "config": Blocked()}, tmp_path / "blocked.pt")
    with pytest.raises(InputError, match="could not read the checkpoint"):
        read_checkpoint(tmp_path / "blocked.pt")
    torch.save({"model": ({}, {}), "config": Inert()}, tmp_path / "inert.pt")
    loaded = read_checkpoint(tmp_path / "inert.pt")
    assert type(loaded["config"]).__name__ == "_touch" and loaded["config"].args == (str(tmp_path / "pwned"),)
    assert not (tmp_path / "pwned").exists()


def _touch(path):
    open(path, "w").close()


def test_errors_name_the_file_and_the_expectation(tmp_path, graph):
    folder, _ = _model_folder(tmp_path, graph, "rescal", False)
    (folder / "relation_ids.del").write_text("0\tREL_A\n")
    with pytest.raises(InputError, match="expected 1 relation rows"):
        load_libkge(folder, graph)
    (folder / "relation_ids.del").write_text("zero REL_A\n")
    with pytest.raises(InputError, match="expected 2 tab-separated columns") as info:
        load_libkge(folder, graph)
    assert "relation_ids.del" in str(info.value)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "checkpoint_best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="not a readable torch checkpoint"):
        load_libkge(broken, graph)
    other, _ = _model_folder(tmp_path, graph, "distmult", False, seed=1)
    (other / "entity_ids.del").unlink()
    with pytest.raises(InputError, match="no entity_ids.del"):
        load_libkge(other, graph)
