"""TxGNN's saved results as a table of scores: ``TxEval.eval_disease_centric(save_result=True)``
pickles (``disease_centric_eval.pkl``) read as what they hold, the model's scores.

TxGNN's ``utils.disease_centric_evaluation`` (mims-harvard/TxGNN, ``txgnn/utils.py``,
``calculate_metrics`` and ``get_scores_disease``, around lines 1297–1454 of the released
version) returns, and ``TxEval`` pickles, per relation (``rev_indication``,
``rev_contraindication``, ``rev_off-label use``) a pandas DataFrame built from a dict of dicts:
one row per disease, columns ``ID`` (TxGNN's disease id), ``Name``, ``Ranked List``, ``AUROC``,
``AUPRC``, ``Recall@…``, ``Prediction`` (a dict drug id → score) and ``Labels`` (drug id → 1 a
test positive, -1 a training or validation positive left out, 0 another drug). With
``disease_idxs`` given it pickles one relation's DataFrame; with ``return_raw`` a dict of
``prediction``, ``label`` and ``result``. Every form is read here.

A pickle runs code when it is loaded: refused without ``trust_pickle`` (``--trust-pickle``), as a
PyKEEN model is. TxGNN's ids (PrimeKG's ``node_id``: DrugBank ids, grouped MONDO ids) map to the
dataset's labels as written or as the last ``::`` part of one (openbench's PrimeKG labels are
``type::source::id``); an id the dataset lacks is counted and listed. The record keeps TxGNN's own
means from the pickle beside openbench's numbers of the same scores (``--protocol txgnn`` adds
its formulas recomputed), so a gap like TxGNN#29's can be traced to its cause.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from openbench.errors import InputError
from openbench.models.tables import NAMED, ScoreTable, table_sha256

__all__ = ["RELATIONS", "read_txgnn_results"]

RELATIONS = ("rev_indication", "rev_contraindication", "rev_off-label use")
REPORTED = ("AUROC", "AUPRC", "Recall@1%", "Recall@5%", "Recall@10%", "Recall@10", "Recall@50", "Recall@100")


def _unpickled(path: Path, trust_pickle: bool):
    if not trust_pickle:
        raise InputError("a TxGNN result is a pickle, and loading a pickle runs code from the file; pass "
                         "--trust-pickle if you trust its origin", path)
    import pickle

    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except ModuleNotFoundError as error:
        raise InputError(f"the pickle needs {error.name}, which is not installed (TxGNN's results are pandas "
                         "DataFrames: pip install pandas)", path) from None
    except Exception as error:  # a foreign or corrupt pickle can raise anything
        raise InputError(f"cannot load the pickle ({type(error).__name__}: {error})", path) from None


def _columns(result: Any, relation: str, path: Path) -> Tuple[Dict[Any, Any], Dict[str, Any]]:
    """({disease id: {drug id: score}}, TxGNN's own means) of one relation, whatever form was pickled."""
    if isinstance(result, dict) and "prediction" in result and "result" in result:  # return_raw
        predictions = result["prediction"]
        predictions = predictions.get(relation, predictions) if isinstance(predictions, dict) and \
            relation in predictions else predictions
        return dict(predictions), {}
    if isinstance(result, dict):
        if relation not in result:
            raise InputError(f"no {relation!r} in the pickle; it holds {', '.join(map(str, result))} (--score-column "
                             "names the relation)", path)
        result = result[relation]
    if not (hasattr(result, "columns") and hasattr(result, "to_dict")):
        raise InputError(f"expected TxGNN's disease-centric DataFrame(s) (columns ID, Prediction, ...), found a "
                         f"{type(result).__name__}", path)
    columns = list(result.columns)
    if "Prediction" not in columns:
        raise InputError(f"a TxGNN result holds a Prediction column (drug id -> score); found {', '.join(columns)}",
                         path)
    frame = result.to_dict()
    predictions = dict(frame["Prediction"])
    if "ID" in frame:  # the index is TxGNN's disease id already; ID repeats it
        predictions = {frame["ID"][key]: value for key, value in predictions.items()}
    means = {}
    for name in REPORTED:
        if name in frame:
            values = [float(v) for v in frame[name].values() if isinstance(v, (int, float)) and math.isfinite(v)]
            means[name] = float(np.mean(values)) if values else None  # TxGNN averages its -1 "undefined" in
    return predictions, means


def read_txgnn_results(path, dataset, relation: Optional[str] = None, trust_pickle: bool = False) -> ScoreTable:
    """TxGNN's pickled disease-centric results at ``path`` as a table of (disease, drug, score)
    pairs over ``dataset``'s ids (``relation``: which of :data:`RELATIONS`, default rev_indication)."""
    path = Path(path)
    relation = relation or "rev_indication"
    predictions, means = _columns(_unpickled(path, trust_pickle), relation, path)
    index: Dict[str, List[int]] = {}
    for position, label in enumerate(dataset.entity_labels):
        index.setdefault(label, []).append(position)
        if "::" in label:
            index.setdefault(label.rsplit("::", 1)[1], []).append(position)
    pairs: List[Tuple[int, int]] = []
    scores: List[float] = []
    unknown: List[str] = []
    for disease, drugs in predictions.items():
        disease_ids = index.get(_id(disease), [])
        if len(disease_ids) != 1:
            unknown.append(f"disease {disease}")
            continue
        if not isinstance(drugs, dict):
            raise InputError(f"disease {disease}: expected its Prediction as a dict of drug id -> score", path)
        for drug, score in drugs.items():
            drug_ids = index.get(_id(drug), [])
            value = float(score)
            if not math.isfinite(value):
                raise InputError(f"disease {disease}, drug {drug}: score {value}; expected a finite number", path)
            if len(drug_ids) != 1:
                unknown.append(f"drug {drug}")
                continue
            pairs.append((disease_ids[0], drug_ids[0]))
            scores.append(value)
    if not pairs:
        raise InputError(f"no disease and drug of the pickle is an entity of the dataset (first unknown: "
                         f"{unknown[0] if unknown else '-'})", path)
    table = ScoreTable("pairs", np.array(pairs, np.int64), np.array(scores, np.float64),
                       {"format": "TxGNN disease-centric results (pickle)", "layout": "pairs", "relation": relation,
                        "rows": len(scores) + len(unknown), "unknown_rows": len(unknown),
                        "unknown": sorted(set(unknown))[:NAMED], "txgnn_reported_means": means, "path": str(path)})
    table.source_sha256 = table_sha256(path)
    return table


def _id(value) -> str:
    """A TxGNN id as text (a float id read from pandas, 9907.0, is the integer 9907)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
