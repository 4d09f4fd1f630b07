"""A ground-truth file (a clinical-trials or off-label set) mapped onto the matrix
(:func:`read_ground_truth`): positive and negative pairs, the rows whose drug or disease the dataset
lacks, the pairs the training already holds, and the rows dated on or before the graph's cut-off
apart from the later ones.

**Labels.** A row says what it is by one of three spellings: a ``label`` column (treat / not-treat,
1/0, true/false, positive/negative); an ``outcome`` column holding one of Every Cure's four trial
outcomes (:data:`OUTCOMES`); or Every Cure's own clinical-trial layout, one 0/1 column per outcome
(``significantly_better``, ``non_significantly_better``, ``non_significantly_worse``,
``significantly_worse``). Which outcomes are positives and which negatives is the user's choice;
the default is Every Cure's (its clinical-trials transformer sets ``y`` 1 for a significantly
better outcome, 0 for a significantly worse one, and leaves the non-significant ones unlabelled):
positive ``significantly_better``, negative ``significantly_worse``, the rest left out and
counted. A row of the 0/1 layout that flags several outcomes counts as the best it flags, as Every
Cure's ``clean_clinical_trial_data`` keeps it (its comment says the worst; its code keeps the
first flagged of best-to-worst); one that flags none is left out and counted. A pair listed as both
positive and negative is positive.

**Dates against the cut-off.** An optional ``date`` column (``YYYY-MM-DD``, ``YYYY-MM`` or
``YYYY``, one form per file; :mod:`openbench._io.dates`) is read against the graph's cut-off (a
split by dates states it in its ``split_info.json``; ``--cutoff`` gives one for any other graph):
Every Cure's clinical-trials set "is valid for a time split only if the graph's cut-off precedes
the trials". Rows dated after the cut-off are the ground truth proper; rows dated on or before it
(a month or year is its first day: a period that begins by the cut-off is not after it) may sit in
the graph's own sources and form their own part, as do undated rows where a cut-off is known;
no part is mixed with another (:class:`GroundTruth`'s ``parts``).
"""
from __future__ import annotations

import datetime
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from openbench.errors import InputError, UsageError, option
from openbench.evaluation.tasks.repurposing.matrix import Matrix
from openbench.evaluation.tasks.repurposing.options import DEFAULT_NEGATIVE_OUTCOMES, DEFAULT_POSITIVE_OUTCOMES, OUTCOMES

__all__ = ["POSITIVE_LABELS", "NEGATIVE_LABELS", "OUTCOMES", "DEFAULT_POSITIVE_OUTCOMES", "DEFAULT_NEGATIVE_OUTCOMES",
           "PART_VIEWS", "TruthPart", "GroundTruth", "read_ground_truth", "outcome_of"]

logger = logging.getLogger(__name__)

POSITIVE_LABELS = ("treat", "treats", "1", "true", "positive", "yes", "indication")
NEGATIVE_LABELS = ("not-treat", "not_treat", "not treat", "0", "false", "negative", "no", "failure")
# the record's view of each part of the file: after the cut-off (or all rows, no cut-off known),
# on or before it, undated where a cut-off is known
PART_VIEWS = {"after": "ground_truth", "before": "ground_truth_before_cutoff", "undated": "ground_truth_undated"}


@dataclass
class TruthPart:
    """The pairs of one part of the file: positive and negative pair codes, sorted and unique."""

    positives: np.ndarray
    negatives: np.ndarray
    rows: int


@dataclass
class GroundTruth:
    """A ground-truth file mapped onto the matrix: its parts by date (:data:`PART_VIEWS`; only
    ``after`` without a cut-off), the rows whose drug or disease the dataset lacks (or the matrix
    leaves out), the pairs also in training, and how its labels were read."""

    path: str
    sha256: str
    parts: Dict[str, TruthPart]
    unknown: List[dict]  # {"line", "drug", "disease", "why"}
    leaked: List[dict]  # positives the training or validation pairs hold: {"line", "drug", "disease"}
    conflicting: int  # negatives that are known positives
    rows: int
    labels: dict = field(default_factory=dict)  # how rows became positives and negatives (the record's "labels")
    dates: Optional[dict] = None  # {"cutoff", "from", "earliest", "latest", ...}; None without a date column

    @property
    def positives(self) -> np.ndarray:
        """Every part's positive codes."""
        return np.unique(np.concatenate([part.positives for part in self.parts.values()] + [np.zeros(0, np.int64)]))


def outcome_of(text: str) -> Optional[str]:
    """The outcome an ``outcome`` cell names (``"Significantly Better?"``, ``non-significantly
    worse``: case, spaces, hyphens and a trailing ``?`` do not matter), or None."""
    name = str(text).strip().rstrip("?").strip().lower().replace("-", "_").replace(" ", "_")
    return name if name in OUTCOMES else None


def _outcome_sets(positive: Sequence[str], negative: Sequence[str]) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    chosen = []
    for flag, given in (("positive_outcomes", positive), ("negative_outcomes", negative)):
        names = []
        for text in given:
            name = outcome_of(text)
            if name is None:
                raise UsageError(f"{option(flag, text)}: expected outcomes among {', '.join(OUTCOMES)}")
            names.append(name)
        chosen.append(tuple(dict.fromkeys(names)))
    both = sorted(set(chosen[0]) & set(chosen[1]))
    if both:
        raise UsageError(f"{', '.join(both)} is both a positive and a negative outcome")
    return chosen[0], chosen[1]


def _header(text: str, path: Path) -> Tuple[str, List[str], List[str]]:
    """(separator, header names as written, lower-cased)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    separator = "\t" if first.count("\t") >= first.count(",") and "\t" in first else ","
    written = first.split(separator)
    return separator, written, [name.strip().lower() for name in written]


def _label_spelling(header: List[str], path: Path) -> str:
    """``"label"``, ``"outcome"`` or ``"flags"`` (Every Cure's 0/1 columns): the one way the file
    labels its rows."""
    missing = [name for name in ("drug", "disease") if name not in header]
    ways = [way for way, present in (("label", "label" in header), ("outcome", "outcome" in header),
                                     ("flags", all(name in header for name in OUTCOMES))) if present]
    if missing or len(ways) != 1:
        found = "both " + " and ".join(ways) if len(ways) > 1 else None
        raise InputError(f"the header names {', '.join(header) or 'nothing'}"
                         + (f" ({found})" if found else "")
                         + "; expected the columns drug, disease and one of label (treat / not-treat), outcome (one "
                           "of " + ", ".join(OUTCOMES) + ") or the four 0/1 outcome columns of Every Cure's "
                           "clinical-trial layout; optionally date, source", path, 1)
    return ways[0]


def _row_outcomes(frame: pl.DataFrame, way: str, path: Path, lines: List[int]) -> List[Optional[str]]:
    """Each row's outcome (``"positive"``/``"negative"`` for a label, an outcome's name, or None:
    a 0/1 row flagging none); a bad cell is an error naming the line."""
    found: List[Optional[str]] = []
    if way == "label":
        for position, label in enumerate(frame.get_column("label").to_list()):
            value = str(label).strip().lower()
            if value not in POSITIVE_LABELS and value not in NEGATIVE_LABELS:
                raise InputError(f"label {label!r}; expected treat or not-treat (1/0, true/false, positive/negative)",
                                 path, lines[position] if position < len(lines) else None)
            found.append("positive" if value in POSITIVE_LABELS else "negative")
        return found
    if way == "outcome":
        for position, text in enumerate(frame.get_column("outcome").to_list()):
            name = outcome_of(text)
            if name is None:
                raise InputError(f"outcome {text!r}; expected one of {', '.join(OUTCOMES)}", path,
                                 lines[position] if position < len(lines) else None)
            found.append(name)
        return found
    flags = {name: frame.get_column(name).to_list() for name in OUTCOMES}
    for position in range(frame.height):
        row_outcome = None
        for name in OUTCOMES:  # best first: the first flagged is the row's outcome (Every Cure's rule)
            cell = str(flags[name][position] or "").strip()
            if cell not in ("", "0", "1", "0.0", "1.0"):
                raise InputError(f"{name} {cell!r}; expected 0 or 1", path,
                                 lines[position] if position < len(lines) else None)
            if row_outcome is None and cell in ("1", "1.0"):
                row_outcome = name
        found.append(row_outcome)
    return found


def _date_parts(frame: pl.DataFrame, cutoff: Optional[datetime.date], path: Path, first_line: int
                ) -> Tuple[List[str], Optional[dict]]:
    """Each row's part (``after``, ``before``, ``undated``) and the file's dates block."""
    if "date" not in frame.columns:
        return ["after"] * frame.height, None
    from openbench._io.dates import parse_dates

    dates, form = parse_dates(frame.get_column("date"), path, first_line)
    dated = dates.drop_nulls()
    block = {"cutoff": cutoff.isoformat() if cutoff else None, "form": form,
             "earliest": dated.min().isoformat() if len(dated) else None,  # type: ignore[union-attr]
             "latest": dated.max().isoformat() if len(dated) else None,  # type: ignore[union-attr]
             "undated_rows": int(dates.null_count())}
    if cutoff is None:
        return ["after"] * frame.height, block
    parts = ["undated" if value is None else "after" if value > cutoff else "before" for value in dates.to_list()]
    return parts, block


def read_ground_truth(path, dataset, matrix: Matrix, *, cutoff: Optional[datetime.date] = None,
                      cutoff_from: Optional[str] = None,
                      positive_outcomes: Sequence[str] = DEFAULT_POSITIVE_OUTCOMES,
                      negative_outcomes: Sequence[str] = DEFAULT_NEGATIVE_OUTCOMES) -> GroundTruth:
    """The rows of a CSV or TSV ground-truth file (see the module docstring) mapped through the
    dataset's entity labels onto ``matrix``, in parts by ``cutoff`` (``cutoff_from`` says where it
    came from). Unknown entities are counted and listed, never dropped silently; a bad label,
    outcome or date is an error naming the file and line."""
    from openbench._io.inputs import read_table, read_text

    path = Path(path)
    positive_set, negative_set = _outcome_sets(positive_outcomes, negative_outcomes)
    text = read_text(path)
    separator, written, header = _header(text, path)
    way = _label_spelling(header, path)
    wanted = {"drug", "disease", "date", *({"label"} if way == "label" else {"outcome"} if way == "outcome"
                                           else set(OUTCOMES))}
    selection = {name: name.strip().lower() for name in written if name.strip().lower() in wanted}
    frame = read_table(path, selection, separator=separator, header=True, comment_prefixes=(),
                       quote_char='"' if separator == "," else None,
                       required=("drug", "disease") + (("label",) if way == "label" else ("outcome",)
                                                       if way == "outcome" else ()))
    if frame.height == 0:
        raise InputError("no rows below the header; expected one (drug, disease, label) row per pair", path)
    lines = _data_lines(text)
    outcomes = _row_outcomes(frame, way, path, lines)
    parts_of_rows, dates = _date_parts(frame, cutoff, path, lines[0] if lines else 2)
    if dates is not None:
        dates["cutoff_from"] = cutoff_from if cutoff else None
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    row_of = {int(entity): row for row, entity in enumerate(matrix.drugs.tolist())}
    col_of = {int(entity): col for col, entity in enumerate(matrix.diseases.tolist())}
    known = set(np.union1d(matrix.pairs["train"], matrix.pairs["valid"]).tolist())
    codes: Dict[str, Dict[str, list]] = {}
    part_rows: Dict[str, int] = {}
    unknown, leaked = [], []
    conflicting = 0
    left_out: Dict[str, int] = {}
    for position, (drug, disease) in enumerate(frame.select("drug", "disease").iter_rows()):
        line = lines[position] if position < len(lines) else None
        part = parts_of_rows[position]
        part_rows[part] = part_rows.get(part, 0) + 1
        outcome = outcomes[position]
        kind = outcome if way == "label" else ("positive" if outcome in positive_set else
                                              "negative" if outcome in negative_set else None)
        if kind is None:
            left_out[outcome or "no outcome flagged"] = left_out.get(outcome or "no outcome flagged", 0) + 1
            continue
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
        if code in known:
            if kind == "positive":
                leaked.append({"line": line, "drug": drug, "disease": disease})
            else:
                conflicting += 1
            continue
        codes.setdefault(part, {"positive": [], "negative": []})[kind].append(code)
    parts = {}
    for part in PART_VIEWS:
        if part not in part_rows and not (part == "after" and cutoff is None):
            continue
        found = codes.get(part, {"positive": [], "negative": []})
        positive_codes = np.unique(np.array(found["positive"], dtype=np.int64))
        negative_codes = np.setdiff1d(np.unique(np.array(found["negative"], dtype=np.int64)), positive_codes)
        parts[part] = TruthPart(positive_codes, negative_codes, part_rows.get(part, 0))
    labels = {"from": way, **({"positive_outcomes": list(positive_set), "negative_outcomes": list(negative_set),
                               "rows_left_out_by_outcome": dict(sorted(left_out.items()))} if way != "label" else {})}
    _log(path, unknown, leaked, parts, cutoff)
    return GroundTruth(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), parts, unknown, leaked, conflicting,
                       frame.height, labels, dates)


def _log(path: Path, unknown: List[dict], leaked: List[dict], parts: Dict[str, TruthPart],
         cutoff: Optional[datetime.date]) -> None:
    if unknown:
        logger.warning("%s: %d row(s) name an entity the matrix lacks (first: line %s, %s)", path, len(unknown),
                       unknown[0]["line"], unknown[0]["why"])
    if leaked:
        logger.warning("%s: %d positive pair(s) are training or validation pairs of the dataset (leakage), left out",
                       path, len(leaked))
    if cutoff is not None and "before" in parts:
        logger.warning("%s: %d row(s) are dated on or before the cut-off %s (they may sit in the graph's sources): "
                       "scored apart, as the view %s", path, parts["before"].rows, cutoff, PART_VIEWS["before"])


def _data_lines(text: str) -> List[int]:
    """The 1-based line numbers of a file's non-empty lines after its header."""
    numbers = [number for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    return numbers[1:]
