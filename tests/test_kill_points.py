"""A kill at any instant leaves the old or the new output, byte for byte (issue 72): each command
is killed (SIGKILL, which no handler sees) at every counted step of its life in turn (every file
opened to write, folder made, rename, exchange and removal, every statement of the board's
database: tests.helpers.KILL_SCRIPT), never by wall-clock luck, and what the user named is
compared with the old and the new output straight after the kill, before any later run tidies up.

The folder output here is generate's: ``graph_files/`` inside the folder the user named, whose
staging once lay beside it, inside that folder (a kill left a hidden staging folder there, seen
twice in 170 wall-clock kills). The split's folder output: tests/test_outputs.py."""
import json
import shutil
import signal

import numpy as np
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from tests.helpers import killed_at, snapshot

pytestmark = pytest.mark.slow  # one process start per kill point: about a minute in all


def _kills(arguments, target, old, new, restore, most=200):
    """Kill ``openbench ARGUMENTS`` at steps 1, 2, ... until a run finishes; after each kill
    ``target`` must be ``old`` or ``new`` (snapshots); ``restore()`` puts ``old`` back before each
    run. Returns the outcomes in order."""
    outcomes = []
    for step in range(1, most):
        restore()
        done = killed_at(step, arguments)
        if done.returncode == 0:
            assert snapshot(target) == new, "the finished run did not write the new output"
            return outcomes
        assert done.returncode == -signal.SIGKILL, done.stderr
        state = snapshot(target)
        assert state in (old, new), f"killed at step {step}: {target} is neither the old nor the new output"
        outcomes.append("old" if state == old else "new")
    raise AssertionError(f"the run took more than {most} steps")


def _generate(output, undirected=False):
    return ["generate", "--sample", "--output", str(output), "--no-progress"] + (["--undirected"] if undirected
                                                                                   else [])


@pytest.mark.parametrize("before", ["an older graph", "nothing"])
def test_a_killed_generate_leaves_its_output_folder_old_or_new(tmp_path, before):
    """Over an older graph (undirected edges; the new run writes directed ones) and into a folder
    that does not exist yet: the folder named by --output holds the old graph, or the new one,
    and nothing else (no staging folder) at every kill point."""
    runner = CliRunner()
    reference_new, reference_old = tmp_path / "reference_new" / "K", tmp_path / "reference_old" / "K"
    assert runner.invoke(main, _generate(reference_new)).exit_code == 0
    assert runner.invoke(main, _generate(reference_old, undirected=True)).exit_code == 0
    new, old = snapshot(reference_new), snapshot(reference_old) if before == "an older graph" else None
    assert old != new
    work = tmp_path / "work"
    target = work / "K"

    def restore():
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        if old is not None:
            shutil.copytree(reference_old, target)

    outcomes = _kills(_generate(target), target, old, new, restore)
    assert "old" in outcomes and "new" in outcomes and len(outcomes) >= 10, outcomes
    leftovers = [path.name for path in work.iterdir() if path.name != "K"]
    assert all("~openbench-" in name for name in leftovers), leftovers  # side folders beside K, hidden
    restore()
    assert runner.invoke(main, _generate(target)).exit_code == 0  # a later run cleans a dead run's leftovers
    assert snapshot(target) == new


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """A split and two models' embedding files (their records differ)."""
    root = tmp_path_factory.mktemp("evaluation")
    runner = CliRunner()
    assert runner.invoke(main, _generate(root / "graph")).exit_code == 0
    graph = root / "graph" / "graph_files"
    assert runner.invoke(main, ["split", "rand", "--edges", str(graph / "edges.csv"), "--nodes",
                                str(graph / "ALL_nodes.csv"), "--output", str(root / "split"), "--seed", "1"]
                         ).exit_code == 0
    dataset = load_dataset(root / "split")
    models = {}
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        for table, rows in (("e", dataset.num_entities), ("r", dataset.num_relations)):
            np.save(root / f"{table}{seed}.npy", rng.standard_normal((rows, 8)).astype(np.float32))
        models[seed] = ["--model", "DistMult", "--entity-embeddings", str(root / f"e{seed}.npy"),
                        "--relation-embeddings", str(root / f"r{seed}.npy")]
    return root, models


def _without_timing(path):
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return {key: value for key, value in record.items() if key not in ("timing", "seconds")}


def test_a_killed_evaluate_leaves_its_output_file_old_or_new(evaluation, tmp_path):
    """``evaluate --output``: the record of the first model, or the second's (its timing aside,
    which differs between any two runs), never a part of either, at every kill point."""
    root, models = evaluation
    target = tmp_path / "result.json"

    def command(seed):
        return ["evaluate", "--dataset", str(root / "split"), *models[seed], "--no-progress", "--output", str(target)]

    assert CliRunner().invoke(main, command(2)).exit_code == 0
    new_record = _without_timing(target)
    assert CliRunner().invoke(main, command(1)).exit_code == 0
    saved = target.read_bytes()
    old_record = _without_timing(target)
    assert old_record != new_record
    outcomes = []
    for step in range(1, 200):
        target.write_bytes(saved)
        done = killed_at(step, command(2))
        if done.returncode == 0:
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
        found = target.read_bytes()
        assert found == saved or _without_timing(target) == new_record, f"killed at step {step}"
        outcomes.append("old" if found == saved else "new")
    assert "old" in outcomes and len(outcomes) >= 3, outcomes
    assert _without_timing(target) == new_record


def test_a_killed_submission_leaves_the_board_old_or_new(evaluation, tmp_path):
    """``leaderboard submit``: the board holds the rows it held, or those and the new one, at every
    kill point (a transaction a kill interrupts is rolled back when the board is next opened)."""
    from openbench.leaderboard import open_leaderboard

    root, models = evaluation
    for seed in (1, 2):
        assert CliRunner().invoke(main, ["evaluate", "--dataset", str(root / "split"), *models[seed], "--no-progress",
                                         "--output", str(tmp_path / f"r{seed}.json")]).exit_code == 0
    db, saved = tmp_path / "board.sqlite", tmp_path / "saved.sqlite"
    assert CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / "r1.json"), "--name", "first",
                                     "--db", str(db)]).exit_code == 0
    shutil.copy(db, saved)

    def rows():
        board = open_leaderboard(db)
        try:
            found = board.connection.execute("SELECT name, result_json FROM submissions ORDER BY id").fetchall()
        finally:
            board.close()
        return [(name, json.loads(text)["metrics"]) for name, text in found]

    old = rows()
    command = ["leaderboard", "submit", str(tmp_path / "r2.json"), "--name", "second", "--db", str(db)]
    outcomes = []
    for step in range(1, 200):
        for side in tmp_path.glob("board.sqlite*"):
            side.unlink()
        shutil.copy(saved, db)
        done = killed_at(step, command)
        if done.returncode == 0:
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
        state = rows()
        assert state == old or (len(state) == 2 and state[0] == old[0] and state[1][0] == "second"), \
            f"killed at step {step}: {[name for name, _ in state]}"
        outcomes.append("old" if state == old else "new")
    assert "old" in outcomes and len(outcomes) >= 3, outcomes
    assert [name for name, _ in rows()] == ["first", "second"]
