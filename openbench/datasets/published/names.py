"""What a dataset argument names: a folder, or a registry name standing for its verified copy
(:func:`resolve`; fetched only by ``datasets get``), a published KG's converted graph (:func:`graph_folder`),
and what a folder says of the registry entry it came from (:func:`registry_of`,
:func:`split_info_of`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from openbench._io import read_json
from openbench.datasets.published.catalogue import DatasetError
from openbench.datasets.published.fetch import get, read_marker
from openbench.datasets.published.native import OFFICIAL_SPLITS
from openbench.datasets.published.registries import _closest, registered, registry
from openbench.errors import InputError

__all__ = ["registry_of", "split_info_of", "resolve", "graph_folder"]


def registry_of(folder) -> Optional[dict]:
    """``{"name", "version", "archive_sha256", …}`` when ``folder`` (or its parent, for
    train_test_data/ and a KG's official split) is a verified copy, or a split that ``split rand``
    made of one (then ``split`` says how, from its ``split_info.json``)."""
    folder = Path(folder)
    for candidate in (folder, folder.parent):
        marker = read_marker(candidate)
        if marker and "name" in marker:
            found = {"name": marker["name"], "version": marker.get("version", "unknown"),
                     "archive_sha256": marker.get("archive_sha256")}
            if "files_sha256" in marker:
                found["files_sha256"] = marker["files_sha256"]
                found["split"] = "official, as published"
            return found
    return _split_of_registry_graph(folder)


def split_info_of(folder) -> Optional[dict]:
    """The ``split_info.json`` of the split whose files lie in ``folder`` (or, for a fold, in its
    parent), or None; a damaged one is an InputError naming it."""
    for candidate in (Path(folder), Path(folder).parent):
        path = candidate / "split_info.json"
        if path.is_file():
            info = read_json(path, "split description")
            if not isinstance(info, dict):
                raise InputError("expected a JSON object (written by openbench split)", path)
            return info
    return None


def _split_of_registry_graph(folder: Path) -> Optional[dict]:
    info = split_info_of(folder) or {}
    dataset = info.get("dataset")
    if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
        return None
    parameters = info.get("parameters")
    seed = parameters.get("seed") if isinstance(parameters, dict) else None
    stated = dataset.get("files_sha256")
    files: dict = stated if isinstance(stated, dict) else {}
    return {"name": dataset["name"], "version": str(dataset.get("version", "unknown")),
            "archive_sha256": next(iter(files.values()), None), "files_sha256": files,
            "split": f"openbench split rand, seed {seed}"}


def resolve(path_or_name, root=None, **options) -> Path:
    """A dataset argument: an existing path as given, a registry name as its verified copy (a
    published KG's official split); anything else unchanged, for the loader to report. A copy that
    is not on this machine is an error naming ``openbench datasets get NAME``: only an explicit
    ``download=True`` (``datasets get``'s) fetches it."""
    options.setdefault("download", False)
    path = Path(path_or_name)
    entry = registered(path_or_name)
    if entry is None:
        if path.exists() or path.is_symlink():
            return path
        entries = registry()
        raise InputError(f"no such folder, and not a dataset name of the registry{_closest(str(path_or_name))}; "
                         f"the registry knows {', '.join(entries)} (openbench datasets list)", path)
    if entry.native and entry.layout not in OFFICIAL_SPLITS:  # refused before any download
        raise InputError(f"{entry.name} is a graph without an official split: split it first (openbench split rand "
                         f"--dataset {entry.name} --output DIR) and evaluate DIR")
    folder = get(entry.name, root, **options)
    if not entry.native:
        return folder
    evaluation = (read_marker(folder) or {}).get("evaluation")
    if evaluation not in ("split", "native"):
        raise DatasetError(f"{folder}: its verification record names no official split; remove the folder and "
                           f"fetch {entry.name} again")
    return folder / evaluation


def graph_folder(path_or_name, root=None, **options) -> Path:
    """The graph folder (``graph_files`` layout with ``graph_info.json``) of a registry name (its
    verified copy: fetched only with ``download=True``, as :func:`resolve`), of a copy's folder, or
    the folder itself."""
    from graphgen.graph_files import GRAPH_INFO

    options.setdefault("download", False)
    entry = registered(path_or_name)
    if entry is not None:
        if not entry.native:
            raise InputError(f"{entry.name} is a published split, not a graph; evaluate it by name")
        return get(entry.name, root, **options) / "graph"
    path = Path(path_or_name)
    for candidate in (path, path / "graph"):
        if (candidate / GRAPH_INFO).is_file():
            return candidate
    if not path.exists():
        raise InputError(f"no such folder, and not a dataset name of the registry{_closest(str(path_or_name))} "
                         "(openbench datasets list)", path)
    raise InputError(f"not a converted graph: expected {GRAPH_INFO} here or in graph/ (openbench datasets get "
                     "writes them); for OpenBioLink's graph_files or a plain triples file give --edges", path)


