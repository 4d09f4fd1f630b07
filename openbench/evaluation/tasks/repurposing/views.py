"""The views of the repurposing matrix: the test pairs (or a ground-truth file's) among the matrix's
pairs (the full-matrix block: Recall@n, AUROC), among their disease's drugs (the disease-specific
block), and against the known negatives (classification); each a function of the matrix pass's
counts, with typed results (:class:`View`) for the intervals (:func:`confidence`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench.evaluation.counting.matrix import MatrixSpec, count_rows
from openbench.evaluation.tasks.repurposing.matrix import Matrix
from openbench.evaluation.tasks.repurposing.metrics import (auroc_from_counts, bootstrap_interval, disease_blocks,
                                                                rank_counts, recall_block)
from openbench.evaluation.tasks.repurposing.options import NAMED, RepurposingOptions

__all__ = ["ViewCounts", "DiseaseValues", "View", "Special", "view", "classification_block", "confidence"]


class ViewCounts(NamedTuple):
    """The exact counts of a view's P ranked pairs against the matrix: better ``greater`` (P,),
    tied ``equal`` (P,) (the pair itself not counted), ``candidates`` (P,)."""

    greater: np.ndarray
    equal: np.ndarray
    candidates: np.ndarray


class DiseaseValues(NamedTuple):
    """Each of D diseases' own values: the realistic means by metric ({"realistic.mrr": (D,), ...}),
    and its AUROC and AUPRC (D,) (None where undefined)."""

    values: Dict[str, np.ndarray]
    aurocs: List[Optional[float]]
    auprcs: List[Optional[float]]


@dataclass
class View:
    """One view: ``block``, what the record shows; ``counts`` and ``per_disease``, what its
    intervals read (None where the view has no positive pair)."""

    block: Dict[str, object]
    counts: Optional[ViewCounts]
    per_disease: Optional[DiseaseValues]


@dataclass
class Special:
    """The special pairs counted against the matrix: unique codes, their flags, and what the
    counting found of them."""

    codes: np.ndarray
    greater: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    equal: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def index(self, codes: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.codes, codes)


def _view_counts(special: Special, ranked: np.ndarray, excluded: np.ndarray, matrix_size: int):
    """(g, e, candidates) of the ``ranked`` codes against the matrix less the ``excluded`` codes
    (known positives of the view, the ranked positives among them): what the matrix pass counted,
    less what the excluded pairs add, decided by their exact order."""
    where, removed = special.index(ranked), special.index(excluded)
    removed_groups = np.sort(special.groups[removed])
    groups = special.groups[where]
    above = removed_groups.size - np.searchsorted(removed_groups, groups, "right")
    level = np.searchsorted(removed_groups, groups, "right") - np.searchsorted(removed_groups, groups, "left")
    is_excluded = np.isin(ranked, excluded)
    greater = special.greater[where] - above
    equal = special.equal[where] - level - np.where(is_excluded, 0, 1)
    non_positive = matrix_size - excluded.size
    candidates = np.full(ranked.size, non_positive, np.int64) + is_excluded.astype(np.int64)
    return greater, equal, candidates


def _full_matrix_block(special: Special, ranked: np.ndarray, excluded: np.ndarray, matrix: Matrix,
                       recall_at: Sequence[int]) -> Optional[Tuple[dict, ViewCounts]]:
    """(the full-matrix block of the ``ranked`` pairs, their counts), or None for no pair."""
    if ranked.size == 0:
        return None
    counts = ViewCounts(*_view_counts(special, ranked, excluded, matrix.size))
    greater, equal, candidates = counts
    block = recall_block(rank_counts(greater, equal, candidates), recall_at)
    negatives = candidates - np.isin(ranked, excluded).astype(np.int64)
    return {"pairs": int(ranked.size), "candidates": int(matrix.size - excluded.size),
            "auroc": auroc_from_counts(greater, equal, negatives), "ranks": block}, counts



def view(dataset, scorer, options: RepurposingOptions, matrix: Matrix, special: Special, positives: np.ndarray,
          negatives: np.ndarray, excluded: np.ndarray, recall_at: Sequence[int], hits_at: Sequence[int],
          name: str) -> "View":
    """One view: the full-matrix block of ``positives`` (and of ``negatives``), and the
    disease-specific block, with the counts and per-disease values its intervals read."""
    shown: Dict[str, object] = {"positives": int(positives.size), "negatives": int(negatives.size)}
    full = _full_matrix_block(special, positives, excluded, matrix, recall_at)
    shown["full_matrix"] = None if full is None else full[0]
    negative = _full_matrix_block(special, negatives, excluded, matrix, recall_at)
    shown["known_negatives"] = None if negative is None else {
        "pairs": negative[0]["pairs"], "ranks": {rank_type: {key: value for key, value in block.items()
                                                             if key.startswith("recall@")}
                                                 for rank_type, block in (negative[0]["ranks"] or {}).items()}}
    disease = _disease_view(dataset, scorer, options, matrix, special, positives, excluded, hits_at)
    shown["disease_specific"] = None if disease is None else disease[0]
    return View(shown, None if full is None else full[1], None if disease is None else disease[1])


def _disease_view(dataset, scorer, options: RepurposingOptions, matrix: Matrix, special: Special,
                  positives: np.ndarray, excluded: np.ndarray,
                  hits_at: Sequence[int]) -> Optional[Tuple[dict, DiseaseValues]]:
    """Each positive among all drugs of its disease (the other known positives of the disease
    removed), counted per disease row (:func:`~openbench.evaluation.counting.matrix.count_rows`)."""
    if positives.size == 0:
        return None
    rows, cols = matrix.rows_cols(positives)
    diseases = np.unique(cols)
    local = np.searchsorted(diseases, cols)
    transposed = MatrixSpec(torch.from_numpy(matrix.diseases[diseases]), torch.from_numpy(matrix.drugs),
                            matrix.spec.relation, not matrix.spec.rows_are_heads)
    # the removed pairs of each positive's disease (the view's other positives) are left out of its row's count
    removed_rows, removed_cols = excluded // matrix.width, excluded % matrix.width
    in_view = np.isin(removed_cols, diseases)
    skip = (np.searchsorted(diseases, removed_cols[in_view]), removed_rows[in_view])
    counted = count_rows(scorer, transposed, local, rows, options.ranks, options.lower_is_better,
                         options.shard, skip=skip)  # type: ignore[arg-type]
    # the positives' order within their disease: the keys as compared in its row (a model that scores a
    # disease's drugs otherwise than a drug's diseases, like the popularity baseline, orders them its own
    # way), or the matrix pass's exact groups (embeddings: one key per triple in either orientation)
    groups = (special.groups[special.index(positives)] if counted.keys is None
              else np.unique(counted.keys, return_inverse=True)[1].reshape(-1).astype(np.int64))
    removed_per_disease = np.bincount(np.searchsorted(diseases, removed_cols[in_view]), minlength=diseases.size)
    is_excluded = np.isin(positives, excluded)
    greater = counted.greater
    equal = counted.equal - 1  # itself
    candidates = matrix.drugs.size - removed_per_disease[local] + is_excluded.astype(np.int64)
    blocks = disease_blocks(cols, greater, equal, candidates, groups, hits_at)
    labels = dataset.entity_labels
    disease_ids: np.ndarray = blocks["disease_ids"]  # type: ignore[assignment]
    aurocs: List[Optional[float]] = blocks["per_disease_auroc"]  # type: ignore[assignment]
    auprcs: List[Optional[float]] = blocks["per_disease_auprc"]  # type: ignore[assignment]
    values: Dict[str, np.ndarray] = blocks["per_disease_values"]  # type: ignore[assignment]
    pairs_of = np.bincount(np.searchsorted(disease_ids, cols), minlength=disease_ids.size)
    names = [labels[int(matrix.diseases[d])] for d in disease_ids.tolist()]
    undefined = [name for name, value in zip(names, aurocs) if value is None]
    per_disease = {name: {"pairs": int(pairs_of[position]), "mrr": float(values["realistic.mrr"][position]),
                          "auroc": aurocs[position], "auprc": auprcs[position]}
                   for position, name in enumerate(names)}
    return {"pairs": int(positives.size), "diseases": blocks["diseases"], "micro": blocks["micro"],
            "macro": blocks["macro"], "auroc": blocks["auroc"], "auprc": blocks["auprc"],
            "per_disease": dict(sorted(per_disease.items())),
            "diseases_without_negative_drugs": undefined[:NAMED], "diseases_without_negative_drugs_count":
                len(undefined)}, DiseaseValues(values, aurocs, auprcs)


def classification_block(matrix: Matrix, special: Special, known: np.ndarray, test: np.ndarray,
                    negatives: np.ndarray) -> Optional[dict]:
    """Positives against known negatives, from their exact order: AUROC and AUPRC of the test
    pairs against the negatives of the test split, and accuracy and F1 at a threshold chosen on the
    validation pairs against the validation split's negatives (where both exist)."""
    from openbench.evaluation.tasks.classification import auroc, average_precision, choose_threshold, threshold_metrics

    test_negatives = np.intersect1d(matrix.negatives["test"], negatives)
    test_negatives = test_negatives if test_negatives.size else negatives
    if test.size == 0 or test_negatives.size == 0:
        return None
    groups = special.groups[special.index(np.concatenate([test, test_negatives]))].astype(np.float64)
    labels = np.r_[np.ones(test.size, bool), np.zeros(test_negatives.size, bool)]
    block: Dict[str, object] = {"positives": int(test.size), "negatives": int(test_negatives.size),
                                "negatives_from": "the test split" if matrix.negatives["test"].size else "every split",
                                "auroc": auroc(groups, labels), "auprc": average_precision(groups, labels),
                                "accuracy": None, "f1": None, "threshold": None}
    valid_positives = np.setdiff1d(matrix.pairs["valid"], matrix.pairs["train"])
    valid_negatives = np.setdiff1d(matrix.negatives["valid"], np.union1d(known, test))
    if valid_positives.size and valid_negatives.size:
        # the threshold is an exact key's rank among the special pairs: every pair compared exactly
        valid_groups = special.groups[special.index(np.concatenate([valid_positives, valid_negatives]))]
        valid_labels = np.r_[np.ones(valid_positives.size, bool), np.zeros(valid_negatives.size, bool)]
        cut = choose_threshold(valid_groups.astype(np.float64), valid_labels, "accuracy")
        measured = threshold_metrics(groups, labels, np.full(groups.size, cut))
        block.update(accuracy=measured["accuracy"], f1=measured["f1"],
                     threshold="chosen on validation (accuracy): the score of a validation pair")
    return block




def confidence(views: Dict[str, "View"], options: RepurposingOptions, recall_at: Sequence[int],
               hits_at: Sequence[int]) -> dict:
    """Bootstrap intervals (95 %, percentile): full-matrix Recall@n and AUROC over the ranked
    pairs, disease-specific macro MRR, Hit@k, AUROC and AUPRC over the diseases; seeded."""
    resamples, seed = int(options.bootstrap or 0), options.seed or 0
    out: Dict[str, object] = {"resamples": resamples, "seed": options.seed, "level": 0.95}
    for name, view in views.items():
        intervals: Dict[str, object] = {}
        if view.counts is not None:
            greater, equal, candidates = view.counts
            negatives = candidates - 1

            def recall(indexes, n):
                rank = greater[indexes] + (equal[indexes] + 2) / 2.0
                return float((rank <= n).mean())

            for n in recall_at:
                intervals[f"recall@{n}"] = bootstrap_interval(lambda idx, n=n: recall(idx, n), greater.size, resamples,
                                                              seed)
            intervals["auroc"] = bootstrap_interval(
                lambda idx: auroc_from_counts(greater[idx], equal[idx], negatives[idx]), greater.size, resamples, seed)
        if view.per_disease is not None:
            values, aurocs, auprcs = view.per_disease  # each disease's own means and AUROC, AUPRC
            units = len(aurocs)
            for metric, key in [("disease_mrr_macro", "realistic.mrr")] + [
                    (f"disease_hits@{k}_macro", f"realistic.hits@{k}") for k in hits_at]:
                intervals[metric] = bootstrap_interval(lambda idx, per=values[key]: float(per[idx].mean()), units,
                                                       resamples, seed)
            for metric, per_disease in (("disease_auroc", aurocs), ("disease_auprc", auprcs)):
                array = np.array([np.nan if v is None else v for v in per_disease])
                intervals[metric] = bootstrap_interval(lambda idx, a=array: float(np.nanmean(a[idx]))
                                                     if np.isfinite(a[idx]).any() else None, units, resamples, seed)
        out[name] = intervals
    return out
