"""A resumable per-case results cache for phenotype-driven disease ranking.

Several ranking methods run over the same test set, independently and possibly at the same time;
each writes its results for a case into that case's file, which accumulates the methods:

``<root>/<DATASET>/cache/case_0000.json``::

    {"case_index": 0, "hpo_terms": [...], "ground_truth": [...],
     "total_elapsed_seconds": 3.2, "method_elapsed_seconds": {"set_jaccard": 1.1, ...},
     "methods_run": ["set_cosine", "set_jaccard"],
     "results": {"set_jaccard": [{"disease_id": ..., "label": ..., "score": ..., "rank": ...}, ...]}}

:func:`save_cache` holds ``case_NNNN.json.lock`` across the whole read-merge-write, so concurrent
writers never lose each other's methods; the file is replaced atomically (temporary file +
rename). A file for other HPO terms or another ground truth is refused; an unreadable one is moved
aside (``case_NNNN.json.corrupt-<n>``) and reported, never silently overwritten. A case whose
methods fail gets ``case_NNNN.error`` (``ExceptionType: message``); a later success removes it.
"""
from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence

from filelock import FileLock

from openbench.errors import InputError

__all__ = ["DEFAULT_ROOT", "DISEASE_ID_KEYS", "LOCK_TIMEOUT_S", "CacheConflict", "cache_dir_for", "cache_path_for",
           "error_path_for", "LOCK_NAME", "CorruptCase", "read_case", "save_cache", "load_cache",
           "methods_already_cached", "record_error", "disease_id", "cached_cases"]

logger = logging.getLogger(__name__)

DEFAULT_ROOT = Path("outputs") / "evaluation"
DISEASE_ID_KEYS = ("disease_id", "canonical_disease_id", "ordo_id")
LOCK_TIMEOUT_S = 120


class CacheConflict(InputError):
    """An existing case file describes a different case (other HPO terms or ground truth)."""


def cache_dir_for(dataset: str, root=DEFAULT_ROOT) -> Path:
    return Path(root) / dataset / "cache"


def cache_path_for(cache_dir, index: int) -> Path:
    if index < 0:
        raise ValueError(f"case index must be non-negative, got {index}")
    return Path(cache_dir) / f"case_{index:04d}.json"


def error_path_for(cache_file) -> Path:
    return Path(cache_file).with_suffix(".error")


LOCK_NAME = ".cache.lock"


def _lock(cache_file: Path) -> FileLock:
    """One lock for the whole cache folder (one small file, not one per case); writes are short."""
    return FileLock(str(Path(cache_file).parent / LOCK_NAME), timeout=LOCK_TIMEOUT_S)


class CorruptCase(InputError):
    """A case file that cannot be read as a cached case."""


def read_case(cache_file) -> dict:
    """The stored case, read without a lock and without touching the file (readers never modify
    a cache: writers replace case files atomically). An unreadable file raises :class:`CorruptCase`."""
    from openbench._io import read_json

    cache_file = Path(cache_file)
    try:
        data = read_json(cache_file, "case file")
    except InputError as error:
        raise CorruptCase(error.reason, cache_file, error.line) from None
    if not isinstance(data, dict) or not isinstance(data.get("results", {}), dict):
        raise CorruptCase("not a cached case (expected an object with results)", cache_file)
    return data


def _read(cache_file: Path) -> Optional[dict]:
    """The stored case, None when there is none; an unreadable file is moved aside and reported."""
    if not cache_file.exists():
        return None
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("results", {}), dict):
            raise ValueError("not a case object")
        return data
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        aside = cache_file.with_name(cache_file.name + ".corrupt")
        number = 1
        while aside.with_name(f"{aside.name}-{number}").exists():
            number += 1
        aside = aside.with_name(f"{aside.name}-{number}")
        os.replace(cache_file, aside)
        logger.error("%s is unreadable (%s); kept as %s and started afresh", cache_file, error, aside)
        return None


def _write_atomic(cache_file: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{cache_file.name}.", suffix=".tmp", dir=cache_file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, cache_file)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_results(results: Mapping[str, Sequence[Mapping]], cache_file: Path) -> None:
    for method, entries in results.items():
        for entry in entries:
            if not any(key in entry for key in DISEASE_ID_KEYS):
                raise InputError(f"{method}: a result without a disease id ({', '.join(DISEASE_ID_KEYS)})", cache_file)
            score = entry.get("score")
            if score is not None and not (isinstance(score, (int, float)) and math.isfinite(score)):
                raise InputError(f"{method}: scores must be finite numbers, got {score!r}", cache_file)


def save_cache(cache_file, case_index: int, hpo_terms: Sequence[str], ground_truth: Sequence[str],
               results: Mapping[str, Sequence[Mapping]], method_elapsed_seconds: Mapping[str, float]) -> dict:
    """Merge ``results`` (method -> result entries) and their timings into the case file; returns
    the merged case. A method already present is replaced and its old time leaves the total."""
    cache_file = Path(cache_file)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    _check_results(results, cache_file)
    hpo_terms, ground_truth = list(hpo_terms), list(ground_truth)
    with _lock(cache_file):
        data = _read(cache_file) or {"case_index": case_index, "hpo_terms": hpo_terms, "ground_truth": ground_truth,
                                     "total_elapsed_seconds": 0.0, "method_elapsed_seconds": {}, "methods_run": [],
                                     "results": {}}
        if data.get("hpo_terms") != hpo_terms or data.get("ground_truth") != ground_truth:
            raise CacheConflict(f"the cached case has other HPO terms or ground truth (cached {data.get('hpo_terms')} "
                                f"/ {data.get('ground_truth')}); refusing to merge case {case_index}", cache_file)
        if data.get("case_index") != case_index:
            raise CacheConflict(f"the file holds case {data.get('case_index')}, not {case_index}", cache_file)
        timings = dict(data.get("method_elapsed_seconds", {}))
        total = float(data.get("total_elapsed_seconds", 0.0))
        for method, entries in results.items():
            total -= float(timings.get(method, 0.0))
            seconds = float(method_elapsed_seconds.get(method, 0.0))
            timings[method] = seconds
            total += seconds
            data["results"][method] = [dict(entry) for entry in entries]
        data["method_elapsed_seconds"] = timings
        data["total_elapsed_seconds"] = max(0.0, total)
        data["methods_run"] = sorted(data["results"])
        _write_atomic(cache_file, data)
        error_path_for(cache_file).unlink(missing_ok=True)
    return data


def load_cache(cache_file) -> Optional[dict]:
    cache_file = Path(cache_file)
    with _lock(cache_file):
        return _read(cache_file)


def methods_already_cached(cache_file, required_methods: Iterable[str]) -> bool:
    """True when the case file exists and holds results for every required method."""
    cache_file = Path(cache_file)
    if not cache_file.exists():
        return False
    data = load_cache(cache_file)
    return data is not None and set(required_methods) <= set(data.get("methods_run", []))


def record_error(cache_file, error: BaseException) -> Path:
    """Write ``case_NNNN.error`` (``ExceptionType: message``) for a failed case; returns its path."""
    path = error_path_for(cache_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{type(error).__name__}: {error}\n", encoding="utf-8")
    return path


def disease_id(entry: Mapping) -> str:
    """The disease id of a cached result entry (``disease_id``, ``canonical_disease_id`` or ``ordo_id``)."""
    for key in DISEASE_ID_KEYS:
        if entry.get(key):
            return str(entry[key])
    raise InputError(f"a cached result without a disease id; expected one of {', '.join(DISEASE_ID_KEYS)}")


def cached_cases(cache_dir) -> List[Path]:
    """The case files of a cache folder, by case index."""
    return sorted(Path(cache_dir).glob("case_[0-9][0-9][0-9][0-9]*.json"))
