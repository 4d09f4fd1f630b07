"""Issue 75: does a model predict what was found later? On a split by dates: the metrics per year of
the test edges' dates (checked against a plain count of the ranks file and a restated bootstrap),
printed and drawn; the record says what its popularity baseline counted; a ground-truth file's rows
dated on or before the cut-off scored apart, and its trial outcomes read by a documented default."""
import copy
import datetime
import json
import statistics
from collections import Counter, defaultdict

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.record import RecordError, validate_record
from tests.bases import CUTOFF, DISEASES, DRUGS, VALID_CUTOFF, dated_graph, dated_rows, write_dated


def _invoke(arguments):
    done = CliRunner().invoke(main, list(map(str, arguments)))
    return done


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    root = tmp_path_factory.mktemp("later")
    rows = dated_rows(dated_graph(11), 12)
    write_dated(root / "dated.tsv", rows)
    done = _invoke(["split", "time", "--edges", root / "dated.tsv", "--cutoff", CUTOFF, "--valid-cutoff",
                    VALID_CUTOFF, "--seed", 1, "--output", root / "split"])
    assert done.exit_code == 0, done.output
    (root / "drugs.txt").write_text("\n".join(DRUGS) + "\n")
    (root / "diseases.txt").write_text("\n".join(DISEASES) + "\n")
    return root, rows


@pytest.fixture(scope="module")
def by_year(dated):
    root, _ = dated
    done = _invoke(["evaluate", "--dataset", root / "split", "--model", "popularity", "--by-period", "year",
                    "--bootstrap", 300, "--seed", 4, "--ranks-output", root / "ranks.parquet", "--no-progress",
                    "--output", root / "record.json"])
    assert done.exit_code == 0, done.output
    return root, json.loads((root / "record.json").read_text()), done.output


def _dates(root):
    lines = (root / "split" / "test_dates.tsv").read_text().splitlines()[1:]
    return {tuple(line.split("\t")[:3]): datetime.date.fromisoformat(line.split("\t")[3]) for line in lines}


def test_the_metrics_per_year_equal_a_plain_count_of_the_ranks(by_year):
    root, record, _ = by_year
    ranks = pl.read_parquet(root / "ranks.parquet")
    dates = _dates(root)
    queries = defaultdict(list)
    for head, relation, tail, rank in ranks.select("head", "relation", "tail", "rank").iter_rows():
        queries[dates[(head, relation, tail)]].append((head, relation, tail, rank))
    years = defaultdict(list)
    for date, found in queries.items():
        years[str(date.year)] += [(date, *row) for row in found]
    block = record["by_period"]
    assert block["period"] == "year" and block["cutoff"] == CUTOFF.isoformat() and block["undated_triples"] == 0
    assert sorted(block["periods"]) == sorted(years) and len(years) >= 2
    for year, found in years.items():
        entry = block["periods"][year]
        assert entry["queries"] == len(found)
        assert entry["triples"] == len({row[1:4] for row in found})
        assert entry["metrics"]["mrr"] == pytest.approx(sum(1 / row[4] for row in found) / len(found), abs=1e-12)
        for k in (1, 3, 10):
            assert entry["metrics"][f"hits@{k}"] == pytest.approx(sum(row[4] <= k for row in found) / len(found),
                                                                  abs=1e-12)
        days = statistics.median((row[0] - CUTOFF).days for row in found)
        assert entry["days_after_cutoff"] == days > 0


def test_each_years_interval_is_the_bootstrap_over_its_triples_restated(by_year):
    """Resample i draws row i of rng.integers(0, U, (resamples, U)) over the year's U triples in
    sorted (split, relation, head, tail) order; its MRR is the mean over the drawn triples' queries."""
    root, record, _ = by_year
    ranks = pl.read_parquet(root / "ranks.parquet")
    dates = _dates(root)
    year = sorted(record["by_period"]["periods"])[0]
    rows = [row for row in ranks.select("split", "relation", "head", "tail", "rank").iter_rows()
            if str(dates[(row[2], row[1], row[3])].year) == year]
    units = sorted({row[:4] for row in rows})
    sums = {unit: [0.0, 0] for unit in units}
    for row in rows:
        sums[row[:4]][0] += 1 / row[4]
        sums[row[:4]][1] += 1
    rng = np.random.default_rng(4)
    drawn = rng.integers(0, len(units), size=(300, len(units)), dtype=np.int32)
    samples = []
    for resample in drawn:
        total = sum(sums[units[i]][0] for i in resample)
        count = sum(sums[units[i]][1] for i in resample)
        samples.append(total / count)
    low, high = np.quantile(samples, [0.025, 0.975])
    assert record["by_period"]["periods"][year]["intervals"]["mrr"] == pytest.approx([low, high], abs=1e-12)


def test_the_years_print_with_their_intervals_and_what_the_table_is_read_against(by_year):
    _, record, output = by_year
    for year, entry in record["by_period"]["periods"].items():
        line = next(line for line in output.splitlines() if line.startswith(year + " "))
        low, high = entry["intervals"]["mrr"]
        assert f"{entry['metrics']['mrr']:.4f} [{low:.3f}, {high:.3f}]" in line
    assert "read against: the popularity baseline of this split" in output
    assert record["dataset"]["time_cut"]["cutoff"] == CUTOFF.isoformat()
    assert "dated on or before the cut-off" in record["dataset"]["time_cut"]["baseline"]
    assert record["dataset"]["made_by"].startswith(f"openbench split time, cut-off {CUTOFF.isoformat()}")


def test_the_report_draws_the_metric_against_the_time_since_the_cutoff(by_year, tmp_path):
    root, record, _ = by_year
    done = _invoke(["report", root / "record.json", "--output", tmp_path / "report"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "report" / "over_time.png").stat().st_size > 1000
    figures = json.loads((tmp_path / "report" / "figures.json").read_text())
    drawn = figures["figures"]["over_time"]["popularity"]
    for year, entry in record["by_period"]["periods"].items():
        assert drawn[year]["mrr"] == entry["metrics"]["mrr"]
        assert drawn[year]["years"] == pytest.approx(entry["days_after_cutoff"] / 365.25)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "years from the cut-off to the period" in page  # the figure, inline, with its caption


def test_by_period_on_a_split_without_dates_is_one_clear_error(dated, tmp_path):
    root, rows = dated
    (tmp_path / "plain.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t, _ in rows))
    assert _invoke(["split", "rand", "--edges", tmp_path / "plain.tsv", "--output", tmp_path / "rand"]).exit_code == 0
    done = _invoke(["evaluate", "--dataset", tmp_path / "rand", "--model", "popularity", "--by-period", "year",
                    "--no-progress"])
    assert done.exit_code != 0
    assert "split by dates" in done.output and "test_dates.tsv" in done.output
    assert len(done.output.strip().splitlines()) == 1


@pytest.mark.parametrize("tamper, message", [
    (lambda block: block["periods"].__setitem__("20x1", block["periods"].pop(sorted(block["periods"])[0])),
     "expected a year label"),
    (lambda block: next(iter(block["periods"].values())).__setitem__("queries", 10 ** 6), "one or two per triple"),
    (lambda block: next(iter(block["periods"].values()))["metrics"].__setitem__("mrr", 1.5), "in [0, 1]"),
    (lambda block: next(iter(block["periods"].values()))["intervals"].__setitem__("mrr", [0.5, 0.1]), "low <= high"),
    (lambda block: next(iter(block["periods"].values())).__setitem__("days_after_cutoff", -3.0), "after the cut-off"),
    (lambda block: block.__setitem__("cutoff", "2020"), "expected a date"),
    (lambda block: block.__setitem__("period", "decade"), "expected one of"),
    (lambda block: next(iter(block["periods"].values()))["metrics"].pop("hits@3"), "expected mrr, hits@1"),
])
def test_a_tampered_period_block_is_refused(by_year, tamper, message):
    _, record, _ = by_year
    validate_record(record)
    changed = copy.deepcopy(record)
    tamper(changed["by_period"])
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_record(changed)


def test_a_tampered_time_cut_is_refused(by_year):
    _, record, _ = by_year
    changed = copy.deepcopy(record)
    changed["dataset"]["time_cut"]["cutoff"] = "June"
    with pytest.raises(RecordError, match="time_cut"):
        validate_record(changed)


# ---------------------------------------------------------------------------------------------
# a ground-truth file against the cut-off


def _ground_truth_rows(rows):
    """(the file's rows, {part: (positives, negatives)} counted plainly): drug-disease pairs no
    treats edge of the graph holds, dated around the cut-off, with every outcome."""
    known = {(h, t) for h, r, t, _ in rows if r == "treats"}  # the graph's own pairs, of any date
    free = [(d, s) for d in DRUGS for s in DISEASES if (d, s) not in known]
    outcomes = ["significantly_better", "non_significantly_better", "non_significantly_worse", "significantly_worse"]
    dates = ["2019-03-01", "2020-06-30", "2021-02-01", "2022-08-15", ""]
    file_rows, expected = [], defaultdict(lambda: (set(), set()))
    for index, (drug, disease) in enumerate(free[:60]):
        outcome, date = outcomes[index % 4], dates[index % 5]
        file_rows.append((drug, disease, outcome, date))
        part = "undated" if not date else "after" if datetime.date.fromisoformat(date) > CUTOFF else "before"
        if outcome == "significantly_better":
            expected[part][0].add((drug, disease))
        elif outcome == "significantly_worse":
            expected[part][1].add((drug, disease))
    return file_rows, expected


def _repurpose(root, ground_truth, *extra, dataset=None):
    out = root / f"repurposing-{abs(hash((str(ground_truth), extra, str(dataset))))}.json"
    done = _invoke(["evaluate", "--dataset", dataset or root / "split", "--model", "popularity", "--task",
                    "repurposing", "--relation", "treats", "--drugs", root / "drugs.txt", "--diseases",
                    root / "diseases.txt", "--ground-truth", ground_truth, *extra, "--no-progress", "--output", out])
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text())["repurposing"]["views"], done.output


def test_rows_dated_by_the_cutoff_are_scored_apart_from_the_later_ones(dated, tmp_path):
    root, rows = dated
    file_rows, expected = _ground_truth_rows(rows)
    path = tmp_path / "trials.csv"
    path.write_text("drug,disease,outcome,date\n" + "".join(",".join(row) + "\n" for row in file_rows))
    views, output = _repurpose(root, path)
    names = {"after": "ground_truth", "before": "ground_truth_before_cutoff", "undated": "ground_truth_undated"}
    for part, name in names.items():
        assert views[name]["positives"] == len(expected[part][0]), name
        assert views[name]["negatives"] == len(expected[part][1]), name
        assert f"{name} view:" in output
    file_block = views["ground_truth"]["file"]
    assert file_block["dates"]["cutoff"] == CUTOFF.isoformat() and file_block["dates"]["cutoff_from"] == "split_info.json"
    assert file_block["dates"]["rows_by_part"] == {names[p]: sum(
        1 for *_, d in file_rows if (not d and p == "undated") or (d and p == ("after" if datetime.date.fromisoformat(d)
                                                                              > CUTOFF else "before")))
        for p in names}
    assert file_block["labels"]["positive_outcomes"] == ["significantly_better"]
    assert file_block["labels"]["rows_left_out_by_outcome"] == dict(sorted(Counter(
        outcome for _, _, outcome, _ in file_rows if outcome.startswith("non_")).items()))
    assert all(expected[part][0] and expected[part][1] for part in names)  # every part met both labels


def test_the_positive_outcomes_are_the_users_choice(dated, tmp_path):
    root, rows = dated
    file_rows, _ = _ground_truth_rows(rows)
    path = tmp_path / "trials.tsv"
    path.write_text("drug\tdisease\toutcome\n" + "".join("\t".join(row[:3]) + "\n" for row in file_rows))
    views, _ = _repurpose(root, path, "--positive-outcomes", "significantly_better,Non-Significantly Better?",
                          "--negative-outcomes", "significantly_worse,non_significantly_worse")
    better = {"significantly_better", "non_significantly_better"}
    assert views["ground_truth"]["positives"] == sum(row[2] in better for row in file_rows)
    assert views["ground_truth"]["negatives"] == sum(row[2] not in better for row in file_rows)
    assert "ground_truth_before_cutoff" not in views  # no date column: nothing to set apart


def test_every_cures_four_flag_layout_reads_as_its_outcome_column(dated, tmp_path):
    root, rows = dated
    file_rows, _ = _ground_truth_rows(rows)
    names = ["significantly_better", "non_significantly_better", "non_significantly_worse", "significantly_worse"]
    flags = tmp_path / "flags.csv"
    flags.write_text("drug,disease," + ",".join(names) + ",date\n" + "".join(
        f"{drug},{disease}," + ",".join("1" if name == outcome else "0" for name in names) + f",{date}\n"
        for drug, disease, outcome, date in file_rows))
    column = tmp_path / "column.csv"
    column.write_text("drug,disease,outcome,date\n" + "".join(",".join(row) + "\n" for row in file_rows))
    flagged, _ = _repurpose(root, flags)
    written, _ = _repurpose(root, column)
    for name in written:
        for key in ("positives", "negatives", "full_matrix", "disease_specific"):
            assert flagged[name][key] == written[name][key], (name, key)


def test_a_row_flagging_several_outcomes_counts_as_the_best(dated, tmp_path):
    root, _ = dated
    flags = tmp_path / "flags.csv"
    flags.write_text("drug,disease,significantly_better,non_significantly_better,non_significantly_worse,"
                     f"significantly_worse\n{DRUGS[0]},{DISEASES[9]},1,0,0,1\n{DRUGS[1]},{DISEASES[9]},0,0,0,0\n")
    views, _ = _repurpose(root, flags)
    assert views["ground_truth"]["positives"] + views["ground_truth"]["file"]["positive_pairs_in_training"] == 1
    assert views["ground_truth"]["file"]["labels"]["rows_left_out_by_outcome"] == {"no outcome flagged": 1}


def test_a_given_cutoff_dates_the_rows_of_anydated_graph(dated, tmp_path):
    root, rows = dated
    file_rows, _ = _ground_truth_rows(rows)
    path = tmp_path / "trials.csv"
    path.write_text("drug,disease,outcome,date\n" + "".join(",".join(row) + "\n" for row in file_rows))
    views, _ = _repurpose(root, path, "--cutoff", "2021-12-31")
    assert views["ground_truth"]["file"]["dates"]["cutoff_from"] == "given"
    later = sum(1 for *_, date in file_rows if date and datetime.date.fromisoformat(date) > datetime.date(2021, 12, 31))
    assert views["ground_truth"]["file"]["dates"]["rows_by_part"]["ground_truth"] == later


@pytest.mark.parametrize("header, row, message, line", [
    ("drug,disease,outcome", "{d},{s},better", "outcome 'better'", 3),
    ("drug,disease,outcome,date", "{d},{s},significantly_better,31/12/2021", "date '31/12/2021'", 3),
    ("drug,disease,label,outcome", "{d},{s},1,significantly_better", "both label and outcome", 1),
    ("drug,disease,significantly_better,non_significantly_better,non_significantly_worse,significantly_worse",
     "{d},{s},yes,0,0,0", "expected 0 or 1", 3),
])
def test_a_bad_ground_truth_row_is_one_line_naming_file_and_line(dated, tmp_path, header, row, message, line):
    root, _ = dated
    path = tmp_path / "trials.csv"
    first = row.format(d=DRUGS[0], s=DISEASES[0]) if line == 1 else \
        (f"{DRUGS[0]},{DISEASES[0]},significantly_better" + (",2021-01-01" if "date" in header else "")
         if "outcome" in header else f"{DRUGS[0]},{DISEASES[0]},1,0,0,0")
    path.write_text(f"{header}\n{first}\n{row.format(d=DRUGS[1], s=DISEASES[1])}\n")
    done = _invoke(["evaluate", "--dataset", root / "split", "--model", "popularity", "--task", "repurposing",
                    "--relation", "treats", "--drugs", root / "drugs.txt", "--diseases", root / "diseases.txt",
                    "--ground-truth", path, "--no-progress"])
    assert done.exit_code != 0
    text = done.output.strip()
    assert len(text.splitlines()) == 1 and "trials.csv" in text and message in text and f"line {line}" in text, text


@pytest.mark.parametrize("extra, message", [
    (["--cutoff", "2021-12-31"], "--ground-truth"),
    (["--ground-truth", "{gt}", "--positive-outcomes", "good"], "expected outcomes among"),
    (["--ground-truth", "{gt}", "--negative-outcomes", "significantly_better"], "both a positive and a negative"),
    (["--ground-truth", "{gt}", "--cutoff", "2021"], "is a year; expected a day"),
])
def test_bad_outcome_and_cutoff_options_are_refused(dated, tmp_path, extra, message):
    root, _ = dated
    path = tmp_path / "gt.csv"
    path.write_text(f"drug,disease,outcome\n{DRUGS[0]},{DISEASES[0]},significantly_better\n")
    done = _invoke(["evaluate", "--dataset", root / "split", "--model", "popularity", "--task", "repurposing",
                    "--relation", "treats", "--drugs", root / "drugs.txt", "--diseases", root / "diseases.txt",
                    *[part.format(gt=path) for part in extra], "--no-progress"])
    assert done.exit_code != 0 and message in done.output, done.output


@pytest.mark.parametrize("change, message, line", [
    (lambda lines: [lines[0], lines[1], lines[1]] + lines[2:], "is dated twice", 3),
    (lambda lines: [lines[0], lines[1].rsplit("\t", 1)[0] + "\t2021-02-30"] + lines[2:], "expected YYYY-MM-DD", 2),
    (lambda lines: ["id1\trelation\tid2\tdate"] + lines[1:], "expected head, relation, tail, date", 1),
])
def test_a_damaged_dates_file_is_one_line_naming_its_line(dated, tmp_path, change, message, line):
    import shutil

    root, _ = dated
    shutil.copytree(root / "split", tmp_path / "split")
    dates = tmp_path / "split" / "test_dates.tsv"
    dates.write_text("\n".join(change(dates.read_text().splitlines())) + "\n")
    done = _invoke(["evaluate", "--dataset", tmp_path / "split", "--model", "popularity", "--by-period", "year",
                    "--no-progress"])
    assert done.exit_code != 0
    text = done.output.strip()
    assert len(text.splitlines()) == 1 and "test_dates.tsv" in text and message in text and f"line {line}" in text, text


def test_a_damaged_cutoff_in_split_info_is_named(dated, tmp_path):
    import shutil

    root, _ = dated
    shutil.copytree(root / "split", tmp_path / "split")
    info_path = tmp_path / "split" / "split_info.json"
    info = json.loads(info_path.read_text())
    info["dated"]["cutoff"] = "mid-2020"
    info_path.write_text(json.dumps(info))
    done = _invoke(["evaluate", "--dataset", tmp_path / "split", "--model", "popularity", "--no-progress"])
    assert done.exit_code != 0
    assert "split_info.json" in done.output and "dated.cutoff" in done.output, done.output
