"""One batch (queries of one side) as a pass down the stages (the candidates, the scores, exact
ranks' window, the count, the settling), each stage entered once, values handed down; and rows
whose window is a point beside rows whose window overflows its record, in one batch."""
import importlib.util

import pytest
import torch

import openbench
from openbench.datasets.loader import load_dataset
from openbench.demo import planted_graph, write_samples
from tests.helpers import PROJECT_ROOT


def _trace_door():
    spec = importlib.util.spec_from_file_location("trace_door", PROJECT_ROOT / "benchmarks" / "trace_door.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("ranks, model", [("fast", "DistMult"), ("fast", "RESCAL"), ("exact", "DistMult"),
                                         ("exact", "TransE-L2"), ("exact", "TransE-L1"), ("exact", "ComplEx")])
def test_a_batch_visits_each_stage_once(ranks, model):
    """Within a batch no module is entered twice: the candidates, the scorer, exact ranks (the
    window, the count inside it, the settling, in one call), the tally and the C kernel, each
    once (the C tally's pass, one block: the torch reference counts through counts.py block by
    block). The evaluation has two batches, the head and the tail queries of its one test triple;
    and the door calls the producer once (its run) after the options, never after the counts.
    Exact ranks: the models whose queries the C helper builds (RESCAL, SimplE and RotatE read the
    scorer's float64 formulas from the window and the settling, a second visit)."""
    from openbench.evaluation.counting.kernels import COUNTING_LIBRARY

    if COUNTING_LIBRARY.get() is None:
        pytest.skip("the C counting helper is not built, or OPENBENCH_KERNEL=torch switched it off")
    found = _trace_door().trace(ranks, tree=False, model_name=model)
    assert len(found.batch_crossings) == 2  # the head queries, then the tail queries
    stages = {"openbench.evaluation.candidates", "openbench.models.scorers", "openbench.evaluation.counting.tally",
              "openbench.evaluation.counting.kernels"}
    if ranks == "exact":
        stages.add("openbench.evaluation.counting.exact")
    for crossed in found.batch_crossings:
        assert stages <= set(crossed)
        assert {module: count for module, count in crossed.items() if count > 1} == {}
    assert found.visits["openbench.evaluation.producers.base"] == 2  # Producer.options, Producer.run


def test_chunks_stream_through_the_scorer_and_the_kernel_only():
    """Where the candidates come in several chunks, the loop over them visits the scorer (each
    chunk's GEMM) and the counting kernel once per chunk; every other stage of the batch is
    visited once (fast ranks: the loop runs on the calling thread, which the trace follows)."""
    from openbench.evaluation.counting.kernels import COUNTING_LIBRARY

    if COUNTING_LIBRARY.get() is None:
        pytest.skip("the C counting helper is not built, or OPENBENCH_KERNEL=torch switched it off")
    found = _trace_door().trace("fast", tree=False, queries=3, entity_chunk=200)
    for visited in found.batch_visits:
        assert {module for module, count in visited.items() if count > 1} == {
            "openbench.models.scorers", "openbench.evaluation.counting.kernels"}
        chunks = visited["openbench.evaluation.counting.kernels"]
        assert chunks >= 2 and visited["openbench.models.scorers"] == 1 + chunks  # the side's queries, each chunk


def test_point_windows_beside_windows_that_overflow_their_record(tmp_path):
    """Integer embeddings with few distinct entity rows: relations of small values are computed
    exactly in float32 (point windows: their many ties are exact), relations of values near 2^23
    are not (windows to settle, whose candidates overflow the window record and are taken out of
    it). Exact ranks in float32 must equal the float64 fast ranks, which compute these integers
    exactly."""
    write_samples(tmp_path, planted_graph(0), 0)
    dataset = load_dataset(tmp_path)
    generator = torch.Generator().manual_seed(1)
    entities = torch.randint(0, 2, (dataset.num_entities, 2), generator=generator).float()
    relations = torch.ones(dataset.num_relations, 2)
    relations[::2] = 2.0 ** 23 + 1
    exact = openbench.evaluate(dataset, openbench.embedding_model("DistMult", entities, relations), ranks="exact")
    wide = openbench.evaluate(dataset, openbench.embedding_model("DistMult", entities.double(), relations.double()),
                              ranks="fast")
    assert exact.metrics == wide.metrics


def test_the_counts_and_their_statistics_load_without_the_data_stage():
    """RankCounts and the metrics read counts, not datasets: importing them loads neither polars nor
    the dataset loader (the candidates' rules that rank_counts applies are imported when it runs)."""
    import subprocess
    import sys

    code = ("import sys, openbench.evaluation.counting.counts, openbench.evaluation.statistics.metrics; "
            "print(sorted(m for m in ('polars', 'openbench.datasets.loader', 'openbench.evaluation.candidates') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert done.stdout.strip() == "[]"


def test_block_by_block_exact_ranks_hold_one_block_of_pairs_at_a_time(tmp_path, monkeypatch):
    """The block-by-block tally (the GPU's path) settles each block's window pairs as it counts
    the block: every settling it asks for holds the pairs of one chunk of candidates only, so a
    collapsed model (every candidate undecided) holds B x chunk pairs, not B x E. Its counts are
    the fused count's."""
    from openbench.evaluation.counting.exact import ExactRanks
    from openbench.evaluation.producers.full import FullRanking

    write_samples(tmp_path, planted_graph(0), 0)
    dataset = load_dataset(tmp_path)
    rows = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))
    entities = rows[torch.arange(dataset.num_entities) % 3]  # three distinct rows: wide ties to settle
    model = openbench.embedding_model("DistMult", entities, torch.randn(dataset.num_relations, 8))
    chunk, seen = 64, []
    settle_pairs = ExactRanks.settle_pairs

    def recording(self, counts, window, pair_rows, pair_ids, *rest):
        seen.append(pair_ids.clone())
        return settle_pairs(self, counts, window, pair_rows, pair_ids, *rest)

    monkeypatch.setattr(ExactRanks, "settle_pairs", recording)
    blocks = openbench.evaluate(dataset, FullRanking(model, counting="blocks", entity_chunk=chunk))
    assert sum(ids.numel() for ids in seen) > 0 and len(seen) > 2
    for ids in seen:
        if ids.numel():
            assert int(ids.max()) // chunk == int(ids.min()) // chunk  # one chunk's candidates
    fused = openbench.evaluate(dataset, FullRanking(model, entity_chunk=chunk))
    assert blocks.metrics == fused.metrics


def test_an_entity_shard_without_its_reduction_is_refused(tmp_path):
    """A shard that gathers rows but cannot sum its counts over the processes would return one
    process's share of the counts as if they were all: the block source refuses to begin."""
    from openbench.evaluation.candidates import RankingSetup
    from openbench.evaluation.counting.chain import EmbeddingBlocks

    write_samples(tmp_path, planted_graph(0), 0)
    dataset = load_dataset(tmp_path)
    model = openbench.embedding_model("DistMult", torch.randn(dataset.num_entities, 4),
                                      torch.randn(dataset.num_relations, 4))
    setup = RankingSetup(dataset, device="cpu", progress=False)
    batch = dataset.triples["test"][:2]
    source = EmbeddingBlocks(model, None, gather_rows=lambda rows: rows, reduce=None)
    with pytest.raises(ValueError, match="needs gather_rows and reduce"):
        source.begin(setup, batch, setup.side_candidates(batch, "tail"), dataset.num_entities)


@pytest.mark.parametrize("environment", [".venv", "venv", "env", "anything", "../{name}-venv", "../{name}_env"])
def test_the_trace_counts_only_the_project_s_modules_wherever_the_environment_lives(environment):
    """A virtual environment inside the checkout (any folder name) or beside it (a name sharing the
    checkout's prefix) holds libraries: their modules are never the project's. The project's own
    files are, with their dotted names."""
    from types import SimpleNamespace

    door = _trace_door()
    root = door.ROOT
    folder = (root / environment.format(name=root.name)).resolve()
    library = folder / "lib" / "python3.11" / "site-packages"
    for package in ("numpy/core/fromnumeric.py", "openbench/evaluate.py", "torch/functional.py",
                    "splits/__init__.py"):
        assert door.module_of(SimpleNamespace(co_filename=str(library / package))) is None, library / package
    assert door.module_of(SimpleNamespace(co_filename=str(root / "openbench" / "evaluation" / "evaluate.py"))) == \
        "openbench.evaluation.evaluate"
    assert door.module_of(SimpleNamespace(co_filename=str(root / "graphgen" / "graph_files.py"))) == \
        "graphgen.graph_files"
    assert door.module_of(SimpleNamespace(co_filename=str(root / "benchmarks" / "trace_door.py"))) is None
