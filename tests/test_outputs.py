"""The output discipline (openbench._io.outputs): only replace what openbench wrote, atomically,
with the modes the umask gives, cleaning dead runs' leftovers; and every command that writes
refuses a dangerous --output with exit status 2 and every byte in place."""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from openbench._io import outputs
from openbench._io.outputs import (MARKER, OutputRefused, atomic_path, check_output_folder, clean_leftovers,
                                   is_openbench_folder, replace_folder, write_json)
from openbench.cli import main
from tests.helpers import killed_at, snapshot


def _fill(text="new"):
    def fill(folder: Path) -> None:
        (folder / "a.txt").write_text(text)
        (folder / "sub").mkdir()
        (folder / "sub" / "b.txt").write_text(text)

    return fill


# ------------------------------------------------------------------------------------------
# the checks


def test_refused_targets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "edges.csv").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "foreign")
    inputs = [tmp_path / "inputs" / "edges.csv", tmp_path / "inputs"]
    refusals = {
        ".": "current directory", str(tmp_path.parent): "current directory or one of its ancestors",
        "inputs/edges.csv": "is an input", "inputs": "(is|holds) an input", "inputs/sub": "inside an input folder",
        "foreign": "openbench did not write", "a_file": "a file", "link": "symbolic link"}
    for target, reason in refusals.items():
        with pytest.raises(OutputRefused, match=reason):
            check_output_folder(target, [tmp_path / "inputs" / "edges.csv"] if target == "inputs/edges.csv" else inputs)
    with pytest.raises(OutputRefused, match="holds an input"):
        check_output_folder(tmp_path / "inputs", [tmp_path / "inputs" / "edges.csv"])
    for fine in ("new", "empty"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        check_output_folder(tmp_path / fine, inputs)
    assert OutputRefused(tmp_path, "x").exit_code == 2


def test_a_folder_openbench_wrote_is_replaced_one_with_a_foreign_file_is_not(tmp_path):
    target = tmp_path / "out"
    replace_folder(target, _fill("one"), kind="test")
    assert is_openbench_folder(target) and (target / "sub" / "b.txt").read_text() == "one"
    marker = json.loads((target / MARKER).read_text())
    assert marker["written_by"] == "openbench" and marker["entries"] == ["a.txt", "sub/b.txt"]
    replace_folder(target, _fill("two"), kind="test")
    assert (target / "a.txt").read_text() == "two"
    (target / "sub" / "notes.txt").write_text("the user's")
    before = snapshot(target)
    with pytest.raises(OutputRefused, match=r"1 file\(s\) openbench did not write \(first: sub/notes.txt\)"):
        replace_folder(target, _fill("three"), kind="test")
    assert snapshot(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left


def test_a_failing_fill_leaves_the_old_output_and_no_staging(tmp_path):
    target = tmp_path / "out"
    replace_folder(target, _fill("old"))
    before = snapshot(target)

    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise ValueError("broken")

    with pytest.raises(ValueError):
        replace_folder(target, broken)
    assert snapshot(target) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_staging_lies_beside_the_target_not_in_the_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "nowhere"))  # a run must not depend on it
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    seen = []
    replace_folder(tmp_path / "deep" / "out", lambda folder: seen.append(folder.parent))
    assert seen == [tmp_path / "deep"]


@pytest.mark.parametrize("mask,file_mode,folder_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700),
                                                          (0o002, 0o664, 0o775)])
def test_modes_follow_the_umask(tmp_path, mask, file_mode, folder_mode):
    old = os.umask(mask)
    try:
        replace_folder(tmp_path / "out", _fill())
        write_json(tmp_path / "result.json", {"written_by": "openbench"})
        with atomic_path(tmp_path / "plain.txt") as tmp:
            tmp.write_text("x")
        with outputs.SequentialWriter(tmp_path / "big.bin", block=2 * outputs.ALIGNMENT) as writer:
            writer.write(b"x" * 3 * outputs.ALIGNMENT)
    finally:
        os.umask(old)
    for path in (tmp_path / "out" / "a.txt", tmp_path / "out" / "sub" / "b.txt", tmp_path / "out" / MARKER,
                 tmp_path / "result.json", tmp_path / "plain.txt", tmp_path / "big.bin"):
        assert path.stat().st_mode & 0o777 == file_mode, path
    for path in (tmp_path / "out", tmp_path / "out" / "sub"):
        assert path.stat().st_mode & 0o777 == folder_mode, path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_dead_runs_leftovers_are_removed_live_ones_kept(tmp_path):
    target = tmp_path / "out"
    host = outputs._host()
    dead, live = _dead_pid(), os.getppid()
    names = {f".out~openbench-staging~{host}~{dead}~ab12": "dead staging",
             f".out~openbench-retired~{host}~{dead}~cd34": "dead retired",
             f".out~openbench-staging~{host}~{live}~ef56": "live staging",
             f".out~openbench-staging~otherhost~{dead}~0000": "another host's"}
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "x").write_text("x")
    (tmp_path / f".out~openbench-tmp~{host}~{dead}~9999").write_text("x")
    replace_folder(target, _fill())
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["out", f".out~openbench-staging~{host}~{live}~ef56",
                           f".out~openbench-staging~otherhost~{dead}~0000"])


def test_a_run_killed_between_the_two_renames_is_repaired(tmp_path):
    """Where the kernel cannot exchange two folders, the swap is two renames; the state a kill
    between them leaves (no target, the old output retired) is repaired by the next run."""
    target = tmp_path / "out"
    replace_folder(target, _fill("old"))
    retired = tmp_path / f".out~openbench-retired~{outputs._host()}~{_dead_pid()}~0001"
    os.rename(target, retired)
    clean_leftovers(target)
    assert (target / "a.txt").read_text() == "old" and not retired.exists()


def test_without_an_atomic_exchange_the_two_rename_swap_works(tmp_path, monkeypatch):
    monkeypatch.setattr(outputs, "_EXCHANGE", None)
    replace_folder(tmp_path / "out", _fill("one"))
    replace_folder(tmp_path / "out", _fill("two"))
    assert (tmp_path / "out" / "a.txt").read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_result_files_replace_only_openbench_json(tmp_path):
    target = tmp_path / "result.json"
    write_json(target, {"written_by": "openbench", "x": 1})
    write_json(target, {"written_by": "openbench", "x": 2})
    assert json.loads(target.read_text())["x"] == 2
    target.write_text("my notes\n")
    with pytest.raises(OutputRefused, match="not written by openbench"):
        write_json(target, {"written_by": "openbench"})
    assert target.read_text() == "my notes\n"
    with pytest.raises(OutputRefused, match="is an input"):
        write_json(tmp_path / "in.json", {}, inputs=[tmp_path / "in.json"])


def test_a_large_record_is_recognised_and_replaced_a_larger_foreign_file_is_not(tmp_path, monkeypatch):
    """A record of 822 relations is over 1 MiB: it is recognised by its whole content (a record
    cut at 1 MiB is not JSON); a file above the recognition bound is never read nor replaced."""
    target = tmp_path / "result.json"
    write_json(target, {"written_by": "openbench", "per_relation": {f"P{i}": "x" * 100 for i in range(20_000)}})
    assert target.stat().st_size > 2 << 20
    write_json(target, {"written_by": "openbench", "x": 2})
    assert json.loads(target.read_text())["x"] == 2
    monkeypatch.setattr(outputs, "RECOGNISED_JSON_BYTES", 8)
    with pytest.raises(OutputRefused, match="not written by openbench"):
        write_json(target, {"written_by": "openbench", "x": 3})
    assert json.loads(target.read_text())["x"] == 2


# ------------------------------------------------------------------------------------------
# kill -9 at every step of a real run


def _split_command(graph: Path, output: Path, seed: int):
    return ["split", "rand", "--edges", str(graph / "edges.csv"), "--tn-edges", str(graph / "TN_edges.csv"),
            "--nodes", str(graph / "ALL_nodes.csv"), "--output", str(output), "--seed", str(seed)]


@pytest.mark.slow
@pytest.mark.parametrize("no_exchange", [False, True], ids=["exchange", "two-renames"])
def test_kill_at_every_step_of_a_split_leaves_the_old_or_the_new_output(tmp_path, no_exchange):
    runner = CliRunner()
    assert runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--no-progress"]).exit_code == 0
    graph, output = tmp_path / "graph_files", tmp_path / "split"
    assert runner.invoke(main, _split_command(graph, tmp_path / "reference_new", 2)).exit_code == 0
    new = snapshot(tmp_path / "reference_new")
    outcomes = []
    for kill_at in range(1, 80):
        shutil.rmtree(output, ignore_errors=True)
        assert runner.invoke(main, _split_command(graph, output, 1)).exit_code == 0
        old = snapshot(output)
        done = killed_at(kill_at, _split_command(graph, output, 2), no_exchange)
        if done.returncode == 0:
            break  # the run finished before step kill_at: every step was tried
        assert done.returncode == -signal.SIGKILL, done.stderr
        if no_exchange:  # two renames leave a moment without the folder: the next run puts the old one back
            clean_leftovers(output)
        state = snapshot(output)
        assert state in (old, new), f"killed at step {kill_at}: neither the old nor the new output"
        outcomes.append("old" if state == old else "new")
        clean_leftovers(output)  # what the next run does first
        assert not [p for p in tmp_path.iterdir() if "~openbench-" in p.name], kill_at
    assert "old" in outcomes and "new" in outcomes and len(outcomes) >= 4, outcomes


# ------------------------------------------------------------------------------------------
# every writing command refuses a dangerous --output


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    runner = CliRunner()
    assert runner.invoke(main, ["generate", "--sample", "--output", str(root / "graph"), "--no-progress"]).exit_code == 0
    graph = root / "graph" / "graph_files"
    assert runner.invoke(main, _split_command(graph, root / "split", 1)).exit_code == 0
    from openbench.datasets.loader import load_dataset

    dataset = load_dataset(root / "split", drop_unknown=True)
    np.save(root / "ent.npy", np.zeros((dataset.num_entities, 4), dtype=np.float32))
    np.save(root / "rel.npy", np.zeros((dataset.num_relations, 4), dtype=np.float32))
    for side in ("pred", "truth"):
        (root / "metaeval" / side).mkdir(parents=True)
        (root / "metaeval" / side / "title.tsv").write_text("p1\tA title\n")
    return root


def _commands(root: Path):
    graph = root / "graph" / "graph_files"
    return {
        "split rand": (lambda out: _split_command(graph, out, 3), [graph, graph / "edges.csv"]),
        "export": (lambda out: ["export", "--graph", str(graph), "--format", "PARQUET", "--output", str(out)],
                   [graph, root / "graph"]),
        "export-kgid": (lambda out: ["export-kgid", "--dataset", str(root / "split"), "--output", str(out)],
                        [root / "split"]),
        "train": (lambda out: ["train", "--dataset", str(root / "split"), "--model", "DistMult", "--epochs", "1",
                               "--output", str(out)], [root / "split"]),
        "metaeval": (lambda out: ["text", "metaeval", "--input", str(root / "metaeval" / "pred"), "--truth",
                                  str(root / "metaeval" / "truth"), "--output", str(out)],
                     [root / "metaeval" / "pred", root / "metaeval"]),
        "leaderboard export": (lambda out: ["leaderboard", "export", "--output", str(out), "--db",
                                            str(root / "board.sqlite")], []),
        "demo": (lambda out: ["demo", "--planted", "--epochs", "1", "--out", str(out), "--no-progress"], []),
        "evaluate": (lambda out: ["evaluate", "--dataset", str(root / "split"), "--model", "DistMult",
                                  "--entity-embeddings", str(root / "ent.npy"), "--relation-embeddings",
                                  str(root / "rel.npy"), "--drop-unknown", "--output", str(out)],
                     [root / "ent.npy", root / "split"]),
    }


@pytest.mark.parametrize("command", ["split rand", "export", "export-kgid", "train", "metaeval", "leaderboard export",
                                     "demo", "evaluate"])
def test_every_writing_command_refuses_dangerous_outputs(inputs, command, tmp_path, monkeypatch):
    build, input_paths = _commands(inputs)[command]
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the user's notes\n")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("\\documentclass{article}\n")
    monkeypatch.chdir(work)
    targets = [Path("."), work.parent, foreign, *input_paths]
    if command == "evaluate":  # a file output: the current directory and a foreign file
        (work / "theirs.json").write_text('{"not": "openbench"}\n')
        targets = [Path("."), work / "theirs.json", *input_paths]
    for target in targets:
        before = {path: snapshot(path) for path in (work, foreign, inputs)}
        done = CliRunner().invoke(main, build(target))
        assert done.exit_code == 2, (target, done.output)
        if "Invalid value for '--output'" not in done.stderr:  # click's own check of a file/folder option
            assert "refused as output" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert {path: snapshot(path) for path in (work, foreign, inputs)} == before, target


# ------------------------------------------------------------------------------------------
# round two (issue 37): nested outputs, long names, mount points, read-only and full filesystems


def _small_graph(root: Path) -> Path:
    done = CliRunner().invoke(main, ["generate", "--sample", "--output", str(root / "graph"), "--no-progress"])
    assert done.exit_code == 0, done.output
    return root / "graph" / "graph_files"


def _split(graph: Path, output: Path, seed: int):
    return CliRunner().invoke(main, ["split", "rand", "--edges", str(graph / "edges.csv"), "--tn-edges",
                                     str(graph / "TN_edges.csv"), "--nodes", str(graph / "ALL_nodes.csv"),
                                     "--output", str(output), "--seed", str(seed)])


def test_a_users_file_in_a_nested_output_is_never_deleted(tmp_path):
    """Issue 37: split --output NS, split --output NS/extra_fold, a note added inside it, then
    split --output NS again deleted the note (a nested marker was trusted without its contents)."""
    graph = _small_graph(tmp_path)
    nested = tmp_path / "NS"
    assert _split(graph, nested, 1).exit_code == 0
    assert _split(graph, nested / "extra_fold", 2).exit_code == 0
    assert _split(graph, nested, 3).exit_code == 0  # a nested openbench output alone is still openbench's
    assert _split(graph, nested / "extra_fold", 2).exit_code == 0
    (nested / "extra_fold" / "notes.txt").write_text("notes\n")
    before = snapshot(nested)
    refused = _split(graph, nested, 4)
    assert refused.exit_code == 2 and "extra_fold/notes.txt" in refused.output, refused.output
    assert snapshot(nested) == before
    drafts = nested / "extra_fold" / "paper_drafts"  # a folder carrying a copied marker that lists nothing
    (nested / "extra_fold" / "notes.txt").unlink()
    drafts.mkdir()
    (drafts / MARKER).write_text(json.dumps({"written_by": "openbench", "kind": "x", "version": "0", "entries": []}))
    (drafts / "draft.tex").write_text("\\section{}")
    refused = _split(graph, nested, 4)
    assert refused.exit_code == 2 and "paper_drafts/draft.tex" in refused.output
    assert (drafts / "draft.tex").read_text() == "\\section{}"


def test_a_folder_name_of_250_characters_is_a_valid_output(tmp_path):
    """Issue 37: the staging folder's name (target name + ~openbench-staging~host~pid~token) went
    past 255 bytes: ENAMETOOLONG for a valid folder name."""
    target = tmp_path / ("d" * 250)
    for text in ("first", "second"):  # written, then replaced (leftover names shortened the same way)
        replace_folder(target, _fill(text))
        assert (target / "a.txt").read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    wide = tmp_path / ("é" * 120)  # 240 bytes in UTF-8
    replace_folder(wide, _fill())
    with atomic_path(tmp_path / ("f" * 250 + ".json")) as tmp:
        assert len(os.fsencode(tmp.name)) <= outputs.NAME_BYTES
        tmp.write_text("{}")


@pytest.fixture()
def mounted(tmp_path):
    """A 40 kB tmpfs mounted at tmp_path/mnt (unmounted after), or a skip where mounting is not
    allowed (no root, no CAP_SYS_ADMIN)."""
    point = tmp_path / "mnt"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip() or 'mount failed'})")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def test_a_mount_point_read_only_and_full_filesystems_are_one_clear_line(tmp_path, mounted):
    graph = _small_graph(tmp_path)
    refused = _split(graph, mounted, 1)  # a mount point cannot be renamed: EBUSY
    assert refused.exit_code == 2 and "mount point" in refused.output and "Traceback" not in refused.output
    full = _split(graph, mounted / "split", 1)  # the split does not fit in 40 kB
    assert full.exit_code == 1, full.output
    lines = [line for line in full.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "no space left" in lines[0] and str(mounted / "split") in lines[0], full.output
    assert "bug" not in full.output and list(mounted.iterdir()) == []  # no staging left
    small = _split(graph, tmp_path / "split", 1)
    assert small.exit_code == 0
    replace_folder(mounted / "kept", _fill("old"))
    subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
    before = snapshot(mounted)
    read_only = CliRunner().invoke(main, ["export-kgid", "--dataset", str(tmp_path / "split"), "--output",
                                          str(mounted / "kept")])
    assert read_only.exit_code == 1 and "read-only file system" in read_only.output, read_only.output
    assert "internal error" not in read_only.output and snapshot(mounted) == before


@pytest.mark.parametrize("command", [
    ["demo", "--out", "{file}/out"],
    ["evaluate", "--dataset", "{data}", "--model", "popularity", "--output", "{file}/x.json"],
    ["report", "{record}", "--output", "{file}/report"],
    ["split", "rand", "--edges", "{triples}", "--output", "{file}/split"],
])
def test_an_output_under_a_file_is_one_line_before_any_work(tmp_path, command):
    """Issue 66: `demo --out predictions.txt/out` said "internal error … a bug in openbench";
    `evaluate --output file.txt/x.json` ran the whole evaluation first. The place is checked
    before anything runs, and the message names the file in the way."""
    from tests.helpers import random_labelled_graph, write_samples

    blocker = tmp_path / "predictions.txt"
    blocker.write_text("mine\n")
    data = write_samples(tmp_path / "data", random_labelled_graph(1, 20, 2, {"train": 60, "valid": 5, "test": 5}),
                         negatives=False)
    triples = tmp_path / "triples.tsv"
    triples.write_text("a\tr\tb\nb\tr\tc\n")
    record = tmp_path / "record.json"
    record.write_text("{}")
    argv = [part.format(file=blocker, data=data, triples=triples, record=record) for part in command]
    done = CliRunner().invoke(main, argv)
    assert done.exit_code == 2, done.output
    assert f"{blocker} is a file, not a folder" in done.output and "bug" not in done.output
    assert len(done.output.strip().splitlines()) == 1 and blocker.read_text() == "mine\n"


def test_an_output_where_nothing_can_be_created_is_refused(tmp_path):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK) and os.geteuid() == 0:
            # root writes anyway: a place that truly cannot hold files is /proc's root
            target = Path("/proc/openbench-nope/out") if Path("/proc").is_dir() else None
        else:
            target = locked / "out"
        if target is None:
            pytest.skip("no place that refuses files here")
        done = CliRunner().invoke(main, ["demo", "--out", str(target)])
        assert done.exit_code == 2 and "nothing can be created in" in done.output and "bug" not in done.output
        assert not list(locked.iterdir())
    finally:
        locked.chmod(0o700)
