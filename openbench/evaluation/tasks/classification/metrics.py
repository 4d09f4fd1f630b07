"""Triple classification on a split's positives and negatives: AUROC, AUPRC and thresholds.

OpenBioLink's splits carry negatives beside the positives of validation and test: the value-0 rows
of ``val_sample.csv``/``test_sample.csv`` and ``negative_val_sample.csv``/``negative_test_sample.csv``
(true negatives from the sources, and corruptions marked ``GENERATED`` in the source column). This
module scores them with any model that scores given triples and reports, per split:

* threshold-free: AUROC as the Mann–Whitney statistic (a tied positive–negative pair counts ½) and
  AUPRC as average precision, scikit-learn's definition (tied scores form one threshold:
  ``AP = Σ_n (R_n - R_{n-1}) P_n`` over the distinct scores, highest first);
* with thresholds: one per relation chosen on validation (a triple is predicted true when its score
  is at least the threshold; the threshold maximises accuracy, or F1, over the relation's distinct
  validation scores and +inf, the highest on ties), applied to both splits: accuracy, precision,
  recall, F1 (null where undefined). A relation without both positives and negatives in
  validation uses the global threshold chosen over all validation triples (recorded as such);
* the same threshold-free metrics per negative kind: true negatives and generated corruptions,
  each against all positives, and the retracted edges of a time split (source ``REMOVED``,
  ``openbench split time --removed-as-negatives``) where the split has them.

All metrics are sorts and cumulative sums over numpy arrays: no Python loop over triples.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import polars as pl
import torch
from scipy.stats import rankdata

from openbench import __version__
from openbench.evaluation.tasks.classification.options import THRESHOLD_METRICS
from openbench.record import SCHEMA_VERSION
from openbench._io.inputs import line_of_row
from openbench.errors import InputError, UsageError, option
from openbench.datasets.loader import map_labels, read_sample_rows
from openbench.datasets.layouts import SAMPLE_FILES, resolve_layout

__all__ = ["THRESHOLD_METRICS", "LabelledTriples", "auroc", "average_precision", "choose_threshold",
           "threshold_metrics", "read_labelled_split", "classification_record", "summary_lines", "Classifying"]

logger = logging.getLogger(__name__)

CLASSIFICATION_SPLITS = ("valid", "test")
NEGATIVE_FILES = {"valid": "negative_val_sample.csv", "test": "negative_test_sample.csv"}


@dataclass
class LabelledTriples:
    """One split's triples to classify. ``triples`` (n, 3) int64 ids in the dataset's maps;
    ``labels`` (n,) bool (True: positive); ``generated`` (n,) bool (a sampled corruption);
    ``removed`` (n,) bool (an edge a later snapshot retracted: source ``REMOVED``, written by
    ``openbench split time --removed-as-negatives``)."""

    triples: torch.Tensor
    labels: np.ndarray
    generated: np.ndarray
    dropped: int = 0  # rows whose labels the dataset's maps lack
    removed: Optional[np.ndarray] = None


# ------------------------------------------------------------------------------------------
# threshold-free metrics


def _class_counts(labels: np.ndarray) -> Tuple[int, int]:
    positives = int(labels.sum())
    return positives, int(labels.size - positives)


def auroc(scores: np.ndarray, labels: np.ndarray) -> Optional[float]:
    """Mann–Whitney AUROC of (n,) scores and (n,) bool labels; ties count ½; None without both classes."""
    positives, negatives = _class_counts(labels)
    if positives == 0 or negatives == 0:
        return None
    ranks = rankdata(scores, method="average")
    u = ranks[labels].sum() - positives * (positives + 1) / 2.0
    return float(u / (positives * negatives))


def _descending_groups(scores: np.ndarray, labels: np.ndarray):
    """(distinct scores high to low, true positives and false positives at or above each)."""
    order = np.argsort(-scores, kind="stable")
    ordered, hits = scores[order], labels[order]
    last_of_group = np.flatnonzero(np.r_[ordered[1:] != ordered[:-1], True])
    true_positives = np.cumsum(hits)[last_of_group]
    false_positives = last_of_group + 1 - true_positives
    return ordered[last_of_group], true_positives, false_positives


def average_precision(scores: np.ndarray, labels: np.ndarray) -> Optional[float]:
    """Average precision (scikit-learn's ``average_precision_score``); None without positives."""
    positives, _ = _class_counts(labels)
    if positives == 0 or scores.size == 0:
        return None
    _, tp, fp = _descending_groups(scores, labels)
    precision, recall = tp / (tp + fp), tp / positives
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


# ------------------------------------------------------------------------------------------
# thresholds


def choose_threshold(scores: np.ndarray, labels: np.ndarray, metric: str) -> float:
    """The threshold (predict true when score >= it) maximising ``metric`` over the distinct
    scores and +inf; the highest threshold among equals."""
    positives, negatives = _class_counts(labels)
    distinct, tp, fp = _descending_groups(scores, labels)
    candidates = np.r_[np.inf, distinct]
    tp, fp = np.r_[0, tp], np.r_[0, fp]
    if metric == "accuracy":
        values = (tp + (negatives - fp)) / max(1, scores.size)
    elif metric == "f1":
        values = np.divide(2.0 * tp, positives + tp + fp, out=np.zeros(tp.size), where=(positives + tp + fp) > 0)
    else:
        raise UsageError(f"{option('threshold_metric', metric)}: expected one of {', '.join(THRESHOLD_METRICS)}")
    return float(candidates[int(np.argmax(values))])


def threshold_metrics(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> Dict[str, Optional[float]]:
    """Accuracy, precision, recall and F1 of (n,) scores against per-triple (n,) thresholds."""
    predicted = scores >= thresholds
    tp = int((predicted & labels).sum())
    fp = int((predicted & ~labels).sum())
    fn = int((~predicted & labels).sum())
    n = labels.size
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None
    return {"accuracy": (n - fp - fn) / n if n else None, "precision": precision, "recall": recall, "f1": f1}


def _block(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> Dict[str, Optional[float]]:
    positives, negatives = _class_counts(labels)
    return {"auroc": auroc(scores, labels), "auprc": average_precision(scores, labels),
            **threshold_metrics(scores, labels, thresholds), "positives": positives, "negatives": negatives}


def _macro(blocks: Dict[str, dict]) -> Dict[str, Optional[float]]:
    out: Dict[str, Optional[float]] = {}
    for key in ("auroc", "auprc", "accuracy", "precision", "recall", "f1"):
        values = [block[key] for block in blocks.values() if block[key] is not None]
        out[key] = float(np.mean(values)) if values else None
    out["relations"] = len(blocks)
    return out


# ------------------------------------------------------------------------------------------
# data


def _labelled_rows(path: Path, negatives_only: bool) -> pl.DataFrame:
    """h, r, t, value, source of one split file (:func:`~openbench.datasets.loader.read_sample_rows`);
    a negative file holds value-0 rows only."""
    frame = read_sample_rows(path)
    if negatives_only:
        bad = frame.with_row_index().filter(pl.col("value") != "0")
        if bad.height:
            raise InputError(f"column 5 (value) is {bad['value'][0]!r}; expected 0 (a negative file)", path,
                             line_of_row(path, int(bad["index"][0])))
    return frame


def read_labelled_split(dataset, split: str, fold: Optional[int] = None) -> LabelledTriples:
    """The positives and negatives of ``split`` ("valid" or "test") of a sample-layout dataset,
    mapped with the dataset's label maps (rows with unknown labels dropped and counted)."""
    layout, folder = resolve_layout(Path(dataset.path), fold)
    if layout != "samples":
        raise UsageError("classification needs negatives: an OpenBioLink split folder (its *_sample.csv and "
                         "negative_*_sample.csv files); the integer-id layout has none")
    parts = []
    for path, negatives_only in ((folder / SAMPLE_FILES[split], False), (folder / NEGATIVE_FILES[split], True)):
        if path.is_file():
            parts.append(_labelled_rows(path, negatives_only))
    if not parts:
        raise InputError(f"no {split} file: {SAMPLE_FILES[split]}", folder)
    frame = pl.concat(parts).unique(["h", "r", "t", "value"], keep="first", maintain_order=True)
    ids, unknown = map_labels(frame, dataset.entity_labels, dataset.relation_labels)
    known = ~unknown.to_numpy() if frame.height else np.zeros(0, dtype=bool)
    triples = ids[torch.from_numpy(known)]
    labels = (frame.get_column("value") == "1").to_numpy()[known]
    generated = (frame.get_column("source") == "GENERATED").to_numpy()[known]
    removed = (frame.get_column("source") == "REMOVED").to_numpy()[known]
    dropped = int((~known).sum())
    if dropped:
        logger.warning("%s: %d row(s) with labels missing from the label maps were left out", split, dropped)
    return LabelledTriples(triples, labels, generated & ~labels, dropped, removed & ~labels)


# ------------------------------------------------------------------------------------------
# the record


def _per_relation(scores, labels, relations, names, thresholds_of) -> Dict[str, dict]:
    blocks = {}
    for relation in np.unique(relations):
        rows = relations == relation
        blocks[names[relation]] = _block(scores[rows], labels[rows], thresholds_of[rows])
    return dict(sorted(blocks.items()))


def classification_record(evaluator, threshold_metric: str = "accuracy", batch_size: Optional[int] = None,
                          fold: Optional[int] = None) -> dict:
    """Score the validation and test positives and negatives with ``evaluator`` (its
    :meth:`openbench.compat.Evaluator.score_triples`) and build the classification
    result record (see the module docstring and README)."""
    if threshold_metric not in THRESHOLD_METRICS:
        raise UsageError(f"{option('threshold_metric', threshold_metric)}: expected one of "
                         f"{', '.join(THRESHOLD_METRICS)}")
    started = time.perf_counter()
    dataset = evaluator.dataset
    names = dataset.relation_labels
    data = {split: read_labelled_split(dataset, split, fold) for split in CLASSIFICATION_SPLITS}
    if data["valid"].labels.size == 0:
        raise InputError("classification chooses thresholds on validation: the split has no validation rows "
                         "(make it with --val)", Path(dataset.path))
    scores = {split: evaluator.score_triples(part.triples, batch_size).double().cpu().numpy()
              for split, part in data.items()}
    for split, values in scores.items():
        if not np.isfinite(values).all():
            raise InputError(f"the model gave non-finite scores to {int((~np.isfinite(values)).sum())} {split} "
                             "triple(s)", Path(dataset.path))
    threshold_of, thresholds, global_threshold = _choose_thresholds(
        scores["valid"], data["valid"], data["test"], names, threshold_metric)
    result: Dict[str, object] = {}
    for split, part in data.items():
        relations = part.triples[:, 1].numpy()
        per_triple = threshold_of[relations] if relations.size else np.zeros(0)
        values, labels = scores[split], part.labels
        per_relation = _per_relation(values, labels, relations, names, per_triple)
        kinds = {}
        removed = part.removed if part.removed is not None else np.zeros(labels.size, bool)
        negative_kinds = [("true_negatives", ~labels & ~part.generated & ~removed), ("generated", part.generated)]
        if removed.any():  # a time split's retracted edges (--removed-as-negatives): a kind of their own
            negative_kinds.append(("removed", removed))
        for kind, mask in negative_kinds:
            keep = labels | mask
            kinds[kind] = {"auroc": auroc(values[keep], labels[keep]),
                           "auprc": average_precision(values[keep], labels[keep]), "negatives": int(mask.sum())}
        result[split] = {"overall": _block(values, labels, per_triple), "per_relation": per_relation,
                         "macro_relation": _macro(per_relation), "by_negative_kind": kinds,
                         "dropped_rows": part.dropped}
    result["thresholds"] = thresholds
    result["global_threshold"] = _json_float(global_threshold)
    record = {"written_by": "openbench", "schema_version": SCHEMA_VERSION, "task": "classification", "classification": result,
              "protocol": {"threshold_metric": threshold_metric, "threshold_rule": "score >= threshold is true",
                           "thresholds_chosen_on": "valid", "negatives": "value-0 rows of the split files and "
                           "negative_*_sample.csv (true negatives and GENERATED corruptions)"},
              "dataset": evaluator.dataset_description(),
              "model": evaluator.model_description(), "seed": evaluator.seed, "device": str(evaluator.device),
              "version": __version__, "timing": {"seconds": round(time.perf_counter() - started, 6)},
              "warnings": list(evaluator.warnings)}
    return record


def _choose_thresholds(scores: np.ndarray, valid: LabelledTriples, test: LabelledTriples, names: List[str],
                       metric: str) -> Tuple[np.ndarray, Dict[str, dict], float]:
    """(threshold per relation id (R,), the record's ``thresholds`` block, the global threshold):
    each relation's own where validation holds both classes for it, else the global one
    (recorded for the relations that occur in validation or test)."""
    relations = valid.triples[:, 1].numpy()
    global_threshold = choose_threshold(scores, valid.labels, metric)
    threshold_of = np.full(max(1, len(names)), global_threshold)
    present = set(relations.tolist()) | set(test.triples[:, 1].tolist())
    block: Dict[str, dict] = {}
    for relation in sorted(present):
        rows = relations == relation
        positives, negatives = _class_counts(valid.labels[rows])
        if positives and negatives:
            threshold_of[relation] = choose_threshold(scores[rows], valid.labels[rows], metric)
        block[names[relation]] = {"threshold": _json_float(threshold_of[relation]),
                                  "chosen_on": "relation" if positives and negatives else "global"}
    return threshold_of, block, global_threshold


def _json_float(value: float):
    """JSON has no infinity: +inf (predict nothing true) is written as the string "inf"."""
    return "inf" if value == np.inf else float(value)


def summary_lines(record: dict) -> List[str]:
    """A short text summary of a classification record (test overall and per negative kind)."""
    test = record["classification"]["test"]
    overall = test["overall"]

    def show(value):
        return "n/a" if value is None else f"{value:.4f}"

    lines = [f"test: AUROC {show(overall['auroc'])}  AUPRC {show(overall['auprc'])}  accuracy "
             f"{show(overall['accuracy'])}  F1 {show(overall['f1'])}  ({overall['positives']} positives, "
             f"{overall['negatives']} negatives)"]
    for kind, block in test["by_negative_kind"].items():
        lines.append(f"  vs {kind.replace('_', ' ')} ({block['negatives']}): AUROC {show(block['auroc'])}  "
                     f"AUPRC {show(block['auprc'])}")
    return lines


class Classifying:
    """What :func:`classification_record` reads of a model: its scores of given triples (higher:
    more plausible), the dataset, the run's settings."""

    def __init__(self, setup, scorer):
        self.setup, self.scorer = setup, scorer
        self.dataset, self.seed, self.device, self.warnings = setup.dataset, setup.seed, setup.device, setup.warnings

    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) float64 scores of (n, 3) triples, higher is more plausible."""
        scores = self.scorer.score_triples(triples)
        return -scores if self.setup.lower_is_better else scores

    def dataset_description(self) -> dict:
        """The setup's dataset block."""
        return self.setup.dataset_description()

    def model_description(self) -> dict:
        """The scorer's model block."""
        return self.scorer.description()
