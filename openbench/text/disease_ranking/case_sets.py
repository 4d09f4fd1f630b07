"""Test sets of phenotype-driven disease ranking: patients as HPO terms with their true diseases.

Two formats (spec text_evaluators.md C.1):

* PhenoBrain JSON: an array of ``[[hpo_id, ...], [disease_id, ...]]`` (``OMIM:``, ``ORPHA:``,
  ``CCRD:`` ids);
* MME benchmark JSON: an array of patients ``{id, disorders: [{id: "MIM:…"}], features: [{id:
  "HP:…", observed: "yes"|"no"}]}``.

Normalisation: ``MIM:`` becomes ``OMIM:``; repeated HPO ids are kept once (first occurrence);
``observed: "no"`` features are not phenotypes of the patient and go to ``negated_terms``; a
patient without a true disease cannot be scored and is dropped. Everything dropped is counted in
the returned :class:`TestSet` so runs can report it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from openbench.errors import InputError

__all__ = ["Case", "TestSet", "normalise_disease_id", "load_phenobrain", "load_mme", "load_test_set"]


@dataclass
class Case:
    case_id: str
    hpo_terms: List[str]
    ground_truth: List[str]
    negated_terms: List[str] = field(default_factory=list)


@dataclass
class TestSet:
    name: str
    cases: List[Case]
    dropped: Dict[str, int] = field(default_factory=dict)

    __test__ = False  # not a pytest class, despite the name


def normalise_disease_id(disease_id: str) -> str:
    disease_id = disease_id.strip()
    return "OMIM:" + disease_id[4:] if disease_id.startswith("MIM:") else disease_id


def _unique(values) -> List[str]:
    return list(dict.fromkeys(values))


def _load_json(path: Path):
    from openbench._io import read_json

    return read_json(path, "test-set JSON")


def load_phenobrain(path) -> TestSet:
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON array of [[hpo ids], [disease ids]] cases", path)
    cases, dropped = [], {"repeated_hpo_terms": 0, "no_ground_truth": 0}
    for index, item in enumerate(data):
        if (not isinstance(item, list) or len(item) != 2 or not all(isinstance(part, list) for part in item)
                or not all(isinstance(v, str) for part in item for v in part)):
            raise InputError(f"case {index}: expected [[hpo ids], [disease ids]], found {json.dumps(item)[:80]}", path)
        terms = _unique(item[0])
        dropped["repeated_hpo_terms"] += len(item[0]) - len(terms)
        truth = _unique(normalise_disease_id(d) for d in item[1])
        if not truth:
            dropped["no_ground_truth"] += 1
            continue
        cases.append(Case(str(index), terms, truth))
    return TestSet(path.stem, cases, dropped)


def load_mme(path) -> TestSet:
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON array of MME patients", path)
    cases, dropped = [], {"repeated_hpo_terms": 0, "no_ground_truth": 0, "not_observed_terms": 0}
    for index, patient in enumerate(data):
        if not isinstance(patient, dict) or "features" not in patient:
            raise InputError(f"patient {index}: expected an object with features", path)
        observed, negated = [], []
        for feature in patient.get("features", []):
            (negated if str(feature.get("observed", "yes")).lower() == "no" else observed).append(feature["id"])
        terms = _unique(observed)
        dropped["repeated_hpo_terms"] += len(observed) - len(terms)
        dropped["not_observed_terms"] += len(negated)
        truth = _unique(normalise_disease_id(d["id"]) for d in patient.get("disorders", []) if d.get("id"))
        if not truth:
            dropped["no_ground_truth"] += 1
            continue
        cases.append(Case(str(patient.get("id", index)), terms, truth, _unique(negated)))
    return TestSet(path.stem, cases, dropped)


def load_test_set(path) -> TestSet:
    """PhenoBrain or MME JSON, told apart by the shape of the first entry."""
    path = Path(path)
    data = _load_json(path)
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return load_mme(path)
    return load_phenobrain(path)
