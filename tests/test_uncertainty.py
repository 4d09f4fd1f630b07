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
from tests.helpers import random_labelled_graph, snapshot, write_samples


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
    """Three models on one split, each submitted with its ranks: a good one, one nearly the same
    (a few queries differ) and one at chance."""
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
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(root / f"{name}.json"), "--name", name,
                                         "--ranks", str(root / f"{name}.parquet"), "--db", str(db)])
        assert done.exit_code == 0, done.output
        evaluated[name] = record
    return {"db": db, "root": root, "records": evaluated}


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
    assert done.exit_code == 2 and "--ranks goes with a local board" in done.output


@pytest.mark.skipif(__import__("tests.bases", fromlist=["chromium"]).chromium() is None,
                    reason="no headless Chromium here (.ci/run installs Debian's chromium)")
def test_the_page_renders_the_intervals_and_the_marks_in_a_browser(board, tmp_path):
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
