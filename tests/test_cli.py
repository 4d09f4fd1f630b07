"""The openbench command: start-up, evaluate end to end, and its error paths."""
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from openbench import __version__
from openbench.cli import main
from tests.helpers import SAMPLE_NAMES, integer_embeddings, random_labelled_graph, write_samples


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
    first = json.loads(_run(*_evaluate_args(inputs, "--no-filter")).stdout)
    second = json.loads(_run(*_evaluate_args(inputs, "--no-filter")).stdout)
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
                "--model", "DistMult", "--batch-size", "1")
    json.loads(done.stdout)  # stdout holds the record alone
    assert "INFO openbench.progress: evaluating:" in done.stderr and "both  realistic" in done.stderr
    quiet = _run("--quiet", "evaluate", "--dataset", folder, "--entity-embeddings", ent, "--relation-embeddings",
                 rel, "--model", "DistMult", "--batch-size", "1")
    assert "openbench.progress" not in quiet.stderr
