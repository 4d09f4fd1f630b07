"""The dataset cache: a second load reads the binary entry, a changed file invalidates it, a touched
file does not, concurrent loads agree, and cached and fresh evaluations give the same record."""
import json
import os
import subprocess
import sys

import pytest
import torch

from openbench.datasets import loader as dataset_module
from openbench.datasets.loader import load_dataset
from openbench.models.scorers import build_scorer
from tests.helpers import PROJECT_ROOT, integer_embeddings, random_labelled_graph, write_samples
from tests.bases import evaluated


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENBENCH_DATASET_CACHE", "1")
    return tmp_path / "cache" / "datasets"


@pytest.fixture()
def folder(tmp_path):
    return write_samples(tmp_path / "data", random_labelled_graph(2, 30, 3, {"train": 150, "valid": 10, "test": 20}))


def _reads(monkeypatch):
    calls = []
    real = dataset_module.read_dataset

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(dataset_module, "read_dataset", counting)
    return calls


def _same(a, b):
    assert a.entity_labels == b.entity_labels and a.relation_labels == b.relation_labels
    assert a.fingerprint == b.fingerprint and a.id_map_sha256 == b.id_map_sha256 and a.warnings == b.warnings
    assert all(torch.equal(a.triples[s], b.triples[s]) for s in ("train", "valid", "test"))


def test_the_second_load_reads_the_entry(cache, folder, monkeypatch):
    calls = _reads(monkeypatch)
    first = load_dataset(folder)
    second = load_dataset(folder)
    assert len(calls) == 1 and second.cache_entry is not None and second.cache_entry.parent == cache
    _same(first, second)
    assert second.path == str(folder)


def test_a_changed_file_invalidates_a_touched_one_does_not(cache, folder, monkeypatch):
    calls = _reads(monkeypatch)
    load_dataset(folder)
    test_file = folder / "test_sample.csv"
    text = test_file.read_text()
    os.utime(test_file, ns=(1, 1))  # an old time stamp: only the content can tell
    load_dataset(folder)
    assert len(calls) == 1  # the time stamps moved, the content did not: the entry stands
    before = len(calls)
    first_line = text.splitlines()[0].split("\t")
    changed = text.replace(first_line[0], first_line[0][:-1] + ("9" if first_line[0][-1] != "9" else "8"), 1)
    assert len(changed) == len(text)
    test_file.write_text(changed)  # same size, other content
    fresh = load_dataset(folder)
    assert len(calls) == before + 1
    _same(fresh, dataset_module.read_dataset(folder))


def test_turned_off_or_unwritable_the_cache_costs_nothing_but_speed(cache, folder, monkeypatch):
    monkeypatch.setenv("OPENBENCH_DATASET_CACHE", "0")
    assert load_dataset(folder).cache_entry is None and not cache.exists()
    monkeypatch.setenv("OPENBENCH_DATASET_CACHE", "1")
    blocker = cache.parent.parent / "blocked"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("OPENBENCH_CACHE_DIR", str(blocker))
    assert load_dataset(folder).counts()["test"] > 0


def test_cached_and_fresh_evaluations_give_the_same_record(cache, folder, monkeypatch):
    def evaluate():
        dataset = load_dataset(folder)
        scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 4),
                              integer_embeddings(1, dataset.num_relations, 4), dataset.num_entities,
                              dataset.num_relations)
        record = evaluated(dataset, scorer)
        record.pop("timing")
        return record

    monkeypatch.setenv("OPENBENCH_DATASET_CACHE", "0")
    fresh = evaluate()
    monkeypatch.setenv("OPENBENCH_DATASET_CACHE", "1")
    first, cached = evaluate(), evaluate()  # the second also reads the stored filter indexes
    assert fresh == first == cached
    assert sorted(p.name for p in next(cache.iterdir()).glob("filter_*")) == [
        "filter_train-valid-test_head.npz", "filter_train-valid-test_tail.npz"]


@pytest.mark.slow
def test_concurrent_first_loads_agree(cache, folder):
    code = ("import json, sys; from openbench.datasets.loader import load_dataset; "
            "d = load_dataset(sys.argv[1]); print(json.dumps([d.fingerprint, d.counts()]))")
    environment = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), OPENBENCH_CACHE_DIR=str(cache.parent))
    runs = [subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                             env=environment) for _ in range(3)]
    outputs = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    assert all(output == outputs[0] for output in outputs)
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no staging left
