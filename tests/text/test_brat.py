"""BRAT/ChEMU scoring: BRATEval's 18 expected outputs on the ChEMU sample, worked examples, bad input."""
import json

import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.text import brat
from tests.helpers import fixture

SETTINGS = [(task, span, kind) for task in ("ner", "ee") for span in ("exact", "overlap", "approx0.8")
            for kind in ("exact", "inexact", "hierarchical")]


def _expected(task, span, kind):
    lines = fixture("brat", "data", "bratevals", "chemu_sample", f"{task}-gt-test-{span}-{kind}.txt").read_text()
    lines = lines.splitlines()
    return [line.strip() for line in lines[lines.index("Summary:"):] if line.strip()]


def _run(*arguments):
    return CliRunner().invoke(main, ["text", "brat", *arguments], catch_exceptions=False)


@pytest.mark.slow
@pytest.mark.parametrize("task,span,kind", SETTINGS)
@pytest.mark.parametrize("matching", ["greedy", "optimal"])
def test_the_chemu_sample_reproduces_brateval_row_for_row(task, span, kind, matching):
    data = fixture("brat", "data")
    done = _run("--gold", str(data / "corpora" / "chemu_sample" / task / "gt"),
                "--pred", str(data / "systems" / "chemu_sample" / task / "test"), "--task", task,
                "--span", "approx:0.8" if span == "approx0.8" else span, "--type", kind, "--matching", matching)
    assert done.exit_code == 0, done.output
    got = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    # BRATEval finds no annotation.conf in these runs, so hierarchical equals exact; optimal matching
    # finds the same numbers here: no order-dependent conflict in this sample
    assert got == _expected(task, span, kind)


def _write(folder, name, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.ann").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _score_entities(tmp_path, gold, system, span="overlap", kind="exact", matching="optimal"):
    _write(tmp_path / "g", "doc", gold)
    _write(tmp_path / "s", "doc", system)
    mode, threshold = brat.parse_span(span)
    pairs = brat.pair_documents(brat.read_folder(tmp_path / "g"), brat.read_folder(tmp_path / "s"))
    return brat.score_entities(pairs, brat.Rules(mode, threshold, kind), matching)


def test_b_e3_greedy_and_maximum_matching_differ(tmp_path):
    gold = ["T1\tX 0 10\tgold one", "T2\tX 8 20\tgold two"]
    system = ["T1\tX 5 12\tsystem one", "T2\tX 0 4\tsys"]
    greedy = brat.total(_score_entities(tmp_path, gold, system, matching="greedy"))
    assert (greedy.tp, greedy.fp, greedy.fn) == (1, 1, 1) and greedy.f1 == 0.5
    optimal = brat.total(_score_entities(tmp_path, gold, system, matching="optimal"))
    assert (optimal.tp, optimal.fp, optimal.fn) == (2, 0, 0) and optimal.f1 == 1.0


def _relations(tmp_path, gold, system, span):
    _write(tmp_path / "g", "doc", gold)
    _write(tmp_path / "s", "doc", system)
    pairs = brat.pair_documents(brat.read_folder(tmp_path / "g"), brat.read_folder(tmp_path / "s"))
    return pairs, brat.Rules(*brat.parse_span(span), "inexact")


def test_b_e4_exact_and_relaxed_relations(tmp_path):
    gold = ["T1\tREACTION_STEP 0 5\tadded", "T2\tREACTION_PRODUCT 10 20\tthe compou", "R1\tARG1 Arg1:T1 Arg2:T2\t"]
    system = ["T1\tREACTION_STEP 0 5\tadded", "T2\tREACTION_PRODUCT 10 18\tthe comp", "R1\tARG1 Arg1:T1 Arg2:T2"]
    pairs, exact = _relations(tmp_path, gold, system, "exact")
    table = brat.score_relations(pairs, exact)
    counts = table["ARG1|REACTION_STEP|REACTION_PRODUCT"]
    assert (counts.tp, counts.fp, counts.fn, counts.fpm, counts.fnm) == (0, 1, 1, 1, 1)
    assert brat.relation_table(table).splitlines()[-1] == (
        "all|tp:0|fp:1|fn:1|precision:0.0000|recall:0.0000|f1:0.0000|fpm:1|fnm:1")
    relaxed = brat.score_relations(pairs, brat.Rules("overlap", 0.8, "exact"))
    assert brat.relation_table(relaxed).splitlines()[-1] == (
        "all|tp:1|fp:0|fn:0|precision:1.0000|recall:1.0000|f1:1.0000|fpm:0|fnm:0")


def test_b_e5_argument_types_are_part_of_the_key(tmp_path):
    gold = ["T1\tREACTION_STEP 0 5\tadded", "T2\tREACTION_PRODUCT 10 20\tthe compou", "R1\tARG1 Arg1:T1 Arg2:T2"]
    system = ["T1\tREACTION_STEP 0 5\tadded", "T2\tSOLVENT 10 20\tthe compou", "R1\tARG1 Arg1:T1 Arg2:T2"]
    pairs, inexact = _relations(tmp_path, gold, system, "exact")
    table = brat.score_relations(pairs, inexact)  # even with inexact entity types
    assert table["ARG1|REACTION_STEP|REACTION_PRODUCT"].fn == 1 and table["ARG1|REACTION_STEP|SOLVENT"].fp == 1
    assert brat.total(table).tp == 0


def test_b_e6_rounding_is_half_up_on_the_exact_value():
    counts = brat.Counts(tp=1, fp=31, fn=0)
    assert brat.half_up(counts.precision) == "0.0313"  # Python's '%.4f' gives 0.0312
    assert (brat.half_up(counts.recall), brat.half_up(counts.f1)) == ("1.0000", "0.0606")
    assert brat.half_up(0.0) == "0.0000"


def test_b_e7_coreference_is_closed_transitively_and_bridging_is_not(tmp_path):
    mentions = ["T1\tentity 0 4\tacid", "T2\tentity 10 14\tthis", "T3\tentity 20 22\tit"]
    gold = mentions + ["R1\tCOREFERENCE Arg1:T3 Arg2:T2", "R2\tCOREFERENCE Arg1:T2 Arg2:T1",
                       "R3\tWORK_UP Arg1:T3 Arg2:T2", "R4\tWORK_UP Arg1:T2 Arg2:T1"]
    system = mentions + ["R1\tCOREFERENCE Arg1:T3 Arg2:T1", "R2\tWORK_UP Arg1:T3 Arg2:T1"]
    pairs, rules = _relations(tmp_path, gold, system, "exact")
    surface = brat.score_relations(pairs, rules, types=["COREFERENCE"])
    assert (brat.total(surface).tp, brat.total(surface).fp, brat.total(surface).fn) == (0, 1, 2)
    closed = brat.total(brat.score_coreference_closure(pairs, rules))
    assert (closed.tp, closed.fp, closed.fn) == (1, 0, 2)
    assert (brat.half_up(closed.precision), brat.half_up(closed.recall), brat.half_up(closed.f1)) == (
        "1.0000", "0.3333", "0.5000")
    bridging = brat.total(brat.score_relations(pairs, rules, types=["WORK_UP"]))
    assert (bridging.tp, bridging.fp, bridging.fn) == (0, 1, 2)  # T3→T1 is not implied by T3→T2→T1


def test_relaxed_coreference_maps_system_mentions_to_gold_ones(tmp_path):
    gold = ["T1\tentity 0 4\tacid", "T2\tentity 10 14\tthis", "T3\tentity 20 22\tit",
            "R1\tCOREFERENCE Arg1:T3 Arg2:T2", "R2\tCOREFERENCE Arg1:T2 Arg2:T1"]
    system = ["T7\tentity 0 3\taci", "T8\tentity 11 14\this", "T9\tentity 20 22\tit",
              "R1\tCoreference Arg1:T9 Arg2:T8", "R2\tCoreference Arg1:T8 Arg2:T7"]
    pairs, _ = _relations(tmp_path, gold, system, "overlap")
    closed = brat.total(brat.score_coreference_closure(pairs, brat.Rules("overlap", 0.8, "exact")))
    assert (closed.tp, closed.fp, closed.fn) == (3, 0, 0)


def test_spans_types_and_taxonomy(tmp_path):
    touching = brat.total(_score_entities(tmp_path / "a", ["T1\tX 0 5\thello"], ["T1\tX 5 9\tworl"]))
    assert touching.tp == 0  # touching spans do not overlap
    inside = brat.total(_score_entities(tmp_path / "b", ["T1\tX 0 5\thello"], ["T1\tX 3 3\t"]))
    assert inside.tp == 1  # a zero-length span inside another overlaps
    discontinuous = brat.total(_score_entities(tmp_path / "c", ["T1\tX 0 5\thello"], ["T1\tX 0 5;10 15\thello world"],
                                               span="exact"))
    assert discontinuous.tp == 0  # exact means equal fragment sets (BRATEval only asks for a subset)
    table = _score_entities(tmp_path / "d", ["T1\tX 0 5\thello"], ["T1\tY 0 5\thello"], span="exact", kind="inexact")
    assert (table["X"].tp, table["Y"].tp, table["Y"].fp) == (1, 0, 0)  # TP under the gold type, Y listed
    conf = tmp_path / "annotation.conf"
    conf.write_text("[entities]\nCOMPOUND\n\tSOLVENT\n\tREAGENT\nTIME\n[relations]\n")
    taxonomy = brat.Taxonomy.read(conf)
    assert taxonomy.related("SOLVENT", "REAGENT") and not taxonomy.related("SOLVENT", "TIME")
    rules = brat.Rules("exact", 0.8, "hierarchical", taxonomy)
    gold, system = brat.Entity("T1", "SOLVENT", ((0, 5),), "water", 1), brat.Entity("T1", "REAGENT", ((0, 5),), "", 1)
    assert rules.entities_match(gold, system)
    assert not brat.Rules("exact", 0.8, "hierarchical").entities_match(gold, system)  # no taxonomy: exact


def test_events_become_trigger_argument_relations(tmp_path):
    _write(tmp_path, "doc", ["T1\tREACTION_STEP 0 5\tadded", "T2\tSOLVENT 6 11\twater", "T3\tTIME 12 15\t2 h",
                             "E1\tREACTION_STEP:T1 ARG1:T2 ARGM:T3", "A1\tNegation E1", "#1\tAnnotatorNotes T1\tok",
                             "*\tEquiv T2 T3", "N1\tReference T2 ChEBI:15377\twater"])
    document = brat.read_ann(tmp_path / "doc.ann", "added water 2 h")
    assert [(r.type, r.arg1, r.arg2) for r in document.relations] == [("ARG1", "T1", "T2"), ("ARGM", "T1", "T3")]
    assert not document.warnings


def test_offsets_are_checked_against_the_text(tmp_path, caplog):
    _write(tmp_path, "doc", ["T1\tX 0 5\thellp"])
    document = brat.read_ann(tmp_path / "doc.ann", "hello world")
    assert "doc.ann:1: T1 spans ((0, 5),) cover 'hello'" in document.warnings[0]


@pytest.mark.parametrize("line,reason", [
    ("T1\tX 0\tabc", "expected '<start> <end>'"),
    ("T1\tX 5 2\tabc", "start <= end"),
    ("T1 X 0 5 abc", "expected 'T<n><TAB>"),
    ("R1\tARG1 T1 T2", "Arg1:<id> Arg2:<id>"),
    ("Q1\twhat", "unknown annotation line"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, reason):
    _write(tmp_path, "doc", ["T9\tX 0 1\ta", line])
    with pytest.raises(InputError, match=reason) as info:
        brat.read_ann(tmp_path / "doc.ann")
    assert info.value.path.endswith("doc.ann") and info.value.line == 2


def test_relations_to_unknown_ids_and_missing_predictions_are_errors(tmp_path):
    _write(tmp_path / "g", "doc", ["T1\tX 0 1\ta", "R1\tARG1 Arg1:T1 Arg2:T7"])
    with pytest.raises(InputError, match="points to T7"):
        brat.read_ann(tmp_path / "g" / "doc.ann")
    _write(tmp_path / "gold", "a", ["T1\tX 0 1\ta"])
    _write(tmp_path / "gold", "b", ["T1\tX 0 1\ta"])
    _write(tmp_path / "pred", "a", ["T1\tX 0 1\ta"])
    done = CliRunner().invoke(main, ["text", "brat", "--gold", str(tmp_path / "gold"), "--pred", str(tmp_path / "pred")])
    assert done.exit_code == 1 and "no prediction for gold file b.ann" in done.output
    done = _run("--gold", str(tmp_path / "gold"), "--pred", str(tmp_path / "pred"), "--missing-as-empty",
                "--format", "json")
    report = json.loads(done.stdout)
    overall = report["entities"][-1]
    assert (overall["key"], overall["tp"], overall["fn"]) == ("all", 1, 1)
    csv_out = _run("--gold", str(tmp_path / "gold"), "--pred", str(tmp_path / "pred"), "--missing-as-empty",
                   "--format", "csv").stdout
    assert csv_out.splitlines()[0] == "key,tp,fp,fn,fpm,fnm,precision,recall,f1"
    assert csv_out.splitlines()[-1] == "all,1,0,1,0,0,1.0000,0.5000,0.6667"


def test_anaphora_task_reports_surface_and_closure(tmp_path):
    mentions = ["T1\tentity 0 4\tacid", "T2\tentity 10 14\tthis", "T3\tentity 20 22\tit"]
    _write(tmp_path / "gold", "doc", mentions + ["R1\tCOREFERENCE Arg1:T3 Arg2:T2", "R2\tCOREFERENCE Arg1:T2 Arg2:T1"])
    _write(tmp_path / "pred", "doc", mentions + ["R1\tCOREFERENCE Arg1:T3 Arg2:T1"])
    done = _run("--gold", str(tmp_path / "gold"), "--pred", str(tmp_path / "pred"), "--task", "ar")
    assert "# surface" in done.stdout and "# coreference closure" in done.stdout
    assert "all|tp:1|fp:0|fn:2|precision:1.0000|recall:0.3333|f1:0.5000|fpm:0|fnm:0" in done.stdout


def test_settings_errors():
    for text in ("fuzzy", "approx", "approx:x", "approx:1.5", "exact:0.5"):
        with pytest.raises(InputError, match="span mode"):
            brat.parse_span(text)
    assert brat.parse_span("approx:0.5") == ("approx", 0.5)


def test_a_taxonomy_with_an_indentation_jump_is_refused(tmp_path):
    conf = tmp_path / "annotation.conf"
    conf.write_text("[entities]\nA\n\t\tB\n")
    with pytest.raises(InputError, match="indentation jumps") as info:
        brat.Taxonomy.read(conf)
    assert info.value.line == 3


def test_an_offset_past_the_end_of_the_text_is_an_error_naming_the_line(tmp_path):
    """Issue 37: `T1 DRUG 0 7000` on a 28-character document was accepted with a warning."""
    for side in ("gold", "pred"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "doc.txt").write_text("Aspirin binds COX in cells.\n")
    (tmp_path / "gold" / "doc.ann").write_text("T1\tDRUG 0 7\tAspirin\n")
    (tmp_path / "pred" / "doc.ann").write_text("T1\tDRUG 0 7\tAspirin\nT2\tDRUG 0 7000\tAspirin\n")
    done = CliRunner().invoke(main, ["text", "brat", "--gold", str(tmp_path / "gold"), "--pred", str(tmp_path / "pred")])
    assert done.exit_code == 1 and "doc.ann, line 2: T2 span 0 7000 ends past the end of the .txt" in done.output
    with pytest.raises(InputError, match="28 characters"):
        brat.read_ann(tmp_path / "pred" / "doc.ann", (tmp_path / "pred" / "doc.txt").read_text())
