"""The openbench command: start-up, evaluate end to end, and its error paths."""
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from openbench import __version__
from openbench.cli import main
from tests.helpers import integer_embeddings, needs_module, random_labelled_graph, SAMPLE_NAMES, write_samples


@pytest.fixture()
def inputs(tmp_path):
    splits = random_labelled_graph(3, 25, 3, {"train": 120, "valid": 10, "test": 15})
    folder = write_samples(tmp_path / "data", splits)
    n_entities = len({e for triples in [splits["train"]] for h, _, t in triples for e in (h, t)})
    np.save(tmp_path / "ent.npy", integer_embeddings(0, n_entities, 4))
    np.save(tmp_path / "rel.npy", integer_embeddings(1, 3, 4))
    return folder, tmp_path / "ent.npy", tmp_path / "rel.npy"


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _evaluate_args(inputs, *extra):
    folder, ent, rel = inputs
    return ["evaluate", "--dataset", folder, "--entity-embeddings", ent, "--relation-embeddings", rel,
            "--model", "DistMult", "--no-progress", *extra]


def test_version_and_module_entry_point():
    assert __version__ in _run("--version").output
    done = subprocess.run([sys.executable, "-m", "openbench", "--help"], capture_output=True, text=True, check=True)
    assert "evaluate" in done.stdout


def test_help_does_not_import_heavy_modules():
    code = "import sys, openbench.cli; print(sorted(m for m in ('torch', 'polars', 'pykeen') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_evaluate_writes_json_and_prints_a_table(inputs, tmp_path):
    output = tmp_path / "out" / "result.json"
    result = _run(*_evaluate_args(inputs, "--output", output, "--hits-at", "1,5"))
    assert result.exit_code == 0, result.output
    record = json.loads(output.read_text())
    assert record["protocol"]["hits_at"] == [1, 5] and record["model"]["name"] == "DistMult"
    assert len(record["model"]["source_sha256"]) == 64
    assert "both  realistic" in result.stdout  # with --output the table is the command's result on stdout
    assert not [p for p in output.parent.iterdir() if p.name != "result.json"]


def test_evaluate_to_stdout_is_deterministic(inputs):
    first = json.loads(_run(*_evaluate_args(inputs, "--no-filter", "--format", "json")).stdout)
    second = json.loads(_run(*_evaluate_args(inputs, "--no-filter", "--format", "json")).stdout)
    first.pop("timing"), second.pop("timing")
    assert first == second and first["protocol"]["filter_sets"] == []


@pytest.mark.parametrize("extra,message", [
    (["--model", "TransQ"], "'TransQ' is not one of 'TransE-L1', 'TransE-L2', 'DistMult'"),
    (["--filter", "train,dev"], "expected a comma-separated subset of train,valid,test"),
    (["--filter", "train", "--no-filter"], "--filter and --no-filter exclude each other"),
    (["--hits-at", "1,x"], "expected comma-separated integers"),
    (["--device", "tpu"], "unknown device 'tpu'"),
])
def test_bad_options_fail_with_a_message(inputs, extra, message):
    result = _run(*_evaluate_args(inputs, *extra))
    assert result.exit_code != 0
    assert message in result.output


def test_missing_model_inputs_is_a_usage_error(inputs):
    folder, ent, _ = inputs
    result = _run("evaluate", "--dataset", folder, "--entity-embeddings", ent)
    assert result.exit_code == 2
    assert "missing: --relation-embeddings, --model" in result.output


def test_malformed_dataset_fails_without_traceback_or_output(inputs, tmp_path):
    folder = inputs[0]
    lines = (folder / SAMPLE_NAMES["test"]).read_text().splitlines()
    lines[2] = "NCBIGENE:1\tREL_A"
    (folder / SAMPLE_NAMES["test"]).write_text("\n".join(lines) + "\n")
    output = tmp_path / "never.json"
    result = _run(*_evaluate_args(inputs, "--output", output))
    assert result.exit_code == 1
    assert "test_sample.csv, line 3: expected 6 tab-separated columns like the first line, found 2" in result.output
    assert "Traceback" not in result.output and not output.exists()


def test_embedding_shape_mismatch_names_the_file(inputs, tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((3, 4), dtype=np.float32))
    folder, _, rel = inputs
    result = _run("evaluate", "--dataset", folder, "--entity-embeddings", tmp_path / "small.npy",
                  "--relation-embeddings", rel, "--model", "DistMult")
    assert result.exit_code == 1
    assert "small.npy: expected 25 rows, one per entity of the dataset's entity map, found 3" in result.output
    (tmp_path / "junk.npy").write_text("not numpy")
    result = _run("evaluate", "--dataset", folder, "--entity-embeddings", tmp_path / "junk.npy",
                  "--relation-embeddings", rel, "--model", "DistMult")
    assert result.exit_code == 1 and "junk.npy: not a readable .npy array" in result.output


def test_results_on_stdout_progress_lines_on_stderr_when_it_is_no_terminal(inputs, monkeypatch):
    import openbench.progress

    monkeypatch.setattr(openbench.progress, "PERIOD_S", 0.0)
    folder, ent, rel = inputs
    done = _run("evaluate", "--dataset", folder, "--entity-embeddings", ent, "--relation-embeddings", rel,
                "--model", "DistMult", "--batch-size", "1", "--format", "json")
    json.loads(done.stdout)  # stdout holds the record alone
    assert "INFO openbench.progress: evaluating:" in done.stderr and "both  realistic" in done.stderr
    quiet = _run("--quiet", "evaluate", "--dataset", folder, "--entity-embeddings", ent, "--relation-embeddings",
                 rel, "--model", "DistMult", "--batch-size", "1")
    assert "openbench.progress" not in quiet.stderr


# ------------------------------------------------------------------------------------------
# issue 37: what a newcomer trips over


# a Ctrl-C at a chosen instant, without timing: an audit hook (PEP 578) in the child sends SIGINT to
# its own process when the event it waits for happens (an import starts; a file is opened for
# writing under the output folder), then the command runs as `python -m openbench` does
_INTERRUPT_AT = """
import os, signal, sys
kind, target = sys.argv.pop(1), sys.argv.pop(1)
fired = []

def hook(event, args):
    if fired:
        return
    hit = (event == "import" and args[0] == target) if kind == "import" else (
        event == "open" and isinstance(args[0], str) and args[0].startswith(target) and args[1] not in (None, "r", "rb")
        and not (isinstance(args[2], int) and args[2] & 3 == 0))
    if hit:
        fired.append(event)
        os.kill(os.getpid(), signal.SIGINT)

sys.addaudithook(hook)
import runpy
sys.argv[0] = "openbench"
runpy.run_module("openbench", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow  # one subprocess per instant, each importing as far as its instant (torch included)
@pytest.mark.parametrize("kind, target", [
    ("import", "openbench.entry"), ("import", "openbench.errors"), ("import", "click"), ("import", "openbench.cli"),
    ("import", "openbench.demo"), ("import", "torch"), ("import", "polars"), ("import", "openbench.evaluation.evaluate"),
    ("write", "OUT")])
def test_ctrl_c_at_any_instant_is_one_line_and_status_130(tmp_path, kind, target):
    """Issue 37 and 49: a Ctrl-C while the command's modules import printed a traceback; the test of
    it slept for wall-clock delays and failed once under load. Here the interrupt lands exactly
    where it is asked: as each stage of start-up begins, and as the first output file opens."""
    out = tmp_path / "demo"
    target = str(out) if target == "OUT" else target
    done = subprocess.run([sys.executable, "-c", _INTERRUPT_AT, kind, target, "demo", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1].startswith("error: interrupted"), done.stderr
    assert "Traceback" not in done.stderr and "Aborted!" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr  # an interrupt lost in a finaliser
    if out.exists():  # a half-written output is never left in place of the folder
        assert not [path for path in out.rglob("*") if path.is_file()], sorted(out.rglob("*"))


def test_a_mistyped_dataset_name_lists_the_registry_with_the_closest(inputs):
    done = CliRunner().invoke(main, _evaluate_args(inputs)[:1] + ["--dataset", "HQ_DIRR"] + _evaluate_args(inputs)[3:])
    assert done.exit_code == 1, done.output
    assert "HQ_DIRR: no such folder, and not a dataset name of the registry (did you mean HQ_DIR?)" in done.output
    assert "KGID_HQ_DIR" in done.output


def test_the_sweep_output_folder_may_exist_when_openbench_wrote_it(inputs, tmp_path):
    """Issue 37: --output was a click.Path(dir_okay=False): rerunning the README's sweep failed."""
    folder, ent, rel = inputs
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps([{"name": "a", "entity_embeddings": str(ent), "relation_embeddings": str(rel),
                                  "model": "DistMult"}]))
    (tmp_path / "results").mkdir()  # an empty folder is fine too
    for _ in range(2):
        done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--sweep", str(sweep), "--output",
                                         str(tmp_path / "results"), "--no-progress"])
        assert done.exit_code == 0, done.output
    assert (tmp_path / "results" / "a.json").is_file()


@pytest.mark.slow  # four spawned openbench processes, one of them training: ~20 s
def test_verbose_is_openbench_info_only_and_long_steps_announce_themselves(inputs, tmp_path):
    """Issue 37: -v printed third-party DEBUG lines and PyBEL's pkg_resources warning; `train` and
    the demo were silent for minutes where stderr is no terminal."""
    needs_module("pykeen")
    folder, _, _ = inputs
    done = subprocess.run([sys.executable, "-m", "openbench", "-v", "train", "--dataset", str(folder), "--model",
                           "DistMult", "--dim", "4", "--epochs", "2", "--output", str(tmp_path / "model")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "DEBUG" not in done.stderr and "pkg_resources" not in done.stderr, done.stderr
    assert "INFO openbench" in done.stderr
    import openbench.progress

    quiet = subprocess.run([sys.executable, "-c", "import openbench.progress as p; p.PERIOD_S = 0.0; "
                            "from openbench.entry import main; main()", "train", "--dataset", str(folder), "--model",
                            "DistMult", "--dim", "4", "--epochs", "3", "--output", str(tmp_path / "model2")],
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO openbench.progress: training DistMult:" in quiet.stderr and "epoch" in quiet.stderr
    assert openbench.progress.PERIOD_S > 0


def test_a_scoped_evaluation_says_how_many_queries_it_evaluated(inputs):
    """Issue 37: the header said "47 evaluation triples" while 4 queries were evaluated."""
    done = _run(*_evaluate_args(inputs, "--relations", "REL_A", "--sides", "tail", "--format", "json"))
    record = json.loads(done.stdout)
    queries = record["diagnostics"]["queries"]
    assert f"test triples; {queries} queries evaluated" in done.stderr and queries < record["dataset"]["counts"]["test"]


def test_the_meta_eval_console_script(tmp_path):
    for side in ("pred", "truth"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "title.tsv").write_text("p1\tA title\n")
    done = subprocess.run([sys.executable, "-c", "from openbench.entry import metaeval_main; metaeval_main()",
                           "--input", str(tmp_path / "pred"), "--truth", str(tmp_path / "truth")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "title" in done.stdout and "1.000" in done.stdout, done.stderr
    missing = subprocess.run([sys.executable, "-c", "from openbench.entry import metaeval_main; metaeval_main()",
                              "--input", str(tmp_path / "nowhere"), "--truth", str(tmp_path / "truth")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and missing.stderr.startswith("error:") and "Traceback" not in missing.stderr


def test_help_lines_are_the_commands_own_and_whole():
    """``openbench --help`` lists each command's own short help (the lazy group must not import
    them to print it), never cut mid-sentence."""
    import click

    from openbench.cli import COMMANDS

    context = click.Context(main)
    for name, (_, _, line) in COMMANDS.items():
        command = main.get_command(context, name)
        assert line == command.get_short_help_str(limit=1000), name
        assert not line.endswith("...") and line.endswith("."), name
    listed = CliRunner().invoke(main, ["--help"]).output.split("Commands:")[1]
    assert "..." not in listed and all(name in listed for name in COMMANDS)


def test_a_mistyped_command_gets_the_closest_names():
    result = CliRunner().invoke(main, ["evalute"])
    assert result.exit_code == 2 and "Did you mean 'evaluate'?" in result.output
    assert "Did you mean" not in CliRunner().invoke(main, ["xyzzy"]).output


def test_evaluate_prints_the_table_a_person_reads_and_json_only_when_asked(inputs):
    """Issue 54: without --output, stdout held ~6,000 lines of JSON and the table went to stderr."""
    done = _run(*_evaluate_args(inputs))
    assert done.exit_code == 0, done.output
    assert not done.stdout.lstrip().startswith("{") and "both  realistic" in done.stdout
    assert "this table: test set; " in done.stdout and "realistic rank" in done.stdout
    assert "filtered (the other known answers in train, valid, test removed)" in done.stdout
    assert "AMRI (adjusted mean rank index): 1 = every answer ranked first" in done.stdout
    as_json = _run(*_evaluate_args(inputs, "--format", "json"))
    assert json.loads(as_json.stdout)["task"] == "ranking" and "both  realistic" in as_json.stderr
    folder, ent, rel = inputs
    several = _run("evaluate", "--dataset", folder, "--sweep", ent, "--format", "json")
    assert several.exit_code == 2 and "--format json prints one record" in several.output


def test_generate_lists_every_folder_and_split_says_what_it_counted(tmp_path):
    """Issue 54: generate reported graph_files but not the rdf-ttl/ folder it also wrote; split rand
    reported "(928 samples)" without saying what a sample is."""
    done = _run("generate", "--sample", "--output", tmp_path / "g", "--output-format", "RDF-TTL", "--keep-in-files",
                "--no-progress")
    assert done.exit_code == 0, done.output
    written = sorted(p.name for p in (tmp_path / "g").iterdir() if p.is_dir())
    assert written == ["graph_files", "in_files", "rdf-ttl"]
    assert all(str(tmp_path / "g" / name) in done.stdout for name in written)
    graph = tmp_path / "g" / "graph_files"
    done = _run("split", "rand", "--edges", graph / "edges.csv", "--tn-edges", graph / "TN_edges.csv", "--nodes",
                graph / "ALL_nodes.csv", "--output", tmp_path / "s")
    assert done.exit_code == 0, done.output
    info = json.loads((tmp_path / "s" / "split_info.json").read_text())
    samples, positives = info["input"]["after_inconsistent"], info["input"]["positives"]
    assert (f"{samples} samples (a sample is one row of the split files, a positive or a negative edge: "
            f"{positives} positive edges and {samples - positives} negative ones)") in done.stdout
    for part, label in (("train", "training"), ("val", "validation"), ("test", "test")):
        counts = info["split"][part]
        assert f"  {label}: {counts['positives']} positives, {counts['negatives']} negatives" in done.stdout
    removed = {key: value for key, value in info["split"]["test_cleaning"].items() if value}
    assert all(f"{value} {key.replace('_', ' ')}" in done.stdout for key, value in removed.items())


@pytest.mark.parametrize("group", [["leaderboard"], ["leaderboard", "token"], ["split"], ["datasets"], ["text"]])
def test_group_help_gives_each_command_s_summary_whole(group):
    """Issue 66: `openbench leaderboard --help` cut its commands' summaries with "..."."""
    done = CliRunner().invoke(main, [*group, "--help"])
    assert done.exit_code == 0
    commands = done.output.split("Commands:", 1)[1]
    assert "..." not in commands, commands


@pytest.fixture(scope="module")
def reading_inputs(tmp_path_factory):
    """A split, two records with their ranks, and a board holding them (for the torch-free commands)."""
    from openbench.datasets.loader import load_dataset
    from openbench.models.popularity import popularity_model
    from openbench.models.rules import rules_model
    from tests.helpers import board_with_ranks, random_labelled_graph, write_samples

    work = tmp_path_factory.mktemp("reading")
    dataset = load_dataset(write_samples(work / "split", random_labelled_graph(2, 30, 3, {"train": 200, "valid": 10,
                                                                                          "test": 20}),
                                         negatives=False))
    board_with_ranks(work, dataset, (("popularity", popularity_model(dataset)), ("rules", rules_model(dataset))))
    (work / "triples.tsv").write_text("a\tr\tb\nb\tr\tc\nc\ts\ta\n")
    return work


@pytest.mark.parametrize("command", [
    ["leaderboard", "show", "--db", "{work}/board.sqlite"],
    ["leaderboard", "export", "--db", "{work}/board.sqlite", "--output", "{work}/page"],
    ["compare", "{work}/popularity.ranks.parquet", "{work}/rules.ranks.parquet"],
    ["audit", "{work}/split"],
    ["audit", "{work}/triples.tsv"],
    ["datasets", "list"],
    ["text", "--help"],
])
def test_commands_that_need_no_tensor_import_no_torch(reading_inputs, command):
    """Issue 66: `leaderboard show` of a two-row board took 4.3 s and 707 MB, importing torch
    through the statistics it never ran (benchmarks/bench_cli_latency.py times them)."""
    import subprocess
    import sys

    probe = ("import sys\nfrom openbench.cli import main\ntry:\n    main(sys.argv[1:], standalone_mode=False)\n"
             "except SystemExit as stop:\n    assert not stop.code, stop.code\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n")
    argv = [part.format(work=reading_inputs) for part in command]
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "NO-TORCH", done.stderr[-2000:]
