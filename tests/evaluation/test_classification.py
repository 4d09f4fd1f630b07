"""Triple classification: AUROC/AP against scikit-learn, thresholds against a plain loop, a
planted separable case, constant scores, the command, the record and the leaderboard (issue 23)."""
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

from openbench.cli import main
from openbench.evaluation.tasks.classification import (auroc, average_precision, choose_threshold, classification_record,
                                                 threshold_metrics)
from openbench.datasets.loader import load_dataset
from openbench.models.base import score_function
from openbench.models.scorers import SCORERS
from openbench.record import RecordError, validate_record
from tests.bases import evaluated

scores_and_labels = st.integers(2, 60).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]) | st.floats(-5, 5), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n)))


@settings(max_examples=150, deadline=None)
@given(scores_and_labels)
def test_auroc_and_average_precision_equal_scikit_learn(data):
    scores, labels = np.array(data[0]), np.array(data[1])
    if labels.all() or not labels.any():
        assert auroc(scores, labels) is None
    else:
        assert auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    if labels.any():
        assert average_precision(scores, labels) == pytest.approx(average_precision_score(labels, scores), abs=1e-12)
    else:
        assert average_precision(scores, labels) is None


def _loop_threshold(scores, labels, metric):
    """Every candidate threshold tried in turn: +inf, then the distinct scores high to low."""
    best, best_value = None, -1.0
    for threshold in [np.inf] + sorted(set(scores.tolist()), reverse=True):
        predicted = [s >= threshold for s in scores]
        tp = sum(p and y for p, y in zip(predicted, labels))
        fp = sum(p and not y for p, y in zip(predicted, labels))
        fn = sum(y and not p for p, y in zip(predicted, labels))
        tn = len(labels) - tp - fp - fn
        value = (tp + tn) / len(labels) if metric == "accuracy" else (2 * tp / (2 * tp + fp + fn) if tp else 0.0)
        if value > best_value:
            best, best_value = threshold, value
    return best


@settings(max_examples=150, deadline=None)
@given(scores_and_labels, st.sampled_from(["accuracy", "f1"]))
def test_threshold_choice_equals_a_plain_loop(data, metric):
    scores, labels = np.array(data[0]), np.array(data[1])
    assert choose_threshold(scores, labels, metric) == _loop_threshold(scores, labels, metric)
    chosen = choose_threshold(scores, labels, metric)
    values = threshold_metrics(scores, labels, np.full(scores.size, chosen))
    predicted = scores >= chosen
    assert values["accuracy"] == pytest.approx(float((predicted == labels).mean()))


def test_separable_scores_give_auroc_one_and_constant_scores_one_half():
    labels = np.array([True] * 5 + [False] * 7)
    separable = np.where(labels, 2.0, -1.0) + np.linspace(0, 0.1, 12)
    assert auroc(separable, labels) == 1.0 and average_precision(separable, labels) == 1.0
    threshold = choose_threshold(separable, labels, "accuracy")
    assert threshold_metrics(separable, labels, np.full(12, threshold))["accuracy"] == 1.0
    constant = np.zeros(12)
    assert auroc(constant, labels) == 0.5 and average_precision(constant, labels) == pytest.approx(5 / 12)


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_pair_scores_equal_the_ranking_rows(name):
    """score_triples reads the same number the ranking compares (up to summation order)."""
    generator = torch.Generator().manual_seed(3)
    scorer_class = SCORERS[name]
    entities = torch.randn(9, 8, generator=generator)
    relations = torch.randn(4, 8, 8, generator=generator) if name == "RESCAL" else torch.randn(4, 8, generator=generator)
    if scorer_class.complex_valued:
        entities = torch.complex(entities[:, :4], entities[:, 4:])
        relations = torch.complex(relations[:, :4], relations[:, 4:])
        if "RotatE" in name:
            relations = relations / relations.abs()
    scorer = scorer_class(entities, relations)
    batch = torch.tensor([[0, 1, 2], [3, 0, 3], [8, 3, 5], [1, 2, 0]])
    rows = scorer.score_all(batch, "tail")
    assert torch.allclose(scorer.score_pairs(batch), rows[torch.arange(4), batch[:, 2]], atol=1e-5)


def _sample_split(tmp_path):
    """The embedded sample graph, split with a validation set (positives and negatives in each)."""
    out = tmp_path / "graph"
    assert CliRunner().invoke(main, ["generate", "--sample", "--output", str(out), "--no-progress"]).exit_code == 0
    files = out / "graph_files"
    split = tmp_path / "split"
    result = CliRunner().invoke(main, ["split", "rand", "--edges", str(files / "edges.csv"), "--tn-edges",
                                       str(files / "TN_edges.csv"), "--nodes", str(files / "ALL_nodes.csv"),
                                       "--output", str(split), "--val", "0.15", "--test-frac", "0.15"])
    assert result.exit_code == 0, result.output
    return split


def test_the_command_record_and_leaderboard_on_a_real_split(tmp_path):
    split = _sample_split(tmp_path)
    dataset = load_dataset(split)
    positives = set()
    for name in ("train_sample.csv", "val_sample.csv", "test_sample.csv"):
        for line in (split / name).read_text().splitlines():
            a, r, b, *_ = line.split("\t")
            positives.add((a, r, b))
    # RESCAL with one (E x E) identity-like matrix per relation can memorise any set of triples exactly
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    relation_index = {label: i for i, label in enumerate(dataset.relation_labels)}
    entities = np.eye(dataset.num_entities, dtype=np.float32)
    matrices = np.zeros((dataset.num_relations, dataset.num_entities, dataset.num_entities), dtype=np.float32)
    for a, r, b in positives:
        if a in index and b in index and r in relation_index:
            matrices[relation_index[r], index[a], index[b]] = 1.0
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", matrices)
    out = tmp_path / "classification.json"
    result = CliRunner().invoke(main, ["evaluate", "--dataset", str(split), "--entity-embeddings",
                                       str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"),
                                       "--model", "RESCAL", "--task", "classification", "--output", str(out),
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "test: AUROC 1.0000" in result.output
    record = json.loads(out.read_text())
    validate_record(record)
    test = record["classification"]["test"]
    assert record["task"] == "classification" and test["overall"]["auroc"] == 1.0
    assert test["overall"]["accuracy"] == 1.0 and test["overall"]["negatives"] > 0
    assert set(test["by_negative_kind"]) == {"true_negatives", "generated"}
    assert record["protocol"]["threshold_metric"] == "accuracy"
    assert set(record["classification"]["thresholds"]) <= set(dataset.relation_labels)
    broken = json.loads(out.read_text())
    broken["classification"]["test"]["overall"]["auroc"] = 1.5
    with pytest.raises(RecordError, match="auroc = 1.5: expected a value in"):
        validate_record(broken)
    db = tmp_path / "board.sqlite"
    result = CliRunner().invoke(main, ["leaderboard", "submit", str(out), "--name", "memorised", "--db", str(db)])
    assert result.exit_code == 0, result.output
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--task", "classification",
                                      "--format", "json"])
    assert table.exit_code == 0, table.output
    rows = json.loads(table.output)
    assert [row["name"] for row in rows] == ["memorised"] and rows[0]["metrics"]["auroc"]["mean"] == 1.0
    ranking = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--format", "json"])
    assert "memorised" not in ranking.output  # never ranked with ranking records


def test_constant_scores_classify_at_one_half(tmp_path):
    split = _sample_split(tmp_path)
    dataset = load_dataset(split)
    scorer = SCORERS["DistMult"](torch.zeros(dataset.num_entities, 4), torch.zeros(dataset.num_relations, 4))
    record = evaluated(dataset, scorer, task="classification")
    assert record["classification"]["test"]["overall"]["auroc"] == 0.5
    for block in record["classification"]["test"]["per_relation"].values():
        assert block["auroc"] in (0.5, None)


def test_top_k_lists_are_refused_with_the_reason(tmp_path):
    from openbench.errors import UsageError
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.lists import OBL2021Submission, TopKLists

    dataset = load_dataset(_sample_split(tmp_path))
    for lists in (TopKLists({}), OBL2021Submission(np.zeros((0, 10), dtype=np.int64))):
        with pytest.raises(UsageError, match="top-k prediction lists give no score to triples outside the lists"):
            evaluate(dataset, lists, task="classification")


def test_error_paths_name_what_is_wrong(tmp_path):
    from openbench.errors import InputError, UsageError
    from openbench.evaluation.tasks.classification import read_labelled_split

    split = _sample_split(tmp_path)
    dataset = load_dataset(split)
    negatives = split / "negative_test_sample.csv"
    lines = negatives.read_text().splitlines()
    negatives.write_text("\n".join([lines[0].replace("\t0\t", "\t1\t")] + lines[1:]) + "\n")
    with pytest.raises(InputError, match=r"negative_test_sample\.csv, line 1: column 5 \(value\) is '1'; expected 0"):
        read_labelled_split(dataset, "test")
    negatives.write_text("\n".join(lines) + "\n")
    nan = SCORERS["DistMult"](torch.full((dataset.num_entities, 2), float("nan")), torch.ones(dataset.num_relations, 2))
    with pytest.raises(InputError, match=r"entity embeddings, row 0 \(entity '.+'\), column 0, holds NaN"):
        evaluated(dataset, nan, task="classification")  # stored values first (openbench.models.finite)
    nan_rows = score_function(lambda batch, side: torch.full((batch.shape[0], dataset.num_entities), float("nan")),
                              dataset.num_entities)
    with pytest.raises(InputError, match="non-finite scores"):  # a model's own scores
        evaluated(dataset, nan_rows, task="classification")
    for name in ("val_sample.csv", "negative_val_sample.csv"):
        (split / name).unlink()
    scorer = SCORERS["DistMult"](torch.ones(dataset.num_entities, 2), torch.ones(dataset.num_relations, 2))
    with pytest.raises(InputError, match="no valid file: val_sample.csv"):
        evaluated(dataset, scorer, task="classification")
    (split / "val_sample.csv").write_text("")
    with pytest.raises(InputError, match="thresholds on validation: the split has no validation rows"):
        evaluated(dataset, scorer, task="classification")
    ids = tmp_path / "ids"
    assert CliRunner().invoke(main, ["export-kgid", "--dataset", str(split), "--output", str(ids)]).exit_code == 0
    with pytest.raises(UsageError, match="the integer-id layout has none"):
        read_labelled_split(load_dataset(ids), "test")


# ------------------------------------------------------------------------------------------
# issue 43: thresholds come from validation only


def test_thresholds_and_test_metrics_come_from_validation_where_validation_and_test_disagree(tmp_path):
    """Property: on a split whose validation and test favour different thresholds, the recorded
    per-relation thresholds are validation's best (a plain loop over validation alone), and the
    test metrics are those thresholds applied to test, never test's own best."""
    import openbench

    genes = [f"NCBIGENE:{i}" for i in range(12)]
    # (head, relation, tail) -> score; validation separates at 5 (REL_A) and 0.8 (REL_B), test at 2 and 0.2
    planted = {
        "valid": {("NCBIGENE:0", "REL_A", "NCBIGENE:1"): (5.0, 1), ("NCBIGENE:0", "REL_A", "NCBIGENE:2"): (6.0, 1),
                  ("NCBIGENE:0", "REL_A", "NCBIGENE:3"): (1.0, 0), ("NCBIGENE:0", "REL_A", "NCBIGENE:4"): (3.0, 0),
                  ("NCBIGENE:5", "REL_B", "NCBIGENE:6"): (0.8, 1), ("NCBIGENE:5", "REL_B", "NCBIGENE:7"): (0.9, 1),
                  ("NCBIGENE:5", "REL_B", "NCBIGENE:8"): (0.1, 0), ("NCBIGENE:5", "REL_B", "NCBIGENE:9"): (0.5, 0)},
        "test": {("NCBIGENE:1", "REL_A", "NCBIGENE:2"): (2.0, 1), ("NCBIGENE:1", "REL_A", "NCBIGENE:3"): (2.5, 1),
                 ("NCBIGENE:1", "REL_A", "NCBIGENE:4"): (0.0, 0), ("NCBIGENE:1", "REL_A", "NCBIGENE:5"): (0.5, 0),
                 ("NCBIGENE:6", "REL_B", "NCBIGENE:7"): (0.2, 1), ("NCBIGENE:6", "REL_B", "NCBIGENE:8"): (0.3, 1),
                 ("NCBIGENE:6", "REL_B", "NCBIGENE:9"): (0.0, 0), ("NCBIGENE:6", "REL_B", "NCBIGENE:10"): (0.05, 0)},
    }
    folder = tmp_path / "split"
    folder.mkdir()
    train = [(genes[i], "REL_A" if i % 2 else "REL_B", genes[(i + 1) % len(genes)]) for i in range(len(genes))]
    (folder / "train_sample.csv").write_text("".join(f"{h}\t{r}\t{t}\t700\t1\tSTRING\n" for h, r, t in train))
    for split, name in (("valid", "val_sample.csv"), ("test", "test_sample.csv")):
        (folder / name).write_text("".join(f"{h}\t{r}\t{t}\t\t{label}\t{'STRING' if label else 'GENERATED'}\n"
                                           for (h, r, t), (_, label) in planted[split].items()))
    dataset = openbench.load_dataset(str(folder))
    score_of = {(dataset.entity_labels.index(h), dataset.relation_labels.index(r), dataset.entity_labels.index(t)):
                value for split in planted for (h, r, t), (value, _) in planted[split].items()}

    def planted_scores(batch, side):
        rows = torch.zeros(batch.shape[0], dataset.num_entities, dtype=torch.float64)
        for row, (h, r, t) in enumerate(batch.tolist()):
            for entity in range(dataset.num_entities):
                key = (h, r, entity) if side == "tail" else (entity, r, t)
                rows[row, entity] = score_of.get(key, -1.0)
        return rows

    record = openbench.evaluate(dataset, openbench.score_function(planted_scores, dataset.num_entities),
                                task="classification").to_dict()
    thresholds = record["classification"]["thresholds"]
    test = record["classification"]["test"]["per_relation"]
    for relation in ("REL_A", "REL_B"):
        def part(split):
            rows = [(value, label) for (_, r, _), (value, label) in planted[split].items() if r == relation]
            return np.array([v for v, _ in rows]), np.array([bool(y) for _, y in rows])

        valid_scores, valid_labels = part("valid")
        test_scores, test_labels = part("test")
        from_valid = _loop_threshold(valid_scores, valid_labels, "accuracy")
        assert from_valid != _loop_threshold(test_scores, test_labels, "accuracy")  # the split disagrees
        assert thresholds[relation] == {"threshold": from_valid, "chosen_on": "relation"}
        predicted = test_scores >= from_valid
        assert test[relation]["accuracy"] == pytest.approx(float((predicted == test_labels).mean()))
        assert test[relation]["accuracy"] < 1.0  # test's own best would classify it perfectly


# -- issue 39 (7): classification scores without rounding loss ----------------------------------

def _random_tables(name, generator, rows=9, width=8):
    scorer_class = SCORERS[name]
    entities = torch.randn(rows, width, generator=generator)
    relations = torch.randn(4, width, width, generator=generator) if name == "RESCAL" else \
        torch.randn(4, width, generator=generator)
    if scorer_class.complex_valued:
        entities = torch.complex(entities[:, :width // 2], entities[:, width // 2:])
        relations = torch.complex(relations[:, :width // 2], relations[:, width // 2:])
        if "RotatE" in name:
            relations = relations / relations.abs()
    return scorer_class(entities, relations)


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_triple_scores_are_each_models_definition_in_float64(name):
    """score_triples equals the model's definition evaluated exactly on the stored values (the
    rational reference of the exact-ranks tests) to float64's rounding, far below float32's."""
    from tests.bases import exact_score_key, fractions as _fractions, stored_rows as _stored

    scorer = _random_tables(name, torch.Generator().manual_seed(4))
    batch = torch.tensor([[0, 1, 2], [3, 0, 3], [8, 3, 5], [1, 2, 0], [4, 1, 4]])
    scores = scorer.score_triples(batch)
    assert scores.dtype == torch.float64
    entities, relations = _stored(scorer.entities), _stored(scorer.relations)
    for (h, r, t), score in zip(batch.tolist(), scores.tolist()):
        key = exact_score_key(name, _fractions(entities[h]), _fractions(relations[r]), _fractions(entities[t]))
        # the key is the score, or the negated squared distance for TransE-L2 and RotatE
        expected = -math.sqrt(-float(key)) if name in ("TransE-L2", "RotatE") else float(key)
        assert score == pytest.approx(expected, rel=1e-13, abs=1e-13), (name, h, r, t)


def test_transe_self_loops_tie_exactly_as_they_do_in_float64():
    """TransE-L2's self-loops (h, r, h) all score -‖r‖: the expanded float32 formula the ranking
    pass uses does not tie them, the classification scores must."""
    generator = torch.Generator().manual_seed(5)
    scorer = SCORERS["TransE-L2"](torch.randn(200, 16, generator=generator) * 3, torch.randn(2, 16, generator=generator))
    loops = torch.tensor([[i, 1, i] for i in range(200)])
    scores = scorer.score_triples(loops)
    assert bool((scores == scores[0]).all())
    assert scores[0].item() == -float(np.linalg.norm(scorer.relations[1].double().numpy()))
    assert torch.unique(scorer.score_pairs(loops)).numel() > 1  # the expanded float32 formula breaks the tie


def test_auroc_and_auprc_equal_scikit_learn_on_float64_scores_computed_directly(tmp_path):
    """A TransE-L2 model's classification record against scikit-learn on -‖h + r - t‖ computed
    here in float64 from the stored float32 values."""
    from openbench.evaluation.tasks.classification import read_labelled_split

    split = _sample_split(tmp_path)
    dataset = load_dataset(split)
    rng = np.random.default_rng(7)
    entities = rng.normal(size=(dataset.num_entities, 12)).astype(np.float32)
    relations = rng.normal(size=(dataset.num_relations, 12)).astype(np.float32)
    scorer = SCORERS["TransE-L2"](torch.from_numpy(entities), torch.from_numpy(relations))
    record = evaluated(dataset, scorer, task="classification")
    for name in ("valid", "test"):
        part = read_labelled_split(dataset, name, None)
        h, r, t = (part.triples[:, i].numpy() for i in range(3))
        direct = -np.linalg.norm(entities[h].astype(np.float64) + relations[r] - entities[t], axis=1)
        overall = record["classification"][name]["overall"]
        assert overall["auroc"] == pytest.approx(roc_auc_score(part.labels, direct), abs=1e-12)
        assert overall["auprc"] == pytest.approx(average_precision_score(part.labels, direct), abs=1e-12)
