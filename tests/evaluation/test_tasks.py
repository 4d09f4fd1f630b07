"""A task is one object with one interface (issue 76): the door, the command line, the record check,
the board and the page ask the task registry, so a new task is one module and one registry entry.
Here a toy task, added through the public interface only (openbench.task_registry.register_task),
runs from Python and from ``openbench evaluate --task``, has its records checked, and is ranked on a
board and drawn on its page; the three tasks' options are validated once, naming the task an option
of another belongs to."""
import dataclasses
import json
from dataclasses import dataclass
from typing import ClassVar, List

import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import UsageError
from openbench.evaluation.tasks.base import RunSettings, Task, TaskOptions, resolve_task
from openbench.record import RecordError, ResultRecord, validate_record
from openbench.task_registry import get_task, register_task, task_names, unregister_task
from tests.bases import planted_graph
from tests.helpers import needs_chromium, write_samples


@dataclass
class Toy(TaskOptions):
    """The toy task's one option: the score a triple must reach to count."""

    TASK: ClassVar[str] = "toy"
    cutoff: float = 0.0


class ToyTask(Task):
    """The share of the test triples the model scores at or above a cutoff."""

    name = "toy"
    summary = "the share of test triples scored at or above a cutoff (a test's toy task)"
    options_type = Toy
    block_key = "toy"
    headline = "share"
    page_metrics = ("share",)
    table_columns = ("share",)

    def run(self, dataset, model, options, settings):
        """The share, from the model's own scores of the test triples."""
        scores = model.score_triples(dataset.triples["test"])
        share = float((scores >= options.cutoff).double().mean())
        return ResultRecord(metrics=None, per_relation=None, macro_relation=None,
                            protocol={"cutoff": options.cutoff}, dataset={"fingerprint": dataset.fingerprint,
                                                                          "path": str(dataset.path)},
                            model=model.description(), diagnostics=None, seed=settings.seed, device="cpu",
                            version=openbench.__version__, seconds=0.0, task="toy", block={"test": {"share": share}})

    def check_record(self, record: dict) -> None:
        """A share in [0, 1]."""
        share = ((record.get("toy") or {}).get("test") or {}).get("share")
        if not isinstance(share, float) or not 0.0 <= share <= 1.0:
            raise RecordError(f"toy.test.share = {share!r}: expected a share in [0, 1]")

    def board_metrics(self, record: dict) -> dict:
        """The test share."""
        return dict(record["toy"]["test"])

    def summary_lines(self, record: dict) -> List[str]:
        """One line."""
        return [f"toy share {record['toy']['test']['share']:.4f} at cutoff {record['protocol']['cutoff']}"]


@pytest.fixture
def toy():
    task = register_task(ToyTask())
    yield task
    unregister_task(task.name)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("tasks") / "split", planted_graph(3), negatives=False)


def _embeddings(folder, dataset):
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(folder / "e.npy", rng.normal(size=(dataset.num_entities, 4)).astype(np.float32))
    np.save(folder / "r.npy", rng.normal(size=(dataset.num_relations, 4)).astype(np.float32))
    return ["--model", "DistMult", "--entity-embeddings", str(folder / "e.npy"), "--relation-embeddings",
            str(folder / "r.npy")]


def test_a_toy_task_runs_from_python_and_the_command_line_and_is_checked(toy, planted, tmp_path):
    assert "toy" in task_names() and get_task("toy") is toy
    dataset = load_dataset(planted)
    words = _embeddings(tmp_path, dataset)
    model = openbench.embedding_model("DistMult", *(__import__("numpy").load(tmp_path / name) for name in ("e.npy", "r.npy")))
    by_object = openbench.evaluate(dataset, model, task=Toy(cutoff=0.5)).to_dict()
    by_keyword = openbench.evaluate(dataset, model, task="toy", cutoff=0.5).to_dict()
    assert by_object == by_keyword and by_object["task"] == "toy" and list(by_object)[:4] == [
        "written_by", "schema_version", "task", "toy"]
    validate_record(by_object)
    with pytest.raises(RecordError, match="toy.test.share"):
        validate_record(dict(by_object, toy={"test": {"share": 2.0}}))
    with pytest.raises(UsageError, match="the toy task takes no option hits_at=; it belongs to the ranking and "
                                         "repurposing tasks"):
        openbench.evaluate(dataset, model, task="toy", hits_at=[1])
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(planted), *words, "--task", "toy", "--no-progress",
                                     "--output", str(tmp_path / "toy.json")])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("toy share ") and json.loads((tmp_path / "toy.json").read_text())["task"] == "toy"
    assert "toy" in CliRunner().invoke(main, ["evaluate", "--help"]).output
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(planted), *words, "--task", "toy", "--fast"])
    assert done.exit_code == 2 and "--fast belongs to --task ranking and repurposing, not to --task toy" in done.output


def test_a_toy_task_is_ranked_on_a_board_and_drawn_on_its_page(toy, planted, tmp_path):
    from openbench.leaderboard import open_leaderboard
    from openbench.leaderboard.render import page, plot_svg

    dataset = load_dataset(planted)
    words = _embeddings(tmp_path, dataset)
    db = tmp_path / "board.sqlite"
    for cutoff, name in ((0.0, "low"), (1.0, "high")):
        assert CliRunner().invoke(main, ["evaluate", "--dataset", str(planted), *words, "--task", "toy",
                                         "--output", str(tmp_path / f"{name}.json")]).exit_code == 0
        record = json.loads((tmp_path / f"{name}.json").read_text())
        record["protocol"]["cutoff"] = cutoff  # two protocols: two rows
        record["toy"]["test"]["share"] = 0.9 if name == "low" else 0.2
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / f"{name}.json"), "--name", name,
                                         "--db", str(db)])
        assert done.exit_code == 0, done.output
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--task", "toy", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert shown.output.index("low") < shown.output.index("high") and "share" in shown.output
    board = open_leaderboard(db)
    try:
        rows = board.rows(task="toy")
    finally:
        board.close()
    assert [row["name"] for row in rows] == ["low", "high"] and rows[0]["task"] == "toy"
    svg = plot_svg(rows)
    assert 'class="bar-share"' in svg and "SHARE" not in svg and "■ share" in svg and "MRR" not in svg
    assert "share" in page(rows)


def test_each_task_s_table_on_the_page_draws_its_own_metrics(planted, tmp_path):
    """The page drew MRR and hits@10 bars under every table: the classification and repurposing
    tables were empty charts with a legend of metrics they do not have. Each draws its own now."""
    from openbench.leaderboard.render import plot_svg

    row = {"name": "m", "published": False, "metrics": {"auroc": {"mean": 0.8}, "disease_mrr": {"mean": 0.3}}}
    svg = plot_svg([dict(row, task="repurposing")])
    assert "bar-auroc" in svg and "bar-disease_mrr" in svg and "MRR</tspan>" not in svg.replace("disease_mrr", "")
    ranking = plot_svg([{"name": "m", "published": False, "task": "ranking",
                         "metrics": {"mrr": {"mean": 0.5}, "hits@10": {"mean": 0.7}}}])
    assert "bar-mrr" in ranking and "bar-hits10" in ranking


def test_a_repurposing_row_shows_its_record_s_own_interval(planted, tmp_path):
    """A repurposing record carries bootstrap intervals (--bootstrap): its row on the board shows
    the interval of the table's headline (AUROC), as a ranking row shows its ranks' interval."""
    import numpy as np

    dataset = load_dataset(planted)
    words = _embeddings(tmp_path, dataset)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(planted), *words, "--task", "repurposing",
                                     "--relation", "indication", "--bootstrap", "50", "--no-progress",
                                     "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    record = json.loads((tmp_path / "r.json").read_text())
    low, high = record["repurposing"]["confidence"]["test"]["auroc"]
    db = tmp_path / "board.sqlite"
    assert CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "r.json"), "--name", "m", "--db",
                                     str(db)]).exit_code == 0
    from openbench.leaderboard import open_leaderboard

    board = open_leaderboard(db)
    try:
        (row,) = board.rows(task="repurposing")
    finally:
        board.close()
    assert row["interval"]["metric"] == "auroc" and np.isclose(row["interval"]["low"], low) \
        and np.isclose(row["interval"]["high"], high)
    assert row["not_worse_than_best"] is None  # no ranks the board computed: no paired verdict


@pytest.mark.parametrize("task, keyword, owner", [
    ("classification", "ranks", "ranking and repurposing"), ("ranking", "threshold_metric", "classification"),
    ("ranking", "negative_relations", "repurposing"), ("repurposing", "candidates", "ranking")])
def test_an_option_of_another_task_is_an_error_naming_it(task, keyword, owner):
    with pytest.raises(UsageError, match=f"the {task} task takes no option {keyword}=; it belongs to the {owner} task"):
        resolve_task(task, {keyword: None})


def test_the_options_object_and_the_keyword_form_are_one_thing():
    chosen, options = resolve_task(openbench.Repurposing(relation="indication"), {"keep_top": 5})
    assert chosen.name == "repurposing" and options.relations() == ["indication"] and options.keep_top == 5
    _, keyword = resolve_task("repurposing", {"relations": ["indication"], "keep_top": 5})
    assert dataclasses.asdict(keyword) == dataclasses.asdict(options)  # relations= is the keyword spelling
    with pytest.raises(UsageError, match="threshold_metric='best'"):
        resolve_task(openbench.Classification(threshold_metric="best"), {})
    with pytest.raises(UsageError, match="takes Ranking options, not Classification"):
        get_task("ranking").options(openbench.Classification())
    with pytest.raises(UsageError, match="expected one of ranking, classification, repurposing"):
        resolve_task("rnaking", {})
    assert get_task("ranking").options().hits_at == (1, 3, 10)


def test_settings_a_task_cannot_run_under_are_refused_by_it():
    with pytest.raises(UsageError, match="triple classification runs on one process"):
        get_task("classification").check_settings(RunSettings(shard="queries"))
    with pytest.raises(UsageError, match="shards the matrix's drugs"):
        get_task("repurposing").check_settings(RunSettings(shard="queries"))
    get_task("repurposing").check_settings(RunSettings(shard="entities"))


def test_no_module_outside_the_tasks_branches_on_a_task_s_name():
    """The door, the command line, the record, the store, the page, the report and the
    reproduction ask the registry: no ``task ==`` (or ``!=``, ``in``) outside it and the tasks."""
    import re

    from tests.helpers import PROJECT_ROOT

    pattern = re.compile(r"\btask(?:\.name)?\s*(?:==|!=|in \(|not in \()|get\(\"task\"[^)]*\)\s*(?:==|!=)")
    found = []
    for path in (PROJECT_ROOT / "openbench").rglob("*.py"):
        relative = path.relative_to(PROJECT_ROOT).as_posix()
        if relative.startswith(("openbench/evaluation/tasks/", "openbench/text/")) or relative.endswith("task_registry.py"):
            continue  # the tasks themselves; text/ has BRAT's own tasks (ner, ee, ar)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, found


@pytest.mark.slow
def test_each_task_s_table_renders_its_bars_in_a_browser(planted, tmp_path):
    """The demo-like board's page in Chromium: the repurposing table's chart has AUROC bars."""
    chromium = needs_chromium()
    import subprocess

    dataset = load_dataset(planted)
    words = _embeddings(tmp_path, dataset)
    assert CliRunner().invoke(main, ["evaluate", "--dataset", str(planted), *words, "--task", "repurposing",
                                     "--relation", "indication", "--no-progress", "--output",
                                     str(tmp_path / "r.json")]).exit_code == 0
    db = tmp_path / "board.sqlite"
    assert CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "r.json"), "--name", "m", "--db",
                                     str(db)]).exit_code == 0
    assert CliRunner().invoke(main, ["leaderboard", "export", "--format", "html", "--output", str(tmp_path / "site"),
                                     "--db", str(db)]).exit_code == 0
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (tmp_path / "site" / "index.html").as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert 'class="bar-auroc"' in dom and "■ AUROC" in dom
