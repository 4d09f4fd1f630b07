"""The fused count (:class:`~openbench.evaluation.counting.tally.FusedTally`, on several
threads) against the block-by-block reference (``count_block`` per block, exact ranks' window
pairs gathered per block): the same records from whole evaluations, rows whose record of window columns
overflows, NaN scores named as the serial order names them."""
import numpy as np
import pytest

import openbench
from openbench.errors import InputError, ScoreError
from openbench.evaluation.counting import chain
from openbench.evaluation.counting import kernels
from openbench.evaluation.producers.full import FullRanking
from tests.helpers import random_labelled_graph, write_samples

pytestmark = pytest.mark.skipif(kernels.COUNTING_LIBRARY.get() is None, reason="the C kernel is not built")


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = tmp_path_factory.mktemp("fused")
    return write_samples(root / "data", random_labelled_graph(17, 300, 5, {"train": 2400, "valid": 40, "test": 90}))


def _without_timing(record) -> dict:
    return {key: value for key, value in record.to_dict().items() if key != "timing"}


def _tables(kind: str, entities: int, relations: int):
    rng = np.random.default_rng(21)
    if kind == "repeated":  # 12 distinct random rows: many candidates inside each (non-point) window
        distinct = (rng.standard_normal((12, 12)) / 3).astype(np.float32)
        return distinct[rng.integers(0, 12, entities)], (1 + rng.standard_normal((relations, 12)) / 5).astype(np.float32)
    if kind == "coarse":  # values on a grid of 1/4: many exact ties and wide windows
        return (rng.integers(-3, 4, (entities, 8)) / 4).astype(np.float32), \
            (rng.integers(-3, 4, (relations, 8)) / 4).astype(np.float32)
    return (rng.standard_normal((entities, 12)) / 3).astype(np.float32), \
        (1 + rng.standard_normal((relations, 12)) / 5).astype(np.float32)


@pytest.mark.parametrize("model", ["DistMult", "TransE-L2", "TransE-L1", "ComplEx"])
@pytest.mark.parametrize("kind", ["coarse", "random", "repeated"])
def test_fused_evaluations_give_the_block_by_block_records(split, monkeypatch, model, kind):
    """Whole evaluations, fused (two threads, chunks of 16, a record of one window column per row
    so that full rows are taken out on every chunk) against block by block: the same records,
    for exact and fast ranks, all candidates and an entity scope."""
    dataset = openbench.load_dataset(str(split))
    entity_rows, relation_rows = _tables(kind, dataset.num_entities, dataset.num_relations)
    if model == "ComplEx":
        entity_rows, relation_rows = (np.concatenate([t, t[:, ::-1]], axis=1) for t in (entity_rows, relation_rows))
    scorer = openbench.embedding_model(model, entity_rows, relation_rows)
    scope = dataset.entity_labels[::2]
    monkeypatch.setattr(chain, "INITIAL_RECORD", 1)
    for ranks in ("exact", "fast"):
        for options in ({}, {"entities": scope}):
            reference = openbench.evaluate(dataset, FullRanking(scorer, ranks=ranks, counting="blocks",
                                                                entity_chunk=16), progress=False, **options)
            fused_producer = FullRanking(scorer, ranks=ranks, entity_chunk=16)
            fused = openbench.evaluate(dataset, fused_producer, progress=False, **options)
            assert _without_timing(fused) == _without_timing(reference), (ranks, options)
            if ranks == "exact" and kind == "repeated":
                assert fused_producer.source.record_capacity > 1  # the record grew after overflowing
                assert fused.timing["exact_ranks"] == reference.timing["exact_ranks"]


def test_a_nan_score_names_the_query_the_block_by_block_count_names(split, monkeypatch):
    """NaN in the tables: named as a stored value before anything is scored. Past that check (a
    test's patch), exact ranks refuse the first query whose window is not finite, and fast ranks'
    counts report the NaN of the query the serial order meets first: the same line from the fused
    count as from the block-by-block count."""
    dataset = openbench.load_dataset(str(split))
    entity_rows, relation_rows = _tables("random", dataset.num_entities, dataset.num_relations)
    answers = dataset.triples["test"][:, 2].tolist()
    entity_rows[answers[40]] = np.nan  # a row whose chunk comes late, and one in an early chunk
    entity_rows[min(answers[60:], key=lambda e: e)] = np.nan
    scorer = openbench.embedding_model("DistMult", entity_rows, relation_rows)
    first = min(answers[40], *answers[60:])
    with pytest.raises(InputError, match=rf"entity embeddings, row {first} \(entity '.+'\), column 0, holds NaN"):
        openbench.evaluate(dataset, scorer, progress=False)  # stored values first (openbench.models.finite)
    monkeypatch.setattr(type(scorer), "stored_tables", lambda self: [])
    for ranks in ("exact", "fast"):
        if ranks == "fast":
            monkeypatch.setattr(type(scorer), "refuse_fast_overflow", lambda self, finite, dtype: None)
        messages = []
        for counting in ("blocks", "fused"):
            with pytest.raises(ScoreError) as error:
                openbench.evaluate(dataset, FullRanking(scorer, ranks=ranks, counting=counting, entity_chunk=16),
                                   progress=False)
            messages.append(str(error.value))
        assert messages[0] == messages[1], ranks
        assert ("NaN" in messages[0]) if ranks == "fast" else ("is not finite" in messages[0]), messages[0]
