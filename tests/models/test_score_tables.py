"""Any model's predictions, evaluated exactly (issue 73): a score table is a model. A table written
from integer-valued embeddings (scores exact in float64) gives the embeddings' own record for
ranking, classification and every repurposing view; Every Cure's Spark folders, TxGNN's pickled
results and ranked lists by name are read as written; unlisted candidates rank below every scored
one, tied (checked against a brute force); bad tables end in one line."""
import json
import pickle
import shutil

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError, OpenbenchError, ScoreError
from openbench.models.names import normal_name, ranked_list_table
from openbench.models.scorers import build_scorer
from tests.bases import planted_graph
from tests.helpers import integer_embeddings, needs_module, write_samples

DIM = 4


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A drug × disease graph with negatives (classification reads them) and integer embeddings."""
    folder = write_samples(tmp_path_factory.mktemp("tables") / "split", planted_graph(3), negatives=True)
    dataset = load_dataset(folder)
    entities = integer_embeddings(1, dataset.num_entities, DIM, low=-2, high=3)
    relations = integer_embeddings(2, dataset.num_relations, DIM, low=-2, high=3)
    return folder, dataset, entities, relations


def _scores(entities, relations, triples):
    """DistMult's scores of (n, 3) triples in float64: exact for these integers."""
    e, r = entities.astype(np.float64), relations.astype(np.float64)
    return (e[triples[:, 0]] * r[triples[:, 1]] * e[triples[:, 2]]).sum(axis=1)


def _frame(dataset, triples, scores, pairs=False):
    labels, relation_labels = np.array(dataset.entity_labels), np.array(dataset.relation_labels)
    if pairs:
        return pl.DataFrame({"drug": labels[triples[:, 0]], "disease": labels[triples[:, 1]], "score": scores})
    return pl.DataFrame({"head": labels[triples[:, 0]], "relation": relation_labels[triples[:, 1]],
                         "tail": labels[triples[:, 2]], "score": scores})


def _every_candidate(dataset, split="test"):
    """(n, 3) every triple a ranking query of ``split`` ranks (both sides), once each."""
    rows = []
    entities = np.arange(dataset.num_entities)
    for h, r, t in dataset.triples[split].tolist():
        rows.append(np.stack([np.full_like(entities, h), np.full_like(entities, r), entities], axis=1))
        rows.append(np.stack([entities, np.full_like(entities, r), np.full_like(entities, t)], axis=1))
    return np.unique(np.concatenate(rows), axis=0)


def _numbers(record: dict, keys):
    return json.dumps({key: record.get(key) for key in keys}, sort_keys=True)


RANKING_KEYS = ("metrics", "per_relation", "macro_relation", "by_degree", "by_node_type")


def test_a_table_of_the_embeddings_scores_gives_their_ranking_record(planted):
    _, dataset, entities, relations = planted
    embeddings = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    triples = _every_candidate(dataset)
    table = openbench.from_scores(_frame(dataset, triples, _scores(entities, relations, triples)))
    by_table = openbench.evaluate(dataset, table).to_dict()
    by_embeddings = openbench.evaluate(dataset, embeddings).to_dict()
    assert _numbers(by_table, RANKING_KEYS) == _numbers(by_embeddings, RANKING_KEYS)
    assert by_table["model"]["kind"] == "scores" and by_table["model"]["params"]["candidates_unscored"] == 0


def test_a_table_of_the_embeddings_scores_gives_their_classification_record(planted):
    from openbench.evaluation.tasks.classification import read_labelled_split

    _, dataset, entities, relations = planted
    embeddings = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    triples = np.unique(np.concatenate([read_labelled_split(dataset, split).triples.numpy()
                                        for split in ("valid", "test")]), axis=0)
    table = openbench.from_scores(_frame(dataset, triples, _scores(entities, relations, triples)))
    by_table = openbench.evaluate(dataset, table, task="classification").to_dict()
    by_embeddings = openbench.evaluate(dataset, embeddings, task="classification").to_dict()
    assert by_table["classification"] == by_embeddings["classification"]


def _matrix_pairs(dataset):
    """(n, 2) every (drug, disease) pair of the planted graph, and the same as indication triples."""
    labels = dataset.entity_labels
    drugs = [i for i, label in enumerate(labels) if label.startswith("drug::")]
    diseases = [i for i, label in enumerate(labels) if label.startswith("disease::")]
    pairs = np.array([(a, b) for a in drugs for b in diseases], dtype=np.int64)
    indication = dataset.relation_labels.index("indication")
    triples = np.stack([pairs[:, 0], np.full(len(pairs), indication), pairs[:, 1]], axis=1)
    return pairs, triples, drugs, diseases


@pytest.mark.parametrize("form", ["long table", "dense matrix"])
def test_a_table_of_the_embeddings_scores_gives_every_repurposing_view(planted, tmp_path, form):
    _, dataset, entities, relations = planted
    embeddings = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    pairs, triples, drugs, diseases = _matrix_pairs(dataset)
    scores = _scores(entities, relations, triples)
    labels = dataset.entity_labels
    truth = tmp_path / "truth.csv"
    truth.write_text("drug,disease,label\n" + "".join(f"{labels[a]},{labels[b]},{'treat' if i % 2 else 'not-treat'}\n"
                                                      for i, (a, b) in enumerate(pairs[::7][:6])))
    if form == "long table":
        model = openbench.from_scores(_frame(dataset, pairs, scores, pairs=True))
    else:
        model = openbench.from_scores(scores.reshape(len(drugs), len(diseases)), drugs=[labels[i] for i in drugs],
                                      diseases=[labels[i] for i in diseases])
    options = dict(relations=["indication"], negative_relations=["contraindication"], recall_at=[1, 5, 20],
                   ground_truth=str(truth), bootstrap=20, keep_top=15)
    by_table = openbench.evaluate(dataset, model, task="repurposing", **options).to_dict()
    by_embeddings = openbench.evaluate(dataset, embeddings, task="repurposing", **options).to_dict()
    assert json.dumps(by_table["repurposing"], sort_keys=True) == json.dumps(by_embeddings["repurposing"],
                                                                              sort_keys=True)
    txgnn = openbench.evaluate(dataset, model, task="repurposing", relations=["indication"], protocol="txgnn")
    reference = openbench.evaluate(dataset, embeddings, task="repurposing", relations=["indication"],
                                   protocol="txgnn")
    assert txgnn.block["txgnn"] == reference.block["txgnn"]


def test_unlisted_candidates_rank_below_every_scored_one_tied_among_themselves(planted):
    """A table listing a random half: each query's counts are the brute force's with every unlisted
    candidate scored below the lowest score, all tied (the expectation over their order)."""
    _, dataset, entities, relations = planted
    triples = _every_candidate(dataset)
    keep = np.random.default_rng(3).random(len(triples)) < 0.5
    scores = _scores(entities, relations, triples)
    record = openbench.evaluate(dataset, openbench.from_scores(_frame(dataset, triples[keep], scores[keep])))
    listed = {tuple(row): score for row, score in zip(triples[keep].tolist(), scores[keep])}
    known = {tuple(row) for split in ("train", "valid", "test") for row in dataset.triples[split].tolist()}
    expected = []
    for side in ("head", "tail"):
        for h, r, t in dataset.triples["test"].tolist():
            def key(c, h=h, r=r, t=t, side=side):
                triple = (c, r, t) if side == "head" else (h, r, c)
                return listed.get(triple, -np.inf)
            true = h if side == "head" else t
            target = key(true)
            others = [key(c) for c in range(dataset.num_entities) if c != true
                      and ((c, r, t) if side == "head" else (h, r, c)) not in known]
            expected.append((side, sum(v > target for v in others), sum(v == target for v in others) + 1))
    ranks = record.ranks
    found = [(side, g, e) for side, g, e in ranks.select("side", "n_greater", "n_equal").iter_rows()]
    assert sorted(found) == sorted(expected)
    assert record.to_dict()["model"]["params"]["candidates_unscored"] > 0
    with pytest.raises(ScoreError, match="--require-complete"):
        openbench.evaluate(dataset, openbench.from_scores(_frame(dataset, triples[keep], scores[keep]),
                                                          require_complete=True))


def _every_cure_folder(folder, dataset, pairs, scores):
    """A matrix_predictions folder as Every Cure's pipeline writes it: two Parquet part-files and
    _SUCCESS, columns source, target, "treat score", "not treat score", "unknown score", rank
    (ordinal: ties in arbitrary order), quantile_rank and the flag columns."""
    folder.mkdir(parents=True)
    labels = np.array(dataset.entity_labels)
    order = np.lexsort((np.arange(len(scores)), -scores))
    rank = np.empty(len(scores), np.int64)
    rank[order] = np.arange(1, len(scores) + 1)
    frame = pl.DataFrame({"source": labels[pairs[:, 0]], "target": labels[pairs[:, 1]], "treat score": scores,
                          "not treat score": 1.0 - scores, "unknown score": np.zeros(len(scores)), "rank": rank,
                          "quantile_rank": rank / len(scores),
                          **{flag: np.zeros(len(scores), bool) for flag in (
                              "is_known_positive", "is_known_negative", "trial_sig_better", "trial_non_sig_better",
                              "trial_sig_worse", "trial_non_sig_worse", "off_label")}})
    half = len(frame) // 2
    frame[:half].write_parquet(folder / "part-00000-1b2c.c000.snappy.parquet")
    frame[half:].write_parquet(folder / "part-00001-1b2c.c000.snappy.parquet")
    (folder / "_SUCCESS").write_text("")
    return frame


def test_every_cure_s_matrix_folder_is_read_as_written(planted, tmp_path):
    folder, dataset, entities, relations = planted
    pairs, triples, _, _ = _matrix_pairs(dataset)
    scores = np.round(_scores(entities, relations, triples) / 8.0, 3)  # coarse: many ties, as a model's rounding makes
    frame = _every_cure_folder(tmp_path / "fold_0" / "matrix_predictions", dataset, pairs, scores)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--scores",
                                     str(tmp_path / "fold_0" / "matrix_predictions"), "--task", "repurposing",
                                     "--relation", "indication", "--no-progress", "--output",
                                     str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    record = json.loads((tmp_path / "r.json").read_text())
    params = record["model"]["params"]
    assert params["score_column"] == "treat score" and params["format"] == "folder of 2 part-file(s)"
    assert set(params["flags_reported_not_scored"]) == {"is_known_positive", "is_known_negative", "trial_sig_better",
                                                        "trial_non_sig_better", "trial_sig_worse",
                                                        "trial_non_sig_worse", "off_label"}
    # the file's ordinal ranks against the realistic rank of the same scores, counted by hand
    values = frame["treat score"].to_numpy()
    realistic = np.array([(values > v).sum() + ((values == v).sum() + 1) / 2 for v in values])
    differs = frame["rank"].to_numpy() != realistic
    assert params["file_ranks"]["pairs_whose_rank_differs"] == int(differs.sum()) > 0
    assert params["file_ranks"]["largest_difference"] == float(np.abs(frame["rank"].to_numpy() - realistic).max())
    transformed = tmp_path / "transformed"
    shutil.copytree(tmp_path / "fold_0" / "matrix_predictions", transformed)
    for part in transformed.glob("*.parquet"):
        pl.read_parquet(part).rename({"treat score": "untransformed_treat_score"}).with_columns(
            (pl.col("untransformed_treat_score") * 2).alias("transformed_treat_score")).write_parquet(part)
    again = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--scores", str(transformed),
                                      "--score-column", "transformed_treat_score", "--task", "repurposing",
                                      "--relation", "indication", "--no-progress", "--format", "json"])
    assert again.exit_code == 0, again.output
    rescaled = json.loads(again.stdout)
    assert rescaled["repurposing"]["views"] == record["repurposing"]["views"]  # an order-preserving transform


def _txgnn_pickle(path, dataset, entities, relations, pairs, triples):
    """A pickle of the structure TxGNN's eval_disease_centric(save_result=True) writes for the test
    set (txgnn/utils.py, disease_centric_evaluation: {rel_type: pd.DataFrame.from_dict(results)};
    calculate_metrics' out_dict: ID, Name, Ranked List, AUROC, AUPRC, ..., Prediction, Labels),
    TxGNN's ids the last part of openbench's labels."""
    pd = needs_module("pandas")
    labels = dataset.entity_labels
    scores = _scores(entities, relations, triples)
    by_disease = {}
    for (drug, disease), score in zip(pairs.tolist(), scores):
        by_disease.setdefault(labels[disease].split("::")[-1], {})[labels[drug].split("::")[-1]] = float(score)
    ids = list(by_disease)
    out = {"ID": {i: i for i in ids}, "Name": {i: f"disease {i}" for i in ids},
           "Ranked List": {i: sorted(by_disease[i], key=lambda d: -by_disease[i][d]) for i in ids},
           "AUROC": {i: 0.5 for i in ids}, "AUPRC": {i: -1 for i in ids},
           "Prediction": by_disease, "Labels": {i: {d: 0 for d in by_disease[i]} for i in ids}}
    frames = {rel: pd.DataFrame.from_dict(out) for rel in ("rev_contraindication", "rev_indication",
                                                          "rev_off-label use")}
    with open(path, "wb") as handle:
        pickle.dump(frames, handle)


def test_txgnn_s_pickled_results_evaluate_beside_its_own_formula(planted, tmp_path):
    folder, dataset, entities, relations = planted
    pairs, triples, _, _ = _matrix_pairs(dataset)
    path = tmp_path / "disease_centric_eval.pkl"
    _txgnn_pickle(path, dataset, entities, relations, pairs, triples)
    command = ["evaluate", "--dataset", str(folder), "--scores", str(path), "--task", "repurposing", "--relation",
               "indication", "--protocol", "txgnn", "--no-progress", "--format", "json"]
    refused = CliRunner().invoke(main, command)
    assert refused.exit_code == 1 and "--trust-pickle" in refused.output
    done = CliRunner().invoke(main, command + ["--trust-pickle"])
    assert done.exit_code == 0, done.output
    record = json.loads(done.stdout)
    embeddings = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
    reference = openbench.evaluate(dataset, embeddings, task="repurposing", relations=["indication"],
                                   protocol="txgnn").to_dict()
    assert record["repurposing"]["views"] == reference["repurposing"]["views"]
    assert record["repurposing"]["txgnn"] == reference["repurposing"]["txgnn"]  # TxGNN's formulas, same scores
    params = record["model"]["params"]
    assert params["relation"] == "rev_indication" and params["txgnn_reported_means"]["AUROC"] == 0.5


def test_a_ranked_list_by_name_lists_ambiguous_and_unknown_names_with_their_lines(planted, tmp_path):
    folder, dataset, _, _ = planted
    labels = dataset.entity_labels
    drugs = [label for label in labels if label.startswith("drug::")]
    diseases = [label for label in labels if label.startswith("disease::")]
    names = tmp_path / "names.csv"
    names.write_text("id,name\n" + "".join(f"{label.split('::')[1]},Drug {label.split('::')[1][1:]}\n"
                                           for label in drugs)
                     + f"{drugs[0].split('::')[1]},Twinol\n{drugs[1].split('::')[1]},Twinol\n"
                     + "".join(f"{label.split('::')[1]},Disease {label.split('::')[1]}\n" for label in diseases))
    listed = tmp_path / "llm_top.tsv"
    listed.write_text("disease\tdrug\n"
                      f"Disease {diseases[0].split('::')[1]}\tDRUG  {drugs[2].split('::')[1][1:]}!\n"   # line 2
                      f"Disease {diseases[0].split('::')[1]}\ttwinol\n"                                # line 3: ambiguous
                      f"Disease {diseases[0].split('::')[1]}\tNotAdrug\n"                              # line 4: unknown
                      f"{diseases[1]}\t{drugs[3]}\n")                                                  # line 5: labels
    table = ranked_list_table(listed, dataset, names)
    facts = table.facts
    assert facts["names_mapped"] == 2 and facts["names_ambiguous"] == 1 and facts["names_unknown"] == 1
    assert facts["ambiguous"] == [{"line": 3, "name": "twinol", "ids": 2}]
    assert facts["unknown"] == [{"line": 4, "name": "NotAdrug", "ids": 0}]
    assert sorted(table.scores.tolist()) == [-1.0, -1.0]  # each disease's first listed drug
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--ranked-list", str(listed), "--names",
                                     str(names), "--task", "repurposing", "--relation", "indication",
                                     "--no-progress", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["model"]["params"]["names_unknown"] == 1
    assert normal_name("  Drug—A  (sodium) ") == "drug a sodium"


@pytest.mark.parametrize("rows, message", [
    ("drug,disease,score\n{d},{s},nan\n", r"line 2: score nan in column 'score'; expected a finite number"),
    ("drug,disease,score\n{d},{s},inf\n", r"line 2: score inf"),
    ("drug,disease,score\n{d},{s},0.5\n{d},{s},0.7\n", r"the same pair twice \(lines 2 and 3\)"),
    ("drug,disease,score\n{d},disease::NOPE,0.5\n", r"1 row\(s\) name an entity or relation the dataset lacks \(first: "
                                                    r"line 2"),
    ("drug,disease,score\n{d},{s},high\n", r"line 2: column 'score' holds 'high'; expected a number"),
    ("from,to,score\n{d},{s},1\n", r"columns from, to, score name no known layout; expected head, relation, tail or "
                                   r"drug, disease"),
    ("drug,disease,weight\n{d},{s},1\n", r"no score column among drug, disease, weight"),
])
def test_a_bad_table_is_one_line_naming_its_file_and_line(planted, tmp_path, rows, message):
    folder, dataset, _, _ = planted
    drug = next(label for label in dataset.entity_labels if label.startswith("drug::"))
    disease = next(label for label in dataset.entity_labels if label.startswith("disease::"))
    path = tmp_path / "scores.csv"
    path.write_text(rows.format(d=drug, s=disease))
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--scores", str(path), "--task",
                                     "repurposing", "--relation", "indication", "--no-progress"])
    assert done.exit_code == 1, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1 and "scores.csv" in lines[0], done.output
    import re

    assert re.search(message, lines[0]), lines[0]


def test_unknown_ids_go_on_with_drop_unknown_and_are_counted(planted, tmp_path):
    folder, dataset, _, _ = planted
    drug = next(label for label in dataset.entity_labels if label.startswith("drug::"))
    disease = next(label for label in dataset.entity_labels if label.startswith("disease::"))
    path = tmp_path / "scores.tsv"
    path.write_text(f"drug\tdisease\tscore\n{drug}\t{disease}\t1\n{drug}\tdisease::NOPE\t2\n")
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--scores", str(path), "--task",
                                     "repurposing", "--relation", "indication", "--drop-unknown", "--no-progress",
                                     "--format", "json"])
    assert done.exit_code == 0, done.output
    params = json.loads(done.stdout)["model"]["params"]
    assert params["unknown_rows"] == 1 and params["unknown"] == [{"line": 3, "ids": [drug, "disease::NOPE"]}]


def test_a_record_from_a_table_is_reproduced_by_the_board(planted, tmp_path):
    folder, dataset, entities, relations = planted
    triples = _every_candidate(dataset)
    path = tmp_path / "scores.parquet"
    _frame(dataset, triples, _scores(entities, relations, triples)).write_parquet(path)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--scores", str(path), "--no-progress",
                                     "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    db = tmp_path / "board.sqlite"
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "r.json"), "--name", "table",
                                     "--dataset", str(folder), "--scores", str(path), "--db", str(db)])
    assert done.exit_code == 0 and "reproduced by the board" in done.output, done.output
    from openbench.leaderboard import open_leaderboard

    board = open_leaderboard(db)
    try:
        (row_id,) = [row[0] for row in board.connection.execute("SELECT id FROM submissions")]
        certificate = board.certificate(row_id)
    finally:
        board.close()
    assert "--scores" in certificate["command"] and str(path) in certificate["model_files_sha256"]


def test_scores_compared_as_stored_integers_and_float32(planted):
    """Integer and float32 scores rank exactly as stored: the same record as their float64 copies."""
    _, dataset, entities, relations = planted
    triples = _every_candidate(dataset)
    scores = _scores(entities, relations, triples)
    frame = _frame(dataset, triples, scores)
    as_float64 = openbench.evaluate(dataset, openbench.from_scores(frame)).to_dict()
    for dtype in (pl.Int64, pl.Float32):
        other = openbench.evaluate(dataset, openbench.from_scores(frame.with_columns(pl.col("score").cast(dtype))))
        assert _numbers(other.to_dict(), RANKING_KEYS) == _numbers(as_float64, RANKING_KEYS)
    with pytest.raises(InputError, match="beyond 2\\^53"):
        openbench.evaluate(dataset, openbench.from_scores(frame.with_columns(pl.lit(2 ** 60).alias("score"))))
    with pytest.raises(OpenbenchError):
        openbench.evaluate(dataset, openbench.from_scores(frame.with_columns(pl.lit("x").alias("score"))))


@pytest.mark.parametrize("lower_is_better", [False, True])
def test_a_partial_matrix_is_the_complete_one_with_its_unlisted_pairs_tied_last(planted, lower_is_better):
    """Leaving pairs out of a repurposing table is listing them all at one value just beyond every
    listed score on the losing side: every view's numbers are the same (both orders)."""
    _, dataset, entities, relations = planted
    pairs, triples, _, _ = _matrix_pairs(dataset)
    scores = _scores(entities, relations, triples)
    keep = np.random.default_rng(5).random(len(pairs)) < 0.6
    worst = scores[keep].max() + 1.0 if lower_is_better else scores[keep].min() - 1.0
    complete = np.where(keep, scores, worst)
    options = dict(task="repurposing", relations=["indication"], negative_relations=["contraindication"],
                   recall_at=[1, 5, 20], keep_top=0, lower_is_better=lower_is_better)
    partial = openbench.evaluate(dataset, openbench.from_scores(_frame(dataset, pairs[keep], scores[keep], True)),
                                 **options).to_dict()
    full = openbench.evaluate(dataset, openbench.from_scores(_frame(dataset, pairs, complete, True)),
                              **options).to_dict()
    assert json.dumps(partial["repurposing"]["views"], sort_keys=True) == \
        json.dumps(full["repurposing"]["views"], sort_keys=True)
    assert partial["model"]["params"]["candidates_unscored"] > 0 == full["model"]["params"]["candidates_unscored"]
