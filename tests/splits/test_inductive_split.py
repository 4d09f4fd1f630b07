"""The inductive split (issue 52), ILPC 2022's layout: on the sample graph and a synthetic graph of
50,000+ edges an independent reference written here with sets checks that the training and
inference graphs share no entity, that every validation and test triple lies in the inference
graph's entities and training's relations, and that PyKEEN's inductive dataset reads the folder
without dropping a triple. Then the regions, the files, the loader, the door (candidates, filters,
refusals), the baselines, the audit and PyKEEN's InductiveNodePiece against its own evaluator."""
import json
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
import torch
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.errors import InputError, UsageError
from splits.inductive_split import FILES, grow_regions, inductive_split
from tests.bases import sample_graph
from tests.helpers import needs_module


def _triples(path):
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


def _ends(rows):
    return {a for a, _, _ in rows} | {b for _, _, b in rows}


def check_inductive_invariants(folder, graph_rows, directed=True):
    """An inductive split's properties from their definitions, with sets, from its four files and
    the graph's positives (id1, relation, id2). Returns the sets by name."""
    sets = {name: _triples(folder / file) for name, file in FILES.items()}
    graph = set(graph_rows)
    seen = set()
    for name, rows in sets.items():
        assert len(set(rows)) == len(rows), name  # no repeated line
        assert set(rows) <= graph, name  # every triple is an edge of the graph
        assert not set(rows) & seen, name  # in one file only
        seen |= set(rows)
    train_entities = _ends(sets["train"])
    inference_entities = _ends(sets["inference"])
    assert not train_entities & (inference_entities | _ends(sets["valid"]) | _ends(sets["test"]))
    for name in ("valid", "test"):
        assert _ends(sets[name]) <= inference_entities, name
    trained_relations = {r for _, r, _ in sets["train"]}
    for name in ("inference", "valid", "test"):
        assert {r for _, r, _ in sets[name]} <= trained_relations, name
    # nothing of the training graph was lost: every edge between two of its entities is in it
    assert {row for row in graph if row[0] in train_entities and row[2] in train_entities} == set(sets["train"])
    if directed:
        inference = set(sets["inference"])
        for name in ("valid", "test"):
            assert not {(b, r, a) for a, r, b in sets[name]} & inference, name
    return sets


def _pykeen_reads_every_triple(folder, sets):
    needs_module("pykeen")
    from pykeen.datasets.inductive.base import DisjointInductivePathDataset

    dataset = DisjointInductivePathDataset(
        transductive_training_path=folder / FILES["train"], inductive_inference_path=folder / FILES["inference"],
        inductive_testing_path=folder / FILES["test"], inductive_validation_path=folder / FILES["valid"], eager=True)
    counts = {"train": dataset.transductive_training.num_triples, "inference": dataset.inductive_inference.num_triples,
              "valid": dataset.inductive_validation.num_triples, "test": dataset.inductive_testing.num_triples}
    assert counts == {name: len(rows) for name, rows in sets.items()}


def _graph_rows(positives):
    return [tuple(row) for row in positives.select(pl.col("id1").cast(pl.String), "relation",
                                                   pl.col("id2").cast(pl.String)).rows()]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("inductive")
    positives, _, _ = sample_graph(root / "graph")
    return root, positives


@pytest.fixture(scope="module")
def sample_split(sample):
    root, positives = sample
    info = inductive_split(positives, root / "split", inference_fraction=0.4, test_fraction=0.2, seed=3)
    return root / "split", info


def test_the_sample_graph_split_holds_every_invariant_and_pykeen_reads_it(sample, sample_split):
    _, positives = sample
    folder, info = sample_split
    sets = check_inductive_invariants(folder, _graph_rows(positives))
    assert all(sets[name] for name in sets)
    _pykeen_reads_every_triple(folder, sets)
    graph = set(_graph_rows(positives))
    region = _ends(sets["inference"]) | _ends(sets["valid"]) | _ends(sets["test"])
    crossing = {(a, r, b) for a, r, b in graph if (a in region) != (b in region)}
    assert info["removed"]["crossing_edges"] >= len(crossing)  # region entities left without an edge count too
    assert info["entities"]["shared"] == 0 and info["kind"] == "inductive"
    recorded = json.loads((folder / "split_info.json").read_text())
    for name, file in FILES.items():
        import hashlib
        assert recorded["files"][name]["sha256"] == hashlib.sha256((folder / file).read_bytes()).hexdigest()


def test_the_same_seed_writes_the_same_bytes_and_another_seed_another_split(sample, tmp_path):
    _, positives = sample
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        inductive_split(positives, tmp_path / name, seed=seed)
    read = {name: {file: (tmp_path / name / file).read_bytes() for file in [*FILES.values(), "split_info.json"]}
            for name in "abc"}
    assert read["a"] == read["b"] and read["a"] != read["c"]


# -- a synthetic graph of 50,000+ edges ----------------------------------------------------------

@pytest.fixture(scope="module")
def synthetic():
    """Clustered: 40 communities of 200 entities, most edges inside a community, under 5
    relations, one of them the inverse of another for most pairs."""
    rng = np.random.default_rng(52)
    rows = set()
    relations = ["BINDS", "REGULATES", "PART_OF", "TREATS"]
    for _ in range(62_000):
        community = int(rng.integers(40))
        a = community * 200 + int(rng.integers(200))
        b = (community * 200 + int(rng.integers(200))) if rng.random() < 0.95 else int(rng.integers(8000))
        if a != b:
            rows.add((f"E:{a}", relations[int(rng.integers(4))], f"E:{b}"))
    for a, r, b in sorted(rows):
        if r == "TREATS" and rng.random() < 0.9:
            rows.add((b, "TREATED_BY", a))
    ordered = sorted(rows)
    assert len(ordered) >= 50_000
    positives = pl.DataFrame({"id1": [a for a, _, _ in ordered], "relation": [r for _, r, _ in ordered],
                              "id2": [b for _, _, b in ordered], "qscore": [""] * len(ordered),
                              "value": ["1"] * len(ordered), "source": ["synthetic"] * len(ordered)})
    return ordered, positives


def test_a_large_graph_split_holds_every_invariant(synthetic, tmp_path):
    rows, positives = synthetic
    info = inductive_split(positives, tmp_path / "split", inference_fraction=0.2, seed=11)
    sets = check_inductive_invariants(tmp_path / "split", rows)
    assert len(sets["test"]) > 500 and info["removed"]["test_cleaning"]["relation_patterns"] > 0
    # the planted inverse: no test triple's TREATED_BY/TREATS partner stays in the inference graph
    inference = set(sets["inference"])
    partner = {"TREATS": "TREATED_BY", "TREATED_BY": "TREATS"}
    assert not {(b, partner[r], a) for a, r, b in sets["test"] if r in partner} & inference
    assert openbench.audit(tmp_path / "split")["split"]["count"] == 0


def _connected(chosen: set, edges) -> bool:
    links = defaultdict(set)
    for a, b in edges:
        if a in chosen and b in chosen:
            links[a].add(b)
            links[b].add(a)
    start = next(iter(chosen))
    seen, frontier = {start}, [start]
    while frontier:
        frontier = [n for node in frontier for n in links[node] if n not in seen]
        seen.update(frontier)
    return seen == chosen


@pytest.mark.parametrize("seed", range(8))
def test_regions_are_connected_and_of_the_asked_size(seed):
    """On a connected graph the chosen entities are one connected region of exactly the target
    size; on a graph of components, regions fill components before a new one starts."""
    rng = np.random.default_rng(seed)
    n = 60
    path = [(i, i + 1) for i in range(n - 1)]
    extra = [tuple(int(x) for x in rng.integers(n, size=2)) for _ in range(40)]
    edges = path + extra
    heads, tails = np.array([a for a, _ in edges]), np.array([b for _, b in edges])
    for target in (1, 7, 30, 59):
        chosen = grow_regions(heads, tails, n, target, np.random.default_rng(seed))
        members = set(np.flatnonzero(chosen).tolist())
        assert len(members) == target and _connected(members, edges)
    # two components of 10: a target of 15 takes one whole component and 5 of the other
    edges = [(i, i + 1) for i in range(9)] + [(i, i + 1) for i in range(10, 19)]
    heads, tails = np.array([a for a, _ in edges]), np.array([b for _, b in edges])
    chosen = set(np.flatnonzero(grow_regions(heads, tails, 20, 15, np.random.default_rng(seed))).tolist())
    assert len(chosen) == 15 and (set(range(10)) <= chosen or set(range(10, 20)) <= chosen)


def test_inference_relations_training_lacks_are_dropped_and_counted(monkeypatch, tmp_path):
    """Two rings of 12 entities, the second (the inference region, chosen by a stubbed region
    grower) with 12 edges of a relation the first lacks: they leave the inference graph, counted,
    and every file keeps training's relations."""
    import splits.inductive_split as module

    rows = [(f"A:{i}", "LINKS", f"A:{(i + 1) % 12}") for i in range(12)]
    rows += [(f"B:{i}", "LINKS", f"B:{(i + 1) % 12}") for i in range(12)]
    rows += [(f"B:{i}", "ONLY_THERE", f"B:{(i + 5) % 12}") for i in range(12)]
    frame = pl.DataFrame({"id1": [a for a, _, _ in rows], "relation": [r for _, r, _ in rows],
                          "id2": [b for _, _, b in rows], "qscore": [""] * 36, "value": ["1"] * 36,
                          "source": [""] * 36})
    monkeypatch.setattr(module, "grow_regions", lambda heads, tails, n, target, rng: np.arange(n) >= 12)  # B:*
    info = inductive_split(frame, tmp_path / "split", inference_fraction=0.5, val_fraction=0.0, test_fraction=0.25,
                           seed=1)
    assert info["removed"]["relations_unseen_in_training"] == 12 and info["removed"]["crossing_edges"] == 0
    sets = check_inductive_invariants(tmp_path / "split", rows)
    assert all(r == "LINKS" for name in ("inference", "test") for _, r, _ in sets[name])


# -- loading and evaluating --------------------------------------------------------------------

def test_the_door_ranks_inference_entities_filtered_by_ilpc_sets(sample_split):
    """A scorer that ranks entities by id, against a brute-force reference: candidates are the
    inference graph's entities, the filter the inference, validation and test triples."""
    folder, _ = sample_split
    dataset = openbench.load_dataset(folder)
    sets = {name: _triples(folder / file) for name, file in FILES.items()}
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    inference = sorted(_ends(sets["inference"]))
    assert dataset.inductive and sorted(dataset.entity_labels[i] for i in dataset.inference_entities()) == inference
    weights = torch.randn(dataset.num_entities, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = openbench.score_function(lambda batch, side: weights.expand(batch.shape[0], -1).clone(),
                                     dataset.num_entities, name="fixed")
    record = openbench.evaluate(dataset, model).to_dict()
    known = set(sets["inference"]) | set(sets["valid"]) | set(sets["test"])
    reciprocal = []
    for a, r, b in sets["test"]:
        for side in ("head", "tail"):
            answer = a if side == "head" else b
            others = [e for e in inference if e != answer and
                      ((e, r, b) if side == "head" else (a, r, e)) not in known]
            rank = 1 + sum(weights[index[e]] > weights[index[answer]] for e in others)
            reciprocal.append(1.0 / float(rank))
    assert record["metrics"]["both"]["realistic"]["mrr"] == pytest.approx(np.mean(reciprocal), abs=1e-12)
    protocol = record["protocol"]
    assert protocol["filter_sets"] == ["valid", "test", "inference"]
    assert protocol["entities"]["count"] == len(inference) and protocol["entities"]["of"] == "the inference graph"
    assert protocol["split"]["kind"] == "inductive"
    assert protocol["split"]["inference_graph"] == {"entities": len(inference), "triples": len(sets["inference"])}


def test_a_transductive_model_is_refused_and_the_baselines_read_the_inference_graph(sample_split):
    folder, _ = sample_split
    dataset = openbench.load_dataset(folder)
    ones = np.ones((dataset.num_entities, 2), np.float32)
    model = openbench.embedding_model("DistMult", ones, np.ones((dataset.num_relations, 2), np.float32))
    unseen = len(_ends(_triples(folder / FILES["test"])))
    with pytest.raises(UsageError, match=f"{unseen} entities of the test triples occur in no training triple"):
        openbench.evaluate(dataset, model)
    with pytest.raises(UsageError, match="ILPC.s protocol.*sampled.* does not apply"):
        openbench.evaluate(dataset, openbench.popularity_model(dataset), protocol="sampled")
    popularity = openbench.popularity_model(dataset)
    degree = torch.zeros(dataset.num_entities)
    graph = dataset.triples["inference"]
    relation = int(graph[0, 1])
    chosen = graph[graph[:, 1] == relation]
    degree.index_add_(0, chosen[:, 2], torch.ones(chosen.shape[0]))
    row = popularity.score_rows(graph[:1], "tail")[0]
    assert torch.equal(row.float(), degree)  # tail popularity of the relation within the inference graph
    for baseline in (popularity, openbench.neighbour_model(dataset), openbench.rules_model(dataset)):
        assert openbench.evaluate(dataset, baseline).to_dict()["protocol"]["split"]["kind"] == "inductive"


def test_a_foreign_ilpc_folder_with_a_test_entity_outside_the_inference_graph_is_refused(sample_split, tmp_path):
    folder, _ = sample_split
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in FILES.values():
        (broken / file).write_bytes((folder / file).read_bytes())
    train_entity = _triples(folder / FILES["train"])[0][0]
    with open(broken / FILES["test"], "a", encoding="utf-8") as handle:
        a, r, _ = _triples(folder / FILES["test"])[0]
        handle.write(f"{a}\t{r}\t{train_entity}\n")
    with pytest.raises(InputError, match="1 test triple.* an entity the inference graph lacks") as error:
        openbench.load_dataset(broken)
    assert str(error.value.path).endswith(FILES["test"])
    report = openbench.audit(broken)["split"]
    assert report["shared_entities"] == 1 and report["evaluation_outside_inference"]["test"] == 1
    assert report["count"] == 2
    (broken / FILES["valid"]).write_text("", encoding="utf-8")
    (broken / FILES["inference"]).unlink()
    with pytest.raises(InputError):
        openbench.load_dataset(broken)


def test_the_audit_of_an_inductive_split_is_clean(sample_split):
    folder, _ = sample_split
    report = openbench.audit(folder)
    section = report["split"]
    assert section["kind"] == "inductive" and section["count"] == 0 and section["shared_entities"] == 0
    assert section["relations_unseen_in_training"] == [] and report["trivially_inferable"]["test"]["count"] == 0


# -- the command line ------------------------------------------------------------------------------

def test_the_command_line_splits_and_refuses_what_it_cannot(sample, tmp_path):
    root, _ = sample
    edges = root / "graph" / "graph_files" / "edges.csv"
    runner = CliRunner()
    done = runner.invoke(main, ["split", "inductive", "--edges", str(edges), "--output", str(tmp_path / "out"),
                                "--seed", "2"])
    assert done.exit_code == 0, done.output
    assert "inference graph" in done.output and (tmp_path / "out" / FILES["inference"]).is_file()
    for options, message in ((["--test-fraction", "0.6", "--val-fraction", "0.5"], "together below 1"),
                             (["--output", str(edges.parent)], "")):
        failed = runner.invoke(main, ["split", "inductive", "--edges", str(edges), *options])
        assert failed.exit_code != 0 and message in failed.output
    assert edges.is_file()
    both = runner.invoke(main, ["split", "inductive", "--edges", str(edges), "--dataset", "primekg"])
    assert both.exit_code != 0 and "one of them" in both.output


# -- PyKEEN's InductiveNodePiece against its own evaluator ------------------------------------------

def test_inductive_nodepiece_matches_pykeens_testing_evaluator(sample, sample_split, tmp_path):
    """Trained for a few epochs on the sample's inductive split, InductiveNodePiece's realistic MRR
    and hits@1/3/10 from openbench equal PyKEEN's ``RankBasedEvaluator(mode="testing")`` with
    ILPC's filters (inference and validation; test is the evaluated set): PyKEEN's reported values
    to its float32 reduction (1e-6), and the metrics of PyKEEN's own per-query ranks, reduced in
    float64, to 1e-9 — from memory and from the saved folder."""
    needs_module("pykeen")
    from pykeen.datasets.inductive.base import DisjointInductivePathDataset
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.models.inductive import InductiveNodePiece
    from pykeen.training import SLCWATrainingLoop
    from pykeen.utils import set_random_seed

    from openbench.models.pykeen_inductive import inductive_folder, save_inductive

    folder, _ = sample_split
    set_random_seed(0)
    data = DisjointInductivePathDataset(
        transductive_training_path=folder / FILES["train"], inductive_inference_path=folder / FILES["inference"],
        inductive_testing_path=folder / FILES["test"], inductive_validation_path=folder / FILES["valid"],
        create_inverse_triples=True, eager=True)
    model = InductiveNodePiece(triples_factory=data.transductive_training, inference_factory=data.inductive_inference,
                               embedding_dim=16, num_tokens=3, aggregation="mlp", random_seed=0)
    loop = SLCWATrainingLoop(triples_factory=data.transductive_training, model=model, mode="training",
                             optimizer=torch.optim.Adam(model.parameters(), lr=0.01))
    loop.train(triples_factory=data.transductive_training, num_epochs=4, batch_size=64, use_tqdm=False)
    evaluator = RankBasedEvaluator(mode="testing")
    captured = {}
    finalize = evaluator.finalize

    def keep_ranks():
        captured.update({key: np.concatenate(value) for key, value in evaluator.ranks.items()})
        return finalize()

    evaluator.finalize = keep_ranks
    theirs = evaluator.evaluate(model=model, mapped_triples=data.inductive_testing.mapped_triples, batch_size=16,
                                additional_filter_triples=[data.inductive_inference.mapped_triples,
                                                           data.inductive_validation.mapped_triples],
                                use_tqdm=False).to_flat_dict()
    realistic = np.concatenate([captured[("head", "realistic")], captured[("tail", "realistic")]]).astype(np.float64)
    from_ranks = {"mrr": float(np.mean(1.0 / realistic)),
                  **{f"hits@{k}": float(np.mean(realistic <= k)) for k in (1, 3, 10)}}
    reported = {"mrr": "inverse_harmonic_mean_rank", "hits@1": "hits_at_1", "hits@3": "hits_at_3",
                "hits@10": "hits_at_10"}
    save_inductive(tmp_path / "model", model, data.transductive_training, data.inductive_inference)
    for source in (openbench.from_pykeen(model, data.transductive_training, data.inductive_inference),
                   inductive_folder(tmp_path / "model", trust_pickle=True)):
        ours = openbench.evaluate(folder, source).to_dict()
        block = ours["metrics"]["both"]["realistic"]
        for key, their_key in reported.items():
            assert block[key] == pytest.approx(theirs[f"both.realistic.{their_key}"], abs=1e-6), key
            assert block[key] == pytest.approx(from_ranks[key], abs=1e-9), key
        assert ours["model"]["params"]["inductive"] is True
    assert from_ranks["hits@10"] > 0  # the comparison is about ranks that moved
    with pytest.raises(InputError, match="--trust-pickle"):
        inductive_folder(tmp_path / "model")
    runner = CliRunner()
    refused = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--model-dir", str(tmp_path / "model")])
    assert refused.exit_code != 0 and "trust-pickle" in refused.output
    done = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--model-dir", str(tmp_path / "model"),
                                "--trust-pickle", "--no-progress", "--output", str(tmp_path / "record.json")])
    assert done.exit_code == 0, done.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["metrics"]["both"]["realistic"]["mrr"] == pytest.approx(from_ranks["mrr"], abs=1e-9)
    # the model reads its own inference graph only: another split's is refused, and so is the same
    # split's with one inference triple less (every entity kept)
    other = inductive_split(sample[1], tmp_path / "other", inference_fraction=0.4, test_fraction=0.2, seed=4)
    assert other["kind"] == "inductive"
    in_memory = openbench.from_pykeen(model, data.transductive_training, data.inductive_inference)
    with pytest.raises(InputError, match="unknown to the model|another inference graph"):
        openbench.evaluate(tmp_path / "other", in_memory)
    thinner = tmp_path / "thinner"
    thinner.mkdir()
    for file in FILES.values():
        (thinner / file).write_bytes((folder / file).read_bytes())
    lines = _triples(folder / FILES["inference"])
    degree = defaultdict(int)
    for a, _, b in lines:
        degree[a] += 1
        degree[b] += 1
    dropped = next(i for i, (a, _, b) in enumerate(lines) if degree[a] > 1 and degree[b] > 1)
    (thinner / FILES["inference"]).write_text("".join("\t".join(row) + "\n" for i, row in enumerate(lines)
                                                      if i != dropped), encoding="utf-8")
    with pytest.raises(InputError, match="reads another inference graph"):
        openbench.evaluate(thinner, in_memory)
