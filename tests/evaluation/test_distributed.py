"""torch.distributed evaluation on CPU (gloo): identical counts to one process, in both shard modes."""
import json
import time

import pytest
import torch.multiprocessing as mp

from openbench.datasets.loader import load_dataset
from openbench.evaluation.producers.sharded import ShardedProducer, entity_range
from openbench.evaluation.producers.full import FullRanking
from tests.bases import (distributed_worker, overflow_refusal_worker, scorer_for, small_dataset, tie_heavy_scorer,
                         typed_graph)
from tests.bases import evaluated
from tests.helpers import write_samples

pytestmark = pytest.mark.slow  # minutes in all (spawned processes, training, a corpus): not in the fast loop

# integer embeddings (exact ties) and continuous near-tie ones (exact ranks must not depend on the shards)
MODELS = ("DistMult", "TransE-L1", "RESCAL", "near:DistMult", "near:TransE-L2", "near:RotatE")


def _run(tmp_path, world, shard, model, test_size, fail_rank=-1):
    """(single-process records, the distributed run's records) of ``model`` (one name, or several
    joined by commas: then both are {name: record})."""
    folder = tmp_path / "data"
    dataset = small_dataset(folder, test_size)
    references = {name: evaluated(dataset, scorer_for(dataset, name), batch_size=5) for name in model.split(",")}
    out = tmp_path / f"result-{world}-{shard}.json"
    mp.spawn(distributed_worker, args=(world, str(folder), str(tmp_path / f"rendezvous-{world}-{shard}"), shard, model,
                            str(out), fail_rank), nprocs=world, join=True)
    result = json.loads(out.read_text())
    return (references, result) if "," in model else (references[model], result)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("shard", ["queries", "entities"])
def test_counts_equal_the_single_process_evaluator(tmp_path, world, shard):
    references, results = _run(tmp_path, world, shard, ",".join(MODELS), test_size=7)
    test = load_dataset(tmp_path / "data").triples["test"]
    answers = set(test[:, 0].tolist()) | set(test[:, 2].tolist())
    for rank in range(world):  # every rank owns some true answers, so each contributes true scores
        start, stop = entity_range(23, rank, world)
        assert any(start <= a < stop for a in answers), (rank, answers)
    assert set(results) == set(MODELS)
    for model in MODELS:
        reference, result = references[model], results[model]
        assert result["metrics"] == reference["metrics"], model
        assert result["per_relation"] == reference["per_relation"], model
        assert result["protocol"]["distributed"] == {"world_size": world, "shard": shard, "backend": "gloo"}


def test_more_ranks_than_test_triples(tmp_path):
    reference, result = _run(tmp_path, 3, "queries", "DistMult", test_size=2)
    assert result["metrics"] == reference["metrics"] and result["diagnostics"]["queries"] == 4


def test_entity_ranges_cover_every_entity_once():
    for entities in (0, 1, 5, 23):
        for world in (1, 2, 3, 7):
            ranges = [entity_range(entities, rank, world) for rank in range(world)]
            assert ranges[0][0] == 0 and ranges[-1][1] == entities
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_a_dying_rank_fails_the_run_instead_of_hanging(tmp_path):
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        _run(tmp_path, 2, "entities", "DistMult", test_size=7, fail_rank=1)
    # spawn reports whichever rank it sees fail first: the dying one, or its peer whose collective
    # lost the connection (gloo says so as "Connection closed by peer", "connection reset by peer", or,
    # when its read times out first, "…caused by a remote worker hanging or bugs in the application")
    message = str(caught.value)
    peer_lost = ("Connection closed by peer", "connection reset by peer", "caused by a remote worker")
    assert "dies on purpose" in message or any(phrase in message for phrase in peer_lost), message
    assert time.monotonic() - started < 60


def test_torchrun_cli_gives_the_single_process_numbers(tmp_path):
    import subprocess
    import sys

    import numpy as np

    dataset = small_dataset(tmp_path / "data", 7)
    scorer = tie_heavy_scorer(dataset, "DistMult")
    np.save(tmp_path / "e.npy", scorer.entities.numpy())
    np.save(tmp_path / "r.npy", scorer.relations.numpy())
    base = ["-m", "openbench", "evaluate", "--dataset", str(tmp_path / "data"), "--model", "DistMult",
            "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
            "--no-progress"]
    single = subprocess.run([sys.executable, *base, "--output", str(tmp_path / "single.json")], capture_output=True,
                            text=True, timeout=120)
    assert single.returncode == 0, single.stderr
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                          "29517", *base, "--distributed", "--shard", "entities", "--output",
                          str(tmp_path / "dist.json")], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    results = [json.loads((tmp_path / name).read_text()) for name in ("single.json", "dist.json")]
    assert results[0]["metrics"] == results[1]["metrics"]
    assert results[1]["protocol"]["distributed"]["world_size"] == 2


def test_clear_errors_outside_a_process_group(tmp_path, monkeypatch):
    from openbench.errors import InputError
    from openbench.evaluation.producers.sharded import init_from_environment

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(InputError, match="needs torchrun"):
        init_from_environment()
    dataset = small_dataset(tmp_path / "data", 3)
    with pytest.raises(InputError, match="not initialised"):
        ShardedProducer(FullRanking(tie_heavy_scorer(dataset, "DistMult")))
    with pytest.raises(InputError, match="unknown shard mode"):
        ShardedProducer(FullRanking(tie_heavy_scorer(dataset, "DistMult")), shard="relations")


def test_entity_shards_refuse_typed_scores_that_overflow(tmp_path):
    """Typed candidates write -inf over the excluded entries; an overflowed float32 true key would
    be -inf too. Entity shards take exact ranks' one route (the window checked before the count),
    so every rank refuses the batch as one process does
    (test_typed_candidates.py::test_typed_exact_ranks_refuse_scores_that_overflow)."""
    folder = write_samples(tmp_path / "data", typed_graph(2), negatives=False)
    mp.spawn(overflow_refusal_worker, args=(2, str(folder), str(tmp_path / "rendezvous"), str(tmp_path / "out")),
             nprocs=2, join=True)
    for rank in range(2):
        assert "overflow the embeddings' precision" in (tmp_path / f"out{rank}").read_text(), rank
