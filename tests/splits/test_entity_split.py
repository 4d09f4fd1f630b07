"""The entity-held-out split (issue 51): on the sample graph and on a synthetic graph of 50,000+
edges with planted duplicate and inverse relations, an independent reference written here with
sets checks that no held-out entity occurs in a training edge of a held-out relation, that every
such edge went to test or validation, and that no held-out pair is restated in training (reverse,
inverse- or duplicate-relation copy, super-property). Then the selections, the files, the loader,
the door's refusal of transductive models on a cold split, the baselines and the audit."""
import hashlib
import json
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.errors import InputError, UsageError
from splits.entity_split import Selection, entity_split, hierarchy_subtree
from tests.bases import sample_graph
from tests.splits.reference import check_entity_invariants, heldout_roles as _heldout


# -- the sample graph ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("entity")
    positives, true_negatives, nodes = sample_graph(root / "graph")
    return root, positives, true_negatives, nodes


def _graph_rows(positives):
    return [tuple(row) for row in positives.select(pl.col("id1").cast(pl.String), "relation",
                                                   pl.col("id2").cast(pl.String)).rows()]


@pytest.mark.parametrize("relations", [["DIS_DRUG", "GENE_DIS"], None])
def test_the_sample_graph_split_holds_every_invariant(sample, tmp_path, relations):
    root, positives, true_negatives, nodes = sample
    info = entity_split(positives, true_negatives, nodes, tmp_path / "split",
                        selection=Selection(node_type="DIS", fraction=0.3), relations=relations, val_fraction=0.25,
                        seed=5)
    rows = _graph_rows(positives)
    roles, train, val, test = check_entity_invariants(tmp_path / "split", rows, relations)
    types = dict(nodes.select(pl.col("id").cast(pl.String), "node_type").iter_rows())
    pool = {n for a, r, b in rows if relations is None or r in relations for n in (a, b) if types[n] == "DIS"}
    assert len(roles["test"]) == info["heldout"]["test"] == max(1, round(0.3 * len(pool)))
    assert len(roles["valid"]) == max(1, round(0.25 * (len(pool) - len(roles["test"]))))
    assert info["kind"] == "entity" and info["split"]["test"]["positives"] == len(test) > 0
    listing = (tmp_path / "split" / "heldout_entities.tsv").read_bytes()
    assert info["heldout"]["sha256"] == hashlib.sha256(listing).hexdigest()
    assert {types[entity] for entity in roles["test"] | roles["valid"]} == {"DIS"}
    if relations is not None:  # the held-out diseases keep their other edges in training
        kept = {n for a, r, b in train for n in (a, b)}
        assert roles["test"] & kept


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_entities(sample, tmp_path):
    _, positives, true_negatives, nodes = sample
    options = dict(selection=Selection(node_type="DIS", fraction=0.4), relations=["DIS_DRUG", "GENE_DIS"])
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        entity_split(positives, true_negatives, nodes, tmp_path / name, seed=seed, **options)
    files = sorted(path.name for path in (tmp_path / "a").iterdir())
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    assert _heldout(tmp_path / "a") != _heldout(tmp_path / "c")


def test_a_subtree_is_the_roots_and_everything_below_them(sample, tmp_path):
    _, positives, true_negatives, nodes = sample
    rows = _graph_rows(positives)
    children = defaultdict(set)
    for a, r, b in rows:
        if r == "IS_A":
            children[b].add(a)  # (child, IS_A, parent)

    def below(root):  # an independent depth-first walk
        found, stack = {root}, [root]
        while stack:
            for child in children[stack.pop()]:
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    assert hierarchy_subtree(positives, ["DOID:0000003"], "IS_A", "child-parent") == sorted(below("DOID:0000003"))
    info = entity_split(positives, true_negatives, nodes, tmp_path / "split", relations=["DIS_DRUG", "GENE_DIS"],
                        selection=Selection(roots=["DOID:0000003"], hierarchy_relation="IS_A"))
    roles, *_ = check_entity_invariants(tmp_path / "split", rows, ["DIS_DRUG", "GENE_DIS"])
    assert roles["test"] == below("DOID:0000003") and info["parameters"]["selection"]["by"] == "subtree"
    parents = defaultdict(set)
    for a, r, b in rows:
        if r == "IS_A":
            parents[a].add(b)
    above, stack = {"DOID:0000011"}, ["DOID:0000011"]  # read the other way round, the walk goes up
    while stack:
        for parent in parents[stack.pop()]:
            if parent not in above:
                above.add(parent)
                stack.append(parent)
    assert hierarchy_subtree(positives, ["DOID:0000011"], "IS_A", "parent-child") == sorted(above)
    assert len(above) > 2


def test_isolate_and_neighbourhood_remove_what_they_say_and_count_it(sample, tmp_path):
    _, positives, true_negatives, nodes = sample
    rows = _graph_rows(positives)
    relations = ["DIS_DRUG", "GENE_DIS"]
    info = entity_split(positives, true_negatives, nodes, tmp_path / "iso", relations=relations, isolate=True,
                        selection=Selection(node_type="DIS", fraction=0.3), seed=3)
    roles, train, _, _ = check_entity_invariants(tmp_path / "iso", rows, relations)
    assert not {n for a, _, b in train for n in (a, b)} & roles["test"]
    others = [(a, r, b) for a, r, b in rows if r not in relations and {a, b} & roles["test"]]
    assert info["removed"]["isolated_edges"] == len(others) > 0
    padded = entity_split(positives, true_negatives, nodes, tmp_path / "pad", relations=relations, neighbourhood=1,
                          selection=Selection(node_type="DIS", fraction=0.3), seed=3)
    roles, train, _, _ = check_entity_invariants(tmp_path / "pad", rows, relations)
    near = {b if a in roles["test"] else a for a, r, b in rows if {a, b} & roles["test"]} - roles["test"]
    near_held = [(a, r, b) for a, r, b in rows if r in relations and {a, b} & near and not {a, b} & roles["test"]]
    assert padded["removed"]["neighbourhood_edges"] == len(near_held)
    assert not [(a, r, b) for a, r, b in train if r in relations and {a, b} & near]


@pytest.mark.parametrize("options, message", [
    (dict(selection=Selection(node_type="DIS", fraction=0.3), relations=["NOPE"]), "unknown relation"),
    (dict(selection=Selection(entities=["DOID:nope"])), "not in the graph's nodes"),
    (dict(selection=Selection(node_type="DIS", fraction=0.99)), "takes all"),
    (dict(selection=Selection(node_type="DIS", fraction=0.3), val_entities=["DOID:0000001", "DOID:0000002",
                                                                           "DOID:0000003", "DOID:0000004",
                                                                           "DOID:0000005", "DOID:0000006",
                                                                           "DOID:0000007", "DOID:0000008"]),
     "both test and validation"),
    (dict(selection=Selection(node_type="DIS", fraction=0.3), neighbourhood=-1), "--neighbourhood")])
def test_mistakes_are_one_line_errors_and_nothing_is_written(sample, tmp_path, options, message):
    _, positives, true_negatives, nodes = sample
    with pytest.raises(InputError, match=message):
        entity_split(positives, true_negatives, nodes, tmp_path / "split", **options)
    assert not (tmp_path / "split").exists()


@pytest.mark.parametrize("kwargs, message", [({}, "choose the held-out entities one way"),
                                             ({"node_type": "DIS"}, "--fraction"),
                                             ({"node_type": "DIS", "fraction": 0.2, "entities": ["x"]}, "one way"),
                                             ({"roots": ["x"]}, "--hierarchy-relation"),
                                             ({"roots": ["x"], "hierarchy_relation": "IS_A",
                                               "hierarchy_direction": "up"}, "--hierarchy-direction")])
def test_a_selection_is_one_of_three_ways(kwargs, message):
    with pytest.raises(InputError, match=message):
        Selection(**kwargs)


# -- a synthetic graph of 50,000+ edges with planted relation patterns ----------------------------

@pytest.fixture(scope="module")
def synthetic():
    """Genes, diseases, drugs and phenotypes; TREATS between drugs and diseases, its inverse
    TREATED_BY for 90 % of its pairs and a duplicate CURES for 85 %: the copies the split must keep
    out of training."""
    rng = np.random.default_rng(51)
    genes, diseases, drugs, phenotypes = ([f"{kind}:{i}" for i in range(n)] for kind, n in
                                          (("G", 3000), ("D", 900), ("C", 700), ("P", 900)))
    rows = set()

    def add(relation, left, right, count):
        heads = rng.choice(len(left), count)
        tails = rng.choice(len(right), count)
        for h, t in zip(heads.tolist(), tails.tolist()):
            if left[h] != right[t]:
                rows.add((left[h], relation, right[t]))

    add("GENE_GENE", genes, genes, 24000)
    add("GENE_DIS", genes, diseases, 9000)
    add("DIS_PHENOTYPE", diseases, phenotypes, 7000)
    add("TREATS", drugs, diseases, 6000)
    treats = sorted(row for row in rows if row[1] == "TREATS")
    for index, (c, _, d) in enumerate(treats):
        if index % 10:
            rows.add((d, "TREATED_BY", c))
        if index % 20 > 2:
            rows.add((c, "CURES", d))
    ordered = sorted(rows)
    positives = pl.DataFrame({"id1": [a for a, _, _ in ordered], "relation": [r for _, r, _ in ordered],
                              "id2": [b for _, _, b in ordered], "qscore": [""] * len(ordered),
                              "value": ["1"] * len(ordered), "source": ["synthetic"] * len(ordered)})
    empty = positives.head(0)
    kinds = {"G": "GENE", "D": "DIS", "C": "DRUG", "P": "PHENOTYPE"}
    ids = genes + diseases + drugs + phenotypes
    nodes = pl.DataFrame({"id": ids, "node_type": [kinds[i.split(":")[0]] for i in ids]})
    assert len(ordered) >= 50_000
    return ordered, positives, empty, nodes


@pytest.mark.parametrize("relations", [["TREATS"], None])
def test_a_large_graph_split_holds_every_invariant_and_removes_the_planted_copies(synthetic, tmp_path, relations):
    rows, positives, empty, nodes = synthetic
    info = entity_split(positives, empty, nodes, tmp_path / "split", relations=relations, val_fraction=0.1,
                        selection=Selection(node_type="DIS", fraction=0.1), seed=9, neg_ratio=0.5)
    check_entity_invariants(tmp_path / "split", rows, relations)
    if relations is not None:  # TREATED_BY and CURES copies of held-out pairs were in the way
        assert info["removed"]["inverse_relation_copies"] > 0 and info["removed"]["duplicate_relation_copies"] > 0
    report = openbench.audit(tmp_path / "split")
    assert report["split"]["kind"] == "entity" and report["split"]["count"] == 0


def test_a_pattern_only_training_shows_still_removes_its_copies(tmp_path):
    """CURES restates 70 of TREATS' 100 pairs (70 % either way: no pattern in the graph). Holding out
    25 diseases takes 25 TREATS edges, 10 of them restated, leaving 60 of 75 in training: 80 %, a
    duplicate pattern there. Its 10 CURES copies of held-out pairs must leave training."""
    rows = {(f"C:{i}", "TREATS", f"D:{i}") for i in range(100)}
    rows |= {(f"C:{i}", "CURES", f"D:{i}") for i in range(15, 85)}
    rows |= {(f"C:{i}", "CURES", f"D:{(i + 50) % 100}") for i in range(30)}
    ordered = sorted(rows)
    positives = pl.DataFrame({"id1": [a for a, _, _ in ordered], "relation": [r for _, r, _ in ordered],
                              "id2": [b for _, _, b in ordered], "qscore": [""] * len(ordered),
                              "value": ["1"] * len(ordered), "source": ["hand"] * len(ordered)})
    ids = [f"C:{i}" for i in range(100)] + [f"D:{i}" for i in range(100)]
    nodes = pl.DataFrame({"id": ids, "node_type": ["DRUG"] * 100 + ["DIS"] * 100})
    held = [f"D:{i}" for i in range(25)]
    info = entity_split(positives, positives.head(0), nodes, tmp_path / "split", relations=["TREATS"],
                        selection=Selection(entities=held), seed=3, neg_train_val=False, neg_test=False)
    assert info["removed"]["duplicate_relation_copies"] == 10
    roles, train, _, test = check_entity_invariants(tmp_path / "split", ordered, ["TREATS"])
    assert roles["test"] == set(held) and len(test) == 25
    assert not {(a, b) for a, r, b in train if r == "CURES"} & {(a, b) for a, _, b in test}


# -- loading, evaluating, auditing -------------------------------------------------------------------

@pytest.fixture(scope="module")
def splits_on_disk(sample, tmp_path_factory):
    root, positives, true_negatives, nodes = sample
    out = tmp_path_factory.mktemp("entity-splits")
    entity_split(positives, true_negatives, nodes, out / "warm", relations=["DIS_DRUG", "GENE_DIS"],
                 selection=Selection(node_type="DIS", fraction=0.3), seed=1)
    entity_split(positives, true_negatives, nodes, out / "cold", selection=Selection(node_type="DRUG", fraction=0.2),
                 seed=1)
    return out


def test_a_cold_split_maps_every_entity_and_refuses_a_transductive_model_with_the_count(splits_on_disk):
    dataset = openbench.load_dataset(splits_on_disk / "cold")
    held = _heldout(splits_on_disk / "cold")["test"]
    assert held <= set(dataset.entity_labels)
    assert dataset.unseen_entities() == len(held) > 0
    model = openbench.embedding_model("DistMult", np.ones((dataset.num_entities, 2), np.float32),
                                      np.ones((dataset.num_relations, 2), np.float32))
    with pytest.raises(UsageError, match=f"{len(held)} entities of the test triples occur in no training triple"):
        openbench.evaluate(dataset, model)
    for baseline in (openbench.popularity_model(dataset), openbench.neighbour_model(dataset),
                     openbench.rules_model(dataset)):
        record = openbench.evaluate(dataset, baseline)
        split = record.to_dict()["protocol"]["split"]
        assert split["kind"] == "entity" and split["relations"] is None and split["heldout_entities"]["test"] == len(held)


def test_a_warm_split_evaluates_any_model_and_records_the_question(splits_on_disk):
    dataset = openbench.load_dataset(splits_on_disk / "warm")
    assert dataset.unseen_entities() == 0
    model = openbench.embedding_model("DistMult", np.ones((dataset.num_entities, 2), np.float32),
                                      np.ones((dataset.num_relations, 2), np.float32))
    record = openbench.evaluate(dataset, model).to_dict()
    assert record["protocol"]["split"]["relations"] == ["DIS_DRUG", "GENE_DIS"]
    from openbench.record import validate_record

    validate_record(record)


def test_a_changed_heldout_file_is_refused(splits_on_disk, tmp_path):
    import shutil

    shutil.copytree(splits_on_disk / "warm", tmp_path / "warm")
    (tmp_path / "warm" / "heldout_entities.tsv").write_text("DOID:0000001\ttest\n")
    with pytest.raises(InputError, match="held-out entities changed since the split was written"):
        openbench.load_dataset(tmp_path / "warm")


def test_the_structure_baseline_equals_its_definition(splits_on_disk):
    """Each candidate's score: the number of the anchor's training neighbours it answers under
    the query's relation, plus its popularity over one more than the batch's largest."""
    import torch

    dataset = openbench.load_dataset(splits_on_disk / "warm")
    train = dataset.triples["train"].tolist()
    neighbours = defaultdict(set)
    for h, _, t in train:
        if h != t:
            neighbours[h].add(t)
            neighbours[t].add(h)
    model = openbench.neighbour_model(dataset)
    batch = dataset.triples["test"][:6]
    for side in ("head", "tail"):
        rows = model.score_rows(batch, side).numpy()
        popularity = openbench.popularity_model(dataset).score_rows(batch, side).numpy()
        for i, (h, r, t) in enumerate(batch.tolist()):
            anchor = h if side == "tail" else t
            for e in range(dataset.num_entities):
                answered = {x for x in neighbours[anchor]
                            if ([x, r, e] in train if side == "tail" else [e, r, x] in train)}
                assert rows[i, e] == pytest.approx(len(answered) + popularity[i, e] / (popularity.max() + 1),
                                                   abs=1e-12)
    assert torch.is_tensor(model.score_rows(batch, "tail"))


def test_the_audit_reports_what_breaks_an_entity_split(splits_on_disk, tmp_path):
    import shutil

    report = openbench.audit(splits_on_disk / "warm")
    assert report["split"]["count"] == 0 and report["split"]["heldout_in_training"] == 0
    broken = tmp_path / "broken"
    shutil.copytree(splits_on_disk / "warm", broken)
    test_rows = (broken / "test_sample.csv").read_text().splitlines()
    a, r, b, *rest = test_rows[0].split("\t")
    with open(broken / "train_sample.csv", "a") as handle:  # a held-out edge in training, and its reverse
        handle.write("\t".join([a, r, b, *rest]) + "\n" + "\t".join([b, r, a, *rest]) + "\n")
    report = openbench.audit(broken)
    assert report["split"]["heldout_in_training"] == 2
    assert report["split"]["heldout_pairs_in_training"]["reverse_duplicate"] >= 1
    text = CliRunner().invoke(main, ["audit", str(broken)]).output
    assert "held-out entities in training under those relations 2" in text


def test_the_command_line_splits_and_prints_what_it_held_out(sample, tmp_path):
    root = sample[0]
    files = root / "graph" / "graph_files"
    (tmp_path / "held.txt").write_text("DOID:0000001\nDOID:0000007\n")
    done = CliRunner().invoke(main, ["split", "entity", "--edges", str(files / "edges.csv"), "--tn-edges",
                                     str(files / "TN_edges.csv"), "--nodes", str(files / "ALL_nodes.csv"),
                                     "--entities", str(tmp_path / "held.txt"), "--relations", "DIS_DRUG,GENE_DIS",
                                     "--output", str(tmp_path / "split")])
    assert done.exit_code == 0, done.output
    assert "2 test and 0 validation entities held out" in done.output
    assert _heldout(tmp_path / "split")["test"] == {"DOID:0000001", "DOID:0000007"}
    info = json.loads((tmp_path / "split" / "split_info.json").read_text())
    assert info["parameters"]["selection"] == {"by": "entities", "given": 2}
    done = CliRunner().invoke(main, ["split", "entity", "--edges", str(files / "edges.csv"), "--tn-edges",
                                     str(files / "TN_edges.csv"), "--nodes", str(files / "ALL_nodes.csv"),
                                     "--output", str(tmp_path / "none")])
    assert done.exit_code == 1 and "choose the held-out entities one way" in done.output
