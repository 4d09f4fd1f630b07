"""The per-case ranking cache: merge semantics, locking across processes, conflicts, corrupt files."""
import json
import multiprocessing

import pytest

from openbench.errors import InputError
from openbench.text.disease_ranking import cache as rc

TERMS, TRUTH = ["HP:0001250", "HP:0001263"], ["OMIM:100100"]


def _results(method, n=3):
    return {method: [{"disease_id": f"OMIM:{100100 + i}", "label": f"d{i}", "score": 1.0 - i / 10, "rank": i + 1}
                     for i in range(n)]}


def test_paths_and_fields(tmp_path):
    folder = rc.cache_dir_for("MME", tmp_path)
    assert folder == tmp_path / "MME" / "cache"
    path = rc.cache_path_for(folder, 7)
    assert path.name == "case_0007.json"
    data = rc.save_cache(path, 7, TERMS, TRUTH, _results("set_jaccard"), {"set_jaccard": 1.5})
    stored = json.loads(path.read_text())
    assert stored == data
    assert set(stored) == {"case_index", "hpo_terms", "ground_truth", "total_elapsed_seconds",
                           "method_elapsed_seconds", "methods_run", "results"}
    assert stored["methods_run"] == ["set_jaccard"] and stored["total_elapsed_seconds"] == 1.5


def test_methods_merge_and_a_rerun_replaces_its_time(tmp_path):
    path = rc.cache_path_for(tmp_path, 0)
    rc.save_cache(path, 0, TERMS, TRUTH, _results("tfidf"), {"tfidf": 2.0})
    rc.save_cache(path, 0, TERMS, TRUTH, _results("set_cosine"), {"set_cosine": 1.0})
    data = rc.save_cache(path, 0, TERMS, TRUTH, _results("tfidf", n=2), {"tfidf": 0.5})
    assert data["methods_run"] == ["set_cosine", "tfidf"]
    assert data["total_elapsed_seconds"] == pytest.approx(1.5)
    assert data["method_elapsed_seconds"] == {"set_cosine": 1.0, "tfidf": 0.5}
    assert len(data["results"]["tfidf"]) == 2
    assert rc.methods_already_cached(path, ["tfidf", "set_cosine"])
    assert not rc.methods_already_cached(path, ["tfidf", "semantic"])
    assert not rc.methods_already_cached(rc.cache_path_for(tmp_path, 1), ["tfidf"])


def test_another_case_in_the_same_file_is_refused(tmp_path):
    path = rc.cache_path_for(tmp_path, 0)
    rc.save_cache(path, 0, TERMS, TRUTH, _results("tfidf"), {"tfidf": 1.0})
    with pytest.raises(rc.CacheConflict, match="other HPO terms or ground truth"):
        rc.save_cache(path, 0, TERMS[:1], TRUTH, _results("semantic"), {"semantic": 1.0})
    with pytest.raises(rc.CacheConflict):
        rc.save_cache(path, 0, TERMS, ["ORPHA:1"], _results("semantic"), {"semantic": 1.0})
    assert json.loads(path.read_text())["methods_run"] == ["tfidf"]  # untouched


def test_a_corrupt_file_is_kept_aside_and_reported(tmp_path, caplog):
    path = rc.cache_path_for(tmp_path, 3)
    path.write_text('{"case_index": 3, "results": ')  # a half-written file from elsewhere
    data = rc.save_cache(path, 3, TERMS, TRUTH, _results("tfidf"), {"tfidf": 1.0})
    assert data["methods_run"] == ["tfidf"]
    kept = list(tmp_path.glob("case_0003.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == '{"case_index": 3, "results": '
    assert "unreadable" in caplog.text


def test_error_files_are_written_and_removed_by_a_success(tmp_path):
    path = rc.cache_path_for(tmp_path, 2)
    error = rc.record_error(path, ValueError("no HPO term left after filtering"))
    assert error.name == "case_0002.error"
    assert error.read_text() == "ValueError: no HPO term left after filtering\n"
    rc.save_cache(path, 2, TERMS, TRUTH, _results("tfidf"), {"tfidf": 1.0})
    assert not error.exists()


def test_results_need_a_disease_id_and_finite_scores(tmp_path):
    path = rc.cache_path_for(tmp_path, 0)
    with pytest.raises(InputError, match="without a disease id"):
        rc.save_cache(path, 0, TERMS, TRUTH, {"m": [{"label": "x", "score": 1.0}]}, {"m": 1.0})
    with pytest.raises(InputError, match="finite"):
        rc.save_cache(path, 0, TERMS, TRUTH, {"m": [{"disease_id": "OMIM:1", "score": float("nan")}]}, {"m": 1.0})
    assert rc.disease_id({"ordo_id": "ORPHA:5"}) == "ORPHA:5"
    assert rc.disease_id({"canonical_disease_id": "OMIM:7", "ordo_id": "ORPHA:5"}) == "OMIM:7"


def _writer(folder, method, cases):
    for index in range(cases):
        rc.save_cache(rc.cache_path_for(folder, index), index, TERMS, TRUTH, _results(method), {method: 1.0})


def test_concurrent_writers_lose_nothing(tmp_path):
    methods = [f"method_{i}" for i in range(6)]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_writer, args=(str(tmp_path), method, 8)) for method in methods]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    for index in range(8):
        data = json.loads(rc.cache_path_for(tmp_path, index).read_text())
        assert data["methods_run"] == sorted(methods)
        assert data["total_elapsed_seconds"] == pytest.approx(6.0)
    assert rc.cached_cases(tmp_path) == [rc.cache_path_for(tmp_path, i) for i in range(8)]
    assert not list(tmp_path.glob("*.tmp"))
