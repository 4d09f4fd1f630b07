"""Bootstrap intervals (issue 39, 3): the record's confidence block against a plain loop over the
documented resamples, its seed, and the record checks that guard it."""
import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.record import RecordError, validate_record
from tests.helpers import integer_embeddings, random_labelled_graph, sampled_protocol, write_samples

HITS = (1, 3, 10)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(51, 80, 4, {"train": 320, "valid": 12, "test": 45})
    return load_dataset(write_samples(tmp_path_factory.mktemp("confidence"), splits))


def _model(dataset):
    return openbench.embedding_model("DistMult", integer_embeddings(3, dataset.num_entities, 3, -1, 2),
                                     integer_embeddings(4, dataset.num_relations, 3, -1, 2))


def _loop_intervals(ranks, resamples, seed):
    """The documented bootstrap by loops: triples drawn with replacement in sorted order, each with
    all its queries; the macro average over the relations drawn."""
    rows = ranks.to_dicts()
    key = [(row["split"], row["relation"], row["head"], row["tail"]) for row in rows]
    units = sorted(set(key))
    members = {unit: [i for i, k in enumerate(key) if k == unit] for unit in units}

    def value(row, name):
        if row["rank"] is None:
            return 0.0
        return 1 / row["rank"] if name == "mrr" else float(row["rank"] <= int(name[5:]))

    names = ["mrr"] + [f"hits@{k}" for k in HITS]
    rng = np.random.default_rng(seed)
    samples = {side: {name: [] for name in names} for side in ("both", "head", "tail", "macro_relation")}
    for _ in range(resamples):
        drawn = [i for u in rng.integers(0, len(units), size=len(units), dtype=np.int32) for i in members[units[u]]]
        for name in names:
            for side in ("both", "head", "tail"):
                picked = [rows[i] for i in drawn if side == "both" or rows[i]["side"] == side]
                samples[side][name].append(sum(value(row, name) for row in picked) / len(picked))
            per_relation = {}
            for i in drawn:
                per_relation.setdefault(rows[i]["relation"], []).append(value(rows[i], name))
            samples["macro_relation"][name].append(np.mean([np.mean(v) for v in per_relation.values()]))
    return {side: {name: list(np.quantile(values, [0.025, 0.975])) for name, values in by_name.items()}
            for side, by_name in samples.items()}


@pytest.mark.parametrize("protocol", ["full", "sampled"])
def test_the_intervals_are_the_documented_bootstrap(dataset, protocol):
    options = sampled_protocol(dataset, 15, 8) if protocol == "sampled" else {}
    record = openbench.evaluate(dataset, _model(dataset), bootstrap=150, seed=11, **options)
    block = record.confidence
    assert block["resamples"] == 150 and block["seed"] == 11 and block["level"] == 0.95
    reference = _loop_intervals(record.ranks, 150, 11)
    for side in ("both", "head", "tail", "macro_relation"):
        for name, interval in reference[side].items():
            assert block[side][name] == pytest.approx(interval, abs=1e-12), (side, name)
    written = record.to_dict()
    validate_record(written)
    assert list(written).index("confidence") == list(written).index("macro_relation") + 1
    point = written["metrics"]["both"]["realistic"]["mrr"]
    assert block["both"]["mrr"][0] <= point <= block["both"]["mrr"][1]
    assert openbench.ResultRecord.from_dict(written).to_dict() == written


def test_one_side_only_has_no_interval_for_the_other(dataset):
    record = openbench.evaluate(dataset, _model(dataset), bootstrap=50, sides=["tail"])
    assert record.confidence["head"] is None and record.confidence["tail"] == record.confidence["both"]
    validate_record(record.to_dict())


def test_the_command_records_seeded_intervals(dataset, tmp_path):
    model = _model(dataset)
    np.save(tmp_path / "e.npy", model.entities.numpy())
    np.save(tmp_path / "r.npy", model.relations.numpy())
    records = []
    for seed, name in ((0, "a"), (0, "b"), (5, "c")):
        out = tmp_path / f"{name}.json"
        done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--entity-embeddings",
                                         str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
                                         "--model", "DistMult", "--bootstrap", "300", "--seed", str(seed),
                                         "--output", str(out), "--no-progress"])
        assert done.exit_code == 0, done.output
        records.append(json.loads(out.read_text()))
    assert records[0]["confidence"] == records[1]["confidence"]  # the same seed, the same intervals
    assert records[0]["confidence"] != records[2]["confidence"] and records[2]["confidence"]["seed"] == 5
    plain = openbench.evaluate(dataset, model).to_dict()
    assert "confidence" not in plain  # asked for only
    refused = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--entity-embeddings",
                                        str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
                                        "--model", "DistMult", "--bootstrap", "0", "--no-progress"])
    assert refused.exit_code == 2 and "--bootstrap" in refused.output


@pytest.mark.parametrize("change, reason", [
    (lambda block: block["both"].update(mrr=[0.5, 0.4]), "expected 0 <= low <= high <= 1"),
    (lambda block: block["head"].update({"hits@10": [0.2, 1.2]}), "expected 0 <= low <= high <= 1"),
    (lambda block: block["tail"].update(mrr=[-0.1, 0.2]), "expected 0 <= low <= high <= 1"),
    (lambda block: block["macro_relation"].pop("hits@3"), "expected intervals of mrr, hits@1, hits@3, hits@10"),
    (lambda block: block["both"].update(mrr=[0.1]), r"expected \[low, high\]"),
    (lambda block: block["both"].update(mrr=[None, 0.3]), "is null"),
    (lambda block: block["both"].update(mrr=[float("nan"), 0.3]), "finite number"),
    (lambda block: block.update(resamples=0), "expected a positive integer"),
    (lambda block: block.update(seed="x"), "expected an integer or null"),
])
def test_a_broken_confidence_block_is_refused(dataset, change, reason):
    record = openbench.evaluate(dataset, _model(dataset), bootstrap=40).to_dict()
    broken = copy.deepcopy(record)
    change(broken["confidence"])
    with pytest.raises(RecordError, match=reason):
        validate_record(broken)


def test_the_macro_interval_leaves_out_a_relation_a_resample_did_not_draw(tmp_path):
    """Issue 56: relations of 60 … 1 test triples; a resample that draws no triple of a rare
    relation averages over the relations it drew (counting the missing one as 0 moved the interval
    down: [0.127, 0.192] instead of [0.136, 0.206] on a case like this)."""
    import random

    rng = random.Random(8)
    entities = [f"NCBIGENE:{i}" for i in range(60)]
    sizes = {"REL_A": 60, "REL_B": 20, "REL_C": 5, "REL_D": 2, "REL_E": 1, "REL_F": 1}
    train = [(e, relation, entities[(i * 7 + 1) % 60]) for relation in sizes for i, e in enumerate(entities)]
    train += [(rng.choice(entities), rng.choice(list(sizes)), rng.choice(entities)) for _ in range(300)]
    seen = set(train)
    test = []
    for relation, size in sizes.items():
        while sum(1 for _, r, _ in test if r == relation) < size:
            triple = (rng.choice(entities), relation, rng.choice(entities))
            if triple not in seen:
                seen.add(triple)
                test.append(triple)
    data = load_dataset(write_samples(tmp_path / "unequal", {"train": train, "valid": [], "test": test},
                                      negatives=False))
    record = openbench.evaluate(data, _model(data), bootstrap=200, seed=4)
    reference = _loop_intervals(record.ranks, 200, 4)
    for name, interval in reference["macro_relation"].items():
        assert record.confidence["macro_relation"][name] == pytest.approx(interval, abs=1e-12), name
    # the case the property is about: most resamples miss one of the single-triple relations
    draws = np.random.default_rng(4).integers(0, len(test), size=(200, len(test)), dtype=np.int32)
    rare = {i for i, (_, r, _) in enumerate(sorted(test, key=lambda t: (t[1], t[0], t[2]))) if r in ("REL_E", "REL_F")}
    assert sum(not rare <= set(row.tolist()) for row in draws) > 100
