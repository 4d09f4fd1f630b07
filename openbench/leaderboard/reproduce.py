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

from openbench.leaderboard.schema import LeaderboardError

__all__ = ["REPRODUCIBLE_CANDIDATES", "protocol_options", "certificate", "reproduce"]

REPRODUCIBLE_CANDIDATES = ("all", "typed", "sampled")
_MODEL_FLAGS = (("entity_embeddings", "--entity-embeddings"), ("relation_embeddings", "--relation-embeddings"),
                ("model", "--model"), ("model_dir", "--model-dir"), ("dglke_data", "--dglke-data"),
                ("libkge_data", "--libkge-data"))


def protocol_options(protocol: dict) -> Dict[str, Any]:
    """The :func:`openbench.evaluate` options that give a record of ``protocol`` (a record's
    protocol block) again; a protocol that names no options to rerun it (listed candidates, an
    entity subset known by its hash alone) is refused."""
    candidates = protocol.get("candidates", "all")
    if candidates not in REPRODUCIBLE_CANDIDATES:
        raise LeaderboardError(f"a record ranked against {candidates!r} candidates cannot be reproduced from a model "
                               "(ranked lists are scored by a served benchmark: submit-predictions)")
    if protocol.get("entities"):
        raise LeaderboardError("a record ranked against an entity subset names the subset by its hash only; it "
                               "cannot be reproduced here")
    sampled = candidates == "sampled"
    return {"protocol": "sampled" if sampled else "full",
            "filter_sets": None if sampled else list(protocol.get("filter_sets") or []),
            "candidates": "all" if sampled else candidates, "sides": list(protocol.get("sides") or ["head", "tail"]),
            "relations": list(protocol["relations"]) if protocol.get("relations") else None,
            "exclude_query_entity": bool(protocol.get("exclude_query_entity", False)),
            "lower_is_better": bool(protocol.get("lower_is_better", False)),
            "hits_at": list(protocol.get("hits_at") or [1, 3, 10]),
            "evaluation_split": protocol.get("evaluation_split", "test"),
            "ranks": "exact" if protocol.get("ranks", "exact") == "exact" else "fast"}


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
    if spec.complex_layout != "halves":
        words += ["--complex-layout", spec.complex_layout]
    return words + (["--trust-pickle"] if spec.trust_pickle else [])


def _repurposing_words(options: Dict[str, Any]) -> List[str]:
    words = ["--task", "repurposing"]
    for relation in options["relations"]:
        words += ["--relation", relation]
    for relation in options["negative_relations"]:
        words += ["--negative-relation", relation]
    words += ["--recall-at", ",".join(map(str, options["recall_at"])),
              "--hits-at", ",".join(map(str, options["hits_at"])), "--keep-top", str(options["keep_top"])]
    if options["protocol"] == "txgnn":
        words += ["--protocol", "txgnn"]
    if options["ranks"] == "fast":
        words.append("--fast")
    if options.get("bootstrap"):
        words += ["--bootstrap", str(options["bootstrap"])]
    return words


def _protocol_words(options: Dict[str, Any]) -> List[str]:
    if options.get("task") == "classification":
        return ["--task", "classification", "--threshold-metric", options["threshold_metric"]]
    if options.get("task") == "repurposing":
        return _repurposing_words(options)
    words: List[str] = []
    if options["protocol"] == "sampled":
        words += ["--protocol", "sampled"]
    elif options["filter_sets"] == []:
        words.append("--no-filter")
    elif options["filter_sets"] is not None:
        words += ["--filter", ",".join(options["filter_sets"])]
    if options["candidates"] != "all":
        words += ["--candidates", options["candidates"]]
    if options["sides"] != ["head", "tail"]:
        words += ["--sides", options["sides"][0]]
    if options["relations"]:
        words += ["--relations", ",".join(options["relations"])]
    for flag in ("exclude_query_entity", "lower_is_better"):
        if options[flag]:
            words.append("--" + flag.replace("_", "-"))
    if options["ranks"] == "fast":
        words.append("--fast")
    return words + ["--hits-at", ",".join(map(str, options["hits_at"]))]


def _command(spec, dataset_path: str, options: Dict[str, Any], seed) -> str:
    """The ``openbench evaluate`` command line that gives the reproduced record again."""
    words = ["openbench", "evaluate", "--dataset", dataset_path, *_model_words(spec), *_protocol_words(options)]
    if seed is not None:
        words += ["--seed", str(seed)]
    return " ".join(shlex.quote(word) for word in words)


def certificate(model, dataset, options: Dict[str, Any], seed) -> dict:
    """What anyone needs to re-run a reproduced row: the dataset's fingerprint, the model files'
    sha256, the openbench version and the command (a model given as files, a
    :class:`~openbench.models.sources.ModelSpec`); a model given from Python (a scorer) is
    described by its record's model block instead, and has no command."""
    from openbench import __version__
    from openbench.models.sources import ModelSpec

    files = isinstance(model, ModelSpec)
    return {"verified": "reproduced", "dataset_fingerprint": dataset.fingerprint,
            "model_files_sha256": _files_sha256(model) if files else {}, "openbench_version": __version__,
            "command": _command(model, str(dataset.path), options, seed) if files else None}


def repurposing_options(record: dict) -> Dict[str, Any]:
    """The :func:`openbench.evaluate` options that give a repurposing record again; curated lists
    and ground-truth files are named in the record by their size and hash only, so a record that
    used them is refused."""
    protocol, matrix = record.get("protocol") or {}, (record.get("repurposing") or {}).get("matrix") or {}
    if protocol.get("ground_truth_sha256"):
        raise LeaderboardError("a repurposing record scored with a ground-truth file names it by its hash only; it "
                               "cannot be reproduced here")
    if "list" in str(matrix.get("drugs_from", "")) or "list" in str(matrix.get("diseases_from", "")):
        raise LeaderboardError("a repurposing record of curated drug or disease lists names them by their size only; "
                               "it cannot be reproduced here")
    return {"task": "repurposing", "relations": list(protocol.get("relations") or []),
            "negative_relations": list(protocol.get("negative_relations") or []),
            "recall_at": list(protocol.get("recall_at") or []), "hits_at": list(protocol.get("hits_at") or []),
            "keep_top": protocol.get("keep_top"), "protocol": protocol.get("protocol", "full"),
            "ranks": protocol.get("ranks", "exact"), "lower_is_better": bool(protocol.get("lower_is_better", False)),
            "bootstrap": (record["repurposing"].get("confidence") or {}).get("resamples")}


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

    task = record.get("task", "ranking")
    protocol = record.get("protocol") or {}
    if task == "classification":
        options = {"task": "classification", "threshold_metric": protocol.get("threshold_metric", "accuracy")}
    elif task == "repurposing":
        options = repurposing_options(record)
    else:
        options = protocol_options(protocol)
    dataset = dataset_path if isinstance(dataset_path, Dataset) else load_dataset(dataset_path)
    stated = (record.get("dataset") or {}).get("fingerprint")
    if dataset.fingerprint != stated:
        raise LeaderboardError(f"the board's dataset {dataset.path} has fingerprint {dataset.fingerprint[:12]}…, the "
                               f"record's is {str(stated)[:12]}…: give --dataset the split the record evaluated")
    reproduced = evaluate(dataset, spec, device=device, seed=record.get("seed"), progress=progress, **options)
    difference: Optional[Tuple[str, Any, Any]] = (
        next(differences_of(reproduced.to_dict().get(task), record.get(task), task), None)
        if task in ("classification", "repurposing")
        else _first_difference(reproduced.to_dict(), record))
    if difference is not None:
        where, found, claimed = difference
        raise LeaderboardError(f"the model does not reproduce the submitted record: {where}: the board computed "
                               f"{found!r}, the record states {claimed!r}")
    return reproduced, certificate(spec, dataset, options, record.get("seed"))
