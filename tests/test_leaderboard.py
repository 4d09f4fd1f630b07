"""The leaderboard: validation, grouping over seeds, concurrency, damaged files, rendering."""
import copy
import csv
import io
import json
import unicodedata
import re
import math
import multiprocessing
import sqlite3
import statistics
import subprocess
import sys

import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.models.scorers import build_scorer
from openbench.leaderboard import APPLICATION_ID, PUBLISHED_HQ_DIR, LeaderboardError, open_leaderboard, validate
from openbench.leaderboard.store import MIGRATIONS
from openbench.leaderboard.render import render
from tests.bases import TableReader, chromium
from tests.helpers import integer_embeddings, needs_chromium, random_labelled_graph, write_samples
from tests.bases import evaluated, render_in_chromium


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Real result records: two models, three embedding seeds each (recorded as the run's seed)."""
    splits = random_labelled_graph(6, 30, 3, {"train": 150, "valid": 10, "test": 25})
    dataset = load_dataset(write_samples(tmp_path_factory.mktemp("graph"), splits))
    out = {}
    for model in ("DistMult", "TransE-L2"):
        for seed in range(3):
            scorer = build_scorer(model, integer_embeddings(seed, dataset.num_entities, 3),
                                  integer_embeddings(seed + 9, dataset.num_relations, 3), dataset.num_entities,
                                  dataset.num_relations)
            record = evaluated(dataset, scorer, seed=seed)
            record["model"]["source_sha256"] = "same-training-code"  # one model, trained with three seeds
            out[(model, seed)] = record
    return out


def _count(db):
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT count(*) FROM submissions").fetchone()[0]


def test_runs_differing_only_in_seed_form_one_group(tmp_path, records):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    for (model, _seed), record in records.items():
        board.submit(record, name=model, model_type="latent")
    rows = [row for row in board.rows() if not row["published"]]
    assert {row["name"]: row["runs"] for row in rows} == {"DistMult": 3, "TransE-L2": 3}
    for row in rows:
        mrrs = [records[(row["name"], seed)]["metrics"]["both"]["realistic"]["mrr"] for seed in range(3)]
        assert row["metrics"]["mrr"]["mean"] == pytest.approx(statistics.fmean(mrrs), abs=1e-15)
        assert row["metrics"]["mrr"]["std"] == pytest.approx(statistics.stdev(mrrs), abs=1e-15)
        assert row["seeds"] == [0, 1, 2] and row["nonstandard_protocol"] is None
    head = [row for row in board.rows(side="head", rank_type="pessimistic") if not row["published"]]
    distmult = next(row for row in head if row["name"] == "DistMult")
    expected = statistics.fmean(records[("DistMult", s)]["metrics"]["head"]["pessimistic"]["hits@10"] for s in range(3))
    assert distmult["metrics"]["hits@10"]["mean"] == pytest.approx(expected, abs=1e-15)
    with pytest.raises(LeaderboardError, match="already on the leaderboard"):
        board.submit(records[("DistMult", 1)], name="again")
    assert _count(tmp_path / "lb.sqlite") == 6
    board.close()


def test_published_results_sit_beside_and_stay_read_only(tmp_path):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    published = [row for row in board.rows(dataset="HQ_DIR") if row["published"]]
    assert [row["name"] for row in published][:2] == ["RESCAL", "ComplEx"]  # sorted by MRR
    assert len(published) == len(PUBLISHED_HQ_DIR)
    assert all(row["protocol"] == "unknown: LibKGE, LinkExplorer 2022" and row["metrics"]["hits@3"]["mean"] is None
               for row in published)
    with pytest.raises(sqlite3.DatabaseError, match="read-only"):
        board.connection.execute("UPDATE published SET mrr = 0.9")
    assert not [row for row in board.rows(side="head") if row["published"]]  # published numbers are both sides
    board.close()


def _broken(record, change):
    bad = copy.deepcopy(record)
    change(bad)
    return bad


BAD = [
    (lambda r: r.pop("protocol"), "missing key"),
    (lambda r: r["dataset"].pop("fingerprint"), "dataset.fingerprint is missing"),
    (lambda r: r["protocol"].pop("filter_sets"), "protocol field"),
    (lambda r: r["metrics"]["both"]["realistic"].__setitem__("mrr", math.nan), "finite number"),
    (lambda r: r["metrics"]["both"]["realistic"].__setitem__("mrr", 1.5), "outside \\[0, 1\\]"),
    (lambda r: r["metrics"]["head"]["optimistic"].__setitem__("mrr", None), "null"),
    (lambda r: r["metrics"]["tail"]["realistic"].__setitem__("hits@10", 0.0), "hits@k cannot fall"),
    (lambda r: r["metrics"]["both"]["realistic"].__setitem__("mr", 0.5), "at least 1"),
    (lambda r: r["model"].pop("name"), "model.name"),
]


@pytest.mark.parametrize("change,reason", BAD)
def test_bad_records_are_refused_with_the_reason_and_nothing_written(tmp_path, records, change, reason):
    record = _broken(records[("DistMult", 0)], change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record))  # NaN is written as NaN, as a careless tool would
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(path), "--name", "x", "--db",
                                     str(tmp_path / "lb.sqlite")])
    assert done.exit_code == 1
    assert "refused" in done.output
    with pytest.raises(LeaderboardError, match=reason):
        validate(record)
    assert not (tmp_path / "lb.sqlite").exists()  # a refused record creates no store


def test_a_nonstandard_protocol_is_flagged(tmp_path, records):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    standard = copy.deepcopy(records[("DistMult", 0)])
    standard["dataset"]["registry"] = {"name": "HQ_DIR", "version": "Zenodo record 3834052"}
    board.submit(standard, name="standard")
    train_only = copy.deepcopy(standard)
    train_only["protocol"]["filter_sets"] = ["train"]
    board.submit(train_only, name="train-filtered")
    flags = {row["name"]: row["nonstandard_protocol"] for row in board.rows(dataset="HQ_DIR")
             if not row["published"]}
    assert flags == {"standard": False, "train-filtered": True}
    table = render(board.rows(dataset="HQ_DIR"), "table")
    assert "train-filtered*" in table and "RESCAL†" in table
    board.close()


def test_scoped_records_are_never_ranked_with_full_ones(tmp_path, records):
    """A tail-only run on chosen relations is its own protocol: absent from the default table,
    shown with --scoped under its scope, flagged nonstandard."""
    splits = random_labelled_graph(6, 30, 3, {"train": 150, "valid": 10, "test": 25})
    dataset = load_dataset(write_samples(tmp_path / "graph", splits))
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 3),
                          integer_embeddings(9, dataset.num_relations, 3), dataset.num_entities, dataset.num_relations)
    scoped = evaluated(dataset, scorer, sides=["tail"], relations=[dataset.relation_labels[0]])
    scoped["model"]["source_sha256"] = "same-training-code"
    board = open_leaderboard(tmp_path / "lb.sqlite")
    board.submit(records[("DistMult", 0)], name="full")
    board.submit(scoped, name="scoped")
    assert [row["name"] for row in board.rows() if not row["published"]] == ["full"]
    rows = board.rows(scoped=True)
    assert [row["name"] for row in rows] == ["scoped"] and rows[0]["nonstandard_protocol"] is True
    assert rows[0]["scope"] == f"relations {dataset.relation_labels[0]}; tail only"
    assert rows[0]["metrics"]["mrr"]["mean"] == scoped["metrics"]["both"]["realistic"]["mrr"]
    assert board.rows(scoped=True, side="head")[0]["metrics"] == {}  # the head side was not evaluated
    board.close()
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(tmp_path / "lb.sqlite"), "--scoped"])
    assert table.exit_code == 0 and "scoped* [relations REL_A; tail only]" in table.output


def _submit_many(arguments):
    db, record, first_seed = arguments
    board = open_leaderboard(db)
    try:
        for seed in range(first_seed, first_seed + 4):
            run = copy.deepcopy(record)
            run["seed"] = seed
            board.submit(run, name="parallel")
    finally:
        board.close()


@pytest.mark.slow
def test_concurrent_submitters_lose_no_row(tmp_path, records):
    db = tmp_path / "lb.sqlite"
    open_leaderboard(db).close()
    work = [(str(db), records[("DistMult", 0)], 100 * worker) for worker in range(6)]
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        pool.map(_submit_many, work)
    assert _count(db) == 24
    board = open_leaderboard(db)
    assert next(row["runs"] for row in board.rows() if row["name"] == "parallel") == 24
    board.close()


def test_damaged_or_foreign_files_are_refused_and_left_untouched(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 10)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE accounts (id INTEGER)")
    connection.close()
    damaged = tmp_path / "damaged.sqlite"
    open_leaderboard(damaged).close()
    data = bytearray(damaged.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the header survives, the schema page does not
    damaged.write_bytes(bytes(data))
    for path, reason in ((garbage, "not an SQLite database"), (foreign, "another program"),
                         (damaged, "damaged|cannot be used")):
        before = path.read_bytes()
        with pytest.raises(LeaderboardError, match=reason):
            open_leaderboard(path)
        assert path.read_bytes() == before
    newer = tmp_path / "newer.sqlite"
    open_leaderboard(newer).close()
    with sqlite3.connect(newer) as connection:
        connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(LeaderboardError, match="newer than this openbench"):
        open_leaderboard(newer)


def test_schema_is_versioned(tmp_path):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    assert board.connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 5
    assert board.connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    board.close()
    assert len(open_leaderboard(tmp_path / "lb.sqlite").published()) == len(PUBLISHED_HQ_DIR)  # seeded once


def test_show_formats(tmp_path, records):
    db = str(tmp_path / "lb.sqlite")
    path = tmp_path / "r.json"
    for seed in range(2):
        path.write_text(json.dumps(records[("TransE-L2", seed)]))
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(path), "--name", "TransE", "--model-type",
                                         "latent", "--paper", "https://example.org/p", "--db", db])
        assert done.exit_code == 0, done.output
    rows = json.loads(CliRunner().invoke(main, ["leaderboard", "show", "--format", "json", "--db", db]).output)
    ours = next(row for row in rows if not row["published"])
    assert set(ours) >= {"name", "dataset", "side", "rank_type", "metrics", "runs", "protocol", "published",
                         "nonstandard_protocol"}
    assert set(ours["dataset"]) == {"name", "version", "fingerprint", "label"} and ours["runs"] == 2
    assert set(ours["metrics"]["mrr"]) == {"mean", "std"}
    parsed = list(csv.DictReader(io.StringIO(CliRunner().invoke(main, ["leaderboard", "show", "--format", "csv",
                                                                       "--db", db]).output)))
    assert float(next(r for r in parsed if r["published"] == "False")["mrr_mean"]) == pytest.approx(
        ours["metrics"]["mrr"]["mean"])
    markdown = CliRunner().invoke(main, ["leaderboard", "show", "--format", "md", "--sort", "hits@10", "--published",
                                         "--db", db])
    assert markdown.output.startswith("### HQ_DIR (ranking)\n\nwhat this table holds: ") and "TransE" in markdown.output
    assert "\n\n| # | model |" in markdown.output


def test_each_dataset_and_task_is_ranked_on_its_own(tmp_path, records):
    """The demo's rows never share a ranking with the published HQ_DIR rows: one table per dataset
    (named by registry or folder, with the fingerprint prefix), numbered from 1."""
    db = str(tmp_path / "lb.sqlite")
    board = open_leaderboard(db)
    board.submit(records[("DistMult", 0)], name="DistMult")
    board.submit(records[("TransE-L2", 0)], name="TransE-L2")
    fingerprint = records[("DistMult", 0)]["dataset"]["fingerprint"]
    board.close()
    table = CliRunner().invoke(main, ["leaderboard", "show", "--published", "--db", db]).output
    sections = table.split("\n\n")
    ours = next(part for part in sections if fingerprint[:8] in part)
    assert ours.splitlines()[0].startswith("dataset graph") and f"({fingerprint[:8]}) (ranking)" in ours
    assert ours.splitlines()[1].startswith("what this table holds: test set; ")
    numbers = [line.split()[0] for line in ours.splitlines()[3:]]
    assert numbers == ["1", "2"] and "RESCAL" not in ours
    published = next(part for part in sections if part.startswith("dataset HQ_DIR"))
    assert published.splitlines()[3].split()[0] == "1" and "DistMult " not in published.replace("DistMult†", "")


@pytest.mark.parametrize("arguments, message", [
    (["--sort", "foo"], "--sort 'foo': expected one of ahits@1, ahits@10, ahits@3, amr, amri, amrr, hits@1, hits@10, "
                        "hits@3, mr, mrr, zhits@1, zhits@10, zhits@3, zmr, zmrr"),
    (["--dataset", "b76"], "a fingerprint prefix needs 6 or more characters; the board holds"),
    (["--dataset", "NO_SUCH_SET"], "no dataset of that name or fingerprint on this board; it holds"),
])
def test_bad_show_options_are_errors_naming_the_choices(tmp_path, records, arguments, message):
    db = str(tmp_path / "lb.sqlite")
    board = open_leaderboard(db)
    board.submit(records[("DistMult", 0)], name="DistMult")
    board.close()
    result = CliRunner().invoke(main, ["leaderboard", "show", "--db", db, *arguments])
    assert result.exit_code == 1 and message in result.output, result.output


@pytest.mark.parametrize("sort, lower_first", [("mr", True), ("amr", True), ("amrr", False), ("zmr", False)])
def test_sorting_by_mr_shows_the_mr_column(tmp_path, records, sort, lower_first):
    db = str(tmp_path / "lb.sqlite")
    board = open_leaderboard(db)
    for model in ("DistMult", "TransE-L2"):
        board.submit(records[(model, 0)], name=model)
    rows = [row for row in board.rows(sort=sort) if not row["published"]]
    board.close()
    values = [row["metrics"][sort]["mean"] for row in rows]
    assert len(set(values)) == 2 and values == sorted(values, reverse=not lower_first)
    if sort != "mr":
        return
    header = next(line for line in render(rows, "table", "mr").splitlines() if line.startswith("#"))
    assert header.split()[-2] == "mr"


def test_names_identify_a_row(tmp_path, records):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    board.submit(records[("DistMult", 0)], name="mine")
    with pytest.raises(LeaderboardError, match="the name 'mine' already names another model on this dataset"):
        board.submit(records[("TransE-L2", 0)], name="mine")
    with pytest.raises(LeaderboardError, match="this run joins the group of #1 'mine'.*submit it under that name"):
        board.submit(records[("DistMult", 1)], name="other")
    board.submit(records[("DistMult", 1)], name="mine")
    assert [row["runs"] for row in board.rows() if not row["published"]] == [2]
    board.close()


def test_killed_writer_page_corruption_and_hand_edited_cells(tmp_path, records):
    """A hot journal left by kill -9 is rolled back on the next open; a page-corrupted file is
    refused before any write; a hand-edited JSON cell is reported by row."""
    db = tmp_path / "lb.sqlite"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(records[("DistMult", 0)]))
    assert CliRunner().invoke(main, ["leaderboard", "submit", str(path), "--name", "a", "--db", str(db)]).exit_code == 0
    script = ("import sqlite3, os\n"
              f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
              "c.execute('PRAGMA cache_size = 1')\n"
              "c.execute('BEGIN IMMEDIATE')\n"
              "c.execute(\"UPDATE submissions SET name = 'half-written', result_json = result_json || zeroblob(0)\")\n"
              "c.execute(\"INSERT INTO published (dataset_name, model_type, name, protocol, source) \"\n"
              "          \"SELECT 'X', 'other', hex(randomblob(2000)), 'p', 's' FROM published, published\")\n"
              "os.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert (tmp_path / "lb.sqlite-journal").exists()  # the hot journal the killed writer left
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert [row["name"] for row in json.loads(shown.output) if not row["published"]] == ["a"]
    # a hand-edited cell
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE submissions SET metrics_json = '{broken'")
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)])
    assert shown.exit_code == 1 and "row #1: the metrics_json cell is not valid JSON" in shown.output
    exported = CliRunner().invoke(main, ["leaderboard", "export", "--db", str(db), "--format", "html", "--output",
                                         str(tmp_path / "site")])  # the page too: never a table silently left out
    assert exported.exit_code == 1 and "row #1: the metrics_json cell is not valid JSON" in exported.output
    assert not (tmp_path / "site").exists()
    # page corruption: overwrite a page of the table's data
    data = bytearray(db.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for offset in range(page_size, len(data), page_size):
        data[offset:offset + 8] = b"\xff" * 8
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    submitted = CliRunner().invoke(main, ["leaderboard", "submit", str(path), "--name", "b", "--db", str(db)])
    assert submitted.exit_code == 1 and "a damaged or unusable SQLite database" in submitted.output
    assert db.read_bytes() == before


@pytest.mark.parametrize("name", ["<!--<script>", "</script><script>alert(1)</script>", "=HYPERLINK(\"http://x\")",
                                  "a|b<b>bold</b>", "model\u202etxt.exe", "x\x1b[2J\x07\r\nfake row"])
def test_hostile_names_are_escaped_for_every_target(tmp_path, records, name):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    board.submit(records[("DistMult", 0)], name=name)
    rows = [row for row in board.rows() if not row["published"]]
    board.close()
    page = render(rows, "html")
    data = page.split('<script id="rows" type="application/json">')[1].split("</script>")[0]
    assert "<" not in data and json.loads(data)[0]["name"] == name  # the rows survive, nothing closes the script
    markdown = render(rows, "md")
    assert "<script>" not in markdown and "<b>" not in markdown and "<!--" not in markdown
    table_row = next(line for line in markdown.splitlines() if line.startswith("| 1 |"))
    header = next(line for line in markdown.splitlines() if line.startswith("| # |"))
    assert table_row.count(" | ") == header.count(" | ")  # a pipe in a name adds no column
    parsed = list(csv.DictReader(io.StringIO(render(rows, "csv"))))
    assert not parsed[0]["name"].startswith(("=", "+", "-", "@"))
    # issue 63: control and bidirectional formatting characters reach no terminal, Markdown or CSV
    # raw; they are shown as escapes, so a reader sees them
    for fmt in ("table", "md", "csv"):
        shown = render(rows, fmt)
        assert not any(unicodedata.category(c) in ("Cc", "Cf") and c != "\n" for c in shown), fmt
        for character, escape in (("\u202e", "\\u202e"), ("\x1b", "\\x1b"), ("\r", "\\x0d")):
            assert (escape in shown) is (character in name), (fmt, escape)
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(tmp_path / "lb.sqlite")]).output
    assert not any(unicodedata.category(c) in ("Cc", "Cf") and c != "\n" for c in shown)


@pytest.fixture(scope="module")
def classification(records, tmp_path_factory):
    """A real classification record of one of the records' embeddings."""
    splits = random_labelled_graph(6, 30, 3, {"train": 150, "valid": 10, "test": 25})
    folder = write_samples(tmp_path_factory.mktemp("classification"), splits, negatives=False)
    for name, split in (("val_sample.csv", "valid"), ("test_sample.csv", "test")):
        corrupted = [f"{h}\t{r}\tNCBIGENE:{(i * 11) % 30}\t\t0\tGENERATED" for i, (h, r, _) in enumerate(splits[split])]
        with open(folder / name, "a") as handle:
            handle.write("\n".join(corrupted) + "\n")
    dataset = load_dataset(folder)
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 3),
                          integer_embeddings(9, dataset.num_relations, 3), dataset.num_entities, dataset.num_relations)
    return evaluated(dataset, scorer, task="classification")


def _page_board(db, records, classification):
    """A board holding every kind of row a page shows: ranking over seeds, a scoped record, a
    classification record, a team's row with links, and the published HQ_DIR rows."""
    board = open_leaderboard(db)
    for (model, _seed), record in records.items():
        board.submit(record, name=model, model_type="latent")
    scoped = copy.deepcopy(records[("DistMult", 0)])
    scoped["protocol"]["relations"] = ["REL_A"]
    board.submit(scoped, name="DistMult on REL_A")
    board.submit(classification, name="DistMult classifier")
    team_row = copy.deepcopy(records[("DistMult", 0)])
    team_row["model"]["source_sha256"] = "lab model"
    board.submit(team_row, name="Lab model", team="Lab <A>", paper="https://example.org/paper?a=1&b=2",
                 code="http://example.org/code")
    return board


@pytest.mark.slow
def test_html_export_renders_the_store_in_a_browser(tmp_path, records, classification):
    """The exported page, rendered by Chromium, shows every table of the store: one section per
    dataset fingerprint, ranking, scoped and classification tables, team, verification and links,
    and only the footnotes its rows use; OpenBioLink's published rows in a section of their own
    when --published asks for them (without it, none: test_published_rows_appear_only_when_asked_…)."""
    needs_chromium()
    db = str(tmp_path / "lb.sqlite")
    board = _page_board(db, records, classification)
    expected = {"ranking": board.rows(include_published=True), "classification": board.rows(task="classification"),
                "scoped": board.rows(scoped=True)}
    board.close()
    done = CliRunner().invoke(main, ["leaderboard", "export", "--format", "html", "--output", str(tmp_path / "site"),
                                     "--db", db, "--published"])
    assert done.exit_code == 0, done.output
    page = tmp_path / "site" / "index.html"
    dom, console = render_in_chromium(page)
    assert console == []  # no script error, no console message
    reader = TableReader()
    reader.feed(dom)
    rendered = [row for row in reader.rows if row]
    every = expected["ranking"] + expected["classification"] + expected["scoped"]
    assert len(rendered) == len(every)
    by_name = {row["name"]: row for row in rendered}
    for want in expected["ranking"]:  # the page sorts each table by its first metric, as the store does
        flags = ("†" if want["published"] else "") + ("*" if want["nonstandard_protocol"] else "")
        row = by_name[want["name"] + flags]
        mean, std = want["metrics"]["mrr"]["mean"], want["metrics"]["mrr"]["std"]
        assert row["mrr"] == f"{mean:.3f}" + (f" ± {std:.3f}" if std is not None else "")
        assert row["runs"] == ("-" if want["runs"] is None else str(want["runs"]))
        assert row["verified"] == ("published" if want["published"] else "self")
    lab = by_name["Lab model"]
    assert lab["team"] == "Lab <A>" and lab["links"] == "paper code"
    assert reader.links == ["https://example.org/paper?a=1&b=2", "http://example.org/code"]
    assert by_name["DistMult classifier"]["auroc"] == f"{expected['classification'][0]['metrics']['auroc']['mean']:.3f}"
    assert "DistMult on REL_A* [relations REL_A]" in by_name
    dataset = records[("DistMult", 0)]["dataset"]
    folder = dataset["path"].rstrip("/").split("/")[-1]
    assert sorted(reader.headings["h2"]) == sorted([f"{folder} ({dataset['fingerprint'][:8]})",
                                                    "HQ_DIR: published results"])  # one section per dataset
    assert sorted(reader.headings["h3"]) == sorted(["ranking", "classification", "ranking; scope: relations REL_A",
                                                    "ranking (published)"])
    assert "† published result" in dom and "* protocol differs" in dom
    # each table's bars are its task's page metrics: MRR and hits@10 for ranking, AUROC and AUPRC for
    # classification, one bar of each per row
    ranked = len(expected["ranking"]) + len(expected["scoped"])
    assert dom.count('class="bar-mrr"') == dom.count('class="bar-hits10"') == ranked
    assert dom.count('class="bar-auroc"') == dom.count('class="bar-auprc"') == len(expected["classification"])
    auroc = expected["classification"][0]["metrics"]["auroc"]["mean"]
    assert f">{auroc:.3f}</text>" in dom  # the classification bar is labelled with its value
    # each table says what it holds, in the words the CLI uses; the page says when and by what it was made
    from openbench import __version__

    protocols = re.findall(r'<p class="protocol">([^<]*)</p>', dom)
    assert len(protocols) == len(reader.headings["h3"])
    assert any("test set; head and tail queries; realistic rank" in line and "filtered (the other known answers in "
               "train, valid, test removed)" in line for line in protocols)
    assert any("triple classification" in line for line in protocols)
    assert any("published numbers; protocol: unknown" in line for line in protocols)
    assert re.search(rf'<p class="generated">generated \d{{4}}-\d\d-\d\d \d\d:\d\d UTC by openbench '
                     rf'{re.escape(__version__)}</p>', dom)
    sizes = [int(size) for size in re.findall(r'<text [^>]*font-size="(\d+)"', dom)]
    assert sizes and min(sizes) >= 12  # the plot's text is legible


def test_footnotes_only_when_used_and_every_output_escapes_every_text_column(tmp_path, records):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    board.submit(records[("DistMult", 0)], name="plain")
    rows = [row for row in board.rows() if not row["published"]]
    board.close()
    for fmt in ("table", "md", "html"):
        shown = render(rows, fmt)
        assert "†" not in shown and "protocol differs" not in shown, fmt
    hostile = copy.deepcopy(rows[0])
    for key in ("group", "name", "team", "model_type", "scope", "paper", "code"):
        hostile[key] = "=HYPERLINK(\"http://x\")"
    hostile["dataset"] = dict(hostile["dataset"], name="@SUM(A1)", fingerprint="+cmd|' /C calc'!A0")
    parsed = list(csv.reader(io.StringIO(render([hostile], "csv"))))
    header, cells = parsed[0], parsed[1]
    for column, value in zip(header, cells):
        assert not value.startswith(("=", "+", "-", "@")), column
    page = render([dict(hostile, paper="javascript:alert(1)", code="data:text/html,x")], "html")
    data = page.split('<script id="rows" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data)[0]["links"] == []  # only http(s) URLs become links


def test_submission_fields_are_checked(tmp_path, records):
    board = open_leaderboard(tmp_path / "lb.sqlite")
    with pytest.raises(LeaderboardError, match="model type 'neural'"):
        board.submit(records[("DistMult", 0)], name="x", model_type="neural")
    with pytest.raises(LeaderboardError, match="needs a name"):
        board.submit(records[("DistMult", 0)], name="  ")
    with pytest.raises(LeaderboardError, match="side 'left'"):
        board.rows(side="left")
    board.close()
    assert _count(tmp_path / "lb.sqlite") == 0


def test_a_result_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("{not json")
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(path), "--name", "x", "--db",
                                     str(tmp_path / "lb.sqlite")])
    assert done.exit_code == 1 and "result.json, line 1: not valid result record" in done.output


def test_a_version_1_store_migrates_with_its_rows(tmp_path, records):
    """A store written before teams and tokens (schema 1) opens as the current version: its rows
    keep their data, and task, scope and dataset label are filled in from the stored records."""
    from openbench.leaderboard.schema import canonical as _canonical, statements as _statements

    db = tmp_path / "old.sqlite"
    record = records[("DistMult", 0)]
    with sqlite3.connect(db, isolation_level=None) as connection:
        for statement in _statements(MIGRATIONS[0]):
            connection.execute(statement)
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute("PRAGMA user_version = 1")
        model = record["model"]
        connection.execute(
            "INSERT INTO submissions (name, model_type, dataset_fingerprint, protocol_key, model_key, seed_key, "
            "metrics_json, result_json, submitted_at) VALUES (?, 'latent', ?, ?, ?, ?, ?, ?, 'then')",
            ("old run", record["dataset"]["fingerprint"], _canonical(record["protocol"]),
             _canonical([model["name"], model.get("params", {}), model.get("source_sha256")]),
             _canonical(record["seed"]), _canonical(record["metrics"]), json.dumps(record)))
    board = open_leaderboard(db)
    assert board.connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    rows = [row for row in board.rows() if not row["published"]]
    assert [(row["name"], row["verified"], row["runs"]) for row in rows] == [("old run", "self", 1)]
    assert rows[0]["group"].startswith("graph")
    assert board.create_token("lab").startswith("obt_")
    board.close()


def test_a_hosted_part_serving_one_side_is_no_scope():
    """The CI run of 61ddd22 drew a secret whose test-challenge part served tail queries only: the
    part was listed as a "tail only" scope, apart from its test-dev row (the served sides are the
    server's choice, not the submitter's)."""
    from openbench.leaderboard.store import scope_of

    assert scope_of({"sides": ["tail"]}) == "tail only"
    assert scope_of({"sides": ["tail"], "hosted_protocol": "served-v1", "served_sides": ["head", "tail"]}) is None
    assert scope_of({"sides": ["tail"], "hosted_protocol": "served-v1", "relations": ["R"]}) == "relations R"


def _baselines_on_a_board(dataset, db):
    """The popularity and structure baselines of ``dataset`` submitted to a new board at ``db``;
    its non-published rows as ``show --format json`` gives them."""
    import openbench
    from openbench.evaluation.evaluate import evaluate
    from openbench.leaderboard.store import read_rows

    board = open_leaderboard(db)
    for name, model in (("popularity", openbench.popularity_model(dataset)),
                        ("neighbours", openbench.neighbour_model(dataset))):
        board.submit(evaluate(dataset, model, device="cpu").to_dict(), name=name)
    board.close()
    return [row for row in json.loads(render(read_rows(db), "json")) if not row["published"]]


def test_an_entity_split_is_ranked_apart_and_says_its_kind(tmp_path):
    """Issue 51: the rows of an entity-held-out split form their own table, titled with the kind."""
    from splits.entity_split import Selection, entity_split
    from tests.bases import sample_graph

    positives, true_negatives, nodes = sample_graph(tmp_path / "graph")
    entity_split(positives, true_negatives, nodes, tmp_path / "entity", relations=["DIS_DRUG", "GENE_DIS"],
                 selection=Selection(node_type="DIS", fraction=0.3), seed=1)
    dataset = load_dataset(tmp_path / "entity")
    db = tmp_path / "board.sqlite"
    rows = _baselines_on_a_board(dataset, db)
    assert {row["group"] for row in rows} == {rows[0]["group"]} and "entity split, " in rows[0]["group"]
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)]).output
    assert "entity split, " in table and "entities held out" in table


def test_an_inductive_split_is_ranked_apart_and_says_its_kind(tmp_path):
    """Issue 52: the rows of an inductive split form their own table, titled with the kind and the
    inference graph's entity count."""
    from splits.inductive_split import inductive_split
    from tests.bases import sample_graph

    positives, _, _ = sample_graph(tmp_path / "graph")
    inductive_split(positives, tmp_path / "inductive", inference_fraction=0.4, test_fraction=0.2, seed=3)
    dataset = load_dataset(tmp_path / "inductive")
    db = tmp_path / "board.sqlite"
    rows = _baselines_on_a_board(dataset, db)
    entities = int(dataset.inference_entities().shape[0])
    assert {row["group"] for row in rows} == {rows[0]["group"]}
    assert f"inductive split, {entities} inference-graph entities ranked" in rows[0]["group"]
    table = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)]).output
    assert f"full ranking against the {entities} inference-graph entities" in table and "chosen" not in table


def test_an_empty_table_says_why_before_judging_the_sort_key(tmp_path):
    """``show --dataset HQ_DIR --sort hits@10 --side tail`` answered "expected one of mrr": the real
    reason is that no row has tail metrics there (the published results report both sides)."""
    db = tmp_path / "board.sqlite"
    open_leaderboard(db).close()
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--dataset", "HQ_DIR", "--sort",
                                      "hits@10", "--side", "tail"])
    assert shown.exit_code == 1 and "expected one of" not in shown.output
    assert "no ranking rows to show for HQ_DIR on the tail side" in shown.output
    assert "both sides together" in shown.output
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--dataset", "HQ_DIR", "--sort", "hits@10"])
    assert shown.exit_code == 0 and "RESCAL" in shown.output


def test_reading_commands_refuse_a_board_that_does_not_exist(tmp_path):
    """Issue 66: `leaderboard show --db nonexistant.sqlite` exited 0 and created a board."""
    missing = tmp_path / "nonexistant.sqlite"
    for command in (["show"], ["show", "--format", "json"], ["export", "--output", str(tmp_path / "page")]):
        done = CliRunner().invoke(main, ["leaderboard", *command, "--db", str(missing)])
        assert done.exit_code == 1 and "no leaderboard there" in done.output, done.output
        assert not missing.exists() and not (tmp_path / "page").exists()
    made = CliRunner().invoke(main, ["leaderboard", "token", "create", "--name", "lab", "--db", str(missing)])
    assert made.exit_code == 0 and missing.is_file()


def test_published_rows_appear_only_when_asked_in_show_export_and_serve(tmp_path, records):
    """A new lab board holds its own rows: OpenBioLink's published HQ_DIR rows only with --published
    (or --dataset naming HQ_DIR), the same in the table, the page and the served rows."""
    import asyncio

    from openbench.leaderboard.server import create_app

    def get(app, path):
        """The body of one GET through the ASGI application (no HTTP client needed)."""
        sent, body = [], []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)
            body.append(message.get("body", b""))

        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "headers": [], "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80),
                 "client": ("127.0.0.1", 1), "root_path": ""}
        asyncio.run(app(scope, receive, send))
        assert sent[0]["status"] == 200
        return b"".join(body).decode()

    db = tmp_path / "lb.sqlite"
    board = open_leaderboard(db)
    board.submit(records[("DistMult", 0)], name="DistMult")
    board.close()

    def shown(*extra):
        done = CliRunner().invoke(main, ["leaderboard", "show", "--format", "json", "--db", str(db), *extra])
        assert done.exit_code == 0, done.output
        return sum(row["published"] for row in json.loads(done.output))

    assert shown() == 0 and shown("--published") == len(PUBLISHED_HQ_DIR)
    assert shown("--dataset", "HQ_DIR") == len(PUBLISHED_HQ_DIR)
    pages = {}
    for name, extra in (("plain", []), ("asked", ["--published"])):
        done = CliRunner().invoke(main, ["leaderboard", "export", "--output", str(tmp_path / name), "--db", str(db),
                                         *extra])
        assert done.exit_code == 0, done.output
        pages[name] = (tmp_path / name / "index.html").read_text()
    assert "AnyBURL" not in pages["plain"] and "AnyBURL" in pages["asked"]
    for published, expected in ((None, 0), (True, len(PUBLISHED_HQ_DIR))):
        app = create_app(str(db), published=published)
        assert sum(row["published"] for row in json.loads(get(app, "/api/leaderboard"))) == expected
        assert ("AnyBURL" in get(app, "/")) == bool(expected)
