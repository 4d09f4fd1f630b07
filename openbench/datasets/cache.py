"""A binary cache of parsed datasets (id arrays, label maps, filter indexes), so that repeated
evaluations of one dataset skip parsing.

An entry is keyed by the files a dataset is read from (their absolute paths) and the reading
options; it is valid while every file keeps its identity: the size, modification and change
times and inode recorded when the entry was written, or, when any of those moved (a copy, a
``touch``), the same content hash (BLAKE2b of the bytes, computed once when the entry was made).
A changed file invalidates the entry, which is rebuilt.

Entries live in ``$OPENBENCH_CACHE_DIR/datasets`` (default: the user cache directory, e.g.
``~/.cache/openbench/datasets``); ``OPENBENCH_DATASET_CACHE=0`` turns the cache off. An entry is
written into a staging folder and renamed into place, so concurrent runs never read a partial
entry (the loser of a race discards its copy); the least recently used entries beyond
``OPENBENCH_DATASET_CACHE_ENTRIES`` (default 8) are removed.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench import __version__

__all__ = ["CACHE_FORMAT", "cache_root", "cache_enabled", "cached_dataset", "cached_filter_index", "file_identity"]

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1  # bump when the payload layout changes: older entries are then never matched
HASH_BLOCK = 1 << 22
# a file modified this close before its entry was written may change again within the same
# timestamp tick without any stat field moving ("racy" files, as git calls them): check its content
RACY_NS = 2_000_000_000


def cache_enabled() -> bool:
    return os.environ.get("OPENBENCH_DATASET_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def cache_root() -> Path:
    base = os.environ.get("OPENBENCH_CACHE_DIR")
    if base:
        return Path(base) / "datasets"
    import platformdirs

    return platformdirs.user_cache_path("openbench") / "datasets"


def _content_hash(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _stat(path: Path) -> Dict[str, int]:
    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "ctime_ns": status.st_ctime_ns,
            "inode": status.st_ino}


def file_identity(path: Path) -> Dict[str, object]:
    """What an entry records of a file: its stat fields and its content hash."""
    return {**_stat(path), "hash": _content_hash(path)}


def _entry_name(files: Sequence[Path], options: dict) -> str:
    key = json.dumps({"format": CACHE_FORMAT, "version": __version__, "files": [str(p) for p in files],
                      "options": options}, sort_keys=True)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _still_valid(entry: Path, files: Sequence[Path]) -> bool:
    """True when every file keeps its identity; stat fields that moved are checked by content and,
    when the content is the same, refreshed (so the next check is a stat again)."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    recorded = manifest.get("files", {})
    if sorted(recorded) != sorted(str(p) for p in files):
        return False
    refreshed = False
    written = int(manifest.get("written_ns", 0))
    for path in files:
        if not path.is_file():
            return False
        before, now = recorded[str(path)], _stat(path)
        racy = now["mtime_ns"] >= written - RACY_NS or now["ctime_ns"] >= written - RACY_NS
        if not racy and all(before.get(key) == value for key, value in now.items()):
            continue
        if before.get("size") != now["size"] or before.get("hash") != _content_hash(path):
            return False
        recorded[str(path)] = {**now, "hash": before["hash"]}
        refreshed = True
    if refreshed:
        _write_atomic(entry / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
    return True


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _touch(entry: Path) -> None:
    try:
        os.utime(entry / "manifest.json")
    except OSError:
        pass


def _prune(root: Path, keep: Path) -> None:
    limit = max(1, int(os.environ.get("OPENBENCH_DATASET_CACHE_ENTRIES", "8")))
    entries = [p for p in root.iterdir() if p.is_dir() and (p / "manifest.json").is_file()]
    entries.sort(key=lambda p: (p / "manifest.json").stat().st_mtime, reverse=True)
    for old in entries[limit:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# the payload: one .npy per array, labels as one newline-joined UTF-8 blob


def _save_dataset(folder: Path, dataset) -> None:
    for split, triples in dataset.triples.items():
        np.save(folder / f"triples_{split}.npy", triples.numpy())
    for kind, labels in (("entities", dataset.entity_labels), ("relations", dataset.relation_labels)):
        (folder / f"{kind}.txt").write_bytes("\n".join(labels).encode("utf-8"))
    meta = {"layout": dataset.layout, "fingerprint": dataset.fingerprint, "id_map_sha256": dataset.id_map_sha256,
            "dropped": dataset.dropped, "warnings": dataset.warnings, "splits": list(dataset.triples)}
    (folder / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")


def _load_dataset(folder: Path, path: str, dataset_type: type):
    meta = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    labels = {kind: (folder / f"{kind}.txt").read_bytes().decode("utf-8") for kind in ("entities", "relations")}
    triples = {split: torch.from_numpy(np.load(folder / f"triples_{split}.npy")) for split in meta["splits"]}
    return dataset_type(path=path, layout=meta["layout"],
                   entity_labels=labels["entities"].split("\n") if labels["entities"] else [],
                   relation_labels=labels["relations"].split("\n") if labels["relations"] else [],
                   triples=triples, fingerprint=meta["fingerprint"], id_map_sha256=meta["id_map_sha256"],
                   dropped=meta["dropped"], warnings=meta["warnings"])


def cached_dataset(files: Sequence[Path], options: dict, read: Callable[[], Any], path: str, dataset_type: type):
    """The dataset ``read()`` returns, from the cache when an entry for ``files`` and ``options``
    is still valid, else read and stored. ``path`` is what the dataset reports as its path;
    ``dataset_type`` builds one from the stored fields (the loader's ``Dataset``)."""
    files = [Path(os.path.abspath(p)) for p in files]
    if not cache_enabled() or not all(p.is_file() for p in files):
        return read()  # a missing file is the reader's to report
    root = cache_root()
    entry = root / _entry_name(files, options)
    try:
        if entry.is_dir() and _still_valid(entry, files):
            dataset = _load_dataset(entry, path, dataset_type)
            dataset.cache_entry = entry
            _touch(entry)
            logger.info("dataset read from the cache %s", entry)
            return dataset
    except (OSError, ValueError, KeyError) as error:  # a damaged entry is rebuilt
        logger.warning("the dataset cache entry %s is unusable (%s); rebuilding it", entry, error)
    try:
        identities = {str(p): file_identity(p) for p in files}  # before reading: a change meanwhile fails later
    except OSError:
        return read()
    dataset = read()
    try:
        _store(root, entry, dataset, identities)
        dataset.cache_entry = entry if entry.is_dir() else None
    except OSError as error:  # a read-only or full cache folder costs speed, never the evaluation
        logger.warning("could not write the dataset cache in %s (%s)", root, error)
    return dataset


def _store(root: Path, entry: Path, dataset, identities: dict) -> None:
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{entry.name}.{os.getpid()}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        _save_dataset(staging, dataset)
        manifest = {"format": CACHE_FORMAT, "version": __version__, "files": identities, "written_ns": time.time_ns()}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)  # a stale entry for the same files
        try:
            os.rename(staging, entry)
        except OSError:
            pass  # another run put its (equal) entry there first
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _prune(root, entry)


# ------------------------------------------------------------------------------------------
# filter indexes, stored beside the dataset they index


def cached_filter_index(dataset, filter_sets: Sequence[str], side: str,
                        build: Callable[[], Any]):
    """The filter index of ``side`` over ``filter_sets``, from the dataset's cache entry when it
    has one (built and stored there otherwise); a dataset read without the cache just builds."""
    from openbench.datasets.filter_index import FilterIndex

    entry: Optional[Path] = getattr(dataset, "cache_entry", None)
    if entry is None or not entry.is_dir():
        return build()
    name = f"filter_{'-'.join(filter_sets) or 'none'}_{side}.npz"
    path = entry / name
    if path.is_file():
        try:
            with np.load(path) as arrays:
                return FilterIndex(side=side, num_relations=int(arrays["num_relations"]),
                                   keys=torch.from_numpy(arrays["keys"]), offsets=torch.from_numpy(arrays["offsets"]),
                                   answers=torch.from_numpy(arrays["answers"]))
        except (OSError, ValueError, KeyError):
            pass
    index = build()
    try:
        tmp = entry / f".{name}.{os.getpid()}.tmp.npz"
        np.savez(tmp, num_relations=np.int64(index.num_relations), keys=index.keys.cpu().numpy(),
                 offsets=index.offsets.cpu().numpy(), answers=index.answers.cpu().numpy())
        os.replace(tmp, path)
    except OSError as error:
        logger.debug("could not store the filter index in %s (%s)", entry, error)
    return index


def dataset_files(folder: Path, layout: str, maps: Sequence[Optional[str]]) -> List[Path]:
    """The files a dataset of ``layout`` in ``folder`` is read from, map files included."""
    from openbench.datasets.layouts import ID_FILES, INDUCTIVE_FILES, LABEL_FILES, SAMPLE_FILES

    names = (list(SAMPLE_FILES.values()) if layout == "samples" else list(INDUCTIVE_FILES.values())
             if layout == "inductive" else [*LABEL_FILES.values(), *ID_FILES.values()])
    files = [folder / name for name in names if (folder / name).is_file()]
    return files + [Path(m) for m in maps if m]


def describe(files: Sequence[Path]) -> Tuple[int, int]:
    """(number of files, total bytes), for log lines."""
    return len(files), sum(p.stat().st_size for p in files)
