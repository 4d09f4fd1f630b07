"""The drug-repurposing task: which drug for which disease, measured as the field measures it.

``openbench.evaluate(dataset, model, task="repurposing", relations=["indication"], ...)`` (and
``openbench evaluate --task repurposing --relation indication``) scores every pair of a drug ×
disease matrix and reports, in one record:

* **the matrix** (:func:`define_matrix`): the drugs and diseases from the node types of the treats
  relations' ends (``type::...`` labels, or OpenBioLink's CURIE prefixes), or from curated lists
  (``drugs``/``diseases``); either orientation of a relation (a drug at its head or its tail, even
  mixed within it); the training and validation pairs of the treats relations are known positives
  (removed: the filtered setting), the test pairs are ranked; the pairs of ``negative_relations``
  (contraindications, OpenBioLink's true negatives) are known negatives and stay in the matrix;
* **views**: the split's test pairs, and a ground-truth file's pairs (``ground_truth``: a
  clinical-trials or off-label set) scored as an extra test set with the same counts; each view
  holds the full-matrix block (Recall@n per rank type, AUROC = 1 - MQR, Recall@n of the known
  negatives), the disease-specific block (each positive among all drugs of its disease: Hit@k and
  MRR micro and macro, per-disease AUROC and AUPRC averaged) and, where negatives exist, positives
  against known negatives as classification (:mod:`.repurposing_metrics`);
* **frequent flyers**: Drug-Entropy@n and Disease-Entropy@n of the matrix's best pairs, and the
  drugs and diseases most frequent among them; the best ``keep_top`` pairs themselves (for
  ``openbench compare --stability``, which needs no model);
* **TxGNN's protocol** by name (``protocol="txgnn"``, :mod:`.txgnn`), beside the filtered numbers.

The matrix is counted by :mod:`openbench.evaluation.counting.matrix` (one pass over blocks,
exact ranks as the ranking engine decides them); every number is a function of the counts.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench import __version__
from openbench.errors import InputError, UsageError, option
from openbench.evaluation.counting.matrix import MatrixSpec, count_matrix, count_rows
from openbench.evaluation.tasks.repurposing_metrics import (auroc_from_counts, bootstrap_interval, disease_blocks,
                                                          entropy_at, rank_counts, recall_block)

__all__ = ["DEFAULT_RECALL_AT", "DEFAULT_KEEP_TOP", "PROTOCOLS", "RepurposingOptions", "Matrix", "GroundTruth",
           "node_type", "define_matrix", "read_ground_truth", "repurposing_record", "summary_lines"]

logger = logging.getLogger(__name__)

DEFAULT_RECALL_AT = (10, 100, 1000, 10000)  # and 1 % of the matrix, added per matrix
DEFAULT_KEEP_TOP = 1000
PROTOCOLS = ("full", "txgnn")
DRUG_WORDS = ("drug", "compound", "chemical")
SPLIT_NAMES = ("train", "valid", "test")
NAMED = 20  # entities or rows named in a record's lists (the count is always whole)
FLYERS_AT = 100  # the best pairs whose drugs and diseases the frequent flyers count


@dataclass
class RepurposingOptions:
    """What a repurposing evaluation asks (the door's arguments, checked)."""

    relations: Sequence[str]
    negative_relations: Sequence[str] = ()
    drugs: Optional[Sequence[str]] = None
    diseases: Optional[Sequence[str]] = None
    recall_at: Optional[Sequence[int]] = None
    hits_at: Sequence[int] = (1, 3, 10)
    keep_top: int = DEFAULT_KEEP_TOP
    ground_truth: Optional[str] = None
    protocol: str = "full"
    bootstrap: Optional[int] = None
    seed: Optional[int] = 0
    ranks: str = "exact"
    lower_is_better: bool = False
    progress: bool = False
    shard: Optional[object] = None  # openbench.evaluation.counting.matrix.Shard under torch.distributed


def node_type(label: str) -> Optional[str]:
    """An entity's node type from its label: ``type::...`` (PrimeKG, Hetionet, DRKG as openbench
    converts them) or an OpenBioLink CURIE prefix; None when the label says none."""
    if "::" in label:
        return label.split("::", 1)[0]
    if ":" in label:
        from graphgen.edge_types import PREFIX_TO_NODE_TYPE

        return PREFIX_TO_NODE_TYPE.get(label.split(":", 1)[0])
    return None


def _drug_like(kind: Optional[str]) -> bool:
    return kind is not None and any(word in kind.lower() for word in DRUG_WORDS)


# -- the matrix -----------------------------------------------------------------------------------

@dataclass
class Matrix:
    """The drug × disease matrix of a dataset and its pairs (codes ``row * S + col``)."""

    drugs: np.ndarray  # (D,) entity ids, sorted
    diseases: np.ndarray  # (S,) entity ids, sorted
    spec: MatrixSpec
    pairs: Dict[str, np.ndarray]  # split -> (N,) sorted unique codes of the treats relations' pairs
    negatives: Dict[str, np.ndarray]  # split -> codes of the negative relations' pairs
    description: dict
    outside: Dict[str, np.ndarray]  # split -> (M, 3) treats triples with an end outside the matrix

    @property
    def width(self) -> int:
        return int(self.diseases.shape[0])

    @property
    def size(self) -> int:
        return int(self.drugs.shape[0]) * self.width

    def rows_cols(self, codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        return codes // self.width, codes % self.width


def _relation_ids(dataset, labels: Sequence[str], what: str) -> List[int]:
    index = {label: i for i, label in enumerate(dataset.relation_labels)}
    unknown = [label for label in labels if label not in index]
    if unknown:
        import difflib

        hints = [hint for label in unknown for hint in difflib.get_close_matches(label, index, n=1)]
        shown = ", ".join(sorted(index)[:30]) + (" ..." if len(index) > 30 else "")
        raise UsageError(f"{what} {', '.join(map(repr, unknown))}: not a relation of the dataset"
                         + (f" (did you mean {', '.join(map(repr, hints))}?)" if hints else "") + f"; it has {shown}")
    return [index[label] for label in labels]


def _triples_of(dataset, relation_ids: Sequence[int]) -> Dict[str, torch.Tensor]:
    chosen = torch.tensor(list(relation_ids), dtype=torch.long)
    out = {}
    for split in SPLIT_NAMES:
        triples = dataset.triples.get(split, torch.empty((0, 3), dtype=torch.long))
        out[split] = triples[torch.isin(triples[:, 1], chosen)] if triples.shape[0] else triples
    return out


def _listed(dataset, labels: Sequence[str], what: str) -> np.ndarray:
    """Entity ids of a curated list (labels), unknown labels refused with their position."""
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    unknown = [(position, label) for position, label in enumerate(labels, 1) if label not in index]
    if unknown:
        shown = "; ".join(f"line {position}: {label!r}" for position, label in unknown[:5])
        raise InputError(f"{len(unknown)} {what} of the list are not entities of the dataset ({shown}"
                         f"{' ...' if len(unknown) > 5 else ''})")
    ids = np.unique(np.array([index[label] for label in labels], dtype=np.int64))
    if ids.size == 0:
        raise InputError(f"the {what} list is empty")
    return ids


def _ends(dataset, triples: Dict[str, torch.Tensor]) -> np.ndarray:
    every = torch.cat([t for t in triples.values()]) if triples else torch.empty((0, 3), dtype=torch.long)
    return torch.unique(torch.cat([every[:, 0], every[:, 2]])).numpy() if every.shape[0] else np.zeros(0, np.int64)


def define_matrix(dataset, options: RepurposingOptions) -> Matrix:
    """The matrix of ``dataset`` for ``options`` (see the module docstring); one clear error for a
    relation that does not exist, a list of unknown entities, or an empty matrix."""
    if not options.relations:
        raise UsageError(f"the repurposing task needs the treats relation(s): {option('relations')} (e.g. PrimeKG's "
                         "indication, OpenBioLink's DIS_DRUG)")
    treat_ids = _relation_ids(dataset, options.relations, "treats relation")
    negative_ids = _relation_ids(dataset, options.negative_relations, "negative relation")
    overlap = set(treat_ids) & set(negative_ids)
    if overlap:
        raise UsageError(f"{dataset.relation_labels[min(overlap)]!r} is both a treats and a negative relation")
    treats = _triples_of(dataset, treat_ids)
    negatives = _triples_of(dataset, negative_ids)
    labels = dataset.entity_labels
    ends = _ends(dataset, treats)
    if ends.size == 0:
        raise InputError(f"no triple of {', '.join(options.relations)} in the dataset: the matrix would be empty",
                         dataset.path)
    end_types = {int(entity): node_type(labels[int(entity)]) for entity in ends}
    untyped = [entity for entity, kind in end_types.items() if kind is None]
    named_types = {kind for kind in end_types.values() if kind is not None}
    drug_types = sorted(kind for kind in named_types if _drug_like(kind))
    disease_types = sorted(kind for kind in named_types if not _drug_like(kind))
    how: Dict[str, str] = {}
    if options.drugs is not None:
        drugs = _listed(dataset, options.drugs, "drugs")
        how["drugs"] = f"a list of {len(options.drugs)} labels"
    elif untyped or not drug_types:
        raise UsageError("the labels at the ends of the treats relation(s) name no node type that reads as a drug "
                         f"({', '.join(sorted(named_types)) or 'none'}): give the drugs "
                         f"and diseases as lists ({option('drugs')} FILE, {option('diseases')} FILE)")
    else:
        drugs = np.array([i for i, label in enumerate(labels) if node_type(label) in drug_types], dtype=np.int64)
        how["drugs"] = f"every entity of node type {', '.join(drug_types)}"
    if options.diseases is not None:
        diseases = _listed(dataset, options.diseases, "diseases")
        how["diseases"] = f"a list of {len(options.diseases)} labels"
    elif untyped or not disease_types:
        if options.drugs is None:
            raise UsageError("the diseases cannot be told from the node types: give them as a list "
                             f"({option('diseases')} FILE)")
        drug_set = set(drugs.tolist())
        diseases = np.array(sorted(int(e) for e in ends if int(e) not in drug_set), dtype=np.int64)
        how["diseases"] = "the entities at the other end of the treats relation(s)"
    else:
        diseases = np.array([i for i, label in enumerate(labels) if node_type(label) in disease_types],
                            dtype=np.int64)
        how["diseases"] = f"every entity of node type {', '.join(disease_types)}"
    if drugs.size == 0 or diseases.size == 0:
        raise InputError("the drug × disease matrix is empty (no drug or no disease)", dataset.path)
    row_of = np.full(dataset.num_entities, -1, np.int64)
    col_of = np.full(dataset.num_entities, -1, np.int64)
    row_of[drugs], col_of[diseases] = np.arange(drugs.size), np.arange(diseases.size)

    def pairs(triples: torch.Tensor) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes of the pairs, forward (drug at the head) flags, the rows outside the matrix)."""
        heads, tails = triples[:, 0].numpy(), triples[:, 2].numpy()
        forward = (row_of[heads] >= 0) & (col_of[tails] >= 0)
        backward = ~forward & (row_of[tails] >= 0) & (col_of[heads] >= 0)
        rows = np.where(forward, row_of[heads], row_of[tails])
        cols = np.where(forward, col_of[tails], col_of[heads])
        inside = forward | backward
        return rows[inside] * diseases.size + cols[inside], forward[inside], triples.numpy()[~inside]

    split_pairs, split_negatives, outside = {}, {}, {}
    forward_count = backward_count = 0
    scored = treat_ids[0]
    for split in SPLIT_NAMES:
        codes, _, out = pairs(treats[split])
        split_pairs[split], outside[split] = np.unique(codes), out
        scored_triples = treats[split][treats[split][:, 1] == scored]
        _, forward, _ = pairs(scored_triples)
        forward_count += int(forward.sum())
        backward_count += int((~forward).sum())
        split_negatives[split] = np.unique(pairs(negatives[split])[0])
    rows_are_heads = forward_count >= backward_count
    spec = MatrixSpec(torch.from_numpy(drugs), torch.from_numpy(diseases), scored, rows_are_heads)
    description = {"relations": list(options.relations), "score_relation": dataset.relation_labels[scored],
                   "scored_as": "(drug, relation, disease)" if rows_are_heads else "(disease, relation, drug)",
                   "pairs_stored_drug_first": forward_count, "pairs_stored_disease_first": backward_count,
                   "negative_relations": list(options.negative_relations), "drugs": int(drugs.size),
                   "diseases": int(diseases.size), "pairs": int(drugs.size) * int(diseases.size),
                   "drugs_from": how["drugs"], "diseases_from": how["diseases"]}
    return Matrix(drugs, diseases, spec, split_pairs, split_negatives, description, outside)


# -- a ground-truth file -------------------------------------------------------------------------

POSITIVE_LABELS = ("treat", "treats", "1", "true", "positive", "yes", "indication")
NEGATIVE_LABELS = ("not-treat", "not_treat", "not treat", "0", "false", "negative", "no", "failure")


@dataclass
class GroundTruth:
    """A ground-truth file mapped onto the matrix: positive and negative pair codes, the rows whose
    drug or disease the dataset lacks (or the matrix leaves out) and the pairs also in training."""

    path: str
    sha256: str
    positives: np.ndarray
    negatives: np.ndarray
    unknown: List[dict]  # {"line", "drug", "disease", "why"}
    leaked: List[dict]  # positives the training or validation pairs hold: {"line", "drug", "disease"}
    conflicting: int  # negatives that are known positives
    rows: int


def read_ground_truth(path, dataset, matrix: Matrix) -> GroundTruth:
    """The rows of a CSV or TSV ground-truth file (a header naming ``drug``, ``disease``, ``label``;
    optional ``date`` and ``source``): labels treat/not-treat (or 1/0, true/false, positive/negative)
    mapped through the dataset's entity labels. Unknown entities are counted and listed, never
    dropped silently; a bad label is an error naming the file and line."""
    from openbench._io.inputs import read_table, read_text

    path = Path(path)
    text = read_text(path)
    first = next((line for line in text.splitlines() if line.strip()), "")
    separator = "\t" if first.count("\t") >= first.count(",") and "\t" in first else ","
    header = [name.strip().lower() for name in first.split(separator)]
    missing = [name for name in ("drug", "disease", "label") if name not in header]
    if missing:
        raise InputError(f"the header names {', '.join(header) or 'nothing'}; expected the columns drug, disease, "
                         "label (and optionally date, source)", path, 1)
    selection = {name: name for name in first.split(separator) if name.strip().lower() in ("drug", "disease", "label")}
    frame = read_table(path, {original: original.strip().lower() for original in selection}, separator=separator,
                       header=True, comment_prefixes=(), quote_char='"' if separator == "," else None,
                       required=("drug", "disease", "label"))
    if frame.height == 0:
        raise InputError("no rows below the header; expected one (drug, disease, label) row per pair", path)
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    row_of = {int(entity): row for row, entity in enumerate(matrix.drugs.tolist())}
    col_of = {int(entity): col for col, entity in enumerate(matrix.diseases.tolist())}
    known = set(np.union1d(matrix.pairs["train"], matrix.pairs["valid"]).tolist())
    positives, negatives, unknown, leaked = [], [], [], []
    conflicting = 0
    lines = _data_lines(text)
    for position, (drug, disease, label) in enumerate(frame.select("drug", "disease", "label").iter_rows()):
        line = lines[position] if position < len(lines) else None
        value = str(label).strip().lower()
        if value not in POSITIVE_LABELS and value not in NEGATIVE_LABELS:
            raise InputError(f"label {label!r}; expected treat or not-treat (1/0, true/false, positive/negative)",
                             path, line)
        drug_id, disease_id = index.get(drug), index.get(disease)
        why = None
        if drug_id is None or disease_id is None:
            why = "not an entity of the dataset: " + ", ".join(
                repr(name) for name, found in ((drug, drug_id), (disease, disease_id)) if found is None)
        elif drug_id not in row_of or disease_id not in col_of:
            why = "outside the matrix (not among its drugs or diseases)"
        if why is not None:
            unknown.append({"line": line, "drug": drug, "disease": disease, "why": why})
            continue
        assert drug_id is not None and disease_id is not None
        code = row_of[drug_id] * matrix.width + col_of[disease_id]
        if value in POSITIVE_LABELS:
            if code in known:
                leaked.append({"line": line, "drug": drug, "disease": disease})
                continue
            positives.append(code)
        else:
            if code in known:
                conflicting += 1
                continue
            negatives.append(code)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    positive_codes = np.unique(np.array(positives, dtype=np.int64))
    negative_codes = np.setdiff1d(np.unique(np.array(negatives, dtype=np.int64)), positive_codes)
    if unknown:
        logger.warning("%s: %d row(s) name an entity the matrix lacks (first: line %s, %s)", path, len(unknown),
                       unknown[0]["line"], unknown[0]["why"])
    if leaked:
        logger.warning("%s: %d positive pair(s) are training or validation pairs of the dataset (leakage), left out",
                       path, len(leaked))
    return GroundTruth(str(path), digest, positive_codes, negative_codes, unknown, leaked, conflicting, frame.height)


def _data_lines(text: str) -> List[int]:
    """The 1-based line numbers of a file's non-empty lines after its header."""
    numbers = [number for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    return numbers[1:]


# -- counts of a view ----------------------------------------------------------------------------

@dataclass
class _Special:
    """The special pairs counted against the matrix: unique codes, their flags, and what the
    counting found of them."""

    codes: np.ndarray
    greater: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    equal: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def index(self, codes: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.codes, codes)


def _view_counts(special: _Special, ranked: np.ndarray, excluded: np.ndarray, matrix_size: int):
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


def _full_matrix_block(special: _Special, ranked: np.ndarray, excluded: np.ndarray, matrix: Matrix,
                       recall_at: Sequence[int]) -> Optional[dict]:
    if ranked.size == 0:
        return None
    greater, equal, candidates = _view_counts(special, ranked, excluded, matrix.size)
    block = recall_block(rank_counts(greater, equal, candidates), recall_at)
    negatives = candidates - np.isin(ranked, excluded).astype(np.int64)
    return {"pairs": int(ranked.size), "candidates": int(matrix.size - excluded.size),
            "auroc": auroc_from_counts(greater, equal, negatives), "ranks": block,
            "_counts": (greater, equal, candidates)}


# -- the record ------------------------------------------------------------------------------------

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
    negatives_all = np.unique(np.concatenate([matrix.negatives[split] for split in SPLIT_NAMES]))
    positives_all = np.union1d(known, test)
    negatives = np.setdiff1d(negatives_all, positives_all)
    truth = read_ground_truth(options.ground_truth, dataset, matrix) if options.ground_truth else None
    truth_positives = truth.positives if truth else np.zeros(0, np.int64)
    truth_negatives = np.setdiff1d(truth.negatives, np.union1d(positives_all, truth_positives)) if truth else \
        np.zeros(0, np.int64)
    thresholds = np.unique(np.concatenate([test, negatives, truth_positives, truth_negatives]))
    special = _Special(np.unique(np.concatenate([known, thresholds])))
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

    views = {"test": _view(dataset, scorer, options, matrix, special, test, negatives, positives_all, recall_at,
                           hits_at, "test")}
    if truth is not None:
        excluded = np.union1d(positives_all, truth_positives)
        views["ground_truth"] = _view(dataset, scorer, options, matrix, special, truth_positives, truth_negatives,
                                      excluded, recall_at, hits_at, "ground truth")
        views["ground_truth"]["file"] = {
            "path": truth.path, "sha256": truth.sha256, "rows": truth.rows,
            "unknown_rows": len(truth.unknown), "unknown": truth.unknown[:NAMED],
            "positive_pairs_in_training": len(truth.leaked), "in_training": truth.leaked[:NAMED],
            "negatives_that_are_known_positives": truth.conflicting}
    classification = _classification(matrix, special, known, test, negatives)
    if classification is not None:
        views["test"]["classification"] = classification
    flyers = _frequent_flyers(counted, matrix, dataset, recall_at)
    top_pairs = _top_pairs(counted, matrix, dataset)
    description = dict(matrix.description)
    description.update({"known_positive_pairs": int(known.size), "test_pairs": int(test.size),
                        "test_pairs_known_from_training": int(np.intersect1d(matrix.pairs["test"], known).size),
                        "known_negative_pairs": int(negatives.size),
                        "negative_pairs_also_positive": int(np.intersect1d(negatives_all, positives_all).size),
                        "triples_outside_matrix": {split: int(matrix.outside[split].shape[0])
                                                   for split in SPLIT_NAMES},
                        "candidates": int(matrix.size - positives_all.size)})
    description.update(_diseases_without_listed_drugs(dataset, matrix))
    result: Dict[str, object] = {"matrix": description, "views": {name: _public(view) for name, view in views.items()},
                                 "frequent_flyers": flyers, "top_pairs": top_pairs}
    if options.bootstrap:
        result["confidence"] = _confidence(views, options, recall_at, hits_at)
    if options.protocol == "txgnn":
        from openbench.evaluation.tasks.txgnn import txgnn_block

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
    return {"written_by": "openbench", "schema_version": 1, "task": "repurposing", "repurposing": result,
            "protocol": protocol, "dataset": setup_description, "model": scorer.description(),
            "seed": options.seed, "device": device, "version": __version__, "timing": timing, "warnings": warnings}


def _progress_bar(enabled: bool, total: int):
    if not enabled:
        return None
    from openbench.progress import progress

    return progress(total=total, desc="repurposing matrix", unit="drugs")


def _public(view: dict) -> dict:
    """A view without its private arrays (kept for the intervals)."""
    out = {}
    for key, value in view.items():
        if key.startswith("_"):
            continue
        out[key] = {k: v for k, v in value.items() if not k.startswith("_")} if isinstance(value, dict) else value
    return out


def _view(dataset, scorer, options: RepurposingOptions, matrix: Matrix, special: _Special, positives: np.ndarray,
          negatives: np.ndarray, excluded: np.ndarray, recall_at: Sequence[int], hits_at: Sequence[int],
          name: str) -> dict:
    """One view: the full-matrix block of ``positives`` (and of ``negatives``), and the
    disease-specific block."""
    view: Dict[str, object] = {"positives": int(positives.size), "negatives": int(negatives.size)}
    full = _full_matrix_block(special, positives, excluded, matrix, recall_at)
    view["full_matrix"] = full
    negative_block = _full_matrix_block(special, negatives, excluded, matrix, recall_at)
    view["known_negatives"] = None if negative_block is None else {
        "pairs": negative_block["pairs"], "ranks": {rank_type: {key: value for key, value in block.items()
                                                                if key.startswith("recall@")}
                                                    for rank_type, block in (negative_block["ranks"] or {}).items()}}
    view["disease_specific"] = _disease_view(dataset, scorer, options, matrix, special, positives, excluded, hits_at)
    return view


def _disease_view(dataset, scorer, options: RepurposingOptions, matrix: Matrix, special: _Special,
                  positives: np.ndarray, excluded: np.ndarray, hits_at: Sequence[int]) -> Optional[dict]:
    """Each positive among all drugs of its disease (the other known positives of the disease
    removed), counted per disease row (:func:`~openbench.evaluation.counting.matrix.count_rows`)."""
    if positives.size == 0:
        return None
    rows, cols = matrix.rows_cols(positives)
    diseases = np.unique(cols)
    local = np.searchsorted(diseases, cols)
    transposed = MatrixSpec(torch.from_numpy(matrix.diseases[diseases]), torch.from_numpy(matrix.drugs),
                            matrix.spec.relation, not matrix.spec.rows_are_heads)
    greater, equal = count_rows(scorer, transposed, local, rows, options.ranks, options.lower_is_better,
                                options.shard)  # type: ignore[arg-type]
    groups = special.groups[special.index(positives)]
    # the removed pairs of each positive's disease: those above its group, and those tied with it,
    # by binary search over the removed pairs sorted by (disease, group)
    removed_cols, removed_groups = excluded % matrix.width, special.groups[special.index(excluded)]
    stride = int(special.groups.max(initial=0)) + 2  # (col, group) as one sortable code
    removed_codes = np.sort(removed_cols * stride + removed_groups)
    first = np.searchsorted(removed_codes, cols * stride, "left")
    last = np.searchsorted(removed_codes, cols * stride + stride - 1, "right")
    below_or_tied = np.searchsorted(removed_codes, cols * stride + groups, "right")
    above = last - below_or_tied
    level = below_or_tied - np.searchsorted(removed_codes, cols * stride + groups, "left")
    is_excluded = np.isin(positives, excluded)
    greater = greater - above
    equal = equal - level - np.where(is_excluded, 0, 1)
    candidates = matrix.drugs.size - (last - first) + is_excluded.astype(np.int64)
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
                len(undefined),
            "_per_disease": (values, aurocs, auprcs)}


def _classification(matrix: Matrix, special: _Special, known: np.ndarray, test: np.ndarray,
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


def _confidence(views: Dict[str, dict], options: RepurposingOptions, recall_at: Sequence[int],
                hits_at: Sequence[int]) -> dict:
    """Bootstrap intervals (95 %, percentile): full-matrix Recall@n and AUROC over the ranked
    pairs, disease-specific macro MRR, Hit@k, AUROC and AUPRC over the diseases; seeded."""
    resamples, seed = int(options.bootstrap or 0), options.seed or 0
    out: Dict[str, object] = {"resamples": resamples, "seed": options.seed, "level": 0.95}
    for name, view in views.items():
        intervals: Dict[str, object] = {}
        full = view.get("full_matrix")
        if full:
            greater, equal, candidates = full["_counts"]
            negatives = candidates - 1

            def recall(indexes, n):
                rank = greater[indexes] + (equal[indexes] + 2) / 2.0
                return float((rank <= n).mean())

            for n in recall_at:
                intervals[f"recall@{n}"] = bootstrap_interval(lambda idx, n=n: recall(idx, n), greater.size, resamples,
                                                              seed)
            intervals["auroc"] = bootstrap_interval(
                lambda idx: auroc_from_counts(greater[idx], equal[idx], negatives[idx]), greater.size, resamples, seed)
        disease = view.get("disease_specific")
        if disease:
            values, aurocs, auprcs = disease["_per_disease"]  # each disease's own means and AUROC, AUPRC
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


def summary_lines(record: dict) -> List[str]:
    """The table ``openbench evaluate --task repurposing`` prints: the protocol line, then per view
    the full-matrix and disease-specific numbers (realistic ranks), TxGNN's beside them."""
    from openbench._io.outputs import visible

    result, protocol = record["repurposing"], record["protocol"]
    matrix = result["matrix"]

    def show(value) -> str:
        return "-" if value is None else f"{value:.4f}"

    lines = [f"model {visible(record['model'].get('name'))} on {visible(record['dataset'].get('path'))}: repurposing, "
             f"{', '.join(map(visible, protocol['relations']))} (scored as {matrix['scored_as']}); matrix "
             f"{matrix['drugs']:,} drugs × {matrix['diseases']:,} diseases = {matrix['pairs']:,} pairs; filtered (the "
             f"{matrix['known_positive_pairs']:,} training and validation pairs removed); realistic rank (ties: the "
             f"mean of the tied places); ranks {protocol['ranks']}; Recall@n for n = "
             f"{', '.join(map(str, protocol['recall_at']))}; Hit@k for k = {', '.join(map(str, protocol['hits_at']))}"]
    for name, view in result["views"].items():
        full = view.get("full_matrix")
        lines.append(f"{name} view: {view['positives']} positive pair(s), {view['negatives']} known negative pair(s)")
        if full:
            realistic = full["ranks"]["realistic"]
            recalls = "  ".join(f"Recall@{n} {show(realistic.get(f'recall@{n}'))}" for n in protocol["recall_at"])
            lines.append(f"  full matrix ({full['candidates']:,} candidate pairs): AUROC {show(full['auroc'])}  "
                         f"MRR {show(realistic.get('mrr'))}  {recalls}")
        negatives = view.get("known_negatives")
        if negatives:
            realistic = negatives["ranks"]["realistic"]
            lines.append("  known negatives (to be low): " + "  ".join(
                f"Recall@{n} {show(realistic.get(f'recall@{n}'))}" for n in protocol["recall_at"]))
        disease = view.get("disease_specific")
        if disease:
            micro, macro = disease["micro"]["realistic"], disease["macro"]["realistic"]
            hits = "  ".join(f"Hit@{k} {show(macro.get(f'hits@{k}'))}" for k in protocol["hits_at"])
            lines.append(f"  per disease ({disease['diseases']} diseases, macro): MRR {show(macro.get('mrr'))}  {hits}  "
                         f"AUROC {show(disease['auroc'])}  AUPRC {show(disease['auprc'])}  (micro MRR "
                         f"{show(micro.get('mrr'))})")
        classification = view.get("classification")
        if classification:
            lines.append(f"  positives vs known negatives: AUROC {show(classification['auroc'])}  AUPRC "
                         f"{show(classification['auprc'])}  accuracy {show(classification['accuracy'])}  F1 "
                         f"{show(classification['f1'])}")
    txgnn = result.get("txgnn")
    if txgnn:
        fine, centric = txgnn["fine_tuning_test"], txgnn["disease_centric"]
        lines.append(f"TxGNN's protocol (unfiltered, sampled negatives; its code's formulas): micro AUROC "
                     f"{show(fine['micro_auroc'])}  micro AUPRC {show(fine['micro_auprc'])}  macro AUROC "
                     f"{show(fine['macro_auroc'])}  macro AUPRC {show(fine['macro_auprc'])}; disease-centric AUROC "
                     f"{show(centric['auroc'])}  AUPRC {show(centric['auprc'])}")
    entropy = result["frequent_flyers"]["entropy"]
    if entropy:
        lines.append("frequent flyers: " + "  ".join(
            f"Drug-Entropy@{n} {show(values['drug_entropy'])} Disease-Entropy@{n} {show(values['disease_entropy'])}"
            for n, values in entropy.items()))
    for warning in record.get("warnings", []):
        lines.append(f"warning: {warning}")
    return lines
