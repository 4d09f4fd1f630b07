"""The result record's schema and consistency rules (openbench.record), which the leaderboard
applies: every rule over every side and rank type (expected included), several hits@k sets,
keys in any order, and each impossible record refused with its reason."""
import copy
import itertools
import random

import pytest

from openbench.datasets.loader import load_dataset
from openbench.models.scorers import build_scorer
from openbench.record import RANK_TYPES, SIDES, RecordError, validate_record
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples
from tests.bases import evaluated

K_SETS = [(1, 3, 10), (10, 1, 5), (2, 7)]
ALL_RANK_TYPES = RANK_TYPES + ("expected",)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = write_samples(tmp_path_factory.mktemp("data"),
                           random_labelled_graph(4, 40, 3, {"train": 200, "valid": 10, "test": 30}))
    dataset = load_dataset(folder)
    scorer = build_scorer("DistMult", integer_embeddings(3, dataset.num_entities, 4, low=-2, high=3),
                          integer_embeddings(4, dataset.num_relations, 4, low=-2, high=3), dataset.num_entities,
                          dataset.num_relations)
    return {ks: evaluated(dataset, scorer, hits_at=ks)
            for ks in K_SETS}


def _shuffled(block: dict, seed: int) -> dict:
    items = list(block.items())
    random.Random(seed).shuffle(items)
    return dict(items)


def test_the_evaluators_records_pass(records):
    for record in records.values():
        validate_record(record)


@pytest.mark.parametrize("ks", K_SETS)
@pytest.mark.parametrize("side,rank_type", list(itertools.product(SIDES, ALL_RANK_TYPES)))
def test_hits_at_k_may_not_fall_in_any_block_with_keys_in_any_order(records, ks, side, rank_type):
    record = copy.deepcopy(records[ks])
    block = record["metrics"][side][rank_type]
    ordered = sorted(ks)
    low, high = f"hits@{ordered[0]}", f"hits@{ordered[-1]}"
    block[low], block[high] = 0.9, 0.1  # a larger k with fewer hits
    for seed in range(3):
        record["metrics"][side][rank_type] = _shuffled(block, seed)
        with pytest.raises(RecordError, match="cannot fall as k grows|impossible|ties can only|outside"):
            validate_record(record)


@pytest.mark.parametrize("side", SIDES)
def test_rank_types_keep_their_order_on_every_side(records, side):
    record = copy.deepcopy(records[(1, 3, 10)])
    block = record["metrics"][side]
    assert block["optimistic"] != block["pessimistic"]  # the embeddings make ties
    block["optimistic"], block["pessimistic"] = block["pessimistic"], block["optimistic"]  # each block consistent
    with pytest.raises(RecordError, match="ties can only move a rank"):
        validate_record(record)
    record = copy.deepcopy(records[(1, 3, 10)])
    record["metrics"][side]["expected"]["hits@10"] = 1.0  # above the optimistic value
    if record["metrics"][side]["optimistic"]["hits@10"] < 1.0:
        with pytest.raises(RecordError, match="expected.hits@10"):
            validate_record(record)


def _set(path, value):
    def change(record):
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _first_relation(record):
    return next(iter(record["per_relation"]))


IMPOSSIBLE = [
    ("no realistic block", lambda r: r["metrics"]["both"].pop("realistic"), "metrics.both.realistic is missing"),
    ("MRR 0.99 with hits@1 0", lambda r: (_set(("metrics", "both", "realistic", "mrr"), 0.99)(r),
                                          _set(("metrics", "both", "realistic", "hits@1"), 0.0)(r)),
     "impossible with hits@1"),
    ("optimistic below pessimistic", lambda r: r["metrics"]["head"].update(
        optimistic=r["metrics"]["head"]["pessimistic"], pessimistic=r["metrics"]["head"]["optimistic"]),
     "ties can only move"),
    ("MR 1e9 with a small graph", _set(("metrics", "both", "realistic", "mr"), 1e9), "cannot exceed the"),
    ("hits_at [1, 5] while the metrics hold 1, 3, 10", _set(("protocol", "hits_at"), [1, 5]),
     "but protocol.hits_at is"),
    ("filter_sets junk", _set(("protocol", "filter_sets"), ["junk"]), "protocol.filter_sets"),
    ("seed 'abc'", _set(("seed",), "abc"), "seed = 'abc'"),
    ("a per-relation MRR of 7", lambda r: _set(("per_relation", _first_relation(r), "both", "realistic", "mrr"),
                                               7)(r), r"outside \[0, 1\]"),
    ("MRR and MR that no ranks give", lambda r: _set(("metrics", "tail", "optimistic", "mr"),
                                                     0.5 / r["metrics"]["tail"]["optimistic"]["mrr"])(r),
     "the mean of 1/rank is at least 1/mean rank"),
    ("NaN", _set(("metrics", "both", "realistic", "mrr"), float("nan")), "finite number"),
    ("an AMRI above 1", _set(("metrics", "both", "realistic", "amri"), 1.01), r"outside \[-1, 1\]"),
    ("an AMRI below -1", _set(("metrics", "tail", "pessimistic", "amri"), -1.01), r"outside \[-1, 1\]"),
    ("an AMR of 2.5", _set(("metrics", "both", "realistic", "amr"), 2.5), r"outside \(0, 2\]"),
    ("an AMR of 0", _set(("metrics", "head", "optimistic", "amr"), 0.0), r"outside \(0, 2\]"),
    ("an adjusted MRR above 1", _set(("metrics", "both", "realistic", "amrr"), 1.2), "above 1"),
    ("an adjusted hits@10 above 1", _set(("metrics", "tail", "realistic", "ahits@10"), 1.01), "above 1"),
    ("a z-score that is not finite", _set(("metrics", "both", "realistic", "zmrr"), float("inf")), "finite number"),
    ("an unknown rank type", _set(("metrics", "both", "lucky"), {"mrr": 1.0}), "expected a rank type"),
    ("a newer schema", _set(("schema_version",), 99), "schema_version 99"),
    ("a fingerprint that is no sha256", _set(("dataset", "fingerprint"), "=HYPERLINK(\"http://x\")"),
     "expected a sha256, 64 lowercase hex digits"),
    ("an upper-case fingerprint", lambda r: _set(("dataset", "fingerprint"), r["dataset"]["fingerprint"].upper())(r),
     "64 lowercase hex digits"),
    ("a registry that is a string", _set(("dataset", "registry"), "HQ_DIR"), "dataset.registry must be null or"),
    ("a path that is a list", _set(("dataset", "path"), ["x"]), "dataset.path must be a string"),
    ("relations that are no labels", _set(("protocol", "relations"), "REL_A"), "protocol.relations must be a list"),
    ("an entity scope without a count", _set(("protocol", "entities"), {"sha256": "x"}), "protocol.entities must be"),
    ("a per-relation side missing outside a hosted protocol",
     lambda r: _set(("per_relation", _first_relation(r), "head"), None)(r), ".head must be an object"),
]


@pytest.mark.parametrize("name,change,reason", IMPOSSIBLE, ids=[case[0] for case in IMPOSSIBLE])
def test_impossible_records_are_refused_with_the_reason(records, name, change, reason):
    record = copy.deepcopy(records[(1, 3, 10)])
    change(record)
    with pytest.raises(RecordError, match=reason):
        validate_record(record)


def test_a_hosted_protocol_may_leave_a_side_of_a_relation_empty(records):
    """A hosted benchmark serves each test triple on one side: a relation without head queries has
    a null head block there; anything present is still checked."""
    record = copy.deepcopy(next(iter(records.values())))
    relation = _first_relation(record)
    record["per_relation"][relation]["head"] = None
    record["protocol"]["served_sides"] = ["head", "tail"]
    validate_record(record)
    record["per_relation"][relation]["tail"]["realistic"]["mrr"] = 7.0
    with pytest.raises(RecordError, match="outside"):
        validate_record(record)


# ------------------------------------------------------------------------------------------
# issue 43: each inequality of the rank order refused on its own, at every place it applies

def _block_of(ranks, template: dict) -> dict:
    """A metric block computed from ``ranks`` (so consistent within itself), keys of ``template``."""
    values = [float(rank) for rank in ranks]
    block = {}
    for name, value in template.items():
        if name == "mrr":
            block[name] = sum(1 / rank for rank in values) / len(values)
        elif name == "mr":
            block[name] = sum(values) / len(values)
        elif name.startswith("hits@"):
            k = int(name[5:])
            block[name] = sum(rank <= k for rank in values) / len(values)
        elif name in ("amr", "amrr", "zmrr"):  # affine in MR or MRR, as with 20 candidates per query
            mean_rank, reciprocal = sum(values) / len(values), sum(1 / rank for rank in values) / len(values)
            block[name] = {"amr": mean_rank / 10.5, "amrr": (reciprocal - 0.18) / 0.82,
                           "zmrr": (reciprocal - 0.18) / 0.05}[name]
        else:  # the others: not part of the order this test breaks
            block[name] = value
    return block


BASE_RANKS = [1, 2, 3, 3, 6, 12]


def _shifted(by: int):
    return [rank + by for rank in BASE_RANKS]


# (optimistic, realistic, pessimistic, expected) ranks, each a valid block, their order broken once;
# every metric differs between the shifts (hits@3: 4/6, 2/6, 1/6 for shifts 0, 1, 2)
ORDER_BREAKS = {
    "realistic better than optimistic": (_shifted(1), _shifted(0), _shifted(2), None),
    "realistic worse than pessimistic": (_shifted(0), _shifted(2), _shifted(1), None),
    "expected better than optimistic": (_shifted(1), None, _shifted(2), _shifted(0)),
    "expected worse than pessimistic": (_shifted(0), None, _shifted(1), _shifted(2)),
}


def _places(record):
    relation = _first_relation(record)
    return ([("metrics", side) for side in ("both", "head", "tail")]
            + [("per_relation", relation, side) for side in ("both", "head", "tail")]
            + [("macro_relation", side) for side in ("both", "head", "tail")]
            + [("by_degree", next(iter(record["by_degree"])), "both"), ("by_node_type", "GENE", "both")])


def _only(record: dict, metric: str) -> dict:
    """``record`` with every metric block reduced to ``metric`` (protocol.hits_at to match), so a
    broken inequality shows in that metric alone."""
    record = copy.deepcopy(record)
    # hits@100 is 1 for every rank the test makes: it takes part in no inequality
    record["protocol"]["hits_at"] = [int(metric[5:])] if metric.startswith("hits@") else [100]
    blocks = [record["metrics"], record["macro_relation"], *record["per_relation"].values(),
              *(record.get("by_degree") or {}).values(), *(record.get("by_node_type") or {}).values()]
    for sides in blocks:
        for block in sides.values():
            if block is None:  # a stratum without queries of that side
                continue
            for rank_type in list(block):
                kept = {name: value for name, value in block[rank_type].items() if name == metric}
                if not metric.startswith("hits@"):
                    kept["hits@100"] = 1.0
                block[rank_type] = kept
    return record


# the expected block's MR is the realistic one: the record bounds only its other metrics
ORDER_CASES = [(case, metric) for case in ORDER_BREAKS for metric in ("mrr", "mr", "hits@3", "amr", "amrr", "zmrr")
               if not (case.startswith("expected") and metric not in ("mrr", "hits@3"))]


@pytest.mark.parametrize("case,metric", ORDER_CASES)
def test_every_rank_order_inequality_is_refused_on_its_own_everywhere(records, case, metric):
    """Property: a side block whose rank types, each consistent within itself, break one
    inequality of optimistic >= realistic >= pessimistic (MR: <=), or put expected outside
    [pessimistic, optimistic], is refused, for each metric alone (so each half of each inequality
    is needed), on every side, in the per-relation and in the macro blocks."""
    optimistic, realistic, pessimistic, expected = ORDER_BREAKS[case]
    broken_type = "realistic" if case.startswith("realistic") else "expected"
    template = _only(records[(1, 3, 10)], metric)
    validate_record(template)
    for place in _places(template):
        record = copy.deepcopy(template)
        target = record
        for key in place:
            target = target[key]
        between = optimistic  # inside [optimistic, pessimistic]
        for rank_type, ranks in (("optimistic", optimistic), ("realistic", between), ("pessimistic", pessimistic),
                                 ("expected", between)):
            target[rank_type] = _block_of(ranks, target[rank_type])
        validate_record(record)  # the order intact: accepted
        target[broken_type] = _block_of(realistic if broken_type == "realistic" else expected, target[broken_type])
        reason = "ties can only move a rank" if broken_type == "realistic" else r"expected\.\w+.* lies outside"
        with pytest.raises(RecordError, match=f"{'.'.join(place)}.*{reason}"):
            validate_record(record)
