"""The offline demo: deterministic files, a trained model far above chance, the CLI wrapper."""
import json
import re

import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.demo import planted_graph
from openbench.leaderboard import open_leaderboard
from tests.helpers import needs_module

pytestmark = pytest.mark.slow  # minutes in all (spawned processes, training, a corpus): not in the fast loop

needs_module("pykeen")


def test_planted_graph_is_seeded_and_leak_free():
    first, again, other = planted_graph(1), planted_graph(1), planted_graph(2)
    assert first == again and first != other
    seen = {e for h, _, t in first["train"] for e in (h, t)}
    for split in ("valid", "test"):
        assert first[split] and all(h in seen and t in seen for h, _, t in first[split])
    assert not set(first["test"]) & set(first["train"])


def _run_twice(tmp_path_factory, *arguments):
    """Two runs of ``openbench demo`` with the same seed, each into its own folder: [(folder, result)]."""
    runs = []
    for name in ("first", "second"):
        out = tmp_path_factory.mktemp(name)
        result = CliRunner().invoke(main, ["demo", *arguments, "--out", str(out), "--no-progress"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs.append((out, result))
    return runs


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    return _run_twice(tmp_path_factory, "--planted", "--epochs", "20")


def test_demo_writes_everything_and_learns(demo_runs):
    out, run = demo_runs[0]
    record = json.loads((out / "result.json").read_text())
    realistic = record["metrics"]["both"]["realistic"]
    assert realistic["amri"] > 0.5, realistic  # a constant or random model sits at 0
    assert record["model"]["name"] == "DistMult" and record["model"]["params"]["trained_by"] == "pykeen"
    assert "openbench evaluate --dataset" in run.stdout  # results on stdout, logs on stderr


def test_same_seed_gives_byte_identical_files(demo_runs):
    (first, _), (second, _) = demo_runs
    for name in ("dataset/train_sample.csv", "dataset/val_sample.csv", "dataset/test_sample.csv",
                 "model/entities.npy", "model/relations.npy"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    records = [json.loads((out / "result.json").read_text()) for out in (first, second)]
    for record in records:
        record.pop("timing")
        record["dataset"].pop("path")
    assert records[0] == records[1]


@pytest.fixture(scope="module")
def pipeline_runs(pipeline_demo, tmp_path_factory):
    """The session's demo run (shared with the documentation's examples) and a second one."""
    out = tmp_path_factory.mktemp("second")  # the default 60 epochs: at 30 DistMult has not learned this split yet
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [pipeline_demo, (out, result)]


def test_pipeline_demo_generates_splits_trains_two_models_and_evaluates(pipeline_runs):
    out, run = pipeline_runs[0]
    assert (out / "graph" / "graph_files" / "edges.csv").is_file()
    assert (out / "split" / "train_sample.csv").is_file() and (out / "split" / "test_sample.csv").is_file()
    for model in ("DistMult", "TransE-L2"):
        record = json.loads((out / "results" / f"{model}.json").read_text())
        assert record["model"]["name"] == model
        assert record["metrics"]["both"]["realistic"]["amri"] > 0.2, model  # learned: chance sits at 0
        assert model in run.stdout
    assert "openbench evaluate --dataset" in run.stdout
    board = open_leaderboard(out / "leaderboard.sqlite")
    fingerprint = json.loads((out / "results" / "DistMult.json").read_text())["dataset"]["fingerprint"]
    submitted = [row for row in board.rows(dataset=fingerprint[:12]) if not row["published"]]
    board.close()
    # one row per model and protocol: the full filtered ranking and the sampled (OGB) protocol
    assert sorted(row["name"] for row in submitted) == (["DistMult (demo, seed 0)"] * 2 + ["TransE-L2 (demo, seed 0)"] * 2
                                                        + ["popularity (demo, seed 0)", "rules (demo, seed 0)"])
    ranked = [row for row in submitted if row["group"].endswith("(ranking)")]
    assert len(ranked) == 4 and all(row["interval"] is not None for row in ranked)  # the demo submits its ranks
    # the split's training set shows leakage patterns (the rules baseline has answers) and the split removed
    # every test triple they give away: rules scores what popularity does, and the demo says so
    rules = json.loads((out / "results" / "rules.json").read_text())
    assert rules["model"]["params"]["implied_triples"] > 0
    assert rules["metrics"]["both"]["realistic"] == popularity_metrics(out)
    assert "reading: rules scores exactly what popularity does" in run.stdout
    best = max(ranked, key=lambda row: row["metrics"]["mrr"]["mean"])
    assert best["not_worse_than_best"] is True
    for model in ("DistMult", "TransE-L2"):
        sampled = json.loads((out / "results" / f"{model}.sampled.json").read_text())
        assert sampled["protocol"]["candidates"] == "sampled" and sampled["protocol"]["filter_sets"] == []
        assert sampled["protocol"]["negatives_per_query"]["head"] == 20
    assert "under OGB's sampled protocol" in run.stdout
    # what hub degree alone scores, beside them
    popularity = json.loads((out / "results" / "popularity.json").read_text())
    assert popularity["model"]["name"] == "popularity"
    block = popularity["metrics"]["both"]["realistic"]
    assert f"popularity    {block['mrr']:.4f}  {block['hits@1']:.4f}   {block['hits@10']:.4f}" in run.stdout
    # the two baselines compared query by query, from the ranks files the demo wrote
    comparison = run.stdout[run.stdout.index("compared query by query"):]
    assert "mrr on both" in comparison and "95 % CI" in comparison and "Wilcoxon p" in comparison
    records = {model: json.loads((out / "results" / f"{model}.json").read_text()) for model in ("DistMult", "TransE-L2")}
    difference = (records["DistMult"]["metrics"]["both"]["realistic"]["mrr"]
                  - records["TransE-L2"]["metrics"]["both"]["realistic"]["mrr"])
    assert f"A - B  {difference:+.4f}" in comparison
    assert "DistMult (demo, seed 0)" in (out / "leaderboard" / "index.html").read_text()


def test_the_demos_stdout_and_report_say_what_the_numbers_are(pipeline_runs):
    """Issue 54: a person who has read nothing can tell from the demo's stdout and report which
    model is better, by how much, with what certainty: every table carries its split, sides, rank
    type and protocol; the comparison its interval and verdict; the report its figures."""
    out, run = pipeline_runs[0]
    stdout = run.stdout
    queries = json.loads((out / "results" / "DistMult.json").read_text())["diagnostics"]["queries"]
    assert (f"link prediction on the demo's split: test set; {queries} queries (head and tail); realistic rank (ties: "
            "the mean of the tied positions); full ranking against all ") in stdout
    assert "sampled protocol: each query against its own 20 head / 20 tail negatives, unfiltered (not comparable " \
           "with full ranking)" in stdout
    assert "AMRI (adjusted mean rank index): 1 = every answer ranked first" in stdout
    assert "triple classification, test set:" in stdout and "AUROC 0.5 = chance" in stdout
    for model in ("DistMult", "TransE-L2"):  # a classifier below chance is said to be
        auroc = json.loads((out / "results" / f"{model}.classification.json").read_text())[
            "classification"]["test"]["overall"]["auroc"]
        assert (f"reading: {model}: AUROC {auroc:.3f} is below chance" in stdout) == (auroc < 0.45), model
    assert "reading: " in stdout[stdout.index("compared query by query"):]
    assert "the zero-shot disease question:" in stdout and "entity-held-out split (" in stdout
    report = out / "report" / "index.html"
    assert f"report (figures: per relation, rank distribution, degree strata, DistMult against TransE-L2): {report}" \
        in stdout
    page = report.read_text()
    assert "What these numbers are: test set;" in page and "95 % interval [" in page
    assert page.count("<figure>") == 4 and "DistMult against TransE-L2, query by query" in page


def test_the_demo_gives_verdicts_with_intervals_its_zero_shot_rows_and_its_split_command(pipeline_runs, tmp_path):
    """Issue 66: the demo's stdout gave no verdict of model against baseline, its zero-shot results
    were not on its board, the board named its dataset "split (003a32ec)", and its seed (0) against
    split's default (42) kept the how-to from reproducing its split."""
    import shlex
    import subprocess
    import sys

    from openbench.evaluation.statistics.compare import compare_ranks

    out, run = pipeline_runs[0]
    stdout = run.stdout
    for model, folder in (("DistMult", "results"), ("TransE-L2", "results"), ("DistMult", "results/entity")):
        result = compare_ranks(out / folder / f"{model}.ranks.parquet", out / folder / "popularity.ranks.parquet",
                               seed=0)
        low, high = result["ci"]
        assert (f"{model} against popularity on {result['queries']} queries: MRR {result['a']:.4f} against "
                f"{result['b']:.4f}, difference {result['difference']:+.4f}, 95 % interval [{low:+.4f}, "
                f"{high:+.4f}]") in stdout, (model, folder)
    assert "with 4 on one side" in stdout or "positives against" in stdout  # the counts behind a reading
    board = open_leaderboard(out / "leaderboard.sqlite")
    try:
        entity = json.loads((out / "results" / "entity" / "DistMult.json").read_text())["dataset"]["fingerprint"]
        zero_shot = board.rows(dataset=entity[:12])
        assert {row["name"] for row in zero_shot} >= {"DistMult (demo zero-shot, seed 0)",
                                                       "popularity (demo zero-shot, seed 0)"}
        assert board.rows(dataset=entity[:12], task="repurposing")
        labels = {row["dataset"]["label"] for row in board.rows()}
    finally:
        board.close()
    assert any(label.startswith("split: openbench split rand, seed 0 (") for label in labels), labels
    assert any(label.startswith("split_entity: openbench split entity, seed 0 (") for label in labels), labels
    line = next(line for line in stdout.splitlines() if line.strip().startswith("openbench split rand"))
    command = shlex.split(line.strip())
    command[command.index("--output") + 1] = str(tmp_path / "again")
    done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for path in sorted((out / "split").glob("*.csv")):
        assert (tmp_path / "again" / path.name).read_bytes() == path.read_bytes(), path.name


def popularity_metrics(out):
    return json.loads((out / "results" / "popularity.json").read_text())["metrics"]["both"]["realistic"]


def _board(path, folder=None):
    """The leaderboard's rows without what records when (``submitted_at``, the records' ``timing``);
    the demo's folder, which the re-evaluation certificates' commands name, as ``<out>``."""
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.row_factory = sqlite3.Row
        rows = []
        for row in connection.execute("SELECT * FROM submissions ORDER BY id"):
            values = dict(row)
            values.pop("submitted_at")
            if folder is not None and values.get("certificate_json"):
                values["certificate_json"] = values["certificate_json"].replace(str(folder), "<out>")
            record = json.loads(values.pop("result_json"))
            record.pop("timing")
            rows.append((values, record))
        published = [tuple(row) for row in connection.execute("SELECT * FROM published ORDER BY id")]
    return rows, published


def test_two_demo_runs_are_equal_apart_from_timing(pipeline_runs):
    """Every file the demo writes is byte-identical for the same seed, except the documented
    timing: the records' ``timing``, the leaderboard's ``submitted_at`` and the page's generated
    date."""
    (first, _), (second, _) = pipeline_runs
    names = sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(second)) for p in second.rglob("*") if p.is_file())
    assert "graph/graph_files/edges.csv" in names and "split/split_info.json" in names
    for name in names:
        a, b = first / name, second / name
        if name.endswith(".parquet"):  # per-query ranks: no timing in them
            assert a.read_bytes() == b.read_bytes(), name
        elif name.startswith("results/"):
            records = [json.loads(path.read_text()) for path in (a, b)]
            for record in records:
                assert set(record.pop("timing")) <= {"seconds", "exact_ranks", "stages", "matrix_pass", "matrix_counting"}
                record["dataset"].pop("path")
            assert records[0] == records[1], name
        elif name == "leaderboard.sqlite":
            boards = [_board(path, folder) for path, folder in ((a, first), (b, second))]
            for rows, _ in boards:
                for _values, record in rows:
                    record["dataset"].pop("path")
            assert boards[0] == boards[1]
        elif name == "leaderboard/index.html":  # the page's one timing field: its generated line
            pages = [re.sub(r'<p class="generated">generated [^<]* by', "", path.read_text()).replace(str(folder), "")
                     for path, folder in ((a, first), (b, second))]
            assert pages[0] == pages[1], name
        else:
            assert a.read_bytes() == b.read_bytes(), name


def _tutorial_python_blocks():
    """The ```python blocks of the Python tutorial (docs/tutorials/python.md)."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_python_tutorial_runs_on_the_demos_output_and_gives_the_clis_records(pipeline_runs):
    """What the Python tutorial shows runs as written on ``openbench demo``'s folder and gives the
    records the demo wrote through the command line's path."""
    out, _ = pipeline_runs[0]
    blocks = [block.replace('"demo_out/', f'"{out}/') for block in _tutorial_python_blocks()]
    assert len(blocks) == 2
    namespace: dict = {}
    exec(compile(blocks[0], "docs/tutorials/python.md", "exec"), namespace)
    for name, record in (("DistMult", namespace["record"]), ("DistMult.sampled", namespace["sampled"])):
        stored = json.loads((out / "results" / f"{name}.json").read_text())
        assert record.metrics == stored["metrics"] and record.per_relation == stored["per_relation"], name
        # the same arrays (the demo's record adds how it trained them to the parameters)
        assert record.model["source_sha256"] == stored["model"]["source_sha256"], name
    assert 0.0 <= namespace["flagged"].metric("test.overall.auroc") <= 1.0
    baseline = namespace["baseline"]
    assert baseline.model["name"] == "training degree" and 0 < baseline.metric("both.realistic.mrr") < 1
    exec(compile(blocks[1], "docs/tutorials/python.md (PyKEEN)", "exec"), namespace)
    assert namespace["record"].model["kind"] == "pykeen" and namespace["record"].metric("both.realistic.mrr") > 0
