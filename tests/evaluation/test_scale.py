"""The large-graph paths at small size: memory-mapped embedding files, query tiles scored in
entity chunks, and the stage timings a run records (benchmarks/bench_scale.py measures the
cost curve; these check that the paths it takes give the records the plain ones give)."""
import numpy as np
import pytest

import openbench
from openbench.evaluation.producers import full as producers
from openbench.evaluation import candidates as ranking_setup
from openbench.evaluation.candidates import RankingSetup
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY
from openbench.evaluation.producers.full import FullRanking
from openbench.models.sources import ModelSpec
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples


def _without_timing(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "timing"}


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """(split folder, entity .npy, relation .npy): 600 entities, random float embeddings (the
    exact window and its re-scoring are exercised, not only exact integer arithmetic)."""
    root = tmp_path_factory.mktemp("scale")
    folder = write_samples(root / "data", random_labelled_graph(11, 600, 4, {"train": 3000, "valid": 60, "test": 150}))
    rng = np.random.default_rng(5)
    np.save(root / "ent.npy", (rng.standard_normal((600, 16)) / 4).astype(np.float32))
    np.save(root / "rel.npy", (1 + rng.standard_normal((4, 16)) / 8).astype(np.float32))
    return folder, root / "ent.npy", root / "rel.npy"


def test_memory_mapped_embeddings_give_the_in_memory_record(split, monkeypatch):
    """The command line's embedding files are memory-mapped (the scorer's table is the file's
    mapping, no copy) and give the record the same arrays read into memory give."""
    folder, entities, relations = split
    dataset = openbench.load_dataset(str(folder))
    import openbench._io as io_module

    loaded = []
    original = io_module.load_npy

    def spy(path, mmap=False):
        loaded.append(original(path, mmap=mmap))
        return loaded[-1]

    monkeypatch.setattr(io_module, "load_npy", spy)
    spec = ModelSpec(entity_embeddings=str(entities), relation_embeddings=str(relations), model="DistMult")
    mapped = openbench.evaluate(dataset, spec)
    assert isinstance(loaded[0], np.memmap) and str(loaded[0].filename) == str(entities.resolve())
    in_memory = openbench.evaluate(dataset, openbench.embedding_model("DistMult", np.load(entities), np.load(relations)),
                                   progress=False)
    assert _without_timing(mapped.to_dict()) == _without_timing(in_memory.to_dict())
    from openbench.models.sources import select_source

    loaded.clear()
    scorer = select_source(spec).load(dataset, spec)
    assert isinstance(loaded[0], np.memmap) and not isinstance(loaded[1], np.memmap)  # the relations are read
    assert scorer.entities.data_ptr() == loaded[0].ctypes.data  # the scorer's table is the mapping itself


def _score_tables(entities, relations) -> dict:
    """{model name: (entity rows, relation rows)}: every kind of score (dot, L2 keys, L1, moduli),
    random floats (the exact window and its re-scoring at work) and integers (float32 computes
    every key exactly, so the windows are the true keys themselves)."""
    rng = np.random.default_rng(8)
    return {"DistMult": (np.load(entities), np.load(relations)),
            "DistMult-exactly": (integer_embeddings(1, 600, 16), integer_embeddings(2, 4, 16)),
            "DistMult-float64": (np.load(entities).astype(np.float64), np.load(relations).astype(np.float64)),
            "TransE-L2": (np.load(entities), np.load(relations) - 1),
            "TransE-L1": (np.load(entities), np.load(relations) - 1),
            "RotatE": ((rng.standard_normal((600, 16)) / 4).astype(np.float32),  # complex rows as halves
                       np.concatenate([np.cos(phases := rng.uniform(-np.pi, np.pi, (4, 8))), np.sin(phases)],
                                      axis=1).astype(np.float32))}


NEEDS_C = pytest.mark.skipif(COUNTING_LIBRARY.get() is None,
                             reason="the fused count is the C helper's (not built, or OPENBENCH_KERNEL=torch)")


@NEEDS_C
def test_query_tiles_in_entity_chunks_give_the_full_rows_record(split, monkeypatch):
    """Queries in tiles of QUERY_TILE scored in entity chunks (the true answers' keys scored alone)
    and counted by the fused C count on two threads, each chunk right after its GEMM: the
    exact-ranks record is the one full rows counted block by block give, for every kind of score."""
    folder, entities, relations = split
    dataset = openbench.load_dataset(str(folder))
    for name, (entity_rows, relation_rows) in _score_tables(entities, relations).items():
        name = name.replace("-exactly", "").replace("-float64", "")
        full = openbench.evaluate(dataset, FullRanking(openbench.embedding_model(name, entity_rows, relation_rows),
                                                       counting="blocks"), progress=False)
        with monkeypatch.context() as patch:
            patch.setattr(producers, "FUSED_BLOCK_ELEMENTS", 64 * 50)
            patch.setattr(producers, "FUSED_QUERY_TILE", 64)
            patch.setattr(ranking_setup, "CPU_BLOCK_ELEMENTS", 64 * 50)
            model = openbench.embedding_model(name, entity_rows, relation_rows)
            producer = FullRanking(model)
            setup = RankingSetup(dataset, progress=False)
            producer.bind(setup)
            assert producer.fused_counting
            assert producer.default_batch_size(setup) == 64 and producer.chunk_width(64) == 50  # tiles, 12 chunks
            tiled = openbench.evaluate(dataset, model, progress=False)
        assert _without_timing(tiled.to_dict()) == _without_timing(full.to_dict()), name


def test_full_rows_only_where_a_whole_tile_of_them_fits(split, monkeypatch):
    """Where blocks are counted block by block (CUDA, the torch kernel, fast ranks), full (E,)
    score rows per batch only when QUERY_TILE of them fit the block budget: a graph whose rows fit
    a handful at a time is scored in tiles (a batch of 8 full rows streamed the whole table from
    memory once per 8 queries, 12x the machine's limit at 1 M entities). The fused count takes
    blocks of FUSED_BLOCK_ELEMENTS whatever the budget."""
    folder, entities, relations = split
    dataset = openbench.load_dataset(str(folder))
    model = openbench.embedding_model("DistMult", np.load(entities), np.load(relations))
    setup = RankingSetup(dataset, progress=False)
    producer = FullRanking(model, counting="blocks")
    producer.bind(setup)
    assert not producer.fused_counting
    tile = producers.QUERY_TILE
    for budget, batch, width in ((600 * tile, tile, 600), (600 * tile * 3, min(3 * tile, 4096), 600),
                                 (600 * 8, tile, 600 * 8 // tile), (600 * tile - 1, tile, (600 * tile - 1) // tile)):
        producer._block_budget = budget
        assert (producer.default_batch_size(setup), producer.chunk_width(producer.default_batch_size(setup))) \
            == (batch, width), budget
    fused = FullRanking(model)
    fused.bind(setup)
    if COUNTING_LIBRARY.get() is None:  # without the C helper nothing is counted fused
        assert not fused.fused_counting
        return
    assert fused.fused_counting
    for batch in (1, 7, 1024, 4096):
        assert fused.chunk_width(batch) == min(600, producers.FUSED_BLOCK_ELEMENTS // batch)


def test_a_record_says_how_long_each_stage_took(split):
    folder, entities, relations = split
    dataset = openbench.load_dataset(str(folder))
    assert dataset.load_seconds is not None and dataset.load_seconds >= 0
    spec = ModelSpec(entity_embeddings=str(entities), relation_embeddings=str(relations), model="DistMult")
    record = openbench.evaluate(dataset, spec, bootstrap=20)
    stages = record.timing["stages"]
    assert list(stages) == ["load_dataset", "load_model", "filter_index", "evaluation", "bootstrap"]
    assert all(seconds >= 0 for seconds in stages.values())
    assert stages["evaluation"] <= record.seconds
