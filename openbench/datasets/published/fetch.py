"""Fetching a registered dataset: download (resumable, bounded, through
:func:`openbench._io.download.fetch`), verify each file against the checksum its publisher states
(or, without one, the sha256 pinned at first use in ``openbench-checksums.json`` under the data
root, with a warning), unpack a split archive (zip CRCs and member paths checked) or convert a
published KG once with its format's reader into ``graph/`` (and its official split), then swap the
folder into place with a ``.openbench-verified.json`` marker. A folder without a valid marker (a
partial or altered copy) is refused; a second call reuses the verified copy. Any failure keeps
nothing.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from openbench._io import check_output_folder, read_json, replace_folder, write_text_atomic
from openbench.datasets.published.catalogue import DatasetError, RegisteredDataset, RemoteFile
from openbench.datasets.published.registries import lookup
from openbench.errors import InputError
from openbench.datasets.layouts import resolve_layout

PathLike = Union[str, Path]

__all__ = ["MARKER", "PINS", "ROOT_VARIABLE", "MIRROR_VARIABLE", "data_root", "read_marker", "get"]

logger = logging.getLogger(__name__)

MARKER = ".openbench-verified.json"
PINS = "openbench-checksums.json"
ROOT_VARIABLE = "OPENBENCH_DATA_DIR"
MIRROR_VARIABLE = "OPENBENCH_DATASET_MIRROR"


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
    from openbench._io.download import sha256_of

    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "sha256": sha256_of(path)}


def _altered_files(folder: Path, marker: dict) -> list:
    """Files missing or changed since verification. Size and modification time decide for most;
    a file whose time changed is hashed, so an edit that keeps the size is found too."""
    from openbench._io.download import sha256_of

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


def get(name: str, root=None, *, mirror: Optional[str] = None, force: bool = False, progress: bool = True,
        files: Sequence[PathLike] = (), download: bool = True) -> Path:
    """The verified local copy of registry dataset ``name`` under ``root``, downloading it if needed.

    :param mirror: base URL serving the archive instead of the provider (also $OPENBENCH_DATASET_MIRROR);
        ``file:///folder`` reads the files from a local folder.
    :param force: download again even over a copy that fails verification; the old copy stays in
        place until the new one has passed every check.
    :param files: local copies of the dataset's files (a one-file dataset: any name; else matched by
        file name), verified against the catalogue's checksums instead of downloaded.
    :param download: False: never download; a missing copy is an error naming the command that
        fetches it (what every command but ``datasets get`` does).
    """
    from filelock import FileLock

    from openbench._io.download import sidecar_path

    entry = lookup(name)
    local = _local_files(entry, files)
    root = _usable_root(data_root(root))
    folder = root / entry.name
    if not download and not folder.exists():
        raise InputError(f"{entry.name} is not on this machine yet; fetch and verify it first: openbench datasets get "
                         f"{entry.name} (or, with a copy of its file(s): openbench datasets get {entry.name} --file "
                         "PATH); nothing was downloaded")
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
        fetched = _download_files(entry, root, mirror, progress, local)
        try:
            if entry.native:
                _convert_native(entry, fetched, folder)
            else:
                _unpack(entry, fetched[0][1], fetched[0][2], folder)
            for file, _, digest in fetched:
                _pin(entry, root, digest, file)  # only files that passed every check are pinned
        finally:
            for _, path, _ in fetched:
                path.unlink(missing_ok=True)
                sidecar_path(path).unlink(missing_ok=True)
    return folder


def _local_files(entry: RegisteredDataset, files: Sequence[PathLike]) -> Dict[str, Path]:
    """{the entry's file name: the user's local copy} of ``files``; a file the entry has no place
    for is an error naming the names it has."""
    paths = [Path(path) for path in files]
    names = [file.name for file in entry.remote_files]
    if len(names) == 1 and len(paths) == 1:
        return {names[0]: paths[0]}
    matched: Dict[str, Path] = {}
    for path in paths:
        if path.name not in names:
            raise InputError(f"{entry.name} has no file named {path.name!r}: its files are {', '.join(names)}", path)
        matched[path.name] = path
    return matched


def _download_files(entry: RegisteredDataset, root: Path, mirror: Optional[str],
                    progress: bool, local: Optional[Dict[str, Path]] = None) -> List[Tuple[RemoteFile, Path, str]]:
    """(file, downloaded path, sha256) of each of the entry's files, each verified against its
    published checksum or pinned one; a failure removes what this call fetched."""
    from openbench._io.download import sidecar_path

    fetched: List[Tuple[RemoteFile, Path, str]] = []
    try:
        for file in entry.remote_files:
            if local and file.name in local:
                path = _take_local(entry, file, root, local[file.name])
            else:
                path = _download(entry, file, root, mirror, progress)
            fetched.append((file, path, sidecar_path(path).read_text().strip()))  # fetch hashed it once already
            _check_pin(entry, root, fetched[-1][2], path, file)
    except BaseException:
        for _, path, _ in fetched:
            path.unlink(missing_ok=True)
            sidecar_path(path).unlink(missing_ok=True)
        raise
    return fetched


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


def _download(entry: RegisteredDataset, file: RemoteFile, root: Path, mirror: Optional[str], progress: bool) -> Path:
    """One file, fetched (resumable) and checked against its published size/md5/sha256/git id."""
    from openbench._io.download import Remote, fetch

    base = mirror or os.environ.get(MIRROR_VARIABLE)
    url = f"{base.rstrip('/')}/{file.name}" if base else file.url
    remote = Remote(source=entry.name, url=url, filename=file.name, sha256=file.sha256, version=entry.version,
                    md5=file.md5, size=file.size, git_sha1=file.git_sha1)
    # a split archive keeps its old place; a KG's files (train.tsv, …) get the entry's own folder
    cache = root / ".downloads" / entry.name if entry.native else root / ".downloads"
    return fetch(remote, cache, progress=progress)


def _take_local(entry: RegisteredDataset, file: RemoteFile, root: Path, source: Path) -> Path:
    """The user's copy of one of the entry's files, checked as its download would be."""
    from openbench._io.download import Remote, take_local

    remote = Remote(source=entry.name, url=file.url, filename=file.name, sha256=file.sha256, version=entry.version,
                    md5=file.md5, size=file.size, git_sha1=file.git_sha1)
    cache = root / ".downloads" / entry.name if entry.native else root / ".downloads"
    return take_local(remote, source, cache)


def _pin_key(entry: RegisteredDataset, file: RemoteFile) -> str:
    return entry.name if len(entry.remote_files) == 1 else f"{entry.name}/{file.name}"


def _check_pin(entry: RegisteredDataset, root: Path, digest: str, archive: Path, file: RemoteFile) -> None:
    pinned = _read_pins(root).get(_pin_key(entry, file))
    if pinned is not None and pinned != digest:
        raise DatasetError(f"{archive}: sha256 {digest} differs from the one recorded at the first verified "
                           f"download ({pinned}, in {root / PINS}); the file changed or is corrupt")


def _pin(entry: RegisteredDataset, root: Path, digest: str, file: RemoteFile) -> None:
    if file.checked:  # a checksum stated by the entry and checked by the download: nothing to record
        return
    pins = _read_pins(root)
    key = _pin_key(entry, file)
    if key not in pins:
        pins[key] = digest
        write_text_atomic(root / PINS, json.dumps(pins, indent=2, sort_keys=True) + "\n")
        logger.warning("%s: no published checksum for %s; recorded the verified file's sha256 in %s, and later "
                       "downloads must match it", entry.name, file.name, root / PINS)


def _unpack(entry: RegisteredDataset, archive: Path, digest: str, folder: Path) -> None:
    """Check the zip's CRCs, extract, check the layout, write the record, swap into place."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            _check_zip(bundle, archive)

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


def _convert_native(entry: RegisteredDataset, fetched: List[Tuple[RemoteFile, Path, str]], folder: Path) -> None:
    """Unpack the verified files into ``native/``, convert them (:func:`openbench.datasets.published.native.convert`),
    write the verification record, swap the folder into place; a failure keeps nothing."""
    from openbench.datasets.published.native import convert

    checksums = {file.name: digest for file, _, digest in fetched}

    def fill(staging: Path) -> None:
        native = staging / "native"
        native.mkdir()
        for file, path, _ in fetched:
            _place(path, native)
        _flatten(native)
        dataset = {"name": entry.name, "version": entry.version, "format": entry.layout, "url": entry.url,
                   "files_sha256": checksums}
        try:
            info = convert(entry.layout, native, staging, dataset, entry.counts.get("check", {}))
        except InputError as error:  # named by the file as published, not by the staging folder
            where = error.path or ""
            shown = str(Path(where).relative_to(native)) if where.startswith(str(native) + os.sep) else where
            place = f"{shown}, line {error.line}: " if shown and error.line else f"{shown}: " if shown else ""
            raise DatasetError(f"{entry.name}: {place}{error.reason}; nothing was kept") from None
        files = {str(p.relative_to(staging)): _file_record(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        record = {"name": entry.name, "family": entry.family, "version": entry.version, "url": entry.url,
                  "format": entry.layout, "archive_sha256": fetched[0][2], "files_sha256": checksums,
                  "evaluation": info["evaluation"], "counts": info["counts"], "problems": info["problems"],
                  "files": files}
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    replace_folder(folder, fill, kind=f"dataset {entry.name}", extra_markers=(MARKER,), checked=False)


def _place(path: Path, native: Path) -> None:
    """A downloaded file into ``native``: a zip or tar archive unpacked (CRCs checked, no member
    outside the folder, macOS resource forks skipped), any other file (``.gz`` too: the readers
    inflate it) moved as it is."""
    name = path.name
    if name.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as bundle:
                _check_zip(bundle, path)
                bundle.extractall(native, members=[m for m in bundle.namelist() if not _resource_fork(m)])
        except zipfile.BadZipFile as error:
            raise DatasetError(f"{path}: not a readable zip archive ({error})") from None
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        import tarfile

        try:
            with tarfile.open(path) as bundle:
                members = [m for m in bundle.getmembers() if not _resource_fork(m.name)]
                bundle.extractall(native, members=members, filter="data")  # refuses links and paths outside
        except tarfile.FilterError as error:
            raise DatasetError(f"{path}: {error}: a member would unpack outside the dataset folder, or is a link "
                               "or device; refused") from None
        except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
            raise DatasetError(f"{path}: not a readable tar archive ({error})") from None
    else:
        shutil.move(str(path), str(native / name))


def _resource_fork(member: str) -> bool:
    parts = Path(member).parts
    return any(part == "__MACOSX" or part.startswith("._") for part in parts)


def _flatten(native: Path) -> None:
    """An archive that holds one folder (ogbl-biokg's ``biokg/``): its contents take its place."""
    entries = list(native.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        inner = entries[0].rename(native / f".{entries[0].name}.unpacked")  # may hold its own name
        for item in list(inner.iterdir()):
            shutil.move(str(item), str(native / item.name))
        inner.rmdir()


def _check_zip(bundle: zipfile.ZipFile, archive: Path) -> None:
    """Every member's CRC, and no member that would unpack outside the folder."""
    try:
        broken = bundle.testzip()
    except (zlib.error, EOFError) as error:  # damaged compressed data fails before its CRC
        broken = f"(undecodable: {error})"
    if broken is not None:
        raise DatasetError(f"{archive}: member {broken!r} fails its CRC check; the archive is corrupted")
    _check_member_names(bundle, archive)


def _check_member_names(bundle: zipfile.ZipFile, archive: Path) -> None:
    for member in bundle.namelist():
        parts = Path(member).parts
        if member.startswith("/") or ".." in parts:
            raise DatasetError(f"{archive}: member {member!r} would unpack outside the dataset folder")


