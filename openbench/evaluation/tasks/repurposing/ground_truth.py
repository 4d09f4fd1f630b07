"""A ground-truth file (a clinical-trials or off-label set) mapped onto the matrix
(:func:`read_ground_truth`): positive and negative pairs, the rows whose drug or disease the dataset
lacks, the pairs the training already holds."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List

import numpy as np

from openbench.errors import InputError
from openbench.evaluation.tasks.repurposing.matrix import Matrix

__all__ = ["POSITIVE_LABELS", "NEGATIVE_LABELS", "GroundTruth", "read_ground_truth"]

logger = logging.getLogger(__name__)

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
