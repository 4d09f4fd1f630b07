"""Truncated rankings: AnyBURL/SAFRAN prediction files and OBL2021 submissions."""
import json
import random

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.datasets.loader import load_dataset
from openbench.evaluation.evaluate import evaluate
from openbench.models.lists import OBL2021Submission, TopKLists, read_obl2021_submission, read_safran_predictions
from tests.helpers import write_samples

SPLITS = {"train": [("A", "r", "B"), ("A", "r", "C"), ("X", "r", "A"), ("D", "r", "E"), ("Y", "r", "Z")],
          "valid": [], "test": [("A", "r", "D"), ("X", "r", "Y")]}
PREDICTIONS = ("A r D\nHeads: X\t0.9\tA\t0.5\t\nTails: B\t0.9\tD\t0.8\tE\t0.8\tA\t0.7\t\n"
               "X r Y\nHeads: \nTails: Z\t0.3\t\n")


def _dataset(tmp_path, splits=SPLITS):
    return load_dataset(write_samples(tmp_path / "data", splits, negatives=False))


def _evaluate(tmp_path, text, splits=SPLITS, **options):
    dataset = _dataset(tmp_path, splits)
    path = tmp_path / "predictions.txt"
    path.write_text(text)
    return evaluate(dataset, TopKLists(read_safran_predictions(path, dataset), path), **options).to_dict()


def test_hand_example_refilters_ranks_ties_and_gives_unlisted_answers_nothing(tmp_path):
    result = _evaluate(tmp_path, PREDICTIONS)
    both = result["metrics"]["both"]
    # (A r D) head: X above A -> rank 2; tail: B is a known answer (A r B) and leaves, D ties with E
    # -> ranks 1 / 1.5 / 2; (X r Y): head list empty, tail list without Y -> reciprocal rank 0
    assert both["realistic"]["mrr"] == pytest.approx((1 / 2 + 1 / 1.5) / 4)
    assert both["optimistic"]["mrr"] == pytest.approx((1 / 2 + 1) / 4)
    assert both["pessimistic"]["mrr"] == pytest.approx((1 / 2 + 1 / 2) / 4)
    assert both["optimistic"]["hits@1"] == pytest.approx(1 / 4) and both["pessimistic"]["hits@1"] == 0.0
    assert both["realistic"]["mr"] is None  # unlisted answers have no finite rank
    protocol = result["protocol"]
    assert protocol["not_listed"] == 2 and protocol["mrr_is_lower_bound"] and protocol["exclude_query_entity"]
    assert protocol["missing_from_file"] == 0 and result["model"]["kind"] == "topk"


def test_without_refiltering_the_known_answer_stays_above(tmp_path):
    result = _evaluate(tmp_path, PREDICTIONS, filter_sets=[])
    assert result["metrics"]["tail"]["realistic"]["mrr"] == pytest.approx((1 / 2.5 + 0) / 2)


def test_tie_at_the_cut_off_is_counted_and_warned(tmp_path):
    # lists of length 2 are full; (A r D) tail: D is the last entry of a full list, so entities cut
    # off after it may share its confidence; (X r Y) head: X is first, above the last entry
    text = "A r D\nHeads: A\t0.5\tX\t0.1\t\nTails: Q\t0.9\tD\t0.4\t\nX r Y\nHeads: X\t0.9\tE\t0.4\t\nTails: Y\t0.4\t\n"
    splits = dict(SPLITS, train=SPLITS["train"] + [("Q", "s", "Q")])
    result = _evaluate(tmp_path, text, splits)
    assert result["protocol"]["tie_at_cutoff"] == 1 and any("past the cut-off" in w for w in result["warnings"])
    text = "A r D\nHeads: A\t0.5\tX\t0.1\t\nTails: D\t0.9\tQ\t0.4\t\nX r Y\nHeads: X\t0.9\t\nTails: Y\t0.4\t\n"
    assert _evaluate(tmp_path / "again", text, splits)["protocol"]["tie_at_cutoff"] == 0


def test_test_triples_missing_from_the_file_count_as_unlisted(tmp_path):
    result = _evaluate(tmp_path, "A r D\nHeads: A\t0.5\t\nTails: D\t0.8\t\n")
    assert result["protocol"]["missing_from_file"] == 1 and result["protocol"]["not_listed"] == 2
    assert result["metrics"]["both"]["realistic"]["mrr"] == pytest.approx(2 / 4)


def _slow_realistic_mrr(splits, listings, exclude_query=True):
    """The definition written out: re-filter each list, rank the true answer by confidence."""
    known = {tuple(t) for name in ("train", "valid", "test") for t in splits[name]}
    total = []
    for h, r, t in splits["test"]:
        for side in ("head", "tail"):
            true, query = (h, t) if side == "head" else (t, h)
            kept = []
            for entity, confidence in listings.get((h, r, t), {}).get(side, []):
                triple = (entity, r, t) if side == "head" else (h, r, entity)
                if entity != true and (triple in known or (exclude_query and entity == query)):
                    continue
                kept.append((entity, confidence))
            confidence = dict(kept).get(true)
            if confidence is None:
                total.append(0.0)
                continue
            greater = sum(1 for e, c in kept if e != true and c > confidence)
            ties = sum(1 for e, c in kept if e != true and c == confidence)
            total.append(1.0 / (greater + (ties + 2) / 2))
    return sum(total) / len(total)


@pytest.mark.parametrize("seed", range(6))
def test_random_lists_agree_with_the_slow_definition(tmp_path, seed):
    rng = random.Random(seed)
    entities = [f"E{i}" for i in range(12)]
    relations = ["r", "s"]
    triples = {(rng.choice(entities), rng.choice(relations), rng.choice(entities)) for _ in range(60)}
    triples = sorted(triples)
    rng.shuffle(triples)
    splits = {"train": triples[:40] + [(e, "r", e) for e in entities], "valid": triples[40:45], "test": triples[45:]}
    listings, lines = {}, []
    for h, r, t in splits["test"]:
        sides = {}
        for side in ("head", "tail"):
            picked = rng.sample(entities, rng.randint(0, 6))
            sides[side] = [(e, rng.choice([0.1, 0.5, 0.5, 0.9])) for e in picked]
            sides[side].sort(key=lambda pair: -pair[1])
        listings.setdefault((h, r, t), sides)
        lines += [f"{h} {r} {t}"] + [f"{label} " + "".join(f"{e}\t{c}\t" for e, c in sides[side])
                                     for label, side in (("Heads:", "head"), ("Tails:", "tail"))]
    result = _evaluate(tmp_path, "\n".join(lines) + "\n", splits)
    assert result["metrics"]["both"]["realistic"]["mrr"] == pytest.approx(_slow_realistic_mrr(splits, listings),
                                                                          abs=1e-12)


@pytest.mark.parametrize("text,message,line", [
    ("A r D\nHeads: A\t0.5\t\n", "three lines per triple", 2),
    ("A r\nHeads: A\t0.5\t\nTails: D\t1\t\n", "space-separated triple", 1),
    ("A r D\nHeads: A\t0.5\t\nTails: D\thigh\t\n", "numeric confidences", 3),
    ("A r D\nHeads: NOPE\t0.5\t\nTails: D\t1\t\n", "'NOPE' is not an entity", 2),
    ("A r D\nTails: A\t0.5\t\nHeads: D\t1\t\n", "starting with 'Heads:'", 2),
])
def test_malformed_prediction_files_name_the_line(tmp_path, text, message, line):
    dataset = _dataset(tmp_path)
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        read_safran_predictions(path, dataset)
    assert caught.value.line == line


def test_a_triple_outside_the_split_is_refused(tmp_path):
    with pytest.raises(InputError, match="not in the test split"):
        _evaluate(tmp_path, "A r B\nHeads: \nTails: \n")


# -- OBL2021 ----------------------------------------------------------------------------------

def _id_layout(tmp_path, n_entities=30, seed=0):
    rng = np.random.default_rng(seed)
    folder = tmp_path / "ids"
    folder.mkdir()
    (folder / "entities.tsv").write_text("".join(f"{i}\tE{i}\n" for i in range(n_entities)))
    (folder / "relations.tsv").write_text("0\tr\n1\ts\n")
    for name, size in (("train", 50), ("valid", 5), ("test", 8)):
        rows = np.column_stack([rng.integers(0, n_entities, size), rng.integers(0, 2, size),
                                rng.integers(0, n_entities, size)])
        (folder / f"{name}.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    return folder


def _obl2021_reference(predictions, test):
    """OBL2021's definitions: hits@10 = true id among the 10; MRR = 1 / (position + 1), else 0."""
    truths = np.concatenate([test[:, 2], test[:, 0]])
    hits = np.mean([truth in row for row, truth in zip(predictions, truths)])
    reciprocal = [1.0 / (list(row).index(truth) + 1) if truth in row else 0.0 for row, truth in zip(predictions, truths)]
    return hits, float(np.mean(reciprocal))


def test_obl2021_submission_matches_its_definitions(tmp_path):
    folder = _id_layout(tmp_path)
    dataset = load_dataset(folder)
    test = dataset.triples["test"].numpy()
    rng = np.random.default_rng(1)
    predictions = np.stack([rng.permutation(30)[:10] for _ in range(2 * len(test))])
    predictions[0, 3] = test[0, 2] if test[0, 2] not in predictions[0] else predictions[0, 3]
    path = tmp_path / "pred_OBL2021.npz"
    np.savez(path, pred_top10=predictions.astype(np.int32))
    result = evaluate(dataset, OBL2021Submission(read_obl2021_submission(path), path)).to_dict()
    hits, mrr = _obl2021_reference(predictions, test)
    both = result["metrics"]["both"]["realistic"]
    assert both["hits@10"] == pytest.approx(hits) and both["mrr"] == pytest.approx(mrr)
    assert result["protocol"]["filter_sets"] == [] and result["protocol"]["refiltered"] is False

    runner = CliRunner()
    out = tmp_path / "result.json"
    cli = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--submission", str(path), "--output", str(out)])
    assert cli.exit_code == 0, cli.output
    assert json.loads(out.read_text())["metrics"]["both"]["realistic"]["mrr"] == pytest.approx(mrr)


def test_obl2021_rejects_repeated_ids_and_wrong_shapes(tmp_path):
    folder = _id_layout(tmp_path)
    dataset = load_dataset(folder)
    tasks = 2 * dataset.triples["test"].shape[0]
    repeated = np.tile(np.arange(10), (tasks, 1))
    repeated[3, 9] = 0
    for array, message in ((repeated, "row 3 lists an entity twice"), (np.zeros((5, 10), dtype=int), "expected 16 rows"),
                           (np.full((tasks, 10), 99), r"ids must lie in \[0, 30\)")):
        path = tmp_path / "bad.npz"
        np.savez(path, pred_top10=array)
        with pytest.raises(InputError, match=message):
            evaluate(dataset, OBL2021Submission(read_obl2021_submission(path), path)).to_dict()
    np.savez(tmp_path / "other.npz", something=np.zeros(3))
    with pytest.raises(InputError, match="pred_top10"):
        read_obl2021_submission(tmp_path / "other.npz")


def test_cli_evaluates_a_prediction_file_and_refuses_two_models(tmp_path):
    folder = write_samples(tmp_path / "data", SPLITS, negatives=False)
    path = tmp_path / "predictions.txt"
    path.write_text(PREDICTIONS)
    runner = CliRunner()
    result = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--predictions", str(path), "--no-progress",
                                  "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["protocol"]["candidates"] == "listed (top-k)"
    result = runner.invoke(main, ["evaluate", "--dataset", str(folder), "--predictions", str(path), "--model", "DistMult"])
    assert result.exit_code != 0 and "give one model" in result.output


# -- issue 63, item 8: the candidate count of every served list, against a plain count ------------

@pytest.mark.parametrize("seed", range(12))
def test_listed_counts_equal_a_plain_count_of_every_list(seed):
    """Property, on random lists, known answers and anchors that often are known answers too (an
    anchor of relation r may answer a training query of r): each row's candidates are the
    entities that are neither a known answer of its query nor an anchor of its relation, counted
    once; its n_greater the listed entries before the answer that are neither; +inf when the
    answer is not listed."""
    from openbench.evaluation.producers.topk import listed_counts

    rng = np.random.default_rng(seed)
    num_entities, n, k, relations = int(rng.integers(5, 40)), int(rng.integers(1, 30)), int(rng.integers(1, 8)), 3
    k = min(k, num_entities)
    lists = np.stack([rng.permutation(num_entities)[:k] for _ in range(n)]).astype(np.int64)
    true_ids = rng.integers(0, num_entities, n)
    keys = rng.integers(0, relations, n).astype(np.int64)
    known = {row: set(rng.choice(num_entities, int(rng.integers(0, num_entities // 2 + 1)), replace=False).tolist())
             - {int(true_ids[row])} for row in range(n)}
    anchors = {relation: set(rng.choice(num_entities, int(rng.integers(0, num_entities // 2 + 1)),
                                        replace=False).tolist()) for relation in range(relations)}
    for row in range(n):  # the answer is never an anchor of its relation; anchors overlap known answers
        anchors[int(keys[row])].discard(int(true_ids[row]))
        known[row] |= set(list(anchors[int(keys[row])])[:2])
        known[row].discard(int(true_ids[row]))
    rows = [row for row in range(n) for _ in known[row]]
    cols = [entity for row in range(n) for entity in sorted(known[row])]
    codes = np.unique(np.array([relation * num_entities + e for relation, members in anchors.items()
                                for e in members], dtype=np.int64))
    counts = listed_counts(lists, true_ids, (torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)),
                           num_entities, (codes, keys))
    for row in range(n):
        removed = known[row] | anchors[int(keys[row])]
        assert int(counts.n_candidates[row]) == sum(1 for e in range(num_entities) if e not in removed), row
        kept = [int(e) for e in lists[row] if int(e) not in removed]
        expected = kept.index(int(true_ids[row])) if int(true_ids[row]) in kept else float("inf")
        assert float(counts.n_greater[row]) == expected, row
