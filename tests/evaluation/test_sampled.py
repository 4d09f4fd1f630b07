"""The sampled protocol (each query against its own K negatives): equal to OGB's evaluator, to a
plain loop with ties, and to the full raw ranking when the negatives are every other entity."""
import numpy as np
import pytest
import torch

from openbench.errors import InputError, UsageError
from openbench.datasets.loader import load_dataset
from openbench.evaluation.producers.sampled import SampledNegatives
from openbench.models.scorers import build_scorer
from openbench.record import validate_record
from tests.helpers import integer_embeddings, needs_module, random_labelled_graph, write_samples
from tests.bases import evaluated


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(21, 60, 4, {"train": 300, "valid": 10, "test": 40})
    return load_dataset(write_samples(tmp_path_factory.mktemp("sampled"), splits, negatives=False))


def _negatives(dataset, k, seed):
    rng = np.random.default_rng(seed)
    tasks = dataset.triples["test"].shape[0]
    return SampledNegatives(torch.from_numpy(rng.integers(0, dataset.num_entities, (tasks, k))),
                            torch.from_numpy(rng.integers(0, dataset.num_entities, (tasks, k))))


def _scorer(dataset, name, integer):
    if integer:  # exact arithmetic and many ties
        entities = integer_embeddings(1, dataset.num_entities, 3, low=-1, high=2)
        relations = integer_embeddings(2, dataset.num_relations, 3, low=-1, high=2)
    else:
        rng = np.random.default_rng(5)
        entities = rng.normal(size=(dataset.num_entities, 8)).astype(np.float32)
        relations = rng.normal(size=(dataset.num_relations, 8)).astype(np.float32)
    return build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations)


def _pair_scores(scorer, triples):
    with torch.no_grad():
        return scorer.score_pairs(triples)


@pytest.mark.parametrize("benchmark", ["ogbl-biokg", "ogbl-wikikg2"])
@pytest.mark.parametrize("name,integer", [("DistMult", False), ("TransE-L2", False), ("DistMult", True)])
def test_equal_to_ogbs_evaluator(dataset, benchmark, name, integer):
    ogb = needs_module("ogb.linkproppred")
    scorer = _scorer(dataset, name, integer)
    negatives = _negatives(dataset, 25, seed=3)
    result = evaluated(dataset, scorer, protocol="sampled", negatives=negatives, batch_size=7)
    test = dataset.triples["test"]
    lists = {}
    for side, chosen, column in (("head", negatives.head, 0), ("tail", negatives.tail, 2)):
        positive = _pair_scores(scorer, test)
        expanded = test[:, None, :].expand(-1, chosen.shape[1], -1).clone()
        expanded[:, :, column] = chosen
        negative = _pair_scores(scorer, expanded.reshape(-1, 3)).reshape(chosen.shape)
        lists[side] = ogb.Evaluator(benchmark).eval({"y_pred_pos": positive, "y_pred_neg": negative})
    for side in ("head", "tail", "both"):
        parts = ["head", "tail"] if side == "both" else [side]
        for metric, key in (("mrr", "mrr_list"), ("hits@1", "hits@1_list"), ("hits@3", "hits@3_list"),
                            ("hits@10", "hits@10_list")):
            expected = torch.cat([lists[part][key] for part in parts]).double().mean().item()
            assert result["metrics"][side]["realistic"][metric] == pytest.approx(expected, abs=1e-6), (side, metric)
    assert result["protocol"]["candidates"] == "sampled" and result["protocol"]["filter_sets"] == []
    assert result["protocol"]["negatives_per_query"]["tail"] == 25
    validate_record(result)


def test_ties_against_a_plain_loop(dataset):
    scorer = _scorer(dataset, "DistMult", integer=True)
    negatives = _negatives(dataset, 12, seed=8)
    result = evaluated(dataset, scorer, protocol="sampled", negatives=negatives)
    entities = torch.from_numpy(integer_embeddings(1, dataset.num_entities, 3, low=-1, high=2)).double()
    relations = torch.from_numpy(integer_embeddings(2, dataset.num_relations, 3, low=-1, high=2)).double()
    ranks = {"optimistic": [], "pessimistic": [], "realistic": []}
    for i, (h, r, t) in enumerate(dataset.triples["test"].tolist()):
        for side in ("head", "tail"):
            true = float((entities[h] * relations[r] * entities[t]).sum())
            others = [float((entities[n if side == "head" else h] * relations[r] * entities[t if side == "head" else n])
                            .sum()) for n in (negatives.head if side == "head" else negatives.tail)[i].tolist()]
            better, tied = sum(o > true for o in others), sum(o == true for o in others)
            ranks["optimistic"].append(better + 1)
            ranks["pessimistic"].append(better + tied + 1)
            ranks["realistic"].append(better + tied / 2 + 1)
    assert sum(ranks["pessimistic"]) > sum(ranks["optimistic"])  # the case has ties
    for rank_type, values in ranks.items():
        block = result["metrics"]["both"][rank_type]
        assert block["mrr"] == pytest.approx(np.mean([1 / v for v in values]), abs=1e-12)
        assert block["mr"] == pytest.approx(np.mean(values), abs=1e-12)


def test_every_other_entity_as_negatives_is_the_raw_full_ranking(dataset):
    scorer = _scorer(dataset, "TransE-L2", integer=True)
    test = dataset.triples["test"]
    everything = torch.arange(dataset.num_entities)

    def others(column):
        return torch.stack([everything[everything != answer] for answer in test[:, column].tolist()])

    sampled = evaluated(dataset, scorer, protocol="sampled", negatives=SampledNegatives(others(0), others(2)))
    full = evaluated(dataset, scorer, filter_sets=[])
    for side in ("head", "tail", "both"):
        for rank_type in ("realistic", "optimistic", "pessimistic"):
            for metric, value in full["metrics"][side][rank_type].items():
                assert sampled["metrics"][side][rank_type][metric] == pytest.approx(value, abs=1e-12), (side, metric)


def test_refusals(dataset):
    scorer = _scorer(dataset, "DistMult", integer=False)
    negatives = _negatives(dataset, 5, seed=1)
    with pytest.raises(UsageError, match="without filtering"):
        evaluated(dataset, scorer, protocol="sampled", negatives=negatives, filter_sets=["train"])
    short = SampledNegatives(negatives.head[:3], negatives.tail)
    with pytest.raises(InputError, match=r"head negatives of shape \(3, 5\): expected \(40, K\)"):
        evaluated(dataset, scorer, protocol="sampled", negatives=short)
    outside = SampledNegatives(negatives.head, negatives.tail + dataset.num_entities)
    with pytest.raises(InputError, match="outside"):
        evaluated(dataset, scorer, protocol="sampled", negatives=outside)
    with pytest.raises(InputError, match="relations= and entities= do not apply"):
        evaluated(dataset, scorer, protocol="sampled", negatives=negatives, relations=[dataset.relation_labels[0]])
