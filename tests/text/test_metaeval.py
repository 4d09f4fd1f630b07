"""Meta-Eval: the spec's worked examples E1–E9, the real gold/baseline files, properties, bad input."""
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench.cli import main, metaeval_command
from openbench.errors import InputError
from openbench.text import metaeval

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "metaeval"


def _folders(tmp_path, truth: str, predicted: str, name="m.tsv"):
    (tmp_path / "truth").mkdir(parents=True)
    (tmp_path / "pred").mkdir(parents=True)
    (tmp_path / "truth" / name).write_text(truth, encoding="utf-8")
    (tmp_path / "pred" / name).write_text(predicted, encoding="utf-8")
    return tmp_path / "pred", tmp_path / "truth"


def _scores(tmp_path, truth, predicted, semantics="set"):
    pred, gold = _folders(tmp_path, truth, predicted)
    (result,) = metaeval.evaluate(pred, gold, semantics)
    return result.precision, result.recall


@pytest.mark.parametrize("semantics", metaeval.SEMANTICS)
def test_e1_e2_the_original_unit_tests(tmp_path, semantics):
    assert _scores(tmp_path / "1", "p1\tvalue1\np2\tvalue2\n", "p1\tvalue1\np2\tvalue2Wrong\n", semantics) == (0.5, 0.5)
    precision, recall = _scores(tmp_path / "2", "key1\tvalue1.0\tvalue1.1\nkey2\tvalue2.0\tvalue2.1\n",
                                "key1\tvalue1.0\tvalue1.1Wrong\tvalue1.2Wrong\nkey2\tvalue2.0\n", semantics)
    assert precision == pytest.approx(2 / 3, abs=1e-9) and recall == 0.5


def test_e3_e4_papers_on_one_side_only(tmp_path):
    assert _scores(tmp_path / "3", "a\tx\nb\ty\n", "a\tx\n") == (1.0, 0.5)
    assert _scores(tmp_path / "4", "a\tx\n", "a\tx\nc\tz\n") == (0.5, 1.0)


@pytest.mark.parametrize("semantics,e5,e6", [("compat", (1.0, 0.5), (1.0, 2.0)), ("set", (1.0, 1.0), (1.0, 1.0)),
                                             ("multiset", (1.0, 0.5), (0.5, 1.0))])
def test_e5_e6_repeated_values_per_semantics(tmp_path, semantics, e5, e6):
    assert _scores(tmp_path / "5", "a\tsmith\tsmith\n", "a\tsmith\n", semantics) == e5
    assert _scores(tmp_path / "6", "a\tsmith\n", "a\tsmith\tsmith\n", semantics) == e6


def test_e7_e8_undefined_scores_are_empty_fields(tmp_path):
    pred, gold = _folders(tmp_path / "7", "a\tx\n", "")
    assert metaeval.pr_table(metaeval.evaluate(pred, gold)) == "Metric\tPrecision\tRecall\nm\t\t0.0\n"
    pred, gold = _folders(tmp_path / "8", "", "a\tx\n")
    assert metaeval.pr_table(metaeval.evaluate(pred, gold)) == "Metric\tPrecision\tRecall\nm\t0.0\t\n"


def test_e9_details_file_and_pr_file_through_the_cli(tmp_path):
    pred, gold = _folders(tmp_path, "p1\tvalue1\np2\tvalue2\n", "p2\tvalue2Wrong\np1\tvalue1\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["text", "metaeval", "--input", str(pred), "--truth", str(gold),
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "PR.txt").read_text() == "Metric\tPrecision\tRecall\nm\t0.5\t0.5\n"
    assert (out / "details" / "m-labels.txt").read_text().splitlines() == [
        "ID\tAccuracy\tLabelType\tLabel", "p1\t1\ttrue\tvalue1", "p1\t1\tpred\tvalue1",
        "p2\t0\ttrue\tvalue2", "p2\t0\tpred\tvalue2Wrong"]


def test_meta_eval_console_script_takes_the_same_flags(tmp_path):
    pred, gold = _folders(tmp_path, "a\tx\n", "a\tx\n")
    result = CliRunner().invoke(metaeval_command, ["--input", str(pred), "--truth", str(gold), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"precision": 1.0' in result.output and '"in_both": 1' in result.output


def test_line_handling_crlf_trailing_tabs_blank_lines_and_duplicates(tmp_path, caplog):
    truth = "a\tx\r\n\r\nb\ty\t\t\n"
    predicted = "a\tx\t\r\nb\t\ty\nb\tz\n"  # an interior empty value, then b repeated
    assert _scores(tmp_path / "set", truth, predicted, "set") == (0.75, 1.0)  # b: {y, z} against {y}
    assert "on several lines" in caplog.text
    # compat: b's two lines are two examples; the interior "" is a value of its own
    assert _scores(tmp_path / "compat", truth, predicted, "compat") == (pytest.approx((1 + 0.5 + 0) / 3),
                                                                        pytest.approx((1 + 1 + 0) / 3))


def test_prediction_without_truth_is_skipped_and_collisions_refused(tmp_path, caplog):
    pred, gold = _folders(tmp_path, "a\tx\n", "a\tx\n")
    (pred / "orphan.tsv").write_text("a\tx\n")
    (pred / "notes.md").write_text("ignored: not a field file")
    assert [r.name for r in metaeval.evaluate(pred, gold)] == ["m"]
    assert "orphan" in caplog.text
    (pred / "m.other.txt").write_text("a\tx\n")
    with pytest.raises(InputError, match="both name the field 'm'"):
        metaeval.evaluate(pred, gold)


def test_bad_input_names_file_and_line(tmp_path):
    pred, gold = _folders(tmp_path, "a\tx\n", "a\tx\n\tno id here\n")
    result = CliRunner().invoke(main, ["text", "metaeval", "--input", str(pred), "--truth", str(gold)])
    assert result.exit_code == 1 and "m.tsv, line 2" in result.output and "without a paper id" in result.output
    result = CliRunner().invoke(main, ["text", "metaeval", "--input", str(tmp_path / "missing"), "--truth", str(gold)])
    assert result.exit_code == 1 and "expected a directory" in result.output
    (pred / "m.tsv").write_bytes(b"a\tx\nb\t\xff\n")
    with pytest.raises(InputError, match="line 2.*UTF-8"):
        metaeval.evaluate(pred, gold)


values = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4)
papers = st.dictionaries(st.sampled_from(["p1", "p2", "p3"]), values, max_size=3)


def _write(folder: Path, table) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "f.tsv").write_text("".join(pid + "".join("\t" + v for v in vs) + "\n" for pid, vs in table.items()))


def _slow_set_scores(truth, predicted):
    """The definition, written out plainly."""
    precisions, recalls = [], []
    for paper in set(truth) | set(predicted):
        t, p = set(truth.get(paper, [])), set(predicted.get(paper, []))
        if p:
            precisions.append(len(t & p) / len(p))
        if t:
            recalls.append(len(t & p) / len(t))
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return mean(precisions), mean(recalls)


@settings(max_examples=60, deadline=None)
@given(truth=papers, predicted=papers)
def test_set_semantics_properties(tmp_path_factory, truth, predicted):
    folder = tmp_path_factory.mktemp("prop")
    _write(folder / "truth", truth)
    _write(folder / "pred", predicted)
    (result,) = metaeval.evaluate(folder / "pred", folder / "truth", "set")
    expected = _slow_set_scores(truth, predicted)
    for got, want in zip((result.precision, result.recall), expected):
        assert (got is None and want is None) or (0.0 <= got <= 1.0 and got == pytest.approx(want, abs=1e-12))
    (same,) = metaeval.evaluate(folder / "truth", folder / "truth", "set")
    if any(truth.values()):
        assert (same.precision, same.recall) == (1.0, 1.0)


def test_disjoint_values_score_zero(tmp_path):
    assert _scores(tmp_path, "a\tx\nb\ty\n", "a\tz\nb\tw\n") == (0.0, 0.0)


@pytest.mark.parametrize("dataset", ["acl", "dblp"])
@pytest.mark.parametrize("model", ["grobid", "scienceParse", "scienceParse-highP"])
def test_real_baselines_against_their_gold(tmp_path, dataset, model):
    predictions = FIXTURES / "baseline" / dataset / model
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["text", "metaeval", "--input", str(predictions), "--truth",
                                       str(FIXTURES / "gold" / dataset), "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = (out / "PR.txt").read_text().splitlines()
    gold = FIXTURES / "gold" / dataset
    fields = sorted(p.name.split(".")[0] for p in gold.iterdir())  # a gold field nothing predicted is scored too
    assert [row.split("\t")[0] for row in rows[1:]] == fields
    checked = 0
    for row in rows[1:]:
        name, precision, recall = row.split("\t")
        file_name = next(p.name for p in gold.iterdir() if p.name.split(".")[0] == name)
        predicted = _slow_read(predictions / file_name) if (predictions / file_name).exists() else {}
        want_precision, want_recall = _slow_set_scores(_slow_read(gold / file_name), predicted)
        if want_precision is None:
            assert precision == "" and not predicted, name
        else:
            assert float(precision) == pytest.approx(want_precision, rel=1e-12, abs=1e-15), name
        assert float(recall) == pytest.approx(want_recall, rel=1e-12, abs=1e-15), name
        checked += 1
    assert checked == len(fields) >= 2
    if len(list(predictions.iterdir())) < len(fields):
        assert "without a prediction file score recall 0" in result.output
    title = next(r for r in metaeval.evaluate(predictions, FIXTURES / "gold" / dataset) if r.name == "titleExact")
    truth, predicted = (_slow_read(folder / "titleExact.tsv") for folder in (FIXTURES / "gold" / dataset, predictions))
    assert title.counts["truth_only"] == len(set(truth) - set(predicted)) > 0
    assert title.counts["prediction_only"] == len(set(predicted) - set(truth))


def _slow_read(path: Path) -> dict:
    """A field file read plainly: paper id -> its non-empty values, repeated ids concatenated."""
    table: dict = {}
    for line in path.read_bytes().decode("utf-8-sig").split("\n"):
        fields = line.rstrip("\r").split("\t")
        if line.strip():
            table.setdefault(fields[0], []).extend(value for value in fields[1:] if value)
    return table


def test_a_byte_order_mark_does_not_join_the_first_paper_id(tmp_path):
    plain = _scores(tmp_path / "plain", "p1\tA\np2\tB\n", "p1\tA\np2\tC\n")
    for prediction, truth in (("\ufeffp1\tA\np2\tB\n", "p1\tA\np2\tC\n"), ("p1\tA\np2\tB\n", "\ufeffp1\tA\np2\tC\n"),
                              ("\ufeffp1\tA\np2\tB\n", "\ufeffp1\tA\np2\tC\n")):
        pred, gold = _folders(tmp_path / f"bom{len(prediction)}{len(truth)}", prediction, truth)
        (result,) = metaeval.evaluate(pred, gold, "set")
        assert (result.precision, result.recall) == plain == (0.5, 0.5)  # p1 matches across the mark
