"""Meta-Eval: precision and recall of extracted paper metadata (titles, authors, venues, …).

A port of allenai/meta-eval (spec: ../shared/specs/text_evaluators.md part A). Every
``<field>.tsv``/``.txt`` file of the prediction folder is one field, scored against the truth file
of the same name; lines are ``<paper-id> TAB <value> TAB <value> …``.

Per paper, with T the truth values and P the predicted ones:

========== ============================== ==============================================
semantics  precision                      recall
========== ============================== ==============================================
set        |set(P) ∩ set(T)| / |set(P)|   |set(P) ∩ set(T)| / |set(T)|  (the README's)
multiset   Σ min(count_P, count_T) / |P|  Σ min(count_P, count_T) / |T| (never above 1)
compat     #{p in P: p in set(T)} / |P|   the same count / |T| (what the Scala code does:
                                          truth [a], prediction [a, a] gives recall 2.0)
========== ============================== ==============================================

undefined when the denominator is 0. A field's precision (recall) is the mean over the papers
where it is defined. Papers only in the truth count recall 0, papers only in the predictions
precision 0; a truth field without a prediction file scores recall 0 (``compat``: left out, as the
original). Default: ``set``.

Lines: UTF-8, ``\\r\\n`` tolerated, blank lines skipped, trailing empty fields dropped (as Java's
``split``); interior empty values count only in ``compat`` mode. A paper id repeated in one file
is warned about: ``compat`` scores each prediction line separately and keeps the last truth line,
as the original; ``set``/``multiset`` merge the repeated lines' values.
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from openbench._io.outputs import strict_json
from openbench._io import read_text, replace_folder
from openbench.errors import InputError

__all__ = ["SEMANTICS", "FIELD_SUFFIXES", "read_field_file", "paper_scores", "FieldResult", "score_field",
           "field_files", "evaluate", "pr_table", "labels_table", "summary", "write_outputs", "terminal_table"]

logger = logging.getLogger(__name__)

SEMANTICS = ("set", "multiset", "compat")
FIELD_SUFFIXES = (".tsv", ".txt")
Paper = Tuple[str, List[str]]  # (paper id, values)


def read_field_file(path: Path, keep_empty_values: bool) -> List[Paper]:
    """The (paper id, values) lines of a field file, in file order."""
    text = read_text(path)  # strict UTF-8; a byte-order mark is not part of the first paper id
    papers = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        while fields and fields[-1] == "":  # Java's split drops trailing empty fields
            fields.pop()
        if not fields or not fields[0].strip():
            raise InputError("a line without a paper id; expected <paper-id><TAB><value>…", path, number)
        values = fields[1:] if keep_empty_values else [value for value in fields[1:] if value != ""]
        papers.append((fields[0], values))
    return papers


def _merge(papers: List[Paper], path: Path, keep: str) -> Dict[str, List[str]]:
    """Paper id -> values; a repeated id keeps the last line (``keep="last"``) or concatenates."""
    merged: Dict[str, List[str]] = {}
    repeated = set()
    for paper_id, values in papers:
        if paper_id in merged:
            repeated.add(paper_id)
            merged[paper_id] = values if keep == "last" else merged[paper_id] + values
        else:
            merged[paper_id] = list(values)
    if repeated:
        logger.warning("%s: %d paper id(s) on several lines (first: %s); %s", path, len(repeated),
                       sorted(repeated)[0], "the last line counts" if keep == "last" else "their values are merged")
    return merged


def paper_scores(truth: List[str], predicted: List[str], semantics: str) -> Tuple[Optional[float], Optional[float]]:
    """(precision, recall) of one paper; None where undefined."""
    if semantics == "set":
        t, p = set(truth), set(predicted)
        hits = len(t & p)
        return (hits / len(p) if p else None), (hits / len(t) if t else None)
    if semantics == "multiset":
        hits = sum((Counter(truth) & Counter(predicted)).values())
    elif semantics == "compat":
        truth_set = set(truth)
        hits = sum(1 for value in predicted if value in truth_set)
    else:
        raise ValueError(f"unknown semantics {semantics!r}; valid: {', '.join(SEMANTICS)}")
    return (hits / len(predicted) if predicted else None), (hits / len(truth) if truth else None)


@dataclass
class FieldResult:
    """One field's scores and the examples (paper id, truth values, predicted values) behind them."""

    name: str
    precision: Optional[float]
    recall: Optional[float]
    examples: List[Tuple[str, List[str], List[str]]] = field(repr=False)
    counts: Dict[str, int] = field(default_factory=dict)


def _mean(values: List[float]) -> Optional[float]:
    return math.fsum(values) / len(values) if values else None


def score_field(name: str, predictions: Path, truth: Path, semantics: str = "set") -> FieldResult:
    """Score one prediction file against its truth file."""
    compat = semantics == "compat"
    truth_papers = _merge(read_field_file(truth, compat), truth, "last" if compat else "concatenate")
    predicted_lines = read_field_file(predictions, compat)
    if compat:
        _merge(predicted_lines, predictions, "last")  # only to warn: each line is its own example
        predicted = predicted_lines
    else:
        predicted = list(_merge(predicted_lines, predictions, "concatenate").items())
    examples = [(paper_id, truth_papers.get(paper_id, []), values) for paper_id, values in predicted]
    seen = {paper_id for paper_id, _ in predicted}
    examples += [(paper_id, values, []) for paper_id, values in sorted(truth_papers.items()) if paper_id not in seen]
    precisions, recalls = [], []
    for _, truth_values, predicted_values in examples:
        precision, recall = paper_scores(truth_values, predicted_values, semantics)
        if precision is not None:
            precisions.append(precision)
        if recall is not None:
            recalls.append(recall)
    counts = {"papers": len(examples),
              "in_both": sum(1 for paper_id, _ in predicted if paper_id in truth_papers),
              "truth_only": sum(1 for paper_id in truth_papers if paper_id not in seen),
              "prediction_only": sum(1 for paper_id, _ in predicted if paper_id not in truth_papers),
              "precision_defined": len(precisions), "recall_defined": len(recalls)}
    return FieldResult(name, _mean(precisions), _mean(recalls), examples, counts)


def field_files(folder: Path) -> Dict[str, Path]:
    """Field name (the file name up to its first '.') -> prediction file; collisions are refused."""
    if not folder.is_dir():
        raise InputError("expected a directory of <field>.tsv files", folder)
    found: Dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix not in FIELD_SUFFIXES:
            continue
        name = path.name.split(".", 1)[0]
        if name in found:
            raise InputError(f"{found[name].name} and {path.name} both name the field {name!r}; rename one", folder)
        found[name] = path
    return found


def evaluate(predictions: Path, truth: Path, semantics: str = "set") -> List[FieldResult]:
    """Every field of ``predictions`` that has a truth file, and every truth field without a
    prediction file, sorted by field name. A field nothing predicted scores as predicting nothing
    (precision undefined, recall 0 over its papers), with a warning; ``compat`` leaves it out, as
    the original program does, and warns."""
    predictions, truth = Path(predictions), Path(truth)
    if semantics not in SEMANTICS:
        raise InputError(f"unknown semantics {semantics!r}; valid: {', '.join(SEMANTICS)}")
    if not truth.is_dir():
        raise InputError("expected a directory of truth files", truth)
    predicted = field_files(predictions)
    results = []
    for name, path in sorted(predicted.items()):
        truth_path = truth / path.name
        if not truth_path.is_file():
            logger.warning("%s: no truth file %s; field %s skipped", path, truth_path, name)
            continue
        results.append(score_field(name, path, truth_path, semantics))
    unpredicted = {name: path for name, path in field_files(truth).items() if name not in predicted}
    if unpredicted and semantics == "compat":
        logger.warning("%d truth field(s) without a prediction file, left out as the original program does: %s",
                       len(unpredicted), ", ".join(sorted(unpredicted)))
    elif unpredicted:
        logger.warning("%d truth field(s) without a prediction file score recall 0: %s", len(unpredicted),
                       ", ".join(sorted(unpredicted)))
        results += [_unpredicted(name, path, semantics) for name, path in unpredicted.items()]
    return sorted(results, key=lambda result: result.name)


def _unpredicted(name: str, truth: Path, semantics: str) -> FieldResult:
    """A truth field nothing was predicted for: each paper scored against no values (recall 0
    where it has values, precision undefined)."""
    truth_papers = _merge(read_field_file(truth, False), truth, "concatenate")
    examples = [(paper_id, values, []) for paper_id, values in sorted(truth_papers.items())]
    recalls = [recall for _, values, _ in examples for _, recall in [paper_scores(values, [], semantics)]
               if recall is not None]
    counts = {"papers": len(examples), "in_both": 0, "truth_only": len(examples), "prediction_only": 0,
              "precision_defined": 0, "recall_defined": len(recalls)}
    return FieldResult(name, None, _mean(recalls), examples, counts)


def _number(value: Optional[float]) -> str:
    return "" if value is None else repr(float(value))  # shortest decimal that reads back exactly


def pr_table(results: List[FieldResult]) -> str:
    """``PR.txt``: ``Metric<TAB>Precision<TAB>Recall`` and one row per field."""
    lines = ["Metric\tPrecision\tRecall"] + [f"{r.name}\t{_number(r.precision)}\t{_number(r.recall)}" for r in results]
    return "\n".join(lines) + "\n"


def labels_table(result: FieldResult) -> str:
    """``details/<field>-labels.txt``: per paper (sorted by id), its distinct true values then its
    distinct predicted values, each sorted, with 1 where the value is on the other side too."""
    lines = ["ID\tAccuracy\tLabelType\tLabel"]
    for paper_id, truth_values, predicted_values in sorted(result.examples, key=lambda example: example[0]):
        truth_set, predicted_set = set(truth_values), set(predicted_values)
        lines += [f"{paper_id}\t{int(v in predicted_set)}\ttrue\t{v}" for v in sorted(truth_set)]
        lines += [f"{paper_id}\t{int(v in truth_set)}\tpred\t{v}" for v in sorted(predicted_set)]
    return "\n".join(lines) + "\n"


def summary(results: List[FieldResult], semantics: str) -> dict:
    return {"semantics": semantics,
            "fields": {r.name: {"precision": r.precision, "recall": r.recall, **r.counts} for r in results}}


def write_outputs(results: List[FieldResult], output: Path, semantics: str, json_summary: bool,
                  inputs: Sequence = ()) -> None:
    """``PR.txt``, ``details/*-labels.txt`` and, with ``json_summary``, ``summary.json``, as one
    output folder replaced atomically (``inputs``: the prediction and truth folders)."""

    def fill(folder: Path) -> None:
        (folder / "details").mkdir()
        for result in results:
            (folder / "details" / f"{result.name}-labels.txt").write_text(labels_table(result), encoding="utf-8")
        if json_summary:
            (folder / "summary.json").write_text(strict_json(summary(results, semantics), indent=2) + "\n",
                                                 encoding="utf-8")
        (folder / "PR.txt").write_text(pr_table(results), encoding="utf-8")

    replace_folder(Path(output), fill, inputs=inputs, kind="metaeval")


def terminal_table(results: List[FieldResult]) -> str:
    width = max([len("Metric")] + [len(r.name) for r in results])
    rows = [f"{'Metric':<{width}}  Precision  Recall   papers (both/truth only/prediction only)"]
    for r in results:
        shown = lambda value: "" if value is None else f"{value:.3f}"  # noqa: E731
        c = r.counts
        rows.append(f"{r.name:<{width}}  {shown(r.precision):>9}  {shown(r.recall):>6}   "
                    f"{c['in_both']}/{c['truth_only']}/{c['prediction_only']}")
    return "\n".join(rows)
