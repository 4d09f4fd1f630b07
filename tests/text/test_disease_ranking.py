"""Disease ranking: the spec's toy ontology (C.6), real HPO files, the runner with its cache, rank-eval."""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.errors import InputError
from openbench.text.disease_ranking.knowledge_base import KnowledgeBase, Ontology, ranked_entries, read_hpoa, read_obo
from openbench.text.disease_ranking.case_sets import Case, TestSet
from openbench.text.disease_ranking.runs import case_rank_from_entries, evaluate_cache, run_methods
from tests.helpers import snapshot
from openbench.text.disease_ranking.cache import cache_path_for, error_path_for, load_cache
from tests.helpers import fixture


@pytest.fixture(scope="module")
def toy():
    """Spec C.6: R root; A is_a R; B, C is_a A; D is_a R; d1 {B}, d2 {C}, d3 {D}, d4 {B, D}."""
    ontology = Ontology(parents={"R": [], "A": ["R"], "B": ["A"], "C": ["A"], "D": ["R"]}, names={},
                        replacements={"B_OLD": "B"})
    return KnowledgeBase.build(ontology, {}, {"d1": ["B"], "d2": ["C"], "d3": ["D"], "d4": ["B", "D"]})


EXPECTED = {"semantic": [0.5918, 1.1116, 0.0, 0.4185], "set_jaccard": [0.75, 0.75, 0.20, 0.60],
            "set_cosine": [0.8660, 0.8660, 0.3536, 0.7500], "tfidf": [0.4761, 0.8981, 0.0, 0.3497]}


def test_information_content_of_the_toy_ontology(toy):
    expected = {"R": 0.0, "A": math.log(4 / 3), "B": math.log(2), "C": math.log(4), "D": math.log(2)}
    for term, value in expected.items():
        assert toy.information_content(term) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_c6_scores(toy, method):
    query, dropped = toy.query_indices(["B", "C", "C", "B_OLD", "HP:9999999"])  # duplicates, alt id, unknown
    assert dropped == ["HP:9999999"] and len(query) == 2
    assert toy.scores(method, query) == pytest.approx(EXPECTED[method], abs=1e-4)


def test_c6_resnik_ranking_and_the_jaccard_tie(toy):
    query, _ = toy.query_indices(["B", "C"])
    order = [entry["disease_id"] for entry in ranked_entries(toy, toy.scores("semantic", query), [], 4)]
    assert order == ["d2", "d1", "d4", "d3"]
    entries = ranked_entries(toy, toy.scores("set_jaccard", query), ["d2"], 1)
    assert [(e["disease_id"], e["rank"], e["rank_last"]) for e in entries] == [("d1", 1, 2), ("d2", 1, 2)]
    rank = case_rank_from_entries(entries, ["d2"])  # M3: optimistic 1, pessimistic 2, mean 1.5
    assert (rank.rank("optimistic"), rank.rank("pessimistic"), rank.rank("mean")) == (1, 2, 1.5)


def test_an_empty_query_scores_every_disease_zero(toy):
    for method in EXPECTED:
        assert not toy.scores(method, []).any()


def test_real_hpo_files_build_a_knowledge_base():
    ontology = read_obo(fixture("sources", "hpo", "hp.obo"))
    assert ontology.current("HP:0004715") is not None  # an alt_id maps to its term
    names, terms = read_hpoa(fixture("sources", "hpo", "phenotype.hpoa"))
    assert "OMIM:619340" in terms and "HP:0000006" not in terms["OMIM:619340"]  # aspect I is not a phenotype
    kb = KnowledgeBase.build(ontology, names, terms)
    obo_ids = set()
    for line in fixture("sources", "hpo", "hp.obo").read_text().splitlines():
        if line.startswith(("id: HP:", "alt_id: HP:")):
            obo_ids.add(line.split(": ", 1)[1].strip())
    absent = {term for annotated in terms.values() for term in annotated} - obo_ids
    assert len(kb.diseases) == len(terms) and kb.missing_terms == len(absent) > 0  # this hp.obo is an excerpt
    query, _ = kb.query_indices(terms["OMIM:619340"][:4])
    for method in EXPECTED:
        scores = kb.scores(method, query)
        assert np.isfinite(scores).all()
        top = ranked_entries(kb, scores, ["OMIM:619340"], 3)
        assert any(e["disease_id"] == "OMIM:619340" for e in top)


def test_a_space_separated_header_and_not_qualifiers_are_read(tmp_path):
    names, terms = read_hpoa(fixture("phenotype", "phenol", "phenotype.excerpt.hpoa"))
    assert "OMIM:608328" in terms and names["OMIM:608328"].startswith("Weill-Marchesani")
    path = tmp_path / "small.hpoa"
    path.write_text("#version: x\n#DatabaseID\tDiseaseName\tQualifier\tHPO_ID\tReference\tEvidence\tOnset\tFrequency\t"
                    "Sex\tModifier\tAspect\tBiocuration\n"
                    "OMIM:1\tOne\t\tHP:0000002\tPMID:1\tPCS\t\t\t\t\tP\tHPO:x\n"
                    "OMIM:1\tOne\tNOT\tHP:0000003\tPMID:1\tPCS\t\t\t\t\tP\tHPO:x\n")
    names, terms = read_hpoa(path)
    assert terms == {"OMIM:1": ["HP:0000002"]}
    path.write_text("OMIM:1\tOne\n")
    with pytest.raises(InputError, match="expected at least 12 tab-separated columns, found 2") as info:
        read_hpoa(path)  # no header: read as the old headerless layout, which has more columns
    assert info.value.path == str(path) and info.value.line == 1


def _cases():
    return TestSet("toy", [Case("0", ["B", "C"], ["d2"]), Case("1", ["D"], ["d3", "d4"]), Case("2", ["C"], ["dX"])])


def test_runner_caches_resumes_and_records_errors(tmp_path, toy, monkeypatch):
    cache = tmp_path / "cache"
    counts = run_methods(_cases(), toy, ["set_jaccard", "semantic"], cache, top_n=2, progress=False)
    assert counts["scored"] == 3 and counts["failed"] == 0
    first = load_cache(cache_path_for(cache, 0))
    assert first["methods_run"] == ["semantic", "set_jaccard"]
    jaccard = first["results"]["set_jaccard"]
    assert [(e["disease_id"], e["rank"], e["rank_last"], e["candidates"]) for e in jaccard] == [
        ("d1", 1, 2, 4), ("d2", 1, 2, 4)]
    assert run_methods(_cases(), toy, ["set_jaccard", "semantic"], cache, progress=False)["skipped"] == 3
    counts = run_methods(_cases(), toy, ["set_jaccard", "tfidf"], cache, progress=False)  # only tfidf is new
    assert counts["scored"] == 3
    assert load_cache(cache_path_for(cache, 1))["methods_run"] == ["semantic", "set_jaccard", "tfidf"]

    original = toy.scores

    def failing(method, query):
        if method == "set_cosine" and len(query) == 1:
            raise ValueError("no similarity today")
        return original(method, query)

    monkeypatch.setattr(toy, "scores", failing)
    counts = run_methods(_cases(), toy, ["set_cosine"], cache, progress=False, resume=False)
    assert counts["failed"] == 2 and counts["scored"] == 1
    assert error_path_for(cache_path_for(cache, 1)).read_text() == "ValueError: no similarity today\n"
    monkeypatch.setattr(toy, "scores", original)
    run_methods(_cases(), toy, ["set_cosine"], cache, progress=False)
    assert not error_path_for(cache_path_for(cache, 1)).exists()  # a success removes the stale error


def test_rank_eval_reads_the_cache(tmp_path, toy):
    cache = tmp_path / "cache"
    run_methods(_cases(), toy, ["set_jaccard", "semantic"], cache, top_n=1, progress=False)
    report, corrupt = evaluate_cache(cache, "mean")
    assert corrupt == []
    jaccard = report["set_jaccard"]
    # case 0: d2 ties d1 at 1-2 (1.5); case 1: d3/d4 on D -> d4 (0.6667) ranks 1; case 2: dX unknown -> middle 2
    assert jaccard["missing"] == 1 and jaccard["top1"] == pytest.approx(1 / 3)
    assert jaccard["mrr"] == pytest.approx((1 / 1.5 + 1 + 1 / 2) / 3)
    out = CliRunner().invoke(main, ["text", "rank-eval", "--cache-dir", str(cache), "--format", "json", "--ties",
                                    "optimistic", "--plot", str(tmp_path / "topk.png")])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["set_jaccard"]["top1"] == pytest.approx(2 / 3)
    assert (tmp_path / "topk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = CliRunner().invoke(main, ["text", "rank-eval", "--cache-dir", str(cache)]).stdout
    assert table.splitlines()[0].split()[:3] == ["method", "top1", "top3"]


def test_rank_diseases_command_on_real_files(tmp_path):
    test_set = tmp_path / "tiny.json"
    _, terms = read_hpoa(fixture("sources", "hpo", "phenotype.hpoa"))
    diseases = sorted(terms)[:3]
    test_set.write_text(json.dumps([[terms[d][:3], [d]] for d in diseases]))
    done = CliRunner().invoke(main, ["text", "rank-diseases", "--test-set", str(test_set), "--annotations",
                                     str(fixture("sources", "hpo", "phenotype.hpoa")), "--ontology",
                                     str(fixture("sources", "hpo", "hp.obo")), "--cache-root", str(tmp_path / "out"),
                                     "--method", "tfidf,semantic", "--top-n", "5", "--no-progress"])
    assert done.exit_code == 0, done.output
    case = json.loads((tmp_path / "out" / "tiny" / "cache" / "case_0000.json").read_text())
    assert case["methods_run"] == ["semantic", "tfidf"] and case["ground_truth"] == [diseases[0]]
    assert all(math.isfinite(e["score"]) for e in case["results"]["tfidf"])
    bad = CliRunner().invoke(main, ["text", "rank-diseases", "--test-set", str(test_set), "--method", "magic"])
    assert bad.exit_code == 1 and "unknown method(s) magic" in bad.output


def test_ontology_errors(tmp_path):
    empty = tmp_path / "empty.obo"
    empty.write_text("format-version: 1.2\n")
    with pytest.raises(InputError, match="no \\[Term\\] stanzas"):
        read_obo(empty)
    cyclic = Ontology(parents={"A": ["B"], "B": ["A"]}, names={}, replacements={})
    with pytest.raises(InputError, match="cycle"):
        KnowledgeBase.build(cyclic, {}, {"d": ["A"]})
    looped = tmp_path / "looped.obo"  # issue 37: the cycle was reported without the file
    looped.write_text("format-version: 1.2\n\n[Term]\nid: HP:0000001\nname: All\nis_a: HP:0000002\n\n"
                      "[Term]\nid: HP:0000002\nname: Child\nis_a: HP:0000001\n")
    with pytest.raises(InputError, match=r"looped.obo, line (4|9): the is_a graph has a cycle: HP:000000[12] is_a"):
        KnowledgeBase.build(read_obo(looped), {}, {"d": ["HP:0000002"]})
    with pytest.raises(InputError, match="both --annotations and --ontology"):
        KnowledgeBase.from_files(annotations="x.hpoa")
    with pytest.raises(InputError, match="unknown method"):
        KnowledgeBase.build(Ontology({"R": []}, {}, {}), {}, {"d": ["R"]}).scores("magic", [0])


def test_rank_eval_reads_only_and_reports_corrupt_cases(tmp_path, toy):
    cache = tmp_path / "cache"
    run_methods(_cases(), toy, ["set_jaccard"], cache, top_n=1, progress=False)
    (cache / "case_0001.json").write_text('{"results": ')
    before = snapshot(cache)
    done = CliRunner().invoke(main, ["text", "rank-eval", "--cache-dir", str(cache), "--format", "json"])
    assert done.exit_code == 1 and "case_0001.json" in done.stderr and "left as it is" in done.stderr
    assert json.loads(done.stdout)["set_jaccard"]["corrupt"] == 1
    assert snapshot(cache) == before  # nothing renamed, moved, locked or written
    assert CliRunner().invoke(main, ["text", "rank-eval", "--cache-dir", str(cache), "--skip-corrupt"]).exit_code == 0
    assert snapshot(cache) == before


@pytest.mark.parametrize("name", ["../../escape", "a/b", "..", "."])
def test_rank_diseases_refuses_dataset_names_that_leave_the_cache_root(tmp_path, name):
    test_set = tmp_path / "tiny.json"
    test_set.write_text(json.dumps([[["HP:1"], ["OMIM:1"]]]))
    done = CliRunner().invoke(main, ["text", "rank-diseases", "--test-set", str(test_set), "--dataset", name,
                                     "--cache-root", str(tmp_path / "root")])
    assert done.exit_code == 2 and "expected a plain folder name" in done.stderr
    assert not (tmp_path / "root").exists() and not (tmp_path.parent / "escape").exists()


def test_the_cache_keeps_one_lock_file_not_one_per_case(tmp_path, toy):
    cache = tmp_path / "cache"
    run_methods(_cases(), toy, ["set_jaccard", "semantic"], cache, top_n=1, progress=False)
    assert sorted(p.name for p in cache.iterdir() if "lock" in p.name) == [".cache.lock"]
