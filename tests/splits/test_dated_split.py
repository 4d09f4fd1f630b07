"""Issue 75: what was found later. A dated triples file split at a cut-off, checked with plain sets
against the file itself; two snapshots' strata counted by a plain reference; the edges a later
snapshot retracted read back as known negatives; bad dates end in one line naming file and line."""
import datetime
import json
from collections import Counter, defaultdict

import numpy as np
import pytest
from click.testing import CliRunner

from openbench.cli import main
from tests.bases import CUTOFF, DISEASES, DRUGS, VALID_CUTOFF, dated_graph, dated_rows, write_dated

def _sample_rows(path, value=None):
    if not path.is_file():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines() if line]
    return [(r[0], r[1], r[2]) + ((r[5],) if value == "source" else ()) for r in rows
            if value in (None, "source") and (len(r) < 5 or r[4] == ("0" if value == "source" else "1"))]


def _split(arguments):
    done = CliRunner().invoke(main, ["split", "time", *map(str, arguments)])
    assert done.exit_code == 0, done.output
    return done


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    root = tmp_path_factory.mktemp("dated")
    rows = dated_rows(dated_graph(1), 2)
    source = write_dated(root / "dated.tsv", rows)
    _split(["--edges", source, "--cutoff", CUTOFF, "--valid-cutoff", VALID_CUTOFF, "--seed", 3,
            "--output", root / "split"])
    return root, rows


def _earliest(rows):
    """{edge: its earliest date (None: undated in every row)}, restated with a dict."""
    found = {}
    for h, r, t, text in rows:
        date = datetime.date.fromisoformat(text) if text else None
        if (h, r, t) not in found or date is not None and (found[(h, r, t)] is None or date < found[(h, r, t)]):
            found[(h, r, t)] = date
    return found


def test_every_edge_lands_by_its_date(dated):
    root, rows = dated
    out = root / "split"
    when = _earliest(rows)
    train, valid, test = (set(_sample_rows(out / name)) for name in ("train_sample.csv", "val_sample.csv",
                                                                      "test_sample.csv"))
    assert train and valid and test
    assert all(when[edge] is None or when[edge] <= VALID_CUTOFF for edge in train)
    assert all(when[edge] is not None and VALID_CUTOFF < when[edge] <= CUTOFF for edge in valid)
    assert all(when[edge] is not None and when[edge] > CUTOFF for edge in test)
    # nothing invented, and what is missing was removed by the cleaning (counted), never lost
    assert train | valid | test <= set(when)
    missing = set(when) - (train | valid | test)
    assert missing and all(when[(h, r, t)] > VALID_CUTOFF and (t, r, h) in train | valid for h, r, t in missing)
    info = json.loads((out / "split_info.json").read_text())
    assert info["split"]["test_cleaning"]["reverse_edges"] + info["split"]["val_cleaning"]["reverse_edges"] > 0
    # the record of the cut-off, counted from the file
    assert info["dated"]["cutoff"] == CUTOFF.isoformat() and info["dated"]["valid_cutoff"] == VALID_CUTOFF.isoformat()
    assert info["dated"]["undated_edges_in_training"] == sum(date is None for date in when.values())
    later = {edge: date for edge, date in when.items() if date is not None and date > CUTOFF}
    assert info["dated"]["edges_after_cutoff"] == len(later)
    assert info["dated"]["test_edges_by_year"] == {str(y): n for y, n in sorted(Counter(
        date.year for date in later.values()).items())}
    # test_dates.tsv: every edge after the cut-off with its earliest date
    lines = (out / "test_dates.tsv").read_text().splitlines()
    assert lines[0] == "head\trelation\ttail\tdate"
    assert {tuple(line.split("\t")[:3]): datetime.date.fromisoformat(line.split("\t")[3]) for line in lines[1:]} == later


def test_no_negative_is_a_positive_of_any_date(dated):
    root, rows = dated
    out = root / "split"
    every_positive = {(h, r, t) for h, r, t, _ in rows}
    for name in ("negative_train_sample.csv", "negative_val_sample.csv", "negative_test_sample.csv"):
        negatives = {row[:3] for row in _sample_rows(out / name, "source")}
        assert negatives and not negatives & every_positive, name


def test_entities_first_seen_after_training_are_counted(dated):
    root, rows = dated
    when = _earliest(rows)
    trained = {end for (h, _, t), date in when.items() if date is None or date <= VALID_CUTOFF for end in (h, t)}
    later = {end for (h, _, t), date in when.items() if date is not None and date > VALID_CUTOFF for end in (h, t)}
    info = json.loads((root / "split" / "split_info.json").read_text())
    assert info["dated"]["entities_first_seen_after_training"] == len(later - trained)


def test_a_headerless_file_reads_its_fourth_field_as_the_date(dated, tmp_path):
    root, rows = dated
    source = write_dated(tmp_path / "plain.tsv", rows, header=False)
    _split(["--edges", source, "--cutoff", CUTOFF, "--valid-cutoff", VALID_CUTOFF, "--seed", 3, "--output",
            tmp_path / "split"])
    for name in ("train_sample.csv", "val_sample.csv", "test_sample.csv", "test_dates.tsv"):
        assert (tmp_path / "split" / name).read_bytes() == (root / "split" / name).read_bytes(), name


def test_the_same_seed_writes_the_same_files(dated, tmp_path):
    root, _ = dated
    _split(["--edges", root / "dated.tsv", "--cutoff", CUTOFF, "--valid-cutoff", VALID_CUTOFF, "--seed", 3,
            "--output", tmp_path / "again"])
    for path in sorted((root / "split").iterdir()):
        assert (tmp_path / "again" / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("rows, cutoff, message, line", [
    ([("a", "r", "b", "2020-01-01"), ("c", "r", "d", "June 2020")], "2020-03-01", "date 'June 2020'", 3),
    ([("a", "r", "b", "2020-01-01"), ("c", "r", "d", "2020-02-30")], "2020-01-15", "no day of the calendar", 3),
    ([("a", "r", "b", "2020"), ("c", "r", "d", "2021-05-01")], "2020-03-01", "another form", 3),
    ([("a", "r", "b", "2020-01-01"), ("c", "r", "d", "2021-01-01")], "2014-01-01", "outside the edges' dates", None),
    ([("a", "r", "b", "2020-01-01"), ("c", "r", "d", "2021-01-01")], "2021-01-01", "outside the edges' dates", None),
    ([("a", "r", "b", ""), ("c", "r", "d", "")], "2020-01-01", "no edge has a date", None),
])
def test_a_bad_date_is_one_line_naming_file_and_line(tmp_path, rows, cutoff, message, line):
    source = write_dated(tmp_path / "dated.tsv", rows)
    done = CliRunner().invoke(main, ["split", "time", "--edges", str(source), "--cutoff", cutoff, "--output",
                                     str(tmp_path / "out")])
    assert done.exit_code != 0
    text = done.output.strip()
    assert len(text.splitlines()) == 1 and text.startswith("error:"), text
    assert "dated.tsv" in text and message in text, text
    if line is not None:
        assert f"line {line}" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arguments, message", [
    (["--cutoff", "2020"], "is a year; expected a day"),
    (["--cutoff", "2020-06"], "is a month; expected a day"),
    (["--cutoff", "30/06/2020"], "expected a date"),
    (["--cutoff", "2020-06-30", "--valid-cutoff", "2020-07-31"], "before --cutoff"),
    (["--cutoff", "2020-06-30", "--val", "0.1"], "--val go with two snapshots"),
])
def test_a_bad_cutoff_is_refused(dated, tmp_path, arguments, message):
    root, _ = dated
    done = CliRunner().invoke(main, ["split", "time", "--edges", str(root / "dated.tsv"), *arguments, "--output",
                                     str(tmp_path / "out")])
    assert done.exit_code != 0 and message in done.output, done.output
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# two snapshots: the strata, and the retracted edges as known negatives


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshots")
    now = dated_graph(5)
    rng = np.random.default_rng(6)
    before = [edge for edge in now if rng.random() > 0.15]  # 15 % of today's edges are new
    retracted = [edge for edge in dated_graph(7) if edge not in set(now)][:40]  # t-1 held these; t no longer does
    before += retracted
    for name, edges in (("now.tsv", now), ("before.tsv", before)):
        (root / name).write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in edges))
    _split(["--edges", root / "now.tsv", "--tmo-edges", root / "before.tsv", "--val", "0.2", "--removed-as-negatives",
            "--seed", 2, "--output", root / "split"])
    return root, now, before


def test_the_strata_equal_a_plain_count(snapshots):
    root, now, before = snapshots
    info = json.loads((root / "split" / "split_info.json").read_text())
    strata = info["strata"]
    counted = defaultdict(lambda: {"added": 0, "persistent": 0, "removed": 0})
    for edge in set(now) - set(before):
        counted[edge[1]]["added"] += 1
    for edge in set(now) & set(before):
        counted[edge[1]]["persistent"] += 1
    for edge in set(before) - set(now):
        counted[edge[1]]["removed"] += 1
    assert strata["per_relation"] == dict(counted)
    assert strata["edges"] == {kind: sum(c[kind] for c in counted.values()) for kind in ("added", "persistent",
                                                                                        "removed")}
    ends = lambda edges: {end for h, _, t in edges for end in (h, t)}  # noqa: E731
    assert strata["entities"] == {"appeared": len(ends(now) - ends(before)),
                                  "vanished": len(ends(before) - ends(now))}
    assert all(counted[relation]["removed"] for relation in ("treats", "targets"))  # the plant reached both


def test_the_retracted_edges_are_test_negatives(snapshots):
    root, now, before = snapshots
    removed = {edge for edge in set(before) - set(now)
               if edge[0] in {e for h, _, t in now for e in (h, t)} and edge[2] in {e for h, _, t in now for e in (h, t)}}
    written = {row[:3] for row in _sample_rows(root / "split" / "negative_test_sample.csv", "source")
               if row[3] == "REMOVED"}
    info = json.loads((root / "split" / "split_info.json").read_text())
    assert written and written <= removed
    assert info["input"]["removed_as_test_negatives"] == len(removed)
    assert not written & set(now)
    # a retracted fact leaves training, where it would be taught as true
    trained = set(_sample_rows(root / "split" / "train_sample.csv")) | set(_sample_rows(root / "split" / "val_sample.csv"))
    assert not removed & trained
    assert len(trained) < len(set(before))


def test_classification_reads_the_retracted_edges_as_their_own_kind(snapshots, tmp_path):
    root, _, _ = snapshots
    out = tmp_path / "classification.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(root / "split"), "--model", "popularity", "--task",
                                     "classification", "--no-progress", "--output", str(out)])
    assert done.exit_code == 0, done.output
    kinds = json.loads(out.read_text())["classification"]["test"]["by_negative_kind"]
    written = [row for row in _sample_rows(root / "split" / "negative_test_sample.csv", "source")
               if row[3] == "REMOVED"]
    assert kinds["removed"]["negatives"] == len(written)
    assert "vs removed" in done.output


def test_the_repurposing_task_reads_the_retracted_treats_edges_as_known_negatives(snapshots, tmp_path):
    root, _, _ = snapshots
    (tmp_path / "drugs.txt").write_text("\n".join(DRUGS) + "\n")
    (tmp_path / "diseases.txt").write_text("\n".join(DISEASES) + "\n")
    out = tmp_path / "repurposing.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(root / "split"), "--model", "popularity", "--task",
                                     "repurposing", "--relation", "treats", "--drugs", str(tmp_path / "drugs.txt"),
                                     "--diseases", str(tmp_path / "diseases.txt"), "--no-progress", "--output", str(out)])
    assert done.exit_code == 0, done.output
    matrix = json.loads(out.read_text())["repurposing"]["matrix"]
    written = {row[:3] for row in _sample_rows(root / "split" / "negative_test_sample.csv", "source")
               if row[3] == "REMOVED" and row[1] == "treats"}
    assert written
    assert matrix["known_negative_rows_from_split_files"] == {"REMOVED": len(written)}
    assert matrix["known_negative_pairs"] == len(written)


def test_the_audit_of_a_time_split_shows_its_strata_and_a_dated_split_its_cutoff(snapshots, dated):
    root, _, _ = snapshots
    done = CliRunner().invoke(main, ["audit", str(root / "split")])
    assert done.exit_code == 0, done.output
    info = json.loads((root / "split" / "split_info.json").read_text())
    for relation, counts in info["strata"]["per_relation"].items():
        assert any(relation in line and f"added {counts['added']}," in line and f"removed {counts['removed']}" in line
                   for line in done.output.splitlines()), (relation, done.output)
    dated_root, _ = dated
    done = CliRunner().invoke(main, ["audit", str(dated_root / "split")])
    assert done.exit_code == 0 and f"cut-off {CUTOFF.isoformat()}" in done.output, done.output
