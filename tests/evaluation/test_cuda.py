"""The CUDA path: the same counts as the CPU path, for every scorer, chunked, typed, distributed (NCCL).

Skipped where no GPU is present (CI); run on a GPU machine with ``pytest tests/evaluation/test_cuda.py``.
"""
import json

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.models.scorers import SCORERS, build_scorer
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples
from tests.bases import evaluated

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(11, 400, 5, {"train": 3000, "valid": 150, "test": 300})
    return load_dataset(write_samples(tmp_path_factory.mktemp("graph"), splits))


def _continuous_scorer(dataset, name, seed=0, dim=8):
    """Gaussian float64 embeddings: no ties, so CPU and GPU rounding cannot reorder a rank."""
    rng = np.random.default_rng(seed)
    n, m = dataset.num_entities, dataset.num_relations
    if name in ("ComplEx", "RotatE", "RotatE-DGLKE"):
        ent = rng.normal(size=(n, dim)) + 1j * rng.normal(size=(n, dim))
        rel = (np.exp(1j * rng.uniform(-np.pi, np.pi, size=(m, dim))) if name.startswith("RotatE")
               else rng.normal(size=(m, dim)) + 1j * rng.normal(size=(m, dim)))
    elif name == "SimplE":
        ent, rel = rng.normal(size=(n, 2 * dim)), rng.normal(size=(m, 2 * dim))
    else:
        ent = rng.normal(size=(n, dim))
        rel = rng.normal(size=(m, dim, dim)) if name == "RESCAL" else rng.normal(size=(m, dim))
    return build_scorer(name, ent, rel, n, m)


def _tied_scorer(dataset, name):
    """Small integer embeddings: many exact ties, all arithmetic exact in float32 on both devices."""
    ent = integer_embeddings(3, dataset.num_entities, 3, low=-1, high=2)
    rel = integer_embeddings(4, dataset.num_relations, 9 if name == "RESCAL" else 3, low=-1, high=2)
    return build_scorer(name, ent, rel, dataset.num_entities, dataset.num_relations)


def _same_numbers(gpu, cpu):
    assert gpu["metrics"] == cpu["metrics"]
    assert gpu["per_relation"] == cpu["per_relation"]
    assert gpu["diagnostics"] == cpu["diagnostics"]


@pytest.mark.parametrize("name", list(SCORERS))
def test_every_scorer_ranks_the_same_on_cuda(dataset, name):
    scorer = _continuous_scorer(dataset, name)
    cpu = evaluated(dataset, scorer, batch_size=64)
    gpu = evaluated(dataset, scorer, device="cuda", batch_size=64)
    _same_numbers(gpu, cpu)
    assert gpu["device"].startswith("cuda")


@pytest.mark.parametrize("name", ["DistMult", "TransE-L1", "RESCAL"])
def test_ties_count_the_same_on_cuda(dataset, name):
    scorer = _tied_scorer(dataset, name)
    cpu = evaluated(dataset, scorer)
    gpu = evaluated(dataset, scorer, device="cuda")
    chunked = evaluated(dataset, scorer, device="cuda", entity_chunk=37, batch_size=13)
    _same_numbers(gpu, cpu)
    _same_numbers(chunked, cpu)
    assert gpu["diagnostics"]["tied_query_fraction"] > 0  # the test exercises ties


def test_options_on_cuda(dataset):
    scorer = _tied_scorer(dataset, "DistMult")
    options = dict(lower_is_better=True, exclude_query_entity=True, filter_sets=("train",), progress=False)
    cpu = evaluated(dataset, scorer, **options, batch_size=32)
    gpu = evaluated(dataset, scorer, device="cuda", **options, batch_size=32)
    _same_numbers(gpu, cpu)


def test_typed_candidates_on_cuda(tmp_path):
    from tests.bases import typed_graph

    typed = load_dataset(write_samples(tmp_path / "data", typed_graph(1), negatives=False))
    scorer = build_scorer("DistMult", integer_embeddings(1, typed.num_entities, 4),
                          integer_embeddings(11, typed.num_relations, 4), typed.num_entities, typed.num_relations)
    for chunk in (None, 3):
        cpu = evaluated(typed, scorer, candidates="typed", entity_chunk=chunk, batch_size=4)
        gpu = evaluated(typed, scorer, candidates="typed", device="cuda", entity_chunk=chunk, batch_size=4)
        _same_numbers(gpu, cpu)
        assert gpu["protocol"]["candidates"] == "typed"


def test_the_command_on_cuda_writes_the_cpu_numbers(tmp_path):
    splits = random_labelled_graph(3, 60, 3, {"train": 300, "valid": 20, "test": 40})
    folder = write_samples(tmp_path / "data", splits)
    n_entities = load_dataset(folder).num_entities
    np.save(tmp_path / "ent.npy", integer_embeddings(0, n_entities, 4))
    np.save(tmp_path / "rel.npy", integer_embeddings(1, 3, 4))
    results = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"{device}.json"
        done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--entity-embeddings",
                                         str(tmp_path / "ent.npy"), "--relation-embeddings", str(tmp_path / "rel.npy"),
                                         "--model", "DistMult", "--no-progress", "--device", device,
                                         "--output", str(out)], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        results[device] = json.loads(out.read_text())
    _same_numbers(results["cuda"], results["cpu"])
    assert results["cuda"]["device"].startswith("cuda")


@pytest.mark.parametrize("shard", ["queries", "entities"])
def test_nccl_ranks_give_the_single_process_numbers(tmp_path, shard):
    from tests.bases import distributed_worker, small_dataset, tie_heavy_scorer

    folder = tmp_path / "data"
    local = small_dataset(folder, 40)
    reference = evaluated(local, tie_heavy_scorer(local, "DistMult"))
    world = torch.cuda.device_count()  # NCCL allows one rank per GPU
    out = tmp_path / "result.json"
    mp.spawn(distributed_worker, args=(world, str(folder), str(tmp_path / "rendezvous"), shard, "DistMult", str(out), -1,
                            "nccl"), nprocs=world, join=True)
    result = json.loads(out.read_text())
    assert result["metrics"] == reference["metrics"]
    assert result["protocol"]["distributed"]["backend"] == "nccl"


@pytest.mark.parametrize("name", ["DistMult", "TransE-L2"])
def test_the_repurposing_matrix_counted_on_cuda_gives_the_cpu_s_record(tmp_path, name):
    """The drug × disease matrix computed and counted on the GPU (the device pass, its float64
    step there): the record is the CPU's, byte for byte, apart from timing and the device."""
    import openbench
    from tests.bases import planted_graph

    dataset = load_dataset(write_samples(tmp_path / "split", planted_graph(3, drugs=300, diseases=200),
                                         negatives=False))
    rng = np.random.default_rng(6)
    entities = rng.normal(size=(dataset.num_entities, 16)).astype(np.float32)
    entities[-1] = entities[-2]  # a tie
    relations = rng.normal(size=(dataset.num_relations, 16)).astype(np.float32)
    records = {}
    for device in ("cpu", "cuda"):
        scorer = build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations)
        record = openbench.evaluate(dataset, scorer, task="repurposing", relations=["indication"],
                                    negative_relations=["contraindication"], recall_at=[1, 10, 100], keep_top=50,
                                    device=device).to_dict()
        assert record.pop("device").startswith(device)
        assert record.pop("timing")["matrix_counting"]["pass"] == {"cpu": "C on cpu", "cuda": "torch on cuda"}[device]
        records[device] = json.dumps(record, sort_keys=True)
    assert records["cuda"] == records["cpu"]
