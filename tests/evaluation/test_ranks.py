"""Per-query ranks (issue 39, 1): every metric of the record recomputed from the ranks table by
plain loops, for the full and sampled protocols and ranked lists; the Parquet file, its
refusals, and the Python API's ``record.ranks``."""
import json
import math

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError
from openbench.evaluation.statistics.evidence import read_ranks
from openbench.evaluation.statistics.ranks_table import RANKS_SCHEMA
from openbench.models.lists import TopKLists, read_safran_predictions
from tests.helpers import integer_embeddings, needs_module, random_labelled_graph, sampled_protocol, snapshot, write_samples

HITS = (1, 3, 10)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    splits = random_labelled_graph(31, 70, 4, {"train": 300, "valid": 12, "test": 40})
    return write_samples(tmp_path_factory.mktemp("ranks"), splits)


def _integer_model(dataset):
    """DistMult on small integers: exact arithmetic, many true ties."""
    return openbench.embedding_model("DistMult", integer_embeddings(1, dataset.num_entities, 3, -1, 2),
                                     integer_embeddings(2, dataset.num_relations, 3, -1, 2))


def _values(rows, rank_type):
    """Per-query (reciprocal rank, rank or None, {k: hit}) of ranks-table rows (dicts)."""
    out = []
    for row in rows:
        if row["n_greater"] is None:  # not listed: reciprocal rank and hits 0, no rank
            out.append((0.0, None, {k: 0.0 for k in HITS}))
            continue
        g, k_ties = row["n_greater"], row["n_equal"]
        rank = {"optimistic": g + 1, "pessimistic": g + k_ties, "realistic": g + (k_ties + 1) / 2}[rank_type]
        out.append((1 / rank, rank, {k: float(rank <= k) for k in HITS}))
    return out


def _expected(rows):
    """Per-query expected reciprocal rank and hits over random tie orders: the average over the
    answer's k possible positions g + 1 .. g + k."""
    out = []
    for row in rows:
        if row["n_greater"] is None:
            out.append((0.0, {k: 0.0 for k in HITS}))
            continue
        positions = range(row["n_greater"] + 1, row["n_greater"] + row["n_equal"] + 1)
        out.append((sum(1 / p for p in positions) / row["n_equal"],
                    {k: sum(p <= k for p in positions) / row["n_equal"] for k in HITS}))
    return out


def _chance(rows):
    """Mean expectation and variance of the mean of rank, 1/rank and hits@k for ranks drawn
    uniformly from 1..C (C each row's candidates), by loops over the C possible ranks."""
    n = len(rows)
    moments = {"mr": [0.0, 0.0], "mrr": [0.0, 0.0], **{f"hits@{k}": [0.0, 0.0] for k in HITS}}
    for row in rows:
        possible = range(1, row["n_candidates"] + 1)
        for name, of in [("mr", lambda r: r), ("mrr", lambda r: 1 / r)] + \
                [(f"hits@{k}", lambda r, k=k: float(r <= k)) for k in HITS]:
            mean = sum(of(r) for r in possible) / len(possible)
            variance = sum((of(r) - mean) ** 2 for r in possible) / len(possible)
            moments[name][0] += mean / n
            moments[name][1] += variance / n / n  # the variance of a mean of n independent queries
    return moments


def _over(numerator, denominator):
    """None where the chance level leaves nothing to adjust (every query sure to hit, say)."""
    return None if numerator is None or abs(denominator) < 1e-12 else numerator / denominator


def _adjusted(block, chance):
    """Hoyt et al.'s adjusted metrics of one rank type's block."""
    mr, mrr = block["mr"], block["mrr"]
    (e_mr, v_mr), (e_rr, v_rr) = chance["mr"], chance["mrr"]
    out = {"amr": _over(mr, e_mr), "amri": None if mr is None else 1 - _over(mr - 1, e_mr - 1),
           "amrr": _over(mrr - e_rr, 1 - e_rr)}
    out.update({f"ahits@{k}": _over(block[f"hits@{k}"] - chance[f"hits@{k}"][0], 1 - chance[f"hits@{k}"][0])
                for k in HITS})
    out["zmr"] = None if mr is None else _over(e_mr - mr, math.sqrt(v_mr))
    out["zmrr"] = _over(mrr - e_rr, math.sqrt(v_rr))
    out.update({f"zhits@{k}": _over(block[f"hits@{k}"] - chance[f"hits@{k}"][0], math.sqrt(chance[f"hits@{k}"][1]))
                for k in HITS})
    return out


def _block(rows):
    """The record's block of these rows, by loops over them."""
    if not rows:
        return None
    block = {}
    chance = _chance(rows)
    for rank_type in ("optimistic", "pessimistic", "realistic"):
        values = _values(rows, rank_type)
        ranks = [rank for _, rank, _ in values]
        block[rank_type] = {"mrr": sum(v[0] for v in values) / len(rows),
                            "mr": None if None in ranks else sum(ranks) / len(rows),
                            **{f"hits@{k}": sum(v[2][k] for v in values) / len(rows) for k in HITS}}
        block[rank_type].update(_adjusted(block[rank_type], chance))
    expected = _expected(rows)
    block["expected"] = {"mrr": sum(e[0] for e in expected) / len(rows),
                         **{f"hits@{k}": sum(e[1][k] for e in expected) / len(rows) for k in HITS}}
    return block


def _close(mine, theirs, where):
    if mine is None or theirs is None:
        assert mine is None and theirs is None, where
        return
    if isinstance(mine, dict):
        assert set(mine) == set(theirs), where
        for key in mine:
            _close(mine[key], theirs[key], f"{where}.{key}")
        return
    assert theirs == pytest.approx(mine, rel=1e-9, abs=1e-12), where


def _check_record_against_ranks(record, ranks):
    """Every metric of ``record`` (JSON values) from ``ranks`` (a DataFrame)."""
    rows = ranks.to_dicts()
    sides = {side: [row for row in rows if row["side"] == side] for side in ("head", "tail")}
    for side in ("head", "tail"):
        _close(_block(sides[side]), record["metrics"][side], f"metrics.{side}")
    _close(_block(rows), record["metrics"]["both"], "metrics.both")
    macro_values = {}
    for relation, blocks in record["per_relation"].items():
        of_relation = [row for row in rows if row["relation"] == relation]
        for side in ("head", "tail"):
            _close(_block([row for row in of_relation if row["side"] == side]), blocks[side], f"{relation}.{side}")
        _close(_block(of_relation), blocks["both"], f"{relation}.both")
        macro_values[relation] = _block(of_relation)
    # the macro block: the plain mean over relations of each relation's "both" value
    for rank_type in ("realistic", "optimistic", "pessimistic"):
        for metric in ("mrr", "hits@1", "hits@10"):
            values = [block[rank_type][metric] for block in macro_values.values() if block is not None]
            assert record["macro_relation"]["both"][rank_type][metric] == pytest.approx(sum(values) / len(values),
                                                                                        abs=1e-12)
    assert record["diagnostics"]["queries"] == len(rows)


def test_every_metric_of_a_full_ranking_follows_from_its_ranks_file(folder, tmp_path):
    dataset = load_dataset(folder)
    model = _integer_model(dataset)
    np.save(tmp_path / "e.npy", model.entities.numpy())
    np.save(tmp_path / "r.npy", model.relations.numpy())
    out, ranks_path = tmp_path / "record.json", tmp_path / "ranks.parquet"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--entity-embeddings", str(tmp_path / "e.npy"),
                                     "--relation-embeddings", str(tmp_path / "r.npy"), "--model", "DistMult",
                                     "--output", str(out), "--ranks-output", str(ranks_path), "--no-progress"])
    assert done.exit_code == 0, done.output
    record = json.loads(out.read_text())
    ranks, info = read_ranks(ranks_path)
    assert dict(ranks.schema) == RANKS_SCHEMA and len(ranks) == 2 * dataset.triples["test"].shape[0]
    assert ranks["n_equal"].min() >= 1 and (ranks["n_equal"] > 1).any()  # ties, the answer included
    assert info["dataset_fingerprint"] == record["dataset"]["fingerprint"]
    _check_record_against_ranks(record, ranks)
    # the rows name the queries' triples, heads first, in test order
    test = dataset.triples["test"]
    labels = dataset.entity_labels
    assert ranks.filter(pl.col("side") == "head")["head"].to_list() == [labels[h] for h in test[:, 0].tolist()]
    assert ranks.filter(pl.col("side") == "tail")["tail"].to_list() == [labels[t] for t in test[:, 2].tolist()]
    # the Python API's ranks are the file's
    in_memory = openbench.evaluate(dataset, model)
    assert in_memory.ranks.equals(ranks)
    again = tmp_path / "again.parquet"
    assert CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--entity-embeddings", str(tmp_path / "e.npy"),
                                     "--relation-embeddings", str(tmp_path / "r.npy"), "--model", "DistMult",
                                     "--ranks-output", str(again), "--no-progress"]).exit_code == 0
    assert again.read_bytes() == ranks_path.read_bytes()  # the same run, the same bytes


def test_every_metric_of_the_sampled_protocol_follows_from_its_ranks(folder):
    dataset = load_dataset(folder)
    record = openbench.evaluate(dataset, _integer_model(dataset), **sampled_protocol(dataset, 9, 3))
    assert set(record.ranks["n_candidates"].to_list()) == {10}
    _check_record_against_ranks(record.to_dict(), record.ranks)


def test_every_metric_of_ranked_lists_follows_from_their_ranks_with_unlisted_answers_null(tmp_path):
    splits = {"train": [("A", "r", "B"), ("A", "r", "C"), ("X", "r", "A"), ("D", "r", "E"), ("Y", "r", "Z")],
              "valid": [], "test": [("A", "r", "D"), ("X", "r", "Y")]}
    dataset = load_dataset(write_samples(tmp_path / "data", splits, negatives=False))
    path = tmp_path / "predictions.txt"
    path.write_text("A r D\nHeads: X\t0.9\tA\t0.5\t\nTails: B\t0.9\tD\t0.8\tE\t0.8\tA\t0.7\t\n"
                    "X r Y\nHeads: \nTails: Z\t0.3\t\n")
    record = openbench.evaluate(dataset, TopKLists(read_safran_predictions(path, dataset), path))
    rows = record.ranks.to_dicts()
    unlisted = [row for row in rows if row["rank"] is None]
    assert len(unlisted) == 2 and all(row["n_greater"] is None and row["n_equal"] is None for row in unlisted)
    _check_record_against_ranks(record.to_dict(), record.ranks)


def _evaluate_command(folder, tmp_path, *extra):
    model = _integer_model(load_dataset(folder))
    np.save(tmp_path / "e.npy", model.entities.numpy())
    np.save(tmp_path / "r.npy", model.relations.numpy())
    return CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--entity-embeddings",
                                     str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
                                     "--model", "DistMult", "--no-progress", *extra])


def test_a_ranks_output_never_replaces_what_openbench_did_not_write(folder, tmp_path):
    foreign = tmp_path / "mine.parquet"
    pl.DataFrame({"x": [1, 2]}).write_parquet(foreign)
    before = snapshot(foreign)
    done = _evaluate_command(folder, tmp_path, "--ranks-output", str(foreign))
    assert done.exit_code == 2 and "was not written by openbench" in done.output and snapshot(foreign) == before
    inputs = snapshot(tmp_path / "e.npy")
    done = _evaluate_command(folder, tmp_path, "--ranks-output", str(tmp_path / "e.npy"))
    assert done.exit_code == 2 and "input" in done.output and snapshot(tmp_path / "e.npy") == inputs
    same = _evaluate_command(folder, tmp_path, "--output", str(tmp_path / "x.json"), "--ranks-output",
                             str(tmp_path / "x.json"))
    assert same.exit_code == 2 and "name the same file" in same.output and not (tmp_path / "x.json").exists()
    classification = _evaluate_command(folder, tmp_path, "--task", "classification", "--ranks-output",
                                       str(tmp_path / "c.parquet"))
    assert classification.exit_code == 2 and "--ranks-output" in classification.output
    assert not (tmp_path / "c.parquet").exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "not parquet", "other columns"])
def test_a_damaged_ranks_file_is_refused_naming_it(folder, tmp_path, damage):
    good = tmp_path / "good.parquet"
    assert _evaluate_command(folder, tmp_path, "--ranks-output", str(good)).exit_code == 0
    bad = tmp_path / "bad.parquet"
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[:-40])
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "not parquet":
        bad.write_text("split,side\ntest,head\n")
    else:
        from openbench.evaluation.statistics.ranks_table import RANKS_METADATA_KEY

        ranks, _ = read_ranks(good)
        ranks.drop("rank").write_parquet(bad, metadata={RANKS_METADATA_KEY: json.dumps({"format": "openbench-ranks-v1"})})
    with pytest.raises(InputError, match="bad.parquet: ") as caught:
        read_ranks(bad)
    assert ("expected the columns" if damage == "other columns" else "not a ranks file") in str(caught.value)


@pytest.mark.parametrize("protocol", ["full", "sampled"])
def test_the_adjusted_metrics_equal_pykeens_on_the_same_ranks_and_candidates(folder, protocol):
    """Hoyt et al.'s metrics as PyKEEN computes them (pykeen.metrics.ranking), on the realistic
    ranks and candidate counts of the ranks table: every side and relation of the record."""
    ranking = needs_module("pykeen.metrics.ranking")
    dataset = load_dataset(folder)
    options = sampled_protocol(dataset, 30, 5) if protocol == "sampled" else {}
    record = openbench.evaluate(dataset, _integer_model(dataset), **options)
    metrics = {"amr": ranking.AdjustedArithmeticMeanRank(), "amri": ranking.AdjustedArithmeticMeanRankIndex(),
               "amrr": ranking.AdjustedInverseHarmonicMeanRank(), "zmr": ranking.ZArithmeticMeanRank(),
               "zmrr": ranking.ZInverseHarmonicMeanRank()}
    for k in HITS:
        metrics[f"ahits@{k}"] = ranking.AdjustedHitsAtK(k=k)
        metrics[f"zhits@{k}"] = ranking.ZHitsAtK(k=k)
    written = record.to_dict()
    places = [(record.ranks, written["metrics"]["both"]),
              (record.ranks.filter(pl.col("side") == "tail"), written["metrics"]["tail"])]
    for relation, blocks in written["per_relation"].items():
        places.append((record.ranks.filter((pl.col("relation") == relation) & (pl.col("side") == "head")),
                       blocks["head"]))
    for rows, block in places:
        ranks, candidates = rows["rank"].to_numpy(), rows["n_candidates"].to_numpy()
        for name, metric in metrics.items():
            theirs = float(metric(ranks=ranks, num_candidates=candidates))
            if not math.isfinite(theirs):  # a chance level every query reaches: undefined here
                assert block["realistic"][name] is None, name
                continue
            assert block["realistic"][name] == pytest.approx(theirs, rel=1e-9, abs=1e-9), name


# -- issue 39 (6): stratified results -----------------------------------------------------------

def _bucket(degree):
    """The fixed log2 bucket of a training degree, by a loop."""
    if degree == 0:
        return "0"
    low = 1
    while low * 2 <= degree:
        low *= 2
    return "1" if low == 1 else f"{low}-{2 * low - 1}"


def test_every_stratum_follows_from_the_ranks_and_the_training_triples(tmp_path):
    import random

    rng = random.Random(3)
    prefixes = ["NCBIGENE", "GO", "DOID", "HP", "WHATEVER"]  # the last has no node type
    entities = [f"{prefixes[i % 5]}:{i}" for i in range(60)]
    relations = ["REL_A", "REL_B", "REL_C"]
    hubs = entities[:4]
    train = [(rng.choice(hubs if rng.random() < 0.5 else entities), rng.choice(relations), rng.choice(entities))
             for _ in range(400)]
    test = [(rng.choice(entities), rng.choice(relations), rng.choice(entities)) for _ in range(50)]
    test.append((entities[5], "REL_A", "GO:999"))  # an answer never seen in training: degree 0
    folder = write_samples(tmp_path / "data", {"train": train, "valid": [], "test": test})
    labels = sorted(set(entities) | {"GO:999"})  # the entity map knows it, training does not
    (tmp_path / "entities.tsv").write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(labels)))
    (tmp_path / "relations.tsv").write_text("".join(f"{i}\t{label}\n" for i, label in enumerate(relations)))
    dataset = load_dataset(folder, entity_map=tmp_path / "entities.tsv", relation_map=tmp_path / "relations.tsv")
    record = openbench.evaluate(dataset, _integer_model(dataset))
    written = record.to_dict()
    degree = {}
    for h, _, t in set(train):  # the dataset's training triples are the distinct ones
        degree[h] = degree.get(h, 0) + 1
        degree[t] = degree.get(t, 0) + 1
    rows = record.ranks.to_dicts()
    answer = {id(row): row["head"] if row["side"] == "head" else row["tail"] for row in rows}
    by_degree = {}
    for row in rows:
        by_degree.setdefault(_bucket(degree.get(answer[id(row)], 0)), []).append(row)
    assert "0" in by_degree and len(by_degree) >= 4
    assert list(written["by_degree"]) == sorted(by_degree, key=lambda label: int(label.split("-")[0]))
    types = {"NCBIGENE": "GENE", "GO": "GO", "DOID": "DIS", "HP": "PHENOTYPE", "WHATEVER": "unknown"}
    by_type = {}
    for row in rows:
        by_type.setdefault(types[answer[id(row)].split(":")[0]], []).append(row)
    assert set(written["by_node_type"]) == set(by_type) and list(written["by_node_type"])[-1] == "unknown"
    for name, groups in (("by_degree", by_degree), ("by_node_type", by_type)):
        for label, members in groups.items():
            for side in ("head", "tail"):
                chosen = [row for row in members if row["side"] == side]
                _close(_block(chosen), written[name][label][side], f"{name}.{label}.{side}")
            _close(_block(members), written[name][label]["both"], f"{name}.{label}.both")
    from openbench.record import RecordError, validate_record

    validate_record(written)
    broken = json.loads(json.dumps(written))
    broken["by_degree"]["3-5"] = broken["by_degree"].pop("0")
    with pytest.raises(RecordError, match=r"by_degree.3-5: expected a degree bucket"):
        validate_record(broken)
    broken = json.loads(json.dumps(written))
    broken["by_node_type"]["GENE"]["both"]["realistic"]["mrr"] = 1.5
    with pytest.raises(RecordError, match=r"by_node_type.GENE.both.realistic.mrr = 1.5: outside \[0, 1\]"):
        validate_record(broken)


def test_a_dataset_without_typed_labels_has_no_node_type_strata(tmp_path):
    splits = {"train": [("a:1", "r", "b:2"), ("b:2", "r", "c:3"), ("c:3", "r", "a:1")], "valid": [],
              "test": [("a:1", "r", "c:3")]}
    dataset = load_dataset(write_samples(tmp_path / "data", splits))
    record = openbench.evaluate(dataset, _integer_model(dataset)).to_dict()
    assert record["by_node_type"] is None and list(record["by_degree"]) == ["2-3"]


# -- issue 39 (6): the popularity baseline ------------------------------------------------------

def test_the_popularity_baseline_ranks_by_training_degree_within_relation_and_side(folder, tmp_path):
    """Each candidate scored by its count of training triples with the query's relation on the
    answer's side; every count compared by a loop, ties exact, the command and Python equal."""
    dataset = load_dataset(folder)
    record = openbench.evaluate(dataset, openbench.popularity_model(dataset))
    train = dataset.triples["train"].tolist()
    known = {tuple(row) for split in ("train", "valid", "test") for row in dataset.triples[split].tolist()}
    labels = dataset.entity_labels
    expected = []
    for side in ("head", "tail"):
        for h, r, t in dataset.triples["test"].tolist():
            def score(e, r=r, side=side):
                return sum(1 for a, b, c in train if b == r and (c == e if side == "tail" else a == e))

            true = t if side == "tail" else h
            others = [e for e in range(dataset.num_entities) if e != true and
                      ((h, r, e) if side == "tail" else (e, r, t)) not in known]
            target = score(true)
            expected.append((side, labels[h], labels[t], sum(score(e) > target for e in others),
                             1 + sum(score(e) == target for e in others), len(others) + 1))
    produced = [(row["side"], row["head"], row["tail"], row["n_greater"], row["n_equal"], row["n_candidates"])
                for row in record.ranks.to_dicts()]
    assert produced == expected
    assert record.model["name"] == "popularity" and record.model["kind"] == "popularity"
    out = tmp_path / "popularity.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "popularity", "--output",
                                     str(out), "--no-progress"])
    assert done.exit_code == 0, done.output
    written = json.loads(out.read_text())
    written.pop("timing"), written["dataset"].pop("path")
    mine = record.to_dict()
    mine.pop("timing"), mine["dataset"].pop("path")
    assert written == mine
    both = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "popularity",
                                     "--model-dir", str(tmp_path), "--no-progress"])
    assert both.exit_code == 2 and "give one model" in both.output
