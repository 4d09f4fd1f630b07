"""--candidates typed: ranks among the admitted node types only, against a plain reference."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import ScoreError
from openbench.datasets.loader import load_dataset
from openbench.compat import Evaluator
from openbench.models.scorers import build_scorer
from tests.bases import PREFIXES, typed_graph
from tests.helpers import integer_embeddings, write_samples
from tests.bases import evaluated

ADMITTED = {"GENE_DIS": ({"GENE"}, {"DIS"}), "GENE_GENE": ({"GENE"}, {"GENE"}),
            "DIS_PHENOTYPE": ({"DIS"}, {"PHENOTYPE"}), "IS_A": ({"GO", "DIS", "PHENOTYPE", "ANATOMY"},) * 2}


def _type_of(label):
    prefix = label.split(":")[0]
    return next(kind for kind, p in PREFIXES.items() if p == prefix)


def _slow_typed_mrr(dataset, rows_by_side, side):
    """Realistic MRR of one side from full score rows, candidates restricted by hand."""
    known = {tuple(t) for name in ("train", "valid", "test") for t in dataset.triples[name].tolist()}
    labels, relations = dataset.entity_labels, dataset.relation_labels
    total = []
    for i, (h, r, t) in enumerate(dataset.triples["test"].tolist()):
        true = h if side == "head" else t
        admitted = ADMITTED.get(relations[r])
        row = rows_by_side[i]
        greater = equal = 0
        for candidate in range(len(labels)):
            if candidate == true:
                continue
            triple = (candidate, r, t) if side == "head" else (h, r, candidate)
            if triple in known:
                continue
            if admitted is not None and _type_of(labels[candidate]) not in admitted[0 if side == "head" else 1]:
                continue
            greater += row[candidate] > row[true]
            equal += row[candidate] == row[true]
        total.append(1.0 / (greater + (equal + 2) / 2))
    return sum(total) / len(total)


@pytest.mark.parametrize("seed", range(4))
def test_typed_embedding_evaluation_matches_the_reference(tmp_path, seed):
    dataset = load_dataset(write_samples(tmp_path / "data", typed_graph(seed), negatives=False))
    entities = integer_embeddings(seed, dataset.num_entities, 4)
    relations = integer_embeddings(seed + 10, dataset.num_relations, 4)
    scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    for entity_chunk in (None, 3):  # one block, and several entity chunks
        result = evaluated(dataset, scorer, candidates="typed", entity_chunk=entity_chunk, batch_size=4)
        assert result["protocol"]["candidates"] == "typed"
        assert any("CUSTOM_REL" in w for w in result["warnings"])
        for side in ("head", "tail"):
            rows = scorer.score_all(dataset.triples["test"], side).numpy()
            assert result["metrics"][side]["realistic"]["mrr"] == pytest.approx(_slow_typed_mrr(dataset, rows, side),
                                                                                abs=1e-12)
    untyped = evaluated(dataset, scorer)
    assert untyped["metrics"]["both"]["realistic"]["mr"] >= result["metrics"]["both"]["realistic"]["mr"]


class _RowsEvaluator(Evaluator):
    """Full score rows given up front, some true scores at -inf (the typed fill value)."""

    def __init__(self, dataset, rows, **options):
        super().__init__(dataset, device="cpu", progress=False, **options)
        self.rows = rows

    def score_batch(self, batch):
        index = {tuple(t): i for i, t in enumerate(self.dataset.triples["test"].tolist())}
        picked = [index[tuple(t)] for t in batch.tolist()]
        return self.rows["head"][picked], self.rows["tail"][picked]


def test_a_true_score_at_minus_infinity_does_not_tie_with_excluded_candidates(tmp_path):
    dataset = load_dataset(write_samples(tmp_path / "data", typed_graph(7), negatives=False))
    rng = np.random.default_rng(0)
    rows = {side: torch.from_numpy(rng.integers(-2, 3, (dataset.triples["test"].shape[0], dataset.num_entities))
                                   .astype(np.float64)) for side in ("head", "tail")}
    test = dataset.triples["test"]
    typed_row = next(i for i, r in enumerate(test[:, 1].tolist()) if dataset.relation_labels[r] in ADMITTED)
    rows["tail"][typed_row, test[typed_row, 2]] = float("-inf")  # the true answer scores as low as it can
    rows["tail"][typed_row, (test[typed_row, 2] + 1) % dataset.num_entities] = float("-inf")
    result = _RowsEvaluator(dataset, rows, candidates="typed").evaluate(batch_size=3)
    for side in ("head", "tail"):
        expected = _slow_typed_mrr(dataset, rows[side].numpy(), side)
        assert result["metrics"][side]["realistic"]["mrr"] == pytest.approx(expected, abs=1e-12)


def test_candidate_counts_shrink_to_the_admitted_types(tmp_path):
    dataset = load_dataset(write_samples(tmp_path / "data", typed_graph(1), negatives=False))
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 4),
                          integer_embeddings(1, dataset.num_relations, 4), dataset.num_entities, dataset.num_relations)
    from openbench.evaluation.counting.chain import count_batch
    from openbench.evaluation.producers.full import FullRanking
    from openbench.evaluation.candidates import RankingSetup

    setup = RankingSetup(dataset, candidates="typed", progress=False, device="cpu")
    producer = FullRanking(scorer)
    producer.bind(setup)
    batch = dataset.triples["test"]
    tail_counts = count_batch(setup, producer.source, batch, "tail", producer.chunk_width(batch.shape[0]))
    known = {tuple(t) for name in ("train", "valid", "test") for t in dataset.triples[name].tolist()}
    for i, (h, r, t) in enumerate(batch.tolist()):
        admitted = ADMITTED.get(dataset.relation_labels[r])
        expected = sum(1 for c in range(dataset.num_entities)
                       if c == t or ((h, r, c) not in known
                                     and (admitted is None or _type_of(dataset.entity_labels[c]) in admitted[1])))
        assert int(tail_counts.n_candidates[i]) == expected


def test_cli_flag(tmp_path):
    folder = write_samples(tmp_path / "data", typed_graph(2), negatives=False)
    dataset = load_dataset(folder)
    np.save(tmp_path / "e.npy", integer_embeddings(0, dataset.num_entities, 4))
    np.save(tmp_path / "r.npy", integer_embeddings(1, dataset.num_relations, 4))
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult",
                                       "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                       str(tmp_path / "r.npy"), "--candidates", "typed", "--no-progress",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["protocol"]["candidates"] == "typed"


def test_typed_exact_ranks_refuse_scores_that_overflow(tmp_path):
    """Excluded candidates hold -inf; so would overflowed float32 keys: exact ranks say so instead
    of ranking one as the other. The same values as float64 evaluate."""
    dataset = load_dataset(write_samples(tmp_path / "data", typed_graph(2), negatives=False))
    rng = np.random.default_rng(0)
    entities = np.abs(rng.standard_normal((dataset.num_entities, 4))) * 2.0 ** 62
    relations = -np.abs(rng.standard_normal((dataset.num_relations, 4))) * 2.0 ** 62
    narrow = build_scorer("DistMult", entities.astype(np.float32), relations.astype(np.float32),
                          dataset.num_entities, dataset.num_relations)
    with pytest.raises(ScoreError, match="overflow the embeddings' precision"):
        evaluated(dataset, narrow, candidates="typed")
    wide = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    result = evaluated(dataset, wide, candidates="typed")
    assert result["protocol"]["ranks"] == "exact"


@pytest.mark.parametrize("counting", ["fused", "blocks"])
def test_typed_fast_ranks_keep_the_true_answer_in_its_block(tmp_path, counting):
    """The exclusion written into each block spares the true answer, even one its relation's types
    do not admit (a test triple against the edge type): fast ranks compare the block's own true
    entry with the true score and would report the two computations as differing."""
    splits = typed_graph(2)
    splits["test"] = splits["test"] + [("NCBIGENE:0", "GENE_DIS", "HP:1")]  # a phenotype where diseases go
    dataset = load_dataset(write_samples(tmp_path / "data", splits, negatives=False))
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 4),
                          integer_embeddings(1, dataset.num_relations, 4), dataset.num_entities, dataset.num_relations)
    from openbench.evaluation.producers.full import FullRanking

    result = evaluated(dataset, FullRanking(scorer, ranks="fast", counting=counting), candidates="typed")
    assert not [warning for warning in result["warnings"] if "differed" in warning], result["warnings"]
