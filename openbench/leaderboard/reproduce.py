"""Rows the board computed itself: a submitted model re-evaluated on the board's own copy of the
dataset (``leaderboard submit RESULT.json --dataset DIR --model-dir ...``).

A ranks file someone else wrote is evidence of its record's metrics, never of which rank belongs to
which query: moving rank values between queries of one relation and side changes no metric, and a
paired test against another row then says what the forger wants. So the board draws its paired
verdicts ("≈ best", the paired difference) only between ranks it produced itself: rows its server
scored against hidden answers, and rows it **reproduced** here. Reproducing

1. loads the board's copy of the dataset and refuses it unless its fingerprint (computed from its
   files, not read from the record) is the record's;
2. evaluates the model under the record's own protocol (filters, candidates, sides, relations,
   hits@k, the evaluation split, exact or fast ranks, full or sampled), as ``openbench evaluate``
   does with the same options;
3. refuses the submission unless the board's record gives the submitted record's metrics (every
   side, rank type, relation and the macro average, within
   :data:`~openbench.evaluation.statistics.evidence.TOLERANCE`) and the same queries;
4. stores **the board's record** and its per-query ranks, marked ``verified: reproduced``, with a
   re-evaluation certificate (:func:`certificate`): the dataset's fingerprint, the model files'
   sha256 and the ``openbench evaluate`` command that gives the record again, so anyone holding the
   same files can check it.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from openbench.errors import UsageError
from openbench.evaluation.tasks.base import RunSettings
from openbench.leaderboard.schema import LeaderboardError
from openbench.task_registry import task_of

__all__ = ["certificate", "reproduce"]

_MODEL_FLAGS = (("entity_embeddings", "--entity-embeddings"), ("relation_embeddings", "--relation-embeddings"),
                ("model", "--model"), ("model_dir", "--model-dir"), ("dglke_data", "--dglke-data"),
                ("libkge_data", "--libkge-data"), ("scores", "--scores"), ("score_column", "--score-column"),
                ("ranked_list", "--ranked-list"), ("names", "--names"))


def _files_sha256(spec) -> Dict[str, str]:
    """{path: sha256} of every file the model spec names (a folder: each file in it, sorted)."""
    from openbench.models.scorers import file_sha256

    hashes: Dict[str, str] = {}
    for named in spec.files():
        path = Path(named)
        for file in (sorted(item for item in path.rglob("*") if item.is_file()) if path.is_dir() else [path]):
            hashes[str(file)] = file_sha256(file)
    return hashes


def _model_words(spec) -> List[str]:
    words: List[str] = []
    for field, flag in _MODEL_FLAGS:
        value = getattr(spec, field)
        if value:
            words += [flag, str(value)]
    if spec.id_columns:
        words += ["--id-columns", ",".join(spec.id_columns)]
    if spec.require_complete:
        words.append("--require-complete")
    if spec.complex_layout != "halves":
        words += ["--complex-layout", spec.complex_layout]
    return words + (["--trust-pickle"] if spec.trust_pickle else [])


def _command(spec, dataset_path: str, task, options, settings) -> str:
    """The ``openbench evaluate`` command line that gives the reproduced record again."""
    words = ["openbench", "evaluate", "--dataset", dataset_path, *_model_words(spec), "--task", task.name,
             *task.command_words(options, settings)]
    if settings.seed is not None:
        words += ["--seed", str(settings.seed)]
    return " ".join(shlex.quote(word) for word in words)


def certificate(model, dataset, task, options, settings) -> dict:
    """What anyone needs to re-run a reproduced row: the dataset's fingerprint, the model files'
    sha256, the openbench version and the command (a model given as files, a
    :class:`~openbench.models.sources.ModelSpec`); a model given from Python (a scorer) is
    described by its record's model block instead, and has no command."""
    from openbench import __version__
    from openbench.models.sources import ModelSpec

    files = isinstance(model, ModelSpec)
    return {"verified": "reproduced", "dataset_fingerprint": dataset.fingerprint,
            "model_files_sha256": _files_sha256(model) if files else {}, "openbench_version": __version__,
            "command": _command(model, str(dataset.path), task, options, settings) if files else None}


def _first_difference(board: dict, submitted: dict) -> Optional[Tuple[str, Any, Any]]:
    from openbench.evaluation.statistics.evidence import differences

    for key in ("metrics", "per_relation", "macro_relation"):
        if submitted.get(key) is not None:
            for difference in differences(board.get(key), submitted[key], key):
                return difference
    for key in ("queries", "queries_sha256"):
        computed, stated = (board.get("diagnostics") or {}).get(key), (submitted.get("diagnostics") or {}).get(key)
        if computed != stated:
            return f"diagnostics.{key}", computed, stated
    return None


def reproduce(record: dict, spec, dataset_path, *, device: str = "auto", progress: bool = False):
    """(the board's :class:`~openbench.record.ResultRecord`, its certificate) of ``record``
    (a validated submitted record) re-evaluated with the model ``spec`` (files: a
    :class:`~openbench.models.sources.ModelSpec`; or anything :func:`openbench.evaluate` takes) on
    the dataset at ``dataset_path`` (a folder, a registry name or a loaded dataset); a
    :class:`LeaderboardError` naming the first difference when the model does not give the
    submitted record (see the module docstring)."""
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.evaluation.statistics.evidence import differences as differences_of

    from openbench.datasets.loader import Dataset

    task = task_of(record)
    protocol = record.get("protocol") or {}
    try:
        options = task.reproduce_options(record)
    except UsageError as error:
        raise LeaderboardError(str(error)) from None
    dataset = dataset_path if isinstance(dataset_path, Dataset) else load_dataset(dataset_path)
    stated = (record.get("dataset") or {}).get("fingerprint")
    if dataset.fingerprint != stated:
        raise LeaderboardError(f"the board's dataset {dataset.path} has fingerprint {dataset.fingerprint[:12]}…, the "
                               f"record's is {str(stated)[:12]}…: give --dataset the split the record evaluated")
    settings = RunSettings(device=device, seed=record.get("seed"), progress=progress,
                           lower_is_better=bool(protocol.get("lower_is_better", False)))
    reproduced = evaluate(dataset, spec, options, device=device, seed=settings.seed, progress=progress,
                          lower_is_better=settings.lower_is_better)
    difference: Optional[Tuple[str, Any, Any]] = (
        _first_difference(reproduced.to_dict(), record) if task.block_key is None
        else next(differences_of(reproduced.to_dict().get(task.block_key), record.get(task.block_key),
                                 task.block_key), None))
    if difference is not None:
        where, found, claimed = difference
        raise LeaderboardError(f"the model does not reproduce the submitted record: {where}: the board computed "
                               f"{found!r}, the record states {claimed!r}")
    return reproduced, certificate(spec, dataset, task, options, settings)
