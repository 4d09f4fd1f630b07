"""The leaderboard shows uncertainty (issue 39, 5): rows with their ranks show the bootstrap
interval of the ranked metric and whether they are significantly worse than the best row of their
ranking (paired sign-flip tests, Holm-corrected), on the table, JSON and the page."""
import json

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.evaluation.statistics.compare import sign_flip_p_value
from openbench.evaluation.statistics.intervals import confidence_block
from openbench.evaluation.statistics.ranks_table import write_ranks
from openbench.leaderboard import open_leaderboard
from openbench.leaderboard.uncertainty import ALPHA, PERMUTATIONS, holm
from tests.bases import lifted_scorer
from tests.helpers import needs_chromium, random_labelled_graph, snapshot, write_samples


def test_holm_equals_its_definition():
    p_values = [0.01, 0.04, 0.03, 0.2, 0.005]
    order = sorted(range(5), key=lambda i: p_values[i])
    expected, running = [0.0] * 5, 0.0
    for rank, index in enumerate(order):  # step down: (m - rank) p, kept monotone, at most 1
        running = max(running, min(1.0, (5 - rank) * p_values[index]))
        expected[index] = running
    assert holm(p_values) == pytest.approx(expected)
    assert holm([0.5, 0.6]) == [1.0, 1.0] and holm([]) == []


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Three models on one split, each reproduced by the board (its own record and ranks): a good
    one, one nearly the same (a few queries differ) and one at chance."""
    from openbench.leaderboard.reproduce import reproduce

    root = tmp_path_factory.mktemp("uncertainty")
    folder = write_samples(root / "split", random_labelled_graph(61, 80, 3, {"train": 600, "valid": 20, "test": 120}))
    dataset = load_dataset(folder)
    models = {"good": lifted_scorer(dataset, 0.6, 1), "close": lifted_scorer(dataset, 0.58, 1),
              "chance": lifted_scorer(dataset, 0.0, 2)}
    db = root / "board.sqlite"
    evaluated = {}
    for name, model in models.items():
        record = openbench.evaluate(dataset, model)
        (root / f"{name}.json").write_text(json.dumps(record.to_dict()))
        write_ranks(root / f"{name}.parquet", record.ranks, record.to_dict())
        reproduced, certificate = reproduce(record.to_dict(), model, dataset)
        board = open_leaderboard(db)
        board.submit(reproduced.to_dict(), name=name, verified="reproduced", ranks=reproduced.ranks,
                     certificate=certificate)
        board.close()
        evaluated[name] = record
    return {"db": db, "root": root, "records": evaluated, "dataset": dataset, "models": models}


def _rows(db, *arguments):
    done = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--format", "json", *arguments])
    assert done.exit_code == 0, done.output
    return {row["name"]: row for row in json.loads(done.output) if not row["published"]}


def _differences(best, other, metric):
    """Per-query differences other - best, paired by query, by a plain join on the query's key."""
    key = ["split", "side", "relation", "head", "tail"]

    def value(frame):
        rank = frame["rank"]
        return (1 / rank) if metric == "mrr" else (rank <= int(metric[5:])).cast(pl.Float64)

    joined = other.ranks.with_columns(value(other.ranks).alias("o")).sort(key).select(key + ["o"]).with_columns(
        best.ranks.with_columns(value(best.ranks).alias("b")).sort(key)["b"])
    return (joined["o"] - joined["b"]).to_numpy()


@pytest.mark.parametrize("metric", ["mrr", "hits@10"])
def test_rows_show_their_interval_and_whether_they_are_worse_than_the_best(board, metric):
    rows, records = _rows(board["db"], "--sort", metric), board["records"]
    assert rows["good"]["metrics"][metric]["mean"] > rows["chance"]["metrics"][metric]["mean"]
    best = max(rows, key=lambda name: rows[name]["metrics"][metric]["mean"])
    assert rows[best]["not_worse_than_best"] is True
    others = [name for name in rows if name != best]
    p_values = [sign_flip_p_value(_differences(records[best], records[name], metric), PERMUTATIONS,
                                  np.random.default_rng(0)) for name in others]
    for name, adjusted in zip(others, holm(p_values)):
        difference = _differences(records[best], records[name], metric).mean()
        assert rows[name]["not_worse_than_best"] == (difference >= 0 or adjusted >= ALPHA), name
        assert rows[name]["p_vs_best"] == pytest.approx(adjusted)
    assert rows["chance"]["not_worse_than_best"] is False  # far below the trained model
    assert rows["close" if best == "good" else "good"]["not_worse_than_best"] is True  # the same model, nearly
    for name, row in rows.items():
        expected = confidence_block(records[name].ranks, [1, 3, 10], 1000, 0)["both"][metric]
        assert [row["interval"]["low"], row["interval"]["high"]] == pytest.approx(expected) and \
            row["interval"]["metric"] == metric


def test_the_table_and_the_page_show_them(board, tmp_path):
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(board["db"])])
    assert table.exit_code == 0 and "95% CI" in table.output and "≈best" in table.output
    assert "not significantly worse than the ranking's best row" in table.output
    lines = {line.split()[1]: line for line in table.output.splitlines() if line[:1].isdigit()}
    assert lines["chance"].split()[-2:] == ["no", "1"] and lines["good"].split()[-2:] == ["yes", "1"]
    page = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(board["db"]), "--format", "html"])
    assert page.exit_code == 0 and "95% CI" in page.output and '"not_worse_than_best": false' in page.output
    rank_type = _rows(board["db"], "--rank-type", "pessimistic")
    assert all(row["interval"] is None and row["not_worse_than_best"] is None for row in rank_type.values())


def test_ranks_that_are_not_the_records_are_refused_and_nothing_is_written(board, tmp_path):
    db = tmp_path / "board.sqlite"
    root = board["root"]
    open_leaderboard(db).close()
    before = snapshot(db)
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(root / "good.json"), "--name", "x", "--ranks",
                                     str(root / "chance.parquet"), "--db", str(db)])
    assert done.exit_code == 1 and "these are not the ranks of this evaluation" in done.output
    assert "chance.parquet: metrics.both." in done.output
    assert snapshot(db) == before
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(root / "good.json"), "--name", "x", "--ranks",
                                     str(root / "good.json"), "--db", str(db)])
    assert done.exit_code == 1 and "not a ranks file" in done.output and snapshot(db) == before
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(root / "good.json"), "--name", "x", "--ranks",
                                     str(root / "good.parquet"), "--server", "http://127.0.0.1:9"])
    assert done.exit_code == 2 and "--ranks and the model's files go with a local board" in done.output


def test_the_page_renders_the_intervals_and_the_marks_in_a_browser(board, tmp_path):
    needs_chromium()
    import subprocess

    from tests.bases import TableReader, chromium

    done = CliRunner().invoke(main, ["leaderboard", "export", "--format", "html", "--output", str(tmp_path / "site"),
                                     "--db", str(board["db"])])
    assert done.exit_code == 0, done.output
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (tmp_path / "site" / "index.html").as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    reader = TableReader()
    reader.feed(dom)
    rendered = {row["name"]: row for row in reader.rows if row and "name" in row and row["name"] in board["records"]}
    rows = _rows(board["db"])
    for name, row in rendered.items():
        interval = rows[name]["interval"]
        assert row["interval"] == f"[{interval['low']:.3f}, {interval['high']:.3f}]"
        assert row["not_worse_than_best"] == ("yes" if rows[name]["not_worse_than_best"] else "no")
    assert set(rendered) == {"good", "close", "chance"}


def test_ranks_of_a_classification_record_are_refused(board):
    from openbench.leaderboard.store import Leaderboard, LeaderboardError

    record = json.loads((board["root"] / "good.json").read_text())
    assert Leaderboard._ranks_row(record, board["records"]["good"].ranks) is not None  # a ranking record: kept
    record["task"] = "classification"
    with pytest.raises(LeaderboardError, match="ranks belong to ranking records"):
        Leaderboard._ranks_row(record, board["records"]["good"].ranks)


def test_a_row_of_several_runs_is_not_annotated_from_one_of_them(board, tmp_path):
    """Issue 56: a row of two runs (MRR 0.6 and at chance) showed its first run's interval and
    "not worse than best". The intervals and tests are of one run's ranks: a row of several runs
    gets neither, the single-run rows beside it keep theirs."""
    dataset = load_dataset(board["root"] / "split")
    db = tmp_path / "board.sqlite"
    first = openbench.evaluate(dataset, lifted_scorer(dataset, 0.6, 1), seed=0).to_dict()
    runs = [(first, openbench.evaluate(dataset, lifted_scorer(dataset, 0.6, 1), seed=0).ranks)]
    second_record = openbench.evaluate(dataset, lifted_scorer(dataset, 0.0, 2), seed=1)
    second = dict(second_record.to_dict(), model=first["model"])  # the same model, another seed
    runs.append((second, second_record.ranks))
    for index, (record, ranks) in enumerate(runs):
        (tmp_path / f"run{index}.json").write_text(json.dumps(record))
        write_ranks(tmp_path / f"run{index}.parquet", ranks, record)
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / f"run{index}.json"), "--name",
                                         "two runs", "--ranks", str(tmp_path / f"run{index}.parquet"), "--db", str(db)])
        assert done.exit_code == 0, done.output
    single = board["records"]["close"].to_dict()
    (tmp_path / "single.json").write_text(json.dumps(single))
    write_ranks(tmp_path / "single.parquet", board["records"]["close"].ranks, single)
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "single.json"), "--name", "one run",
                                     "--ranks", str(tmp_path / "single.parquet"), "--db", str(db)])
    assert done.exit_code == 0, done.output
    rows = _rows(db)
    assert rows["two runs"]["runs"] == 2
    assert rows["two runs"]["interval"] is None and rows["two runs"]["not_worse_than_best"] is None
    assert rows["one run"]["interval"] is not None


# -- issue 63: the board compares only ranks it computed -----------------------------------------

def _forged(honest: pl.DataFrame, target: pl.DataFrame) -> pl.DataFrame:
    """``honest`` ranks with their rank values moved between queries of the same relation and side:
    within each group the best values go where ``target`` is weakest. Every per-relation and per-side
    metric stays what it was; only which rank belongs to which query changes."""
    key = ["split", "side", "relation", "head", "tail"]
    joined = honest.join(target.select(*key, pl.col("rank").alias("_target")), on=key, how="left",
                         maintain_order="left").with_row_index("_row")
    parts = []
    for _, group in joined.group_by(["side", "relation"], maintain_order=True):
        slots = group.sort("_target", descending=True, maintain_order=True)["_row"]  # target's weakest first
        values = group.sort("rank", maintain_order=True).select("n_greater", "n_equal", "n_candidates", "rank")
        parts.append(pl.concat([slots.to_frame(), values], how="horizontal"))
    moved = pl.concat(parts)
    return joined.drop("n_greater", "n_equal", "n_candidates", "rank").join(moved, on="_row").sort("_row") \
        .select(honest.columns)


def test_a_forged_ranks_file_that_changes_no_metric_buys_no_verdict(board, tmp_path):
    """The attack as reported: a worse model's rank values moved onto the queries where the best
    model is weakest. The evidence check cannot see it (every metric holds), and a paired test
    would call the forgery "not worse than best"; the board now draws no paired verdict from ranks
    it did not compute: the row keeps its own interval, says it is self-reported, and the rows the
    board computed keep their verdicts."""
    from openbench.evaluation.statistics.evidence import check_against_record, queries_digest
    from openbench.evaluation.statistics.ranks_table import RANKS_METADATA_KEY, ranks_provenance
    from openbench.leaderboard.uncertainty import SELF_REPORTED

    records = board["records"]
    forged = _forged(records["chance"].ranks, records["good"].ranks)
    record = records["chance"].to_dict()
    assert not forged.equals(records["chance"].ranks)
    check_against_record(record, forged)  # the metrics cannot refute it
    paired = _differences(records["good"], type("R", (), {"ranks": forged}), "mrr")
    honest = _differences(records["good"], records["chance"], "mrr")
    # the same mean difference, other pairs: what a paired test would judge is the forger's choice
    assert paired.mean() == pytest.approx(honest.mean()) and not np.allclose(np.sort(paired), np.sort(honest))
    db = tmp_path / "board.sqlite"
    import shutil

    shutil.copy(board["db"], db)
    provenance = ranks_provenance(record)
    provenance.update(queries=forged.height, queries_sha256=queries_digest(forged))
    forged.write_parquet(tmp_path / "forged.parquet", metadata={RANKS_METADATA_KEY: json.dumps(provenance)})
    forged_record = json.loads(json.dumps(record))
    forged_record["model"]["name"] = "forged"
    (tmp_path / "forged.json").write_text(json.dumps(forged_record))
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "forged.json"), "--name", "forged",
                                     "--ranks", str(tmp_path / "forged.parquet"), "--db", str(db)])
    assert done.exit_code == 0 and "self-reported" in done.output, done.output
    rows = _rows(db)
    assert rows["forged"]["verified"] == "self" and rows["forged"]["not_worse_than_best"] is None
    assert rows["forged"]["paired"] == SELF_REPORTED and rows["forged"]["interval"] is not None
    assert "p_vs_best" not in rows["forged"]
    before = _rows(board["db"])
    for name in ("good", "close", "chance"):
        assert rows[name]["not_worse_than_best"] == before[name]["not_worse_than_best"], name
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)]).output
    line = next(line for line in table.splitlines() if " forged " in line)
    assert line.split()[-2:] == ["self", "1"] and "self-reported row gets no paired verdict" in table


def test_no_self_reported_row_is_ever_paired(board, tmp_path):
    """Property: whatever the rows' order, a self-reported row never gets a paired verdict and is
    never the best a computed row is compared with, even when it ranks first."""
    from openbench.leaderboard.uncertainty import annotate

    stored = {1: (board["records"]["good"].ranks, {}), 2: (board["records"]["chance"].ranks, {}),
              3: (board["records"]["close"].ranks, {})}
    for verified in (("self", "reproduced", "server"), ("reproduced", "self", "reproduced"),
                     ("self", "self", "server"), ("server", "reproduced", "self")):
        rows = [{"name": str(i), "group": "g", "scope": None, "verified": mark, "_ids": [i], "metrics": {}}
                for i, mark in zip((1, 2, 3), verified)]
        annotate(rows, stored.get, "mrr", "both", "realistic")
        computed = [row for row in rows if row["verified"] != "self"]
        for row in rows:
            if row["verified"] == "self":
                assert row["not_worse_than_best"] is None and "p_vs_best" not in row
        if computed:
            assert computed[0]["not_worse_than_best"] is True  # the best computed row


def _embedding_model(folder, dataset, seed):
    from tests.helpers import integer_embeddings

    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "entities.npy", integer_embeddings(seed, dataset.num_entities, 4).astype(np.float32))
    np.save(folder / "relations.npy", integer_embeddings(seed + 1, dataset.num_relations, 4).astype(np.float32))
    return ["--model", "DistMult", "--entity-embeddings", str(folder / "entities.npy"), "--relation-embeddings",
            str(folder / "relations.npy")]


def _without_timing(record: dict) -> dict:
    return {key: value for key, value in record.items() if key not in ("timing", "seconds")}


def test_a_reproduced_row_is_the_record_openbench_evaluate_gives(board, tmp_path):
    """A model submitted with its files: the board re-evaluates it and stores its own record, equal
    to `openbench evaluate` of the same files on the same dataset (timing aside), with its ranks and
    a certificate whose command gives that record again."""
    import shlex
    import sqlite3

    split = board["root"] / "split"
    model = _embedding_model(tmp_path / "model", board["dataset"], 3)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(split), *model, "--hits-at", "1,3,10",
                                     "--output", str(tmp_path / "mine.json")])
    assert done.exit_code == 0, done.output
    db = tmp_path / "board.sqlite"
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "mine.json"), "--name", "mine",
                                     "--dataset", str(split), *model, "--db", str(db)])
    assert done.exit_code == 0 and "reproduced by the board" in done.output, done.output
    with sqlite3.connect(db) as connection:
        row_id, stored, certificate, verified = connection.execute(
            "SELECT id, result_json, certificate_json, verified FROM submissions").fetchone()
    mine = json.loads((tmp_path / "mine.json").read_text())
    assert verified == "reproduced" and _without_timing(json.loads(stored)) == _without_timing(mine)
    certificate = json.loads(certificate)
    assert certificate["dataset_fingerprint"] == mine["dataset"]["fingerprint"]
    import hashlib

    assert certificate["model_files_sha256"] == {
        str(tmp_path / "model" / name): hashlib.sha256((tmp_path / "model" / name).read_bytes()).hexdigest()
        for name in ("entities.npy", "relations.npy")}
    again = CliRunner().invoke(main, shlex.split(certificate["command"])[1:] + ["--output", str(tmp_path / "again.json")])
    assert again.exit_code == 0, again.output
    assert _without_timing(json.loads((tmp_path / "again.json").read_text())) == _without_timing(mine)
    rows = _rows(db)
    assert rows["mine"]["verified"] == "reproduced" and rows["mine"]["not_worse_than_best"] is True
    board_file = open_leaderboard(db)
    assert board_file.certificate(row_id) == certificate and board_file.stored_ranks(row_id) is not None
    board_file.close()


def test_a_model_that_does_not_give_the_record_is_refused_and_nothing_written(board, tmp_path):
    split = board["root"] / "split"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(split), *_embedding_model(tmp_path / "a",
                                     board["dataset"], 3), "--output", str(tmp_path / "a.json")])
    assert done.exit_code == 0, done.output
    db = tmp_path / "board.sqlite"
    open_leaderboard(db).close()
    before = snapshot(db)
    other = _embedding_model(tmp_path / "b", board["dataset"], 5)
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "a.json"), "--name", "a", "--dataset",
                                     str(split), *other, "--db", str(db)])
    assert done.exit_code == 1 and "the model does not reproduce the submitted record: metrics." in done.output
    assert snapshot(db) == before
    elsewhere = write_samples(tmp_path / "other", random_labelled_graph(62, 80, 3, {"train": 600, "valid": 20,
                                                                                      "test": 120}))
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "a.json"), "--name", "a", "--dataset",
                                     str(elsewhere), *_embedding_model(tmp_path / "a", board["dataset"], 3), "--db",
                                     str(db)])
    assert done.exit_code == 1 and "give --dataset the split the record evaluated" in done.output, done.output
    assert snapshot(db) == before
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "a.json"), "--name", "a", "--dataset",
                                     str(split), "--db", str(db)])
    assert done.exit_code == 2 and "give the model too" in done.output


def test_a_model_the_engine_refuses_is_refused_by_the_board_and_nothing_written(board, tmp_path):
    """Issue 77: embeddings with one +inf entry once evaluated to MRR 1.000 and were stored as
    reproduced. The engine refuses them in one line; so does the board's reproduction, whatever
    the submitted record claims (here the perfect score the old engine gave), and nothing is written."""
    split = board["root"] / "split"
    model = _embedding_model(tmp_path / "model", board["dataset"], 3)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(split), *model, "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    claimed = json.loads((tmp_path / "r.json").read_text())
    for side in claimed["metrics"].values():
        for rank in side.values():
            rank.update({key: 1.0 for key in rank if key.startswith(("mrr", "hits@", "amri"))})
    (tmp_path / "r.json").write_text(json.dumps(claimed))
    entities = np.load(tmp_path / "model" / "entities.npy")
    entities[0, 2] = np.inf
    np.save(tmp_path / "model" / "entities.npy", entities)
    db = tmp_path / "board.sqlite"
    open_leaderboard(db).close()
    before = snapshot(db)
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "r.json"), "--name", "broken",
                                     "--dataset", str(split), *model, "--db", str(db)])
    assert done.exit_code == 1, done.output
    assert "entities.npy: entity embeddings, row 0" in done.output and "column 2, holds +inf" in done.output
    assert snapshot(db) == before
