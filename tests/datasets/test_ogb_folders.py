"""OGB dataset folders (ogbl-biokg and ogbl-wikikg2 layouts): loaded safely, evaluated under the
sampled protocol with OGB's own numbers, and under the full protocol on the same folder."""
import gzip
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from tests.helpers import needs_module

# biokg-like: per-type ids; num-node-dict.csv.gz lists the types in this (unsorted) order
TYPES = {"protein": 12, "disease": 7, "drug": 9}
SIGNATURES = [("protein", "drug"), ("drug", "disease"), ("protein", "protein")]
K = 10


def _write_biokg(folder, seed, node_dict=True):
    rng = np.random.default_rng(seed)
    splits = {}
    for split, size in (("train", 150), ("valid", 15), ("test", 20)):
        relation = rng.integers(0, len(SIGNATURES), size)
        head_type = [SIGNATURES[r][0] for r in relation]
        tail_type = [SIGNATURES[r][1] for r in relation]
        data = {"head": np.array([rng.integers(0, TYPES[t]) for t in head_type]), "relation": relation,
                "tail": np.array([rng.integers(0, TYPES[t]) for t in tail_type]),
                "head_type": head_type, "tail_type": tail_type}
        if split != "train":
            data["head_neg"] = np.stack([rng.integers(0, TYPES[t], K) for t in head_type])
            data["tail_neg"] = np.stack([rng.integers(0, TYPES[t], K) for t in tail_type])
        splits[split] = data
    _save(folder, splits)
    if node_dict:
        (folder / "raw").mkdir(parents=True, exist_ok=True)
        text = ",".join(TYPES) + "\n" + ",".join(str(n) for n in TYPES.values()) + "\n"
        (folder / "raw" / "num-node-dict.csv.gz").write_bytes(gzip.compress(text.encode()))
    return splits


def _write_wikikg2(folder, seed, entities=40):
    rng = np.random.default_rng(seed)
    splits = {}
    for split, size in (("train", 200), ("valid", 15), ("test", 25)):
        data = {"head": rng.integers(0, entities, size), "relation": rng.integers(0, 4, size),
                "tail": rng.integers(0, entities, size)}
        if split != "train":
            data["head_neg"] = rng.integers(0, entities, (size, K))
            data["tail_neg"] = rng.integers(0, entities, (size, K))
        splits[split] = data
    data = splits["train"]
    data["head"][:entities] = np.arange(entities)  # every entity appears
    _save(folder, splits)
    return splits


def _save(folder, splits):
    (folder / "split" / "random").mkdir(parents=True, exist_ok=True)
    for split, data in splits.items():
        torch.save(data, folder / "split" / "random" / f"{split}.pt")


def _global(splits, split, key, typed):
    """Global ids as OGB's KGE example computes them: type offsets in num_nodes_dict order, which
    ogb/io/read_graph_raw.py builds from the *sorted* type names (not the CSV's column order)."""
    values = np.asarray(splits[split][key])
    if not typed or key == "relation":
        return values
    offsets, first = {}, 0
    for name, count in sorted(TYPES.items()):
        offsets[name] = first
        first += count
    side = "head" if key.startswith("head") else "tail"
    shift = np.array([offsets[t] for t in splits[split][f"{side}_type"]])
    return values + (shift[:, None] if values.ndim == 2 else shift)


def _ogb_metrics(splits, entities, relations, typed, benchmark):
    """OGB's Evaluator on DistMult scores of each test query's true answer and its negatives."""
    ogb = needs_module("ogb.linkproppred")
    e, r = entities.astype(np.float64), relations.astype(np.float64)
    h, rel, t = (_global(splits, "test", key, typed) for key in ("head", "relation", "tail"))
    lists = {}
    for side in ("head", "tail"):
        negatives = _global(splits, "test", f"{side}_neg", typed)
        positive = (e[h] * r[rel] * e[t]).sum(axis=1)
        if side == "head":
            negative = (e[negatives] * (r[rel] * e[t])[:, None, :]).sum(axis=2)
        else:
            negative = (e[negatives] * (e[h] * r[rel])[:, None, :]).sum(axis=2)
        lists[side] = ogb.Evaluator(benchmark).eval({"y_pred_pos": torch.from_numpy(positive),
                                                      "y_pred_neg": torch.from_numpy(negative)})
    return {name: float(torch.cat([lists["head"][name], lists["tail"][name]]).mean())
            for name in ("mrr_list", "hits@1_list", "hits@3_list", "hits@10_list")}


def _evaluate(tmp_path, folder, entities, relations, *extra):
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", relations)
    out = tmp_path / f"result{len(list(tmp_path.glob('result*.json')))}.json"
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "DistMult",
                                       "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                       str(tmp_path / "r.npy"), "--no-progress", "--output", str(out), *extra])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


@pytest.mark.parametrize("layout", ["ogbl-biokg", "ogbl-wikikg2"])
@pytest.mark.parametrize("integer", [False, True])
def test_sampled_protocol_equals_ogbs_evaluator(tmp_path, layout, integer):
    folder = tmp_path / layout
    typed = layout == "ogbl-biokg"
    splits = _write_biokg(folder, 1) if typed else _write_wikikg2(folder, 1)
    dataset = load_dataset(folder)
    rng = np.random.default_rng(2)
    if integer:  # exact arithmetic and many ties
        entities = rng.integers(-1, 2, (dataset.num_entities, 3)).astype(np.float32)
        relations = rng.integers(-1, 2, (dataset.num_relations, 3)).astype(np.float32)
    else:
        entities = rng.normal(size=(dataset.num_entities, 6)).astype(np.float32)
        relations = rng.normal(size=(dataset.num_relations, 6)).astype(np.float32)
    record = _evaluate(tmp_path, folder, entities, relations)  # sampled is the default for OGB folders
    assert record["protocol"]["candidates"] == "sampled" and record["protocol"]["filter_sets"] == []
    assert record["dataset"]["counts"]["entities"] == (sum(TYPES.values()) if typed else 40)
    expected = _ogb_metrics(splits, entities, relations, typed, layout)
    realistic = record["metrics"]["both"]["realistic"]
    assert realistic["mrr"] == pytest.approx(expected["mrr_list"], abs=1e-6)
    for k in (1, 3, 10):
        assert realistic[f"hits@{k}"] == pytest.approx(expected[f"hits@{k}_list"], abs=1e-6)
    full = _evaluate(tmp_path, folder, entities, relations, "--protocol", "full")
    assert full["protocol"]["candidates"] == "all" and full["protocol"]["filter_sets"] == ["train", "valid", "test"]
    assert full["dataset"]["fingerprint"] == record["dataset"]["fingerprint"]


def test_biokg_ids_follow_ogbs_type_order_and_offsets_can_be_given(tmp_path):
    folder = tmp_path / "biokg"
    splits = _write_biokg(folder, 4)
    dataset = load_dataset(folder)
    assert list(TYPES) != sorted(TYPES)  # the CSV's columns are unsorted: the orders differ
    # OGB's order: disease (7), drug (9), protein (12), whatever num-node-dict.csv.gz's columns say
    assert dataset.entity_labels[0] == "disease:0" and dataset.entity_labels[7] == "drug:0"
    assert dataset.entity_labels[16] == "protein:0" and len(dataset.entity_labels) == 28
    assert dataset.triples["test"][:, 0].tolist() == _global(splits, "test", "head", True).tolist()
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"protein": 0, "disease": 12, "drug": 19}))  # the column order, on request
    moved = load_dataset(folder, entity_offsets=offsets)
    assert moved.entity_labels[0] == "protein:0" and moved.entity_labels[12] == "disease:0"
    offsets.write_text(json.dumps({"disease": 0, "drug": 7}))
    with pytest.raises(InputError, match="no offset for node type.*protein"):
        load_dataset(folder, entity_offsets=offsets)


def test_without_a_node_count_file_types_are_sorted_and_it_is_said(tmp_path):
    folder = tmp_path / "biokg"
    _write_biokg(folder, 4, node_dict=False)
    dataset = load_dataset(folder)
    assert dataset.entity_labels[0].startswith("disease:") and any("num-node-dict" in w for w in dataset.warnings)


def test_folder_problems_are_named(tmp_path):
    folder = tmp_path / "wiki"
    splits = _write_wikikg2(folder, 3)
    (folder / "split" / "time").mkdir()
    torch.save(splits["train"], folder / "split" / "time" / "train.pt")
    with pytest.raises(InputError, match="several split types \\(random, time\\)"):
        load_dataset(folder)
    with pytest.raises(InputError, match="no test.pt"):
        load_dataset(folder, ogb_split="time")
    bad = dict(splits["test"], head_neg=np.zeros((3, K), dtype=np.int64))
    torch.save(bad, folder / "split" / "random" / "test.pt")
    with pytest.raises(InputError, match="head_neg.*one row per triple"):
        load_dataset(folder, ogb_split="random")
    with pytest.raises(InputError, match="apply to OGB dataset folders"):
        load_dataset(tmp_path, ogb_split="random")


def test_sampled_scoring_never_builds_full_rows(tmp_path, monkeypatch):
    """Under the sampled protocol only each query's candidates are scored: score_chunk (which
    builds (batch × entities) blocks) is never called."""
    from openbench.models import scorers

    folder = tmp_path / "wiki"
    _write_wikikg2(folder, 5)
    dataset = load_dataset(folder)
    rng = np.random.default_rng(0)

    def forbidden(*args, **kwargs):
        raise AssertionError("a full score block was built under the sampled protocol")

    monkeypatch.setattr(scorers.EmbeddingScorer, "score_chunk", forbidden)
    record = _evaluate(tmp_path, folder, rng.normal(size=(dataset.num_entities, 4)).astype(np.float32),
                       rng.normal(size=(dataset.num_relations, 4)).astype(np.float32))
    assert record["protocol"]["negatives_per_query"]["tail"] == K


def test_offset_and_protocol_mistakes_are_refused(tmp_path):
    from openbench.errors import UsageError
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.lists import TopKLists
    from openbench.models.popularity import popularity_model

    folder = tmp_path / "wiki"
    _write_wikikg2(folder, 6)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"entity": 0}))
    with pytest.raises(InputError, match="applies to datasets with per-type ids"):
        load_dataset(folder, entity_offsets=offsets)
    biokg = tmp_path / "biokg"
    _write_biokg(biokg, 6)
    offsets.write_text(json.dumps({"protein": -3, "disease": 0, "drug": 12}))
    with pytest.raises(InputError, match=r'expected a JSON object \{"node type": offset\}'):
        load_dataset(biokg, entity_offsets=offsets)
    dataset = load_dataset(folder)
    lists = TopKLists({})
    with pytest.raises(UsageError, match="top-k prediction files rank what they list: the sampled protocol"):
        evaluate(dataset, lists, device="cpu")  # an OGB folder: sampled unless told
    with pytest.raises(UsageError, match="runs on one process"):
        evaluate(dataset, popularity_model(dataset), device="cpu", shard="queries")
    full = evaluate(dataset, lists, device="cpu", protocol="full")  # told: every answer unlisted, ranked as such
    assert full.to_dict()["protocol"]["candidates"] == "listed (top-k)" and full.metric("both.realistic.mrr") == 0


def test_a_repeated_test_triple_counts_once_under_the_full_protocol(tmp_path):
    """OGB's test.pt may repeat a triple: the full protocol ranks it once (with a warning), as a
    split folder does; the sampled protocol keeps every row (each has its own negatives)."""
    splits = _write_wikikg2(tmp_path / "wikikg2", 3)
    test = splits["test"]
    for key in ("head", "relation", "tail", "head_neg", "tail_neg"):
        test[key] = np.concatenate([test[key], test[key][:2]])  # the first two triples again
    _save(tmp_path / "wikikg2", splits)
    rng = np.random.default_rng(0)
    entities, relations = rng.normal(size=(40, 6)).astype(np.float32), rng.normal(size=(4, 6)).astype(np.float32)
    full = _evaluate(tmp_path, tmp_path / "wikikg2", entities, relations, "--protocol", "full")
    distinct = len({(h, r, t) for h, r, t in zip(test["head"].tolist(), test["relation"].tolist(),
                                                 test["tail"].tolist())})
    assert full["diagnostics"]["queries"] == 2 * distinct
    assert any("removed 2 repeated test triple(s)" in warning for warning in full["warnings"])
    sampled = _evaluate(tmp_path, tmp_path / "wikikg2", entities, relations)
    assert sampled["diagnostics"]["queries"] == 2 * len(test["head"])
