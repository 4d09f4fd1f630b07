"""The repurposing record (:func:`repurposing_record`): the matrix defined, its special pairs
(known positives, test pairs, known negatives, a ground-truth file's pairs) counted in one pass
over the matrix (:func:`~openbench.evaluation.counting.matrix.count_matrix`), the views, the
frequent flyers and the best pairs, the protocol and the timing."""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from openbench import __version__
from openbench.errors import UsageError, option
from openbench.evaluation.counting.matrix import count_matrix
from openbench.evaluation.tasks.repurposing.ground_truth import PART_VIEWS, GroundTruth, read_ground_truth
from openbench.evaluation.tasks.repurposing.matrix import Matrix, define_matrix
from openbench.evaluation.tasks.repurposing.metrics import entropy_at
from openbench.evaluation.tasks.repurposing.options import (DEFAULT_RECALL_AT, FLYERS_AT, NAMED, PROTOCOLS,
                                                                SPLIT_NAMES, RepurposingOptions)
from openbench.evaluation.tasks.repurposing.split_negatives import split_negatives
from openbench.evaluation.tasks.repurposing.views import Special, classification_block, confidence, view
from openbench.record import SCHEMA_VERSION

__all__ = ["repurposing_record"]


def _recall_at(options: RepurposingOptions, matrix: Matrix) -> List[int]:
    given = list(options.recall_at) if options.recall_at else list(DEFAULT_RECALL_AT)
    if not options.recall_at:
        given.append(max(1, matrix.size // 100))
    values = sorted({int(n) for n in given if int(n) >= 1})
    if not values:
        raise UsageError(f"{option('recall_at')}: expected positive integers")
    return values


def repurposing_record(dataset, scorer, options: RepurposingOptions, setup_description: dict,
                       device: str) -> dict:
    """The repurposing record of ``scorer`` on ``dataset`` (see the module docstring)."""
    started = time.perf_counter()
    if options.protocol not in PROTOCOLS:
        raise UsageError(f"{option('protocol', options.protocol)}: the repurposing task's protocols are "
                         f"{', '.join(PROTOCOLS)}")
    matrix = define_matrix(dataset, options)
    recall_at = _recall_at(options, matrix)
    hits_at = sorted({int(k) for k in options.hits_at})
    known = np.union1d(matrix.pairs["train"], matrix.pairs["valid"])
    test = np.setdiff1d(matrix.pairs["test"], known)
    stated, stated_by_source = split_negatives(dataset, matrix, options.relations)
    negatives_all = np.unique(np.concatenate([matrix.negatives[split] for split in SPLIT_NAMES] + [stated]))
    positives_all = np.union1d(known, test)
    negatives = np.setdiff1d(negatives_all, positives_all)
    truth = _ground_truth(dataset, matrix, options)
    truth_positives = truth.positives if truth else np.zeros(0, np.int64)
    truth_parts = {name: (part.positives, np.setdiff1d(part.negatives, np.union1d(positives_all, truth_positives)))
                   for name, part in (truth.parts.items() if truth else ())}
    thresholds = np.unique(np.concatenate([test, negatives, truth_positives]
                                          + [part_negatives for _, part_negatives in truth_parts.values()]))
    special = Special(np.unique(np.concatenate([known, thresholds])))
    is_threshold = np.isin(special.codes, thresholds)
    rows, cols = matrix.rows_cols(special.codes)
    bar = _progress_bar(options.progress, matrix.drugs.size)
    try:
        counted = count_matrix(scorer, matrix.spec, rows, cols, is_threshold, top_k=max(0, int(options.keep_top)),
                               top_excluded=np.isin(special.codes, known), ranks=options.ranks,
                               lower_is_better=options.lower_is_better,
                               progress=(lambda done: bar.update(done)) if bar is not None else None,
                               shard=options.shard,  # type: ignore[arg-type]
                               device=None if device == "cpu" else torch.device(device))
    finally:
        if bar is not None:
            bar.close()
    special.greater, special.equal, special.groups = counted.greater, counted.equal, counted.groups
    counted_seconds = time.perf_counter() - started

    views = {"test": view(dataset, scorer, options, matrix, special, test, negatives, positives_all, recall_at,
                          hits_at, "test")}
    if truth is not None:
        excluded = np.union1d(positives_all, truth_positives)
        file_block = {
            "path": truth.path, "sha256": truth.sha256, "rows": truth.rows,
            "unknown_rows": len(truth.unknown), "unknown": truth.unknown[:NAMED],
            "positive_pairs_in_training": len(truth.leaked), "in_training": truth.leaked[:NAMED],
            "negatives_that_are_known_positives": truth.conflicting, "labels": truth.labels,
            **({"dates": {**truth.dates, "rows_by_part": {PART_VIEWS[name]: part.rows
                                                          for name, part in truth.parts.items()}}}
               if truth.dates is not None else {})}
        for name, (part_positives, part_negatives) in truth_parts.items():
            shown = PART_VIEWS[name]
            views[shown] = view(dataset, scorer, options, matrix, special, part_positives, part_negatives, excluded,
                                recall_at, hits_at, shown.replace("_", " "))
            views[shown].block["file"] = file_block
    classification = classification_block(matrix, special, known, test, negatives)
    if classification is not None:
        views["test"].block["classification"] = classification
    flyers = _frequent_flyers(counted, matrix, dataset, recall_at)
    top_pairs = _top_pairs(counted, matrix, dataset)
    description = dict(matrix.description)
    description.update({"known_positive_pairs": int(known.size), "test_pairs": int(test.size),
                        "test_pairs_known_from_training": int(np.intersect1d(matrix.pairs["test"], known).size),
                        "known_negative_pairs": int(negatives.size),
                        **({"known_negative_rows_from_split_files": stated_by_source} if stated_by_source else {}),
                        "negative_pairs_also_positive": int(np.intersect1d(negatives_all, positives_all).size),
                        "triples_outside_matrix": {split: int(matrix.outside[split].shape[0])
                                                   for split in SPLIT_NAMES},
                        "candidates": int(matrix.size - positives_all.size)})
    description.update(_diseases_without_listed_drugs(dataset, matrix))
    result: Dict[str, object] = {"matrix": description, "views": {name: shown.block for name, shown in views.items()},
                                 "frequent_flyers": flyers, "top_pairs": top_pairs}
    if options.bootstrap:
        result["confidence"] = confidence(views, options, recall_at, hits_at)
    if options.protocol == "txgnn":
        from openbench.evaluation.tasks.repurposing.txgnn import txgnn_block

        result["txgnn"] = txgnn_block(scorer, matrix, known, test, options.seed or 0, options.lower_is_better,
                                      dataset.entity_labels)
    protocol = {"task": "repurposing", "protocol": options.protocol, "relations": list(options.relations),
                "negative_relations": list(options.negative_relations), "recall_at": recall_at, "hits_at": hits_at,
                "keep_top": int(options.keep_top), "ranks": options.ranks, "filtered": True,
                "filter": "the treats relations' training and validation pairs, and the other test pairs",
                "headline_rank_type": "realistic",
                "tie_rule": "exact comparison of the keys; realistic rank = g + (k + 1) / 2",
                "ground_truth_sha256": truth.sha256 if truth else None,
                "lower_is_better": bool(options.lower_is_better)}
    timing = {"seconds": round(time.perf_counter() - started, 6), "matrix_pass": round(counted_seconds, 6),
              "matrix_counting": {key: value for key, value in counted.stats.items()}}
    warnings: List[str] = []
    if matrix.size and test.size == 0:
        warnings.append("no test pair of the treats relation(s) lies in the matrix: the test view is empty")
    return {"written_by": "openbench", "schema_version": SCHEMA_VERSION, "task": "repurposing", "repurposing": result,
            "protocol": protocol, "dataset": setup_description, "model": scorer.description(),
            "seed": options.seed, "device": device, "version": __version__, "timing": timing, "warnings": warnings}


def _ground_truth(dataset, matrix: Matrix, options: RepurposingOptions) -> Optional[GroundTruth]:
    """The ground-truth file read against the cut-off: ``--cutoff`` where given, else the one a
    split by dates states (:attr:`~openbench.datasets.loader.Dataset.time_cut`), else none."""
    if not options.ground_truth:
        if options.cutoff is not None:
            raise UsageError(f"{option('cutoff')} dates a ground-truth file's rows against the graph: give "
                             f"{option('ground_truth')} FILE with a date column")
        return None
    from openbench._io.dates import parse_date

    time_cut = getattr(dataset, "time_cut", None) or {}
    if options.cutoff is not None:
        cutoff, cutoff_from = parse_date(options.cutoff, option("cutoff")), "given"
    elif time_cut.get("cutoff"):
        cutoff, cutoff_from = parse_date(time_cut["cutoff"], "split_info.json's cutoff"), "split_info.json"
    else:
        cutoff, cutoff_from = None, None
    return read_ground_truth(options.ground_truth, dataset, matrix, cutoff=cutoff, cutoff_from=cutoff_from,
                             positive_outcomes=options.positive_outcomes, negative_outcomes=options.negative_outcomes)


def _progress_bar(enabled: bool, total: int):
    if not enabled:
        return None
    from openbench.progress import progress

    return progress(total=total, desc="repurposing matrix", unit="drugs")


def _frequent_flyers(counted, matrix: Matrix, dataset, recall_at: Sequence[int]) -> dict:
    """Entropy@n of the best pairs (n of ``recall_at`` within the kept top), and the drugs and
    diseases most frequent among them."""
    top_rows, top_cols = (counted.top[:, 0], counted.top[:, 1]) if counted.top.size else (np.zeros(0, np.int64),) * 2
    entropy = {}
    for n in recall_at:
        found = entropy_at(top_rows, top_cols, counted.top_groups, n, int(matrix.drugs.size), int(matrix.width))
        if found is not None:
            entropy[str(n)] = found
    labels = dataset.entity_labels

    # the frequencies among the best FLYERS_AT pairs (fewer where the matrix has fewer candidates)
    counted_over = min(FLYERS_AT, int(top_rows.size))

    def most(ids: np.ndarray, entities: np.ndarray) -> List[list]:
        if ids.size == 0:
            return []
        values, counts = np.unique(ids[:counted_over], return_counts=True)
        order = np.lexsort((values, -counts))[:10]
        return [[labels[int(entities[values[i]])], int(counts[i])] for i in order]

    return {"entropy": entropy, "counted_over": counted_over,
            "top_drugs": most(top_rows, matrix.drugs), "top_diseases": most(top_cols, matrix.diseases)}


def _top_pairs(counted, matrix: Matrix, dataset) -> List[list]:
    """The best pairs, best first: [drug, disease, place] (tied pairs share the place of the first)."""
    labels = dataset.entity_labels
    out = []
    place, previous = 0, None
    for position, ((row, col), group) in enumerate(zip(counted.top.tolist(), counted.top_groups.tolist()), 1):
        if group != previous:
            place, previous = position, group
        out.append([labels[int(matrix.drugs[row])], labels[int(matrix.diseases[col])], place])
    return out


def _diseases_without_listed_drugs(dataset, matrix: Matrix) -> dict:
    """The test triples of the treats relations with an end outside the matrix, and their other ends."""
    outside = matrix.outside["test"]
    if outside.shape[0] == 0:
        return {"test_entities_outside": 0, "test_entities_outside_named": []}
    ends = np.unique(np.concatenate([outside[:, 0], outside[:, 2]]))
    missing = [dataset.entity_labels[int(e)] for e in np.setdiff1d(ends, np.union1d(matrix.drugs, matrix.diseases))]
    return {"test_entities_outside": len(missing), "test_entities_outside_named": sorted(missing)[:NAMED]}
