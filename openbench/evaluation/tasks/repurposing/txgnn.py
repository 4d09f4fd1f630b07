"""TxGNN's own evaluation protocol, by name (``--protocol txgnn``), beside the filtered numbers.

TxGNN (Huang et al., Nature Medicine 2024; ``mims-harvard/TxGNN``) reports two things, and this
module computes both as its code does, on the scores of any model openbench reads:

* **the fine-tuning test** (``txgnn/utils.py``: ``evaluate_fb`` and ``get_all_metrics_fb``, the
  negatives of ``Full_Graph_NegSampler`` with its ``fix_dst`` method and k = 1, drawn by
  ``evaluate_graph_construct``): every test drug-disease edge in both directions (the
  ``rev_`` relations ``reverse_rel_generation`` adds), each with one negative whose destination
  is drawn uniformly from the nodes with a test edge of that type (a disease for drug → disease, a
  drug for disease → drug); scores are ``sigmoid`` of the model's logits in float32; micro AUROC and
  AUPRC over every positive and negative (scikit-learn's ``roc_auc_score`` and
  ``average_precision_score``), macro the mean of the per-edge-type values. Unfiltered: a drawn
  negative may be a known positive.
* **the disease-centric evaluation** (``TxEval.eval_disease_centric`` → ``utils.py``'s
  ``disease_centric_evaluation``: ``get_scores_disease`` and ``calculate_metrics``): for each test
  disease, every drug with an edge of the relation anywhere in the graph, less the drugs of the
  disease's training and validation edges (labelled -1 there); its test drugs are the positives,
  the other test positives stay; per disease AUROC and AUPRC (scikit-learn), and Recall@k of the
  first k of ``np.argsort(pred)[::-1]`` (its tie order) for k = 1 %, 5 %, 10 % of the relation's
  drugs, 10, 50 and 100; averaged over the diseases with ``np.mean``, including the -1 its code
  stores where a metric is undefined (a disease all of whose candidates are positives).

openbench's model has one relation where TxGNN scores ``rev_indication`` with a decoder of its
own: the reverse edges here score the same pairs again. The draws are seeded.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import torch

from openbench.evaluation.tasks.classification import auroc, average_precision

__all__ = ["txgnn_block", "draw_negatives", "fine_tuning_test", "disease_centric", "sigmoid_scores"]

RECALL_AT = ("1%", "5%", "10%", 10, 50, 100)
UNDEFINED = -1.0  # what TxGNN's code stores for a metric it cannot compute, and averages in


def sigmoid_scores(scorer, matrix, rows: np.ndarray, cols: np.ndarray, lower_is_better: bool = False) -> np.ndarray:
    """(P,) float32 sigmoid of the model's scores of the pairs (rows, cols) of ``matrix``, as
    TxGNN's ``torch.sigmoid`` of its float32 logits (a distance model's negated score)."""
    triples = matrix.spec.triples(torch.from_numpy(rows.astype(np.int64)), torch.from_numpy(cols.astype(np.int64)))
    scores = scorer.score_triples(triples).to(torch.float32)
    if lower_is_better:
        scores = -scores
    return torch.sigmoid(scores).numpy()


def _metrics(scores: np.ndarray, labels: np.ndarray) -> Dict[str, Optional[float]]:
    return {"auroc": auroc(scores.astype(np.float64), labels), "auprc": average_precision(scores.astype(np.float64),
                                                                                          labels)}


def draw_negatives(rows: np.ndarray, cols: np.ndarray, seed: int) -> Dict[str, tuple]:
    """{edge type: (negative rows, negative columns)} of the test pairs (rows, cols): one negative
    per positive, its destination drawn uniformly (seeded) from the destinations with a test edge
    of the type (TxGNN's ``fix_dst``): a disease for drug -> disease, a drug for disease -> drug."""
    rng = np.random.default_rng(seed)
    diseases, drugs = np.unique(cols), np.unique(rows)
    forward = (rows, diseases[rng.integers(0, diseases.size, rows.size)])
    backward = (drugs[rng.integers(0, drugs.size, rows.size)], cols)
    return {"drug -> disease": forward, "disease -> drug": backward}


def fine_tuning_test(scorer, matrix, test: np.ndarray, seed: int, lower_is_better: bool = False) -> dict:
    """TxGNN's fine-tuning test metrics of the ``test`` pair codes (see the module docstring)."""
    rows, cols = matrix.rows_cols(test)
    positives = sigmoid_scores(scorer, matrix, rows, cols, lower_is_better)
    per_type = {}
    negatives_of = {}
    for name, (negative_rows, negative_cols) in draw_negatives(rows, cols, seed).items():
        negatives = negatives_of[name] = sigmoid_scores(scorer, matrix, negative_rows, negative_cols, lower_is_better)
        scores = np.concatenate([positives, negatives])
        labels = np.r_[np.ones(positives.size, bool), np.zeros(negatives.size, bool)]
        per_type[name] = _metrics(scores, labels)
    # evaluate_fb concatenates every type's positives, then every type's negatives
    scores = np.concatenate([positives, positives, *negatives_of.values()])
    labels = np.r_[np.ones(2 * positives.size, bool), np.zeros(sum(n.size for n in negatives_of.values()), bool)]
    micro = _metrics(scores, labels)
    defined = [block for block in per_type.values() if block["auroc"] is not None]
    return {"pairs": int(test.size), "negatives_per_positive": 1, "per_edge_type": per_type,
            "micro_auroc": micro["auroc"], "micro_auprc": micro["auprc"],
            "macro_auroc": float(np.mean([b["auroc"] for b in defined])) if defined else None,
            "macro_auprc": float(np.mean([b["auprc"] for b in defined])) if defined else None}


def disease_centric(scorer, matrix, known: np.ndarray, test: np.ndarray, labels: List[str],
                    lower_is_better: bool = False) -> dict:
    """TxGNN's disease-centric metrics (see the module docstring)."""
    every = np.unique(np.concatenate([matrix.pairs[split] for split in ("train", "valid", "test")]))
    relation_drugs = np.unique(every // matrix.width)
    test_rows, test_cols = matrix.rows_cols(test)
    known_rows, known_cols = matrix.rows_cols(known)
    drug_labels = np.array([labels[int(matrix.drugs[row])] for row in relation_drugs])
    by_label = np.argsort(drug_labels, kind="stable")  # np.intersect1d sorts TxGNN's string ids
    relation_drugs = relation_drugs[by_label]
    count = relation_drugs.size
    cutoffs = {str(k): (int(count * float(k[:-1]) / 100) if isinstance(k, str) else int(k)) for k in RECALL_AT}
    per_disease: Dict[str, List[float]] = {"auroc": [], "auprc": [], **{f"recall@{k}": [] for k in cutoffs}}
    diseases = np.unique(test_cols)
    for disease in diseases.tolist():
        removed = known_rows[known_cols == disease]
        candidates = relation_drugs[~np.isin(relation_drugs, removed)]
        positive = np.isin(candidates, test_rows[test_cols == disease])
        predictions = sigmoid_scores(scorer, matrix, candidates, np.full(candidates.size, disease), lower_is_better)
        metrics = _metrics(predictions, positive) if positive.any() else {"auroc": None, "auprc": None}
        per_disease["auroc"].append(UNDEFINED if metrics["auroc"] is None else metrics["auroc"])
        per_disease["auprc"].append(UNDEFINED if metrics["auprc"] is None else metrics["auprc"])
        ranked = np.argsort(predictions)[::-1]
        positions = np.flatnonzero(positive)
        for name, k in cutoffs.items():
            found = np.intersect1d(ranked[:k], positions).size
            per_disease[f"recall@{name}"].append(found / positions.size if positions.size else UNDEFINED)
    means = {name: float(np.mean(values)) if values else None for name, values in per_disease.items()}
    return {"diseases": int(diseases.size), "candidate_drugs": int(count),
            "undefined_diseases": int(sum(1 for value in per_disease["auroc"] if value == UNDEFINED)), **means}


def txgnn_block(scorer, matrix, known: np.ndarray, test: np.ndarray, seed: int, lower_is_better: bool = False,
                labels: Optional[List[str]] = None) -> dict:
    """Both of TxGNN's evaluations of the test pairs, with how they differ from the filtered ones."""
    return {"fine_tuning_test": fine_tuning_test(scorer, matrix, test, seed, lower_is_better),
            "disease_centric": disease_centric(scorer, matrix, known, test, labels or [], lower_is_better),
            "seed": seed,
            "differs_by": ["unfiltered: a drawn negative or a candidate may be a known positive",
                           "sampled negatives (one per positive, from the test graph's destinations) in the "
                           "fine-tuning test, instead of every non-positive pair",
                           "the other test positives of a disease are positives, not removed",
                           "ties broken by np.argsort's order in Recall@k; -1 averaged in where a metric is "
                           "undefined"]}
