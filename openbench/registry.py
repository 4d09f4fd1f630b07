"""The registry of published benchmark datasets: fetch by name, verify, unpack, reuse.

One table (:data:`REGISTRY`) names each published dataset with its URL, version, published
checksum and size where the provider gives them ("unknown" otherwise), the counts known from the
OpenBioLink README, a license note and the standard protocol the leaderboard compares against.

:func:`get` downloads an archive (resumable, retried, with a progress bar; through
:func:`graphgen.download.fetch`), checks its size and md5 where published, checks the zip's own
CRCs, unpacks it beside the final folder and renames it into place only when everything passed,
writing a ``.openbench-verified.json`` marker (archive sha256, file sizes). Without a published
checksum the archive's sha256 is recorded on first use (``openbench-checksums.json`` in the
root) with a warning, and later downloads must match it. A folder without a valid marker (a
partial or altered copy) is refused. A second call reuses the verified copy.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Optional

from openbench._io import check_output_folder, read_json, replace_folder, write_text_atomic
from openbench.errors import InputError, OpenbenchError
from openbench.layouts import resolve_layout
from openbench.record import Protocol

__all__ = ["MARKER", "PINS", "ROOT_VARIABLE", "MIRROR_VARIABLE", "OBL2020_PROTOCOL", "OBL2021_PROTOCOL",
           "OBL2020_LICENSE", "RegisteredDataset", "REGISTRY", "DatasetError", "registry_table", "lookup",
           "data_root", "read_marker", "get", "registry_of", "resolve", "REGISTRY_VARIABLE", "read_registry_file",
           "use_registry_files", "registry"]

logger = logging.getLogger(__name__)

MARKER = ".openbench-verified.json"
PINS = "openbench-checksums.json"
ROOT_VARIABLE = "OPENBENCH_DATA_DIR"
MIRROR_VARIABLE = "OPENBENCH_DATASET_MIRROR"

# the protocol of OpenBioLink's own evaluation, and of its leaderboard (filtered, all entities)
OBL2020_PROTOCOL = Protocol(filter_sets=["train", "valid", "test"], hits_at=[1, 3, 10])
OBL2021_PROTOCOL = Protocol(filter_sets=["train", "valid", "test"], hits_at=[10],
                            extra={"top_k": 10, "metrics": ["hits@10", "mrr@10"],
                                   "ranking": "submitted top-10 lists (pred_top10), filtered by the submitter"})
OBL2020_LICENSE = ("see Zenodo record 3834052; the graph is derived from sources under their own licenses "
                   "(OpenBioLink README, source license table): check them before redistributing")


@dataclass(frozen=True)
class RegisteredDataset:
    """One published dataset. ``md5``/``size`` are None where the provider publishes none."""

    name: str
    family: str
    version: str
    url: str
    layout: str  # "samples" (OpenBioLink CSVs) or "ids" (integer-id TSVs)
    description: str
    counts: Dict[str, dict]
    license: str
    protocol: Protocol
    md5: Optional[str] = None
    size: Optional[int] = None
    notes: str = ""
    extra: dict = field(default_factory=dict)
    sha256: Optional[str] = None  # published (or, for a user's registry, stated) archive checksum
    citation: str = ""
    source: str = "openbench"  # "openbench", or the registry file an entry came from

    @property
    def archive(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    def as_row(self) -> dict:
        row = asdict(self)
        row["md5"] = self.md5 or "unknown"
        row["sha256"] = self.sha256 or "unknown"
        row["size"] = self.size if self.size is not None else "unknown"
        return row


def _obl2020(name: str, description: str, counts: Dict[str, dict]) -> RegisteredDataset:
    return RegisteredDataset(
        name=name, family="OpenBioLink2020", version="Zenodo record 3834052",
        url=f"https://zenodo.org/record/3834052/files/{name}.zip", layout="samples", description=description,
        counts=counts, license=OBL2020_LICENSE, protocol=OBL2020_PROTOCOL)


# counts from the OpenBioLink README: per-split totals include the negative samples
REGISTRY: Dict[str, RegisteredDataset] = {entry.name: entry for entry in (
    _obl2020("HQ_DIR", "directed, high quality (the default benchmark)",
             {"positives": {"train": 4_192_002, "valid": 188_394, "test": 183_009},
              "negatives": {"train": 4_311_578, "valid": 208_672, "test": 218_892},
              "with_negatives": {"train": 8_503_580, "valid": 397_066, "test": 401_901},
              "graph": {"entities": 184_732, "relations": 28}}),
    _obl2020("HQ_UNDIR", "undirected, high quality",
             {"with_negatives": {"train": 7_559_921, "valid": 357_297, "test": 372_877},
              "graph": {"entities": 184_722, "relations": 28}}),
    _obl2020("ALL_DIR", "directed, no quality cutoff",
             {"with_negatives": {"train": 51_636_927, "valid": 2_474_921, "test": 2_079_139},
              "graph": {"entities": 486_998, "relations": 32}}),
    _obl2020("ALL_UNDIR", "undirected, no quality cutoff",
             {"with_negatives": {"train": 41_383_093, "valid": 1_932_436, "test": 2_010_662},
              "graph": {"entities": 486_998, "relations": 32}}),
    RegisteredDataset(
        name="KGID_HQ_DIR", family="OBL2021", version="Zenodo record 5361324",
        url="https://zenodo.org/record/5361324/files/KGID_HQ_DIR.zip", layout="ids",
        description="HQ_DIR in the integer-id layout, for OBL2021 top-10 submissions",
        counts={"positives": {"test": 180_964}}, license=OBL2020_LICENSE.replace("3834052", "5361324"),
        protocol=OBL2021_PROTOCOL,
        notes="test count implied by the submission shape (361,928 = 2 x 180,964)"),
)}


class DatasetError(OpenbenchError):
    """A registry copy is missing, partial or altered."""


# ------------------------------------------------------------------------------------------
# a lab's own registry: a JSON list of entries in the same schema


REGISTRY_VARIABLE = "OPENBENCH_REGISTRY"  # registry files (os.pathsep-separated) added to the built-in one
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a folder name under the data root
USER_FIELDS = {"name": str, "url": str, "sha256": str, "layout": str, "size": int, "license": str, "version": str,
               "description": str, "family": str, "citation": str, "counts": dict}
REQUIRED_FIELDS = ("name", "url", "sha256", "layout", "license")
_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object"}
_added_files: list = []


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
    unknown = sorted(set(item) - set(USER_FIELDS))
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown field(s) {', '.join(unknown)}"
        raise InputError(f"{where} {problem}; expected the fields {', '.join(USER_FIELDS)}", path)
    for key, kind in USER_FIELDS.items():
        if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
            raise InputError(f"{where}: {key} must be {_KIND_NAMES[kind]}", path)
    name = str(item["name"])  # a string: checked above
    if not NAME_PATTERN.fullmatch(name):
        raise InputError(f"{where}: the name must be letters, digits, '_', '.' or '-' (at most 64, not starting "
                         "with a dot): it names the dataset's folder", path)
    if not re.fullmatch(r"https?://[^\s]+", item["url"]):
        raise InputError(f"{where}: url must be an http(s) URL", path)
    if not re.fullmatch(r"[0-9a-f]{64}", item["sha256"]):
        raise InputError(f"{where}: sha256 must be 64 lowercase hex digits (the archive's checksum)", path)
    if item["layout"] not in ("samples", "ids"):
        raise InputError(f"{where}: layout {item['layout']!r}; expected samples (OpenBioLink split files) or ids "
                         "(the KGID layout), in a zip archive", path)
    if "size" in item and item["size"] <= 0:
        raise InputError(f"{where}: size must be a positive number of bytes", path)
    if not item["url"].rsplit("/", 1)[-1]:
        raise InputError(f"{where}: the url must end in the archive's file name", path)
    return RegisteredDataset(name=name, family=item.get("family", "user registry"),
                             version=item.get("version", "unversioned"), url=item["url"], layout=item["layout"],
                             description=item.get("description", ""), counts=item.get("counts", {}),
                             license=item["license"], protocol=OBL2020_PROTOCOL, size=item.get("size"),
                             sha256=item["sha256"], citation=item.get("citation", ""), source=str(path))


def read_registry_file(path) -> Dict[str, RegisteredDataset]:
    """The entries of a registry file: a JSON list of objects with ``name``, ``url`` (a zip
    archive), ``sha256``, ``layout`` (``samples`` or ``ids``), ``license`` and optionally
    ``size``, ``version``, ``description``, ``family``, ``citation``, ``counts``. A name may not
    repeat nor take a built-in one."""
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
    lines = [f"{'name':<12} {'family':<16} {'version':<22} {'checksum':<15} {'entities':>9} {'relations':>9}  url"]
    for entry in registry().values():
        graph = entry.counts.get("graph", {})
        checksum = f"sha256 {entry.sha256[:8]}" if entry.sha256 else f"md5 {entry.md5[:8]}" if entry.md5 else "unknown"
        lines.append(f"{entry.name:<12} {entry.family:<16} {entry.version:<22} {checksum:<15} "
                     f"{graph.get('entities', '?'):>9} {graph.get('relations', '?'):>9}  {entry.url}")
    return "\n".join(lines)


def lookup(name: str) -> RegisteredDataset:
    key = name.strip()
    entries = registry()
    match = entries.get(key) or next((e for n, e in entries.items() if n.lower() == key.lower()), None)
    if match is None:
        raise InputError(f"unknown dataset {name!r}{_closest(name)}; registered: {', '.join(entries)}")
    return match


def data_root(root=None) -> Path:
    """``root``, else $OPENBENCH_DATA_DIR, else the user's data directory (platformdirs)."""
    if root:
        return Path(root)
    if os.environ.get(ROOT_VARIABLE):
        return Path(os.environ[ROOT_VARIABLE])
    import platformdirs

    return platformdirs.user_data_path("openbench") / "datasets"


def _usable_root(root: Path) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"the datasets folder cannot be created ({error.strerror}); give --root or set "
                         f"${ROOT_VARIABLE} to a writable folder", root) from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise InputError(f"the datasets folder is not writable; give --root or set ${ROOT_VARIABLE}", root)
    return root


def read_marker(folder: Path) -> Optional[dict]:
    """The verification record of a registry copy, or None (not a registry copy, or unreadable)."""
    path = Path(folder) / MARKER
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("files"), dict) else None


def _file_record(path: Path) -> dict:
    from graphgen.download import sha256_of

    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "sha256": sha256_of(path)}


def _altered_files(folder: Path, marker: dict) -> list:
    """Files missing or changed since verification. Size and modification time decide for most;
    a file whose time changed is hashed, so an edit that keeps the size is found too."""
    from graphgen.download import sha256_of

    altered = []
    for name, record in sorted(marker.get("files", {}).items()):
        path = folder / name
        if not isinstance(record, dict) or not path.is_file():
            altered.append(name)
            continue
        status = path.stat()
        if status.st_size != record.get("size"):
            altered.append(name)
        elif status.st_mtime_ns != record.get("mtime_ns") and sha256_of(path) != record.get("sha256"):
            altered.append(name)
    return altered


def get(name: str, root=None, *, mirror: Optional[str] = None, force: bool = False, progress: bool = True) -> Path:
    """The verified local copy of registry dataset ``name`` under ``root``, downloading it if needed.

    :param mirror: base URL serving the archive instead of the provider (also $OPENBENCH_DATASET_MIRROR).
    :param force: download again even over a copy that fails verification; the old copy stays in
        place until the new one has passed every check.
    """
    from filelock import FileLock

    from graphgen.download import sidecar_path

    entry = lookup(name)
    root = _usable_root(data_root(root))
    folder = root / entry.name
    with FileLock(str(root / f".{entry.name}.lock")):
        if folder.exists():
            marker = read_marker(folder)
            problem = ("it holds no verification record (a partial or foreign copy)" if marker is None else
                       _describe_altered(_altered_files(folder, marker)))
            if problem is None:
                logger.info("%s: reusing the verified copy in %s", entry.name, folder)
                return folder
            if not force:
                raise DatasetError(f"{folder}: not a verified copy of {entry.name}: {problem}; remove the folder "
                                   f"or pass --force to download it again")
            check_output_folder(folder, extra_markers=(MARKER,))  # never replace what openbench did not write
            logger.warning("%s: replacing %s once the new copy is verified (%s)", entry.name, folder, problem)
        archive = _download(entry, root, mirror, progress)
        try:
            digest = sidecar_path(archive).read_text().strip()  # fetch hashed the archive once already
            _check_pin(entry, root, digest, archive)
            _unpack(entry, archive, digest, folder)
            _pin(entry, root, digest)  # only an archive that passed every check is pinned
        finally:
            archive.unlink(missing_ok=True)
            sidecar_path(archive).unlink(missing_ok=True)
    return folder


def _describe_altered(altered: list) -> Optional[str]:
    if not altered:
        return None
    return f"{len(altered)} file(s) missing or changed since verification (first: {altered[0]})"


def _read_pins(root: Path) -> Dict[str, str]:
    path = root / PINS
    if not path.is_file():
        return {}
    pins = read_json(path, "checksum record")
    if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items()):
        raise InputError("expected a JSON object of dataset name -> sha256; fix or remove the file", path)
    return pins


def _download(entry: RegisteredDataset, root: Path, mirror: Optional[str], progress: bool) -> Path:
    """The archive, fetched (resumable) and checked against the registry's size/md5 where published."""
    from graphgen.download import Remote, fetch

    base = mirror or os.environ.get(MIRROR_VARIABLE)
    url = f"{base.rstrip('/')}/{entry.archive}" if base else entry.url
    remote = Remote(source=entry.name, url=url, filename=entry.archive, sha256=entry.sha256,
                    version=entry.version, md5=entry.md5, size=entry.size)
    return fetch(remote, root / ".downloads", progress=progress)


def _check_pin(entry: RegisteredDataset, root: Path, digest: str, archive: Path) -> None:
    pinned = _read_pins(root).get(entry.name)
    if pinned is not None and pinned != digest:
        raise DatasetError(f"{archive}: sha256 {digest} differs from the one recorded at the first verified "
                           f"download ({pinned}, in {root / PINS}); the archive changed or is corrupt")


def _pin(entry: RegisteredDataset, root: Path, digest: str) -> None:
    if entry.sha256:  # stated by the entry and checked by the download: nothing to record
        return
    pins = _read_pins(root)
    if entry.name not in pins:
        pins[entry.name] = digest
        write_text_atomic(root / PINS, json.dumps(pins, indent=2, sort_keys=True) + "\n")
        logger.warning("%s: no published checksum; recorded the verified archive's sha256 in %s, and later "
                       "downloads must match it", entry.name, root / PINS)


def _unpack(entry: RegisteredDataset, archive: Path, digest: str, folder: Path) -> None:
    """Check the zip's CRCs, extract, check the layout, write the record, swap into place."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            try:
                broken = bundle.testzip()
            except (zlib.error, EOFError) as error:  # damaged compressed data fails before its CRC
                broken = f"(undecodable: {error})"
            if broken is not None:
                raise DatasetError(f"{archive}: member {broken!r} fails its CRC check; the archive is corrupted")
            _check_member_names(bundle, archive)

            def fill(staging: Path) -> None:
                with tempfile.TemporaryDirectory(dir=staging.parent, prefix=f".{entry.name}.unzip.") as scratch:
                    bundle.extractall(scratch)
                    top = [p for p in Path(scratch).iterdir()]
                    inner = top[0] if len(top) == 1 and top[0].is_dir() and top[0].name == entry.name else None
                    source = inner or Path(scratch)
                    for item in source.iterdir():
                        shutil.move(str(item), str(staging / item.name))
                layout, _ = resolve_layout(staging, None)
                if layout != entry.layout:
                    raise DatasetError(f"{archive}: unpacked into the {layout!r} layout, expected {entry.layout!r}")
                files = {str(p.relative_to(staging)): _file_record(p) for p in sorted(staging.rglob("*"))
                         if p.is_file()}
                record = {"name": entry.name, "family": entry.family, "version": entry.version, "url": entry.url,
                          "archive_sha256": digest, "files": files}
                (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

            replace_folder(folder, fill, kind=f"dataset {entry.name}", extra_markers=(MARKER,), checked=False)
    except zipfile.BadZipFile as error:
        raise DatasetError(f"{archive}: not a readable zip archive ({error})") from None
    except InputError as error:
        raise DatasetError(f"{archive}: the archive does not hold a {entry.layout!r} dataset: {error}") from None


def _check_member_names(bundle: zipfile.ZipFile, archive: Path) -> None:
    for member in bundle.namelist():
        parts = Path(member).parts
        if member.startswith("/") or ".." in parts:
            raise DatasetError(f"{archive}: member {member!r} would unpack outside the dataset folder")


def registry_of(folder) -> Optional[dict]:
    """``{"name", "version"}`` when ``folder`` (or its parent, for train_test_data/) is a verified copy."""
    folder = Path(folder)
    for candidate in (folder, folder.parent):
        marker = read_marker(candidate)
        if marker and "name" in marker:
            return {"name": marker["name"], "version": marker.get("version", "unknown"),
                    "archive_sha256": marker.get("archive_sha256")}
    return None


def resolve(path_or_name, root=None, **options) -> Path:
    """A dataset argument: an existing path as given, a registry name as its verified copy (fetched
    by :func:`get` when missing); anything else unchanged, for the loader to report."""
    path = Path(path_or_name)
    if path.exists() or path.is_symlink():
        return path
    entries = registry()
    if str(path_or_name).strip().lower() in {name.lower() for name in entries}:
        return get(str(path_or_name), root, **options)
    raise InputError(f"no such folder, and not a dataset name of the registry{_closest(str(path_or_name))}; the "
                     f"registry knows {', '.join(entries)} (openbench datasets list)", path)


def _closest(name: str) -> str:
    """' (did you mean X?)' for the registry name closest to ``name``, or ''."""
    import difflib

    by_lower = {known.lower(): known for known in registry()}
    found = difflib.get_close_matches(name.strip().lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[found[0]]}?)" if found else ""
