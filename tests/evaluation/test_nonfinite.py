"""Non-finite and near-limit stored values (issue 77): one rule for every scorer, task, pass and
process count. A planted ``+inf``, ``-inf`` or NaN, in an entity row read as a query and as a
candidate, a candidate-only row or a relation row, is refused in one line naming its table, row
and column; a finite value near float32's or float64's largest gives the exact reference's counts
or that one line. Never a third outcome (the old code gave MRR 1.000 for one ``+inf``)."""
import math

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import OpenbenchError
from openbench.evaluation.counting import kernels
from openbench.evaluation.evaluate import evaluate
from openbench.evaluation.producers.full import FullRanking
from openbench.models.finite import StoredTable, first_nonfinite, nonfinite_error
from openbench.models.scorers import build_scorer
from tests.bases import PLANTED_COLUMN, planted_graph, planted_value_tables, planted_value_worker, rational_counts, record_counts
from tests.helpers import random_labelled_graph, write_samples

# NumPy's floating-point warnings never reach a terminal from the engine: here they fail the test
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

MODELS = ("DistMult", "TransE-L1", "TransE-L2", "ComplEx", "RotatE")
# name: (value, the tables' dtype)
NONFINITE = {"+inf": (math.inf, np.float32), "-inf": (-math.inf, np.float32), "NaN": (math.nan, np.float32)}
NEAR_LIMITS = {"near float32's largest": (1e38, np.float32),
               "float64, products beyond its largest": (1e300, np.float64),
               "float64, products within its range": (1e150, np.float64)}
PLACES = ("query entity", "candidate entity", "relation")
PASSES = ("exact, fused count", "exact, block by block", "exact, torch kernel", "fast")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(3, 40, 3, {"train": 150, "valid": 6, "test": 10})
    return load_dataset(write_samples(tmp_path_factory.mktemp("graph"), splits))


def _run(dataset, model, entities, relations, mode, monkeypatch):
    """('error', message) or ('counts', {side: [(n_greater, n_equal, n_candidates)]}) of one pass."""
    try:
        scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
        with monkeypatch.context() as patch:
            if mode == "exact, torch kernel":
                patch.setenv("OPENBENCH_KERNEL", "torch")
                kernels.COUNTING_LIBRARY.reset()
            counting = "blocks" if mode == "exact, block by block" else "fused"
            producer = FullRanking(scorer, ranks="fast" if mode == "fast" else "exact", counting=counting,
                                   entity_chunk=16)
            record = evaluate(dataset, producer, device="cpu")
        return "counts", record_counts(record)
    except OpenbenchError as error:
        return "error", str(error)
    finally:
        kernels.COUNTING_LIBRARY.reset()


def _one_line(message):
    assert "\n" not in message and message.strip(), message


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("plant", sorted(NONFINITE))
@pytest.mark.parametrize("model", MODELS)
def test_a_non_finite_stored_value_is_one_line_naming_it_under_every_pass(dataset, model, plant, place, monkeypatch):
    value, dtype = NONFINITE[plant]
    entities, relations, table, row = planted_value_tables(dataset, model, value, dtype, place)
    labels = dataset.entity_labels if table == "entities" else dataset.relation_labels
    kind = "entity" if table == "entities" else "relation"
    for mode in PASSES:
        outcome, found = _run(dataset, model, entities, relations, mode, monkeypatch)
        assert outcome == "error", (mode, found)  # never counts: no order of infinite or NaN scores is the model's
        _one_line(found)
        assert f"{kind} embeddings, row {row}" in found and f"column {PLANTED_COLUMN}" in found, (mode, found)
        assert plant in found, found
        if not (model == "RotatE" and table == "relations"):  # RotatE's rotations: refused as they are built
            assert repr(labels[row]) in found, found


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("plant", sorted(NEAR_LIMITS))
@pytest.mark.parametrize("model", MODELS)
def test_a_value_near_a_limit_gives_the_exact_counts_or_one_line(dataset, model, plant, place, monkeypatch):
    """Finite values near the largest float32 or float64: every exact pass gives the rational
    reference's counts or one line, and dot and L1 keys are decided (their float64 windows hold:
    no float32 cancellation); fast ranks, which compare keys as computed, give one line wherever a
    key can overflow their precision. (A mid-range 1e150 in float64 is for the exact passes: fast
    ranks round there by design, a 1e150 entry swamping the other terms of a distance.)"""
    value, dtype = NEAR_LIMITS[plant]
    entities, relations, table, _ = planted_value_tables(dataset, model, value, dtype, place)
    passes = PASSES if plant != "float64, products within its range" else PASSES[:-1]
    outcomes = {mode: _run(dataset, model, entities, relations, mode, monkeypatch) for mode in passes}
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations) \
        if not (model == "RotatE" and table == "relations") else None  # a RotatE rotation of modulus 1e38: refused
    for mode, (outcome, found) in outcomes.items():
        if outcome == "error":
            _one_line(found)
            continue
        assert found == rational_counts(dataset, scorer, model), mode
    decided = model in ("DistMult", "TransE-L1", "ComplEx") and plant != "float64, products beyond its largest"
    assert not decided or all(outcomes[mode][0] == "counts" for mode in PASSES[:3]), outcomes
    if "fast" in outcomes:
        assert outcomes["fast"][0] == "error", outcomes["fast"]


@pytest.mark.parametrize("task", ["classification", "repurposing"])
@pytest.mark.parametrize("plant", sorted(NONFINITE))
def test_every_task_refuses_a_non_finite_stored_value_by_name(tmp_path, task, plant):
    splits = planted_graph(3)
    dataset = load_dataset(write_samples(tmp_path / "split", splits, negatives=task == "classification"))
    value, _ = NONFINITE[plant]
    rng = np.random.default_rng(0)
    entities = rng.normal(size=(dataset.num_entities, 6)).astype(np.float32)
    relations = rng.normal(size=(dataset.num_relations, 6)).astype(np.float32)
    entities[5, 3] = value
    scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    options = [{"relations": ["indication"], "ranks": ranks} for ranks in ("exact", "fast")] \
        if task == "repurposing" else [{}]  # classification has no rank types: its scores are float64 definitions
    for given in options:
        with pytest.raises(OpenbenchError) as error:
            evaluate(dataset, scorer, task=task, **given)
        _one_line(str(error.value))
        assert f"entity embeddings, row 5 (entity {dataset.entity_labels[5]!r}), column 3, holds {plant}" \
            in str(error.value)


@pytest.mark.parametrize("pass_name", ["fused", "plain", "torch"])
@pytest.mark.parametrize("plant", ["near float32's largest", "float64, products beyond its largest"])
def test_the_matrix_passes_refuse_keys_that_may_overflow(tmp_path, monkeypatch, pass_name, plant):
    """The repurposing matrix's passes at a limit: one line under exact and fast ranks (its passes
    need keys bounded within float32's range, or float64's for float64 tables); never a NumPy
    warning."""
    from openbench.evaluation.counting import matrix

    monkeypatch.setenv(matrix.PASS_VARIABLE, pass_name)
    dataset = load_dataset(write_samples(tmp_path / "split", planted_graph(3), negatives=False))
    value, dtype = NEAR_LIMITS[plant]
    rng = np.random.default_rng(1)
    entities = rng.normal(size=(dataset.num_entities, 6)).astype(dtype)
    relations = rng.normal(size=(dataset.num_relations, 6)).astype(dtype)
    entities[2, 1] = value
    scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    with np.errstate(all="raise"):
        for ranks in ("exact", "fast"):
            with pytest.raises(OpenbenchError) as error:
                evaluate(dataset, scorer, task="repurposing", relations=["indication"], ranks=ranks)
            _one_line(str(error.value))


def test_the_message_names_a_complex_file_s_own_column():
    """A ComplEx table read from [Re | Im] halves or interleaved pairs: the message names the
    file's column and which part of which complex column it is."""
    values = torch.zeros((3, 4), dtype=torch.complex64)
    values[2, 1] = complex(0.0, math.inf)
    found = first_nonfinite(values)
    assert found == ((2, 1, 1), math.inf)
    for layout, column in (("halves", 5), ("interleaved", 3)):
        message = str(nonfinite_error(StoredTable("entity embeddings", values, "entity", "e.npy", layout), *found))
        assert message.startswith(f"e.npy: entity embeddings, row 2, column {column} (the imaginary part of complex "
                                  "column 1), holds +inf"), message
    assert first_nonfinite(torch.ones((5, 3))) is None
    chunked = torch.ones(10_000)
    chunked[7_777] = -math.inf
    assert first_nonfinite(chunked, chunk=1000) == ((7_777,), -math.inf)  # found in a later chunk


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["+inf", "near float32's largest"])
def test_two_processes_give_one_process_s_outcome(tmp_path, plant):
    """Entity shards over two gloo processes: the same one line, or the same counts, as one process."""
    splits = random_labelled_graph(3, 40, 3, {"train": 150, "valid": 6, "test": 10})
    folder = write_samples(tmp_path / "graph", splits)
    value = {**NONFINITE, **NEAR_LIMITS}[plant][0]
    mp.spawn(planted_value_worker, args=(2, str(folder), str(tmp_path / "rendezvous"), str(tmp_path / "out"), value),
             nprocs=2, join=True)
    dataset = load_dataset(folder)
    entities, relations, _, _ = planted_value_tables(dataset, "DistMult", value, np.float32, "query entity")
    scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    try:
        alone = repr(sorted(record_counts(evaluate(dataset, scorer, device="cpu")).items()))
    except OpenbenchError as error:
        alone = str(error)
    for rank in range(2):
        assert (tmp_path / f"out{rank}").read_text() == alone


def test_the_command_line_names_the_entry_under_every_rank_type_and_task(tmp_path):
    """The issue's case: one +inf at entity 0, dimension 24 of 32: one line, exit 1, under exact and
    fast ranks and as a classifier; nothing on stdout."""
    splits = random_labelled_graph(5, 30, 3, {"train": 120, "valid": 6, "test": 8})
    folder = write_samples(tmp_path / "split", splits)
    dataset = load_dataset(folder)
    rng = np.random.default_rng(0)
    entities = rng.standard_normal((dataset.num_entities, 32)).astype(np.float32)
    entities[0, 24] = np.inf
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", rng.standard_normal((dataset.num_relations, 32)).astype(np.float32))
    for extra in ([], ["--fast"], ["--task", "classification"]):
        result = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult",
                                           "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                           str(tmp_path / "r.npy"), "--no-progress", *extra])
        assert result.exit_code == 1, (extra, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert f"e.npy: entity embeddings, row 0 (entity {dataset.entity_labels[0]!r}), column 24, holds +inf" \
            in lines[0]
