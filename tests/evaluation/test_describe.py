"""The sentences that say what a table holds (issue 54): every protocol a record can carry is
named, the sampled protocol is never shown without its warning, and the readings fire exactly at
their thresholds."""
import pytest

from openbench.evaluation.statistics.describe import (CHANCE_AMRI, SAMPLED_WARNING, classification_readings,
                                                      protocol_line, ranking_readings, record_protocol_line)

FULL = {"evaluation_split": "test", "filter_sets": ["train", "valid", "test"], "candidates": "all",
        "sides": ["head", "tail"], "headline_rank_type": "realistic"}


def test_full_filtered_ranking_names_split_queries_rank_and_candidates():
    line = protocol_line(FULL, entities=132, queries=94)
    assert line.startswith("test set; 94 queries (head and tail); realistic rank")
    assert "full ranking against all 132 entities, filtered (the other known answers in train, valid, test removed)" \
        in line and SAMPLED_WARNING not in line


def test_raw_one_sided_scoped_and_validation_protocols_say_so():
    line = protocol_line(dict(FULL, filter_sets=[], sides=["tail"], relations=["DIS_DRUG"], evaluation_split="valid"),
                         entities=10, queries=3, rank_type="pessimistic")
    assert line.startswith("valid set; 3 queries (tail only); relations DIS_DRUG only; pessimistic rank")
    assert "unfiltered (raw" in line
    assert "against 5 chosen entities" in protocol_line(dict(FULL, entities={"count": 5}), entities=10)
    assert "a type each relation admits" in protocol_line(dict(FULL, candidates="typed"))


def test_sampled_protocol_always_carries_its_warning():
    sampled = dict(FULL, filter_sets=[], candidates="sampled", negatives_per_query={"head": 20, "tail": 20})
    line = protocol_line(sampled, entities=132, queries=94)
    assert "sampled protocol: each query against its own 20 head / 20 tail negatives, unfiltered" in line
    assert line.endswith(f"({SAMPLED_WARNING})") and "full ranking" not in line.replace(SAMPLED_WARNING, "")


def test_held_out_and_inductive_splits_are_named():
    entity = dict(FULL, split={"kind": "entity", "heldout_entities": {"count": 3, "test": 3}})
    assert "entity-held-out split (3 test entities held out of training under every relation (fully cold))" in \
        protocol_line(entity)
    chosen = dict(FULL, split={"kind": "entity", "heldout_entities": {"count": 3, "test": 3},
                               "relations": ["DIS_DRUG", "GENE_DIS"]})
    # issue 66: "unseen in training" is the audit's word for an entity in no training triple; a
    # held-out entity may still be in training under other relations
    assert "(3 test entities held out of training under DIS_DRUG, GENE_DIS)" in protocol_line(chosen)
    assert "unseen" not in protocol_line(chosen)
    inductive = dict(FULL, split={"kind": "inductive", "inference_graph": {"entities": 40}})
    line = protocol_line(inductive, entities=200)
    assert "inductive split" in line and "against the 40 inference-graph entities" in line and "200" not in line
    # as the door writes it: the inference graph's entities are also the record's entity scope
    as_recorded = dict(inductive, entities={"count": 40, "dropped_triples": 0, "of": "the inference graph"})
    line = protocol_line(as_recorded, entities=200)
    assert "against the 40 inference-graph entities" in line and "chosen" not in line


def test_a_record_gives_its_own_counts():
    record = {"protocol": FULL, "dataset": {"counts": {"entities": 7}}, "diagnostics": {"queries": 4}}
    assert record_protocol_line(record) == protocol_line(FULL, 7, 4)


@pytest.mark.parametrize("amri, expected", [(CHANCE_AMRI + 1e-9, None), (CHANCE_AMRI, "near"), (0.0, "near"),
                                            (-CHANCE_AMRI, "near"), (-CHANCE_AMRI - 1e-9, "below")])
def test_chance_reading_fires_at_its_threshold(amri, expected):
    lines = ranking_readings("M", {"mrr": 0.5, "amri": amri})
    if expected is None:
        assert lines == []
    else:
        assert len(lines) == 1 and f"is {expected} chance" in lines[0]


def test_below_the_baseline_is_said_and_equal_is_not():
    assert ranking_readings("M", {"mrr": 0.1, "amri": 0.5}, {"mrr": 0.1}) == []
    line, = ranking_readings("TransE", {"mrr": 0.0999, "amri": 0.5}, {"mrr": 0.1})
    assert "below the popularity baseline's 0.100" in line


@pytest.mark.parametrize("auroc, expected", [(0.39, "below chance"), (0.4499, "below chance"), (0.45, "near chance"),
                                             (0.55, "near chance"), (0.5501, None), (None, None)])
def test_classification_chance(auroc, expected):
    lines = classification_readings("M", auroc)
    assert (lines == []) if expected is None else (expected in lines[0])
