"""User registries: a lab's own entries (a JSON list in the catalogue's schema, ``--registry FILE``
or ``$OPENBENCH_REGISTRY``), every field checked; the combined view (:func:`registry`), name
lookup with the closest match for a mistyped name (:func:`lookup`) and the table
``openbench datasets list`` prints. Free text of an entry (someone else's) reaches the terminal
without control characters.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Optional, Tuple

from openbench._io import visible, read_json
from openbench.datasets.published.catalogue import (FILTERED_PROTOCOL, OBL2020_PROTOCOL, REGISTRY, RegisteredDataset,
                                                    RemoteFile)
from openbench.datasets.published.native import NATIVE_FORMATS
from openbench.errors import InputError

__all__ = ["REGISTRY_VARIABLE", "NAME_PATTERN", "FORMATS", "read_registry_file", "use_registry_files", "registry",
           "registry_table", "lookup", "registered"]

REGISTRY_VARIABLE = "OPENBENCH_REGISTRY"  # registry files (os.pathsep-separated) added to the built-in one
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a folder name under the data root
USER_FIELDS = {"name": str, "url": str, "sha256": str, "layout": str, "format": str, "files": list, "size": int,
               "license": str, "version": str, "description": str, "family": str, "citation": str, "counts": dict}
REQUIRED_FIELDS = ("name", "license")
FILE_FIELDS = {"url": str, "sha256": str, "size": int, "filename": str}
FORMATS = ("samples", "ids", *NATIVE_FORMATS)
_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "a list"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_added_files: list = []


def _user_file(item, where: str, path: Path) -> RemoteFile:
    """One object of an entry's ``files``: url and sha256 required, size and filename optional."""
    if not isinstance(item, dict) or not {"url", "sha256"} <= set(item) or set(item) - set(FILE_FIELDS):
        raise InputError(f"{where}: each of files must be an object with url and sha256 (optionally size, "
                         "filename) and nothing else", path)
    for key, kind in FILE_FIELDS.items():
        if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
            raise InputError(f"{where}: files.{key} must be {_KIND_NAMES[kind]}", path)
    _check_url_and_checksum(item["url"], item["sha256"], where, path)
    if "size" in item and item["size"] <= 0:
        raise InputError(f"{where}: files.size must be a positive number of bytes", path)
    remote = RemoteFile(url=item["url"], sha256=item["sha256"], size=item.get("size"), filename=item.get("filename", ""))
    if not NAME_PATTERN.fullmatch(remote.name):
        raise InputError(f"{where}: the file name {remote.name!r} must be letters, digits, '_', '.' or '-' (give "
                         "filename when the URL does not end in one)", path)
    return remote


def _check_url_and_checksum(url: str, sha256: str, where: str, path: Path) -> None:
    if not re.fullmatch(r"https?://[^\s]+", url):
        raise InputError(f"{where}: url must be an http(s) URL", path)
    if not _SHA256.fullmatch(sha256):
        raise InputError(f"{where}: sha256 must be 64 lowercase hex digits (the file's checksum)", path)


def _user_entry(item, index: int, path: Path) -> RegisteredDataset:
    """One entry of a registry file, every field checked (the name becomes a folder name)."""
    where = f"entry {index + 1}"
    if not isinstance(item, dict):
        raise InputError(f"{where} is a {type(item).__name__}; expected an object with {', '.join(REQUIRED_FIELDS)}",
                         path)
    name = item.get("name")
    if isinstance(name, str):
        where = f"entry {index + 1} ({name!r})"
    missing = [key for key in REQUIRED_FIELDS if key not in item]
    if "files" not in item:
        missing += [key for key in ("url", "sha256") if key not in item]
    if "layout" not in item and "format" not in item:
        missing.append("format")
    unknown = sorted(set(item) - set(USER_FIELDS))
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown field(s) {', '.join(unknown)}"
        raise InputError(f"{where} {problem}; expected the fields {', '.join(USER_FIELDS)} (url and sha256, or "
                         "files)", path)
    for key, kind in USER_FIELDS.items():
        if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
            raise InputError(f"{where}: {key} must be {_KIND_NAMES[kind]}", path)
    name = str(item["name"])  # a string: checked above
    if not NAME_PATTERN.fullmatch(name):
        raise InputError(f"{where}: the name must be letters, digits, '_', '.' or '-' (at most 64, not starting "
                         "with a dot): it names the dataset's folder", path)
    if "layout" in item and "format" in item and item["layout"] != item["format"]:
        raise InputError(f"{where}: layout and format differ; give one (format)", path)
    fmt = item.get("format", item.get("layout"))
    if fmt not in FORMATS:
        raise InputError(f"{where}: format {fmt!r}; expected samples (OpenBioLink split files) or ids (the KGID "
                         f"layout) in a zip archive, or a published KG's own format: {', '.join(NATIVE_FORMATS)}", path)
    if fmt in ("samples", "ids") and "files" in item:
        raise InputError(f"{where}: a {fmt} dataset is one zip archive: give url and sha256, not files", path)
    files = _entry_files(item, fmt, where, path)
    check = item.get("counts", {}).get("check", {})
    if not isinstance(check, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in check.values()):
        raise InputError(f"{where}: counts.check must map count names to non-negative integers", path)
    return RegisteredDataset(name=name, family=item.get("family", "user registry"),
                             version=item.get("version", "unversioned"), url=files[0].url, layout=fmt,
                             description=item.get("description", ""), counts=item.get("counts", {}),
                             license=item["license"], protocol=OBL2020_PROTOCOL if fmt in ("samples", "ids")
                             else FILTERED_PROTOCOL, size=files[0].size, sha256=files[0].sha256,
                             citation=item.get("citation", ""), source=str(path),
                             files=files if fmt in NATIVE_FORMATS else ())


def _entry_files(item: dict, fmt: str, where: str, path: Path) -> Tuple[RemoteFile, ...]:
    """An entry's files: ``files`` (native formats) or its one ``url``/``sha256`` (a zip archive)."""
    if "files" in item:
        if "url" in item or "sha256" in item or "size" in item:
            raise InputError(f"{where}: give url/sha256/size or files, not both", path)
        if not item["files"]:
            raise InputError(f"{where}: files is empty; expected the dataset's files", path)
        files = tuple(_user_file(one, where, path) for one in item["files"])
        names = [one.name for one in files]
        if len(set(names)) != len(names):
            raise InputError(f"{where}: two files have the same file name", path)
        return files
    _check_url_and_checksum(item["url"], item["sha256"], where, path)
    if "size" in item and item["size"] <= 0:
        raise InputError(f"{where}: size must be a positive number of bytes", path)
    remote = RemoteFile(url=item["url"], sha256=item["sha256"], size=item.get("size"))
    if not NAME_PATTERN.fullmatch(remote.name):  # '..' or '.' would name a folder above or the folder itself
        raise InputError(f"{where}: the url must end in the {'archive' if fmt in ('samples', 'ids') else 'file'}'s "
                         "name (letters, digits, '_', '.', '-', not starting with a dot)", path)
    return (remote,)


def read_registry_file(path) -> Dict[str, RegisteredDataset]:
    """The entries of a registry file: a JSON list of objects with ``name``, ``license``,
    ``format`` (``samples`` or ``ids`` for a zip archive of split files, or a published KG's
    format: ``hetionet``, ``primekg``, ``drkg``, ``ogbl-biokg``, ``biokg``, ``pharmkg8k``; ``layout``
    is the older name), the file(s): ``url`` and ``sha256`` (one file, optionally ``size``), or
    ``files`` (a list of {``url``, ``sha256``, optionally ``size``, ``filename``}), and optionally
    ``version``, ``description``, ``family``, ``citation``, ``counts`` (``counts.check``: counts
    the reader's must equal). A name may not repeat nor take a built-in one."""
    path = Path(path)
    items = read_json(path, "registry file")
    if not isinstance(items, list):
        raise InputError("expected a JSON list of dataset entries", path)
    entries: Dict[str, RegisteredDataset] = {}
    taken = {name.lower() for name in REGISTRY}
    for index, item in enumerate(items):
        entry = _user_entry(item, index, path)
        if entry.name.lower() in taken or entry.name.lower() in {n.lower() for n in entries}:
            raise InputError(f"entry {index + 1}: the name {entry.name!r} is taken (built-in or earlier entry)", path)
        entries[entry.name] = entry
    return entries


def use_registry_files(paths) -> None:
    """The registry files ``--registry`` named, for this command (checked now; ``()`` clears them)."""
    for path in paths:
        read_registry_file(path)
    _added_files[:] = [Path(path) for path in paths]


def registry() -> Dict[str, RegisteredDataset]:
    """The built-in entries, then those of ``--registry`` files and of ``$OPENBENCH_REGISTRY``."""
    entries = dict(REGISTRY)
    named = [p for p in os.environ.get(REGISTRY_VARIABLE, "").split(os.pathsep) if p.strip()]
    for path in [*_added_files, *map(Path, named)]:
        for name, entry in read_registry_file(path).items():
            if name.lower() in {n.lower() for n in entries}:
                raise InputError(f"the dataset name {name!r} is registered twice", path)
            entries[name] = entry
    return entries


def registry_table() -> str:
    """The registry as a fixed-width table (``openbench datasets list``)."""
    lines = [f"{'name':<12} {'family':<16} {'format':<10} {'version':<38} {'checksum':<15} {'entities':>9} "
             f"{'relations':>9}  url"]
    for entry in registry().values():
        graph = entry.counts.get("graph", {})
        first = entry.remote_files[0]
        checksum = (f"sha256 {first.sha256[:8]}" if first.sha256 else f"md5 {first.md5[:8]}" if first.md5
                    else f"git {first.git_sha1[:8]}" if first.git_sha1 else "pinned once")
        more = f" (+{len(entry.remote_files) - 1} files)" if len(entry.remote_files) > 1 else ""
        name, family, layout, version, url = (visible(value) for value in (entry.name, entry.family, entry.layout,
                                                                            entry.version, entry.url))
        entities, relations = (visible(graph.get(key, "?")) for key in ("entities", "relations"))
        lines.append(f"{name:<12} {family:<16} {layout:<10} {version:<38} {checksum:<15} {entities:>9} "
                     f"{relations:>9}  {url}{more}")
    return "\n".join(lines)


def lookup(name: str) -> RegisteredDataset:
    key = name.strip()
    entries = registry()
    match = entries.get(key) or next((e for n, e in entries.items() if n.lower() == key.lower()), None)
    if match is None:
        raise InputError(f"unknown dataset {name!r}{_closest(name)}; registered: {', '.join(entries)}")
    return match


def registered(path_or_name) -> Optional[RegisteredDataset]:
    """The registry entry ``path_or_name`` names (case-insensitively), or None: an existing path is a
    path, never a name."""
    path = Path(path_or_name)
    if path.exists() or path.is_symlink():
        return None
    key = str(path_or_name).strip().lower()
    return next((entry for name, entry in registry().items() if name.lower() == key), None)


def _closest(name: str) -> str:
    """' (did you mean X?)' for the registry name closest to ``name``, or ''."""
    import difflib

    by_lower = {known.lower(): known for known in registry()}
    found = difflib.get_close_matches(name.strip().lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[found[0]]}?)" if found else ""
