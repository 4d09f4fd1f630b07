"""Phenotype test sets: the real PhenoBrain and MME files load with the spec's counts (C.1)."""
import json
from pathlib import Path

import pytest

from openbench.errors import InputError
from openbench.text.disease_ranking.case_sets import load_mme, load_phenobrain, load_test_set

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "phenotype"


def test_phenobrain_public_test_set():
    test_set = load_test_set(FIXTURES / "phenobrain" / "Public_Test_set.json")
    assert len(test_set.cases) == 873
    sizes = [len(case.ground_truth) for case in test_set.cases]
    assert min(sizes) == 1 and max(sizes) == 13 and sizes.count(1) == 165 and sizes.count(2) == 410
    raw = json.loads((FIXTURES / "phenobrain" / "Public_Test_set.json").read_text())
    assert test_set.dropped["repeated_hpo_terms"] == sum(len(terms) - len(set(terms)) for terms, _ in raw) > 0
    assert [case.hpo_terms for case in test_set.cases] == [list(dict.fromkeys(terms)) for terms, _ in raw]
    assert all(len(set(case.hpo_terms)) == len(case.hpo_terms) for case in test_set.cases)
    assert all(d.split(":")[0] in ("OMIM", "ORPHA", "CCRD") for case in test_set.cases for d in case.ground_truth)


def test_mme_benchmark_patients():
    test_set = load_test_set(FIXTURES / "mme" / "MME.benchmark_patients.json")
    assert len(test_set.cases) == 43 and test_set.dropped["no_ground_truth"] == 7
    assert test_set.dropped["not_observed_terms"] == 2
    raw = json.loads((FIXTURES / "mme" / "MME.benchmark_patients.json").read_text())
    with_truth = [patient for patient in raw if patient.get("disorders")]
    negated = [[f["id"] for f in patient["features"] if str(f.get("observed", "yes")).lower() == "no"]
               for patient in with_truth]
    assert [case.negated_terms for case in test_set.cases] == [list(dict.fromkeys(ids)) for ids in negated]
    assert all(d.startswith("OMIM:") for case in test_set.cases for d in case.ground_truth)
    assert all(not set(case.negated_terms) & set(case.hpo_terms) for case in test_set.cases)


def test_small_files_and_bad_input(tmp_path):
    path = tmp_path / "set.json"
    path.write_text(json.dumps([[["HP:1", "HP:2", "HP:1"], ["MIM:100"]], [["HP:3"], []]]))
    test_set = load_phenobrain(path)
    assert [(c.hpo_terms, c.ground_truth) for c in test_set.cases] == [(["HP:1", "HP:2"], ["OMIM:100"])]
    assert test_set.dropped == {"repeated_hpo_terms": 1, "no_ground_truth": 1}
    path.write_text(json.dumps([{"id": "p", "features": [{"id": "HP:1", "observed": "no"}, {"id": "HP:2"}],
                                 "disorders": [{"id": "MIM:7"}]}]))
    (case,) = load_mme(path).cases
    assert case.hpo_terms == ["HP:2"] and case.negated_terms == ["HP:1"] and case.ground_truth == ["OMIM:7"]
    path.write_text("[[\"HP:1\"], ")
    with pytest.raises(InputError, match="not valid test-set JSON"):
        load_test_set(path)
    path.write_text(json.dumps([["HP:1", "OMIM:1"]]))
    with pytest.raises(InputError, match=r"case 0: expected \[\[hpo ids\], \[disease ids\]\]"):
        load_phenobrain(path)
