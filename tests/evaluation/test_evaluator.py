"""End-to-end evaluation against a slow reference, both model contracts, and error paths."""
import json

import numpy as np
import pytest
import torch

from openbench.errors import InputError, ScoreError
from openbench.datasets.loader import load_dataset
from openbench.compat import Evaluator
from openbench.models.scorers import build_scorer
from tests.helpers import integer_embeddings, known_answers, random_labelled_graph, slow_counts, write_samples
from tests.bases import evaluated


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(7, 30, 4, {"train": 150, "valid": 20, "test": 25})
    return load_dataset(write_samples(tmp_path_factory.mktemp("graph"), splits))


def _scorer(dataset, name="DistMult", seed=0, dim=3):
    ent = integer_embeddings(seed, dataset.num_entities, dim, -2, 3)
    rel = integer_embeddings(seed + 1, dataset.num_relations, dim * dim if name == "RESCAL" else dim, -2, 3)
    return build_scorer(name, ent, rel, dataset.num_entities, dataset.num_relations)


def _slow_metrics(dataset, scorer, filter_sets, lower_is_better=False, exclude_query_entity=False, hits=(1, 3, 10),
                  relations=None, entities=None, sides=("head", "tail")):
    """Reference metrics by plain loops: full rows, dict filters, per-task ranks; optionally only
    the test triples of ``relations`` (ids), only ``sides``, and only ``entities`` (ids) as
    candidates (a triple whose answer is outside them skipped)."""
    known = [tuple(row) for split in filter_sets for row in dataset.triples[split].tolist()]
    heads, tails = known_answers(known)
    ranks = {side: [] for side in sides}
    outside = set(range(dataset.num_entities)) - set(entities) if entities is not None else set()
    for h, r, t in dataset.triples["test"].tolist():
        if relations is not None and r not in relations:
            continue
        if any((h if side == "head" else t) in outside for side in sides):
            continue
        batch = torch.tensor([[h, r, t]])
        for side in sides:
            row = scorer.score_all(batch, side)[0].tolist()
            true, query_entity = (h, t) if side == "head" else (t, h)
            removed = set(heads.get((r, t), set()) if side == "head" else tails.get((h, r), set())) | outside
            if exclude_query_entity:
                removed.add(query_entity)
            removed.discard(true)
            g, e, c = slow_counts([-v for v in row] if lower_is_better else row, true, removed)
            ranks[side].append((g, e, c))
    out = {}
    both = [task for evaluated in sides for task in ranks[evaluated]]
    for side, tasks in [*ranks.items(), ("both", both)]:
        realistic = [g + (e + 2) / 2 for g, e, _ in tasks]
        optimistic = [g + 1 for g, _, _ in tasks]
        pessimistic = [g + e + 1 for g, e, _ in tasks]
        n = len(tasks)
        out[side] = {}
        for name, rank in (("realistic", realistic), ("optimistic", optimistic), ("pessimistic", pessimistic)):
            out[side][name] = {"mrr": sum(1 / x for x in rank) / n, "mr": sum(rank) / n}
            out[side][name].update({f"hits@{k}": sum(x <= k for x in rank) / n for k in hits})
        expected_mr = sum((c + 1) / 2 for _, _, c in tasks) / n
        out[side]["realistic"]["amri"] = 1 - (out[side]["realistic"]["mr"] - 1) / (expected_mr - 1)
    return out


def _assert_metrics_equal(result, reference):
    for side, by_type in reference.items():
        for rank_type, values in by_type.items():
            for name, value in values.items():
                assert result["metrics"][side][rank_type][name] == pytest.approx(value, abs=1e-12), \
                    (side, rank_type, name)


@pytest.mark.parametrize("name", ["DistMult", "TransE-L1", "TransE-L2", "RESCAL"])
@pytest.mark.parametrize("filter_sets", [("train", "valid", "test"), (), ("train",)])
def test_embedding_evaluator_matches_slow_reference(dataset, name, filter_sets):
    scorer = _scorer(dataset, name)
    result = evaluated(dataset, scorer, filter_sets=filter_sets)
    _assert_metrics_equal(result, _slow_metrics(dataset, scorer, filter_sets))
    assert result["protocol"]["filter_sets"] == list(filter_sets)


def test_lower_is_better_and_excluded_query_entity(dataset):
    scorer = _scorer(dataset, "DistMult", seed=4)
    result = evaluated(dataset, scorer, lower_is_better=True, exclude_query_entity=True, batch_size=4)
    reference = _slow_metrics(dataset, scorer, ("train", "valid", "test"), lower_is_better=True,
                              exclude_query_entity=True)
    _assert_metrics_equal(result, reference)
    assert result["protocol"]["exclude_query_entity"] is True and result["protocol"]["lower_is_better"] is True


def test_entity_chunks_give_the_same_result_as_full_rows(dataset):
    scorer = _scorer(dataset, "TransE-L2", seed=5)
    full = evaluated(dataset, scorer, batch_size=7)
    chunked = evaluated(dataset, scorer, entity_chunk=4, batch_size=3)
    assert chunked["metrics"] == full["metrics"] and chunked["per_relation"] == full["per_relation"]
    assert not chunked["warnings"]


class RowEvaluator(Evaluator):
    """A user-style evaluator returning full rows (OpenBioLink's 2-tensor contract)."""

    def __init__(self, dataset, scorer, **kwargs):
        super().__init__(dataset, **kwargs)
        self.scorer = scorer

    def score_batch(self, batch):
        return self.scorer.score_all(batch, "head"), self.scorer.score_all(batch, "tail")


def test_score_batch_contract_matches_embedding_evaluator(dataset):
    scorer = _scorer(dataset, "DistMult", seed=2)
    rows = RowEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=5)
    builtin = evaluated(dataset, scorer)
    assert rows["metrics"] == builtin["metrics"] and rows["macro_relation"] == builtin["macro_relation"]
    assert rows["model"]["kind"] == "score_batch"


class FourTensorEvaluator(RowEvaluator):
    def score_batch(self, batch):
        head, tail = super().score_batch(batch)
        pos_head = head.gather(1, batch[:, :1]).squeeze(1) + 100.0  # deliberately inconsistent
        pos_tail = tail.gather(1, batch[:, 2:]).squeeze(1)
        return pos_head, head, pos_tail, tail


def test_four_tensor_contract_reads_true_scores_from_rows_and_warns(dataset):
    scorer = _scorer(dataset, "DistMult", seed=2)
    result = FourTensorEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=5)
    reference = RowEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=5)
    assert result["metrics"] == reference["metrics"]
    assert any("head positive score(s) differ" in warning for warning in result["warnings"])
    assert not any("tail positive" in warning for warning in result["warnings"])


class RoundedFourTensorEvaluator(RowEvaluator):
    """pos_* the same scores computed another way: equal up to the last bits (issue 37: 36 head /
    29 tail warnings for differences <= 4.5e-8)."""

    def score_batch(self, batch):
        head, tail = super().score_batch(batch)
        pos_head = head.gather(1, batch[:, :1]).squeeze(1).double()
        pos_tail = tail.gather(1, batch[:, 2:]).squeeze(1)
        pos_head = (pos_head * (1 + 2 * torch.finfo(torch.float32).eps)).float()  # a few ulps off
        return pos_head, head, torch.nextafter(pos_tail, pos_tail + 1), tail


def test_four_tensor_positives_that_differ_by_rounding_only_are_not_warned_about(dataset):
    scorer = _scorer(dataset, "DistMult", seed=2)
    result = RoundedFourTensorEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=5)
    assert not any("positive score(s) differ" in warning for warning in result["warnings"]), result["warnings"]


class NaNEvaluator(RowEvaluator):
    def score_batch(self, batch):
        head, tail = super().score_batch(batch)
        tail[batch[:, 0] == self.bad_head, 0] = float("nan")
        return head, tail


def test_nan_scores_name_the_first_offending_query(dataset):
    evaluator = NaNEvaluator(dataset, _scorer(dataset), device="cpu", progress=False)
    test = dataset.triples["test"]
    evaluator.bad_head = int(test[6, 0])
    first = int((test[:, 0] == evaluator.bad_head).nonzero()[0, 0])
    h, r, t = test[first].tolist()
    with pytest.raises(ScoreError) as info:
        evaluator.evaluate(batch_size=4)
    message = str(info.value)
    assert f"tail query #{first} of the test split" in message
    assert f"({dataset.entity_labels[h]}, {dataset.relation_labels[r]}, {dataset.entity_labels[t]})" in message


class ShapeEvaluator(RowEvaluator):
    def score_batch(self, batch):
        head, tail = super().score_batch(batch)
        return head, tail[:, :-1]


def test_wrong_score_shape_is_reported(dataset):
    with pytest.raises(ScoreError, match=r"tail scores of shape \(5, 29\); expected \(5, 30\)"):
        ShapeEvaluator(dataset, _scorer(dataset), device="cpu", progress=False).evaluate(batch_size=5)


class BareEvaluator(Evaluator):
    def score_batch(self, batch):
        return None


def test_bad_score_batch_output_and_base_class(dataset):
    with pytest.raises(ScoreError, match="score_batch must return"):
        BareEvaluator(dataset, device="cpu", progress=False).evaluate()
    with pytest.raises(NotImplementedError, match="subclasses implement score_batch"):
        Evaluator(dataset, device="cpu", progress=False).evaluate()


class MemoryHungryEvaluator(RowEvaluator):
    def score_batch(self, batch):
        if batch.shape[0] > 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return super().score_batch(batch)


def test_out_of_memory_halves_the_batch_and_records_it(dataset):
    scorer = _scorer(dataset)
    result = MemoryHungryEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=16)
    reference = RowEvaluator(dataset, scorer, device="cpu", progress=False).evaluate(batch_size=16)
    assert result["metrics"] == reference["metrics"]
    assert [w for w in result["warnings"] if "out of memory" in w] == [
        "out of memory at batch size 16; continued with batch size 8",
        "out of memory at batch size 8; continued with batch size 4",
        "out of memory at batch size 4; continued with batch size 2"]


def test_constructor_errors(dataset):
    with pytest.raises(InputError, match="unknown filter set"):
        evaluated(dataset, _scorer(dataset), filter_sets=("train", "test2"))
    with pytest.raises(InputError, match="hits@k needs positive integers"):
        evaluated(dataset, _scorer(dataset), hits_at=(0,))
    with pytest.raises(InputError, match="unknown evaluation split"):
        evaluated(dataset, _scorer(dataset), evaluation_split="dev")
    with pytest.raises(InputError, match="batch size must be positive"):
        evaluated(dataset, _scorer(dataset), batch_size=-1)


def test_result_record_shape(dataset):
    result = evaluated(dataset, _scorer(dataset), seed=3, hits_at=(1, 5))
    json.dumps(result, allow_nan=False)
    assert list(result) == ["written_by", "schema_version", "task", "metrics", "per_relation", "macro_relation",
                            "by_degree", "by_node_type", "protocol", "dataset", "model", "diagnostics", "seed", "device", "version", "timing",
                            "warnings"]
    assert result["schema_version"] == 1 and result["written_by"] == "openbench" and set(result["timing"]) == {"seconds", "exact_ranks", "stages"}
    stages = result["timing"]["stages"]  # wall seconds of the stages the run went through
    assert {"filter_index", "evaluation"} <= set(stages) <= {"load_dataset", "filter_index", "evaluation"}
    assert all(seconds >= 0 for seconds in stages.values())
    from openbench.record import validate_record

    validate_record(result)  # the evaluators' records pass the leaderboard's own checks
    for side in ("both", "head", "tail"):
        block = result["metrics"][side]
        adjusted = {"amr", "amri", "amrr", "ahits@1", "ahits@5", "zmr", "zmrr", "zhits@1", "zhits@5"}
        assert set(block["realistic"]) == set(block["optimistic"]) == set(block["pessimistic"]) == \
            {"mrr", "mr", "hits@1", "hits@5"} | adjusted
        assert set(block["expected"]) == {"mrr", "hits@1", "hits@5"}
    protocol = result["protocol"]
    assert protocol["headline_rank_type"] == "realistic" and protocol["candidates"] == "all"
    assert protocol["sides"] == ["head", "tail"] and protocol["hits_at"] == [1, 5]
    assert protocol["dropped_queries"] == 0 and result["seed"] == 3
    assert set(result["dataset"]) == {"path", "fingerprint", "id_map_sha256", "counts", "registry"}
    assert result["dataset"]["registry"] is None  # not a registry copy
    assert set(result["model"]) == {"name", "kind", "params", "source_sha256"}
    labels_with_queries = {dataset.relation_labels[r] for r in dataset.triples["test"][:, 1].tolist()}
    assert set(result["per_relation"]) == labels_with_queries


def test_model_and_dataset_sizes_must_agree(dataset):
    other = build_scorer("DistMult", np.zeros((5, 3)), np.zeros((dataset.num_relations, 3)), 5,
                         dataset.num_relations)
    with pytest.raises(InputError, match="expected 30 rows, one per entity of the dataset's entity map, found 5"):
        evaluated(dataset, other)


def test_device_names(dataset):
    from openbench.evaluation.counting.device import resolve_device

    assert resolve_device("cpu").type == "cpu" and resolve_device("auto").type in ("cpu", "cuda")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="CUDA is not available here"):
            resolve_device("cuda:0")
    with pytest.raises(InputError, match="unknown device 'gpu'"):
        resolve_device("gpu")


@pytest.mark.parametrize("sides", [("head", "tail"), ("tail",), ("head",)])
@pytest.mark.parametrize("scope", ["relations", "entities", "both"])
@pytest.mark.parametrize("name", ["DistMult", "TransE-L1"])
def test_scoped_evaluation_matches_a_hand_filtered_reference(dataset, sides, scope, name):
    """Chosen relations, one side, an entity subset: equal to the plain loop that filters the test
    triples and candidates by hand; an unevaluated side is null and ``both`` is the other alone."""
    scorer = _scorer(dataset, name, seed=2)
    relation_ids = [0, 2] if scope in ("relations", "both") else None
    entity_ids = list(range(0, dataset.num_entities, 3)) + list(range(1, 12)) if scope in ("entities", "both") \
        else None
    options = dict(relations=[dataset.relation_labels[i] for i in relation_ids] if relation_ids else None,
                   entities=[dataset.entity_labels[i] for i in entity_ids] if entity_ids else None,
                   sides=sides)
    result = evaluated(dataset, scorer, **options, batch_size=5)
    reference = _slow_metrics(dataset, scorer, ("train", "valid", "test"), relations=relation_ids,
                              entities=entity_ids, sides=sides)
    _assert_metrics_equal(result, reference)
    for side in ("head", "tail"):
        assert (result["metrics"][side] is None) == (side not in sides)
    if len(sides) == 1:
        assert result["metrics"]["both"] == result["metrics"][sides[0]]
    protocol = result["protocol"]
    assert protocol["sides"] == list(sides)
    if relation_ids:
        assert protocol["relations"] == [dataset.relation_labels[i] for i in relation_ids]
        assert set(result["per_relation"]) <= set(protocol["relations"])
    if entity_ids:
        kept = sum(1 for h, r, t in dataset.triples["test"].tolist() if relation_ids is None or r in relation_ids)
        queries = result["diagnostics"]["queries"] // len(sides)
        assert protocol["entities"]["count"] == len(set(entity_ids))
        assert protocol["entities"]["dropped_triples"] == kept - queries > 0
    from openbench.record import validate_record

    validate_record(result)


def test_bad_scopes_are_one_line_errors(dataset):
    from openbench.errors import InputError

    scorer = _scorer(dataset)
    with pytest.raises(InputError, match=r"unknown relation\(s\) NOPE; the dataset has REL_A"):
        evaluated(dataset, scorer, relations=["REL_A", "NOPE"])
    with pytest.raises(InputError, match=r"1 entity label\(s\) not in the dataset \(first: X:1\)"):
        evaluated(dataset, scorer, entities=["X:1"])
    with pytest.raises(InputError, match="sides"):
        evaluated(dataset, scorer, sides=["middle"])
    with pytest.raises(InputError, match="the entity list is empty"):
        evaluated(dataset, scorer, entities=[])
    far = [dataset.entity_labels[0]]  # one entity: no test triple has both answers among it
    with pytest.raises(InputError, match="no evaluation triple lies in the chosen scope"):
        evaluated(dataset, scorer, entities=far)
