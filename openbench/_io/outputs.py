"""Outputs: only ever replace what openbench wrote, atomically, with the modes the umask gives.

**Folders.** :func:`replace_folder` fills a staging folder *beside* its target (same filesystem),
writes a marker file (:data:`MARKER`, listing what it holds) into it, and swaps it with the target
in one step (``renameat2(RENAME_EXCHANGE)`` where the kernel has it; two renames otherwise, with
recovery by the next run), then removes the old folder. A kill at any moment leaves the complete
old or the complete new output at the target. Before anything is written,
:func:`check_output_folder` refuses (:class:`OutputRefused`, exit status 2) a target that is the
current directory or one of its ancestors, an input of the command, a folder holding an input or
lying inside an input folder, a file, a symbolic link, or a non-empty folder that holds anything
openbench did not write.

**Files.** :func:`atomic_path` writes beside the file and renames over it; the file must not be
an input or a folder, and an existing one is replaced only when the caller's ``recognise`` says
openbench wrote it (or it is empty).

**Leftovers.** Staging and retired folders and temporary files are named
``.<target>~openbench-<role>~<host>~<pid>~<token>``; the next write to the same target removes
those of dead processes on this host, never a live run's.
"""
from __future__ import annotations

import ctypes
import errno
import json
import math
import unicodedata
import os
import tempfile
import re
import secrets
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from openbench.errors import OpenbenchError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["MARKER", "OutputRefused", "OutputFailed", "NAME_BYTES", "error_code", "replace_folder", "check_output_folder", "check_output_file", "atomic_path",
           "write_text_atomic", "json_text", "write_json", "write_marker", "is_openbench_folder", "clean_leftovers",
           "file_mode", "folder_mode", "SequentialWriter", "JSON_SIGNATURE", "is_openbench_json",
           "is_openbench_png"]

PathLike = Union[str, Path]
MARKER = ".openbench-output.json"
# what every JSON document openbench writes carries at its top level (result records, summaries)
JSON_SIGNATURE = {"written_by": "openbench"}
# the largest JSON file read to recognise it as openbench's (a record of thousands of relations
# is a few MB; a file above this is never one openbench replaces)
RECOGNISED_JSON_BYTES = 256 << 20
ALIGNMENT = 4096  # O_DIRECT wants file offsets, lengths and buffer addresses on the logical block size
DIRECT_BLOCK = 64 << 20
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class OutputRefused(OpenbenchError):
    """An output location openbench must not write to; nothing was touched. Exit status 2."""

    exit_code = 2

    def __init__(self, path: PathLike, reason: str):
        self.path = str(path)
        super().__init__(f"{path}: refused as output: {reason}; nothing was written")


# ------------------------------------------------------------------------------------------
# modes


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - platforms without /proc
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~current_umask()


def folder_mode() -> int:
    return 0o777 & ~current_umask()


# ------------------------------------------------------------------------------------------
# names of staging folders, retired folders and temporary files


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


NAME_BYTES = 255  # the longest file name common filesystems take
_SUFFIX_BYTES = 80  # "~openbench-staging~<host, at most 40>~<pid>~<token>" and the leading dot


def _stem(target: Path) -> str:
    """The target's name as its side files carry it: whole where the side name fits in
    :data:`NAME_BYTES`, else a prefix and a digest of the whole name (the same for every run)."""
    name = target.name
    if len(os.fsencode(name)) + _SUFFIX_BYTES <= NAME_BYTES:
        return name
    import hashlib

    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    prefix = os.fsencode(name)[:NAME_BYTES - _SUFFIX_BYTES - 18].decode("utf-8", "ignore")
    return f"{prefix}-{digest}"


def _side_stem(target: Path, place: Path) -> str:
    """The stem of ``target``'s side files in the folder ``place``: its name beside it, else its
    path below ``place`` with ``%`` for each separator (``K%graph_files``: no other output's)."""
    if target.parent == place:
        return _stem(target)
    return _stem(Path("%".join(target.relative_to(place).parts)))


def _side_name(target: Path, role: str, place: Optional[Path] = None) -> Path:
    """A staging, retired or temporary name for ``target`` in ``place`` (default: beside it)."""
    place = target.parent if place is None else place
    return place / f".{_side_stem(target, place)}~openbench-{role}~{_host()}~{os.getpid()}~{secrets.token_hex(4)}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


def _leftovers(target: Path, place: Optional[Path] = None) -> List[tuple]:
    """(path, role, pid) of this host's dead runs' staging/retired folders and temporary files of
    ``target`` in ``place`` (default: beside it)."""
    place = target.parent if place is None else place
    prefix = f".{_side_stem(target, place)}~openbench-"
    found = []
    try:
        entries = list(os.scandir(place))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        parts = entry.name[len(prefix):].split("~")
        if len(parts) != 4 or parts[0] not in ("staging", "retired", "tmp") or not parts[2].isdigit():
            continue
        role, host, pid = parts[0], parts[1], int(parts[2])
        if host == _host() and pid != os.getpid() and not _pid_alive(pid):
            found.append((Path(entry.path), role, pid))
    return found


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def clean_leftovers(target: PathLike, place: Optional[PathLike] = None) -> int:
    """Remove dead runs' staging folders, retired folders and temporary files of ``target`` (in
    ``place``, where its side files go: default beside it).

    A missing target with a dead run's retired folder beside it is the complete old output of a
    run killed between two renames (filesystems without an atomic exchange): it is put back.
    Returns how many leftovers were removed.
    """
    target = Path(target)
    leftovers = _leftovers(target, None if place is None else Path(place))
    if not target.exists() and not target.is_symlink():
        retired = [path for path, role, _ in leftovers if role == "retired" and (path / MARKER).is_file()]
        if retired:
            newest = max(retired, key=lambda path: path.stat().st_mtime)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(newest, target)
            leftovers = [item for item in leftovers if item[0] != newest]
    for path, _, _ in leftovers:
        _remove(path)
    return len(leftovers)


# ------------------------------------------------------------------------------------------
# what openbench wrote


def _read_marker(folder: Path) -> Optional[dict]:
    path = folder / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(marker, dict) or marker.get("written_by") != "openbench":
        return None
    entries = marker.get("entries")
    if not isinstance(entries, list) or not all(isinstance(entry, str) for entry in entries):
        return None
    return marker


def _foreign_entries(folder: Path, owned: Iterable[str], extra_markers: Sequence[str] = ()) -> List[str]:
    """Relative paths under ``folder`` that no marker lists: its own marker's entries are owned,
    and inside a subfolder with a valid marker of its own (a nested openbench output) that
    marker's entries too, but never more: a user's file in a nested output, or a folder holding a
    copied marker, is foreign."""
    owned = set(owned)
    foreign: List[str] = []

    def walk(current: Path, relative: str) -> None:
        for entry in sorted(os.scandir(current), key=lambda e: e.name):
            name = f"{relative}{entry.name}"
            if name in owned or (not relative and entry.name in (MARKER, *extra_markers)):
                continue
            if entry.is_dir(follow_symlinks=False):
                nested = _read_marker(Path(entry.path))
                if nested is not None:
                    owned.add(f"{name}/{MARKER}")
                    owned.update(f"{name}/{listed}" for listed in nested["entries"])
                walk(Path(entry.path), name + "/")
            else:
                foreign.append(name)

    walk(folder, "")
    return foreign


def is_openbench_folder(folder: PathLike, extra_markers: Sequence[str] = ()) -> bool:
    """True when ``folder`` holds a valid marker and nothing the marker does not list."""
    folder = Path(folder)
    marker = _read_marker(folder)
    return marker is not None and not _foreign_entries(folder, marker["entries"], extra_markers)


def write_marker(folder: PathLike, kind: str, entries: Optional[Sequence[str]] = None) -> Path:
    """Write the marker that makes ``folder`` an openbench output; ``entries`` default to every
    file below it (relative paths, sorted), so that nothing added later is taken for ours."""
    from openbench import __version__

    folder = Path(folder)
    if entries is None:
        entries = sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                         if (path.is_file() or path.is_symlink()) and path.name != MARKER)
    marker = {**JSON_SIGNATURE, "kind": kind, "version": __version__, "entries": list(entries)}
    path = folder / MARKER
    path.write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------
# checks


def _resolved(path: PathLike) -> Path:
    return Path(os.path.abspath(Path(path).expanduser())).resolve()


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _check_against_inputs(target: Path, inputs: Iterable[Optional[PathLike]], folder: bool = True) -> None:
    """``target`` is none of the inputs; a folder output also holds none and lies in no input
    folder (a new file inside an input folder changes none of its files)."""
    resolved = _resolved(target)
    for given in inputs:
        if given is None or str(given) == "":
            continue
        source = _resolved(given)
        if source == resolved:
            raise OutputRefused(target, f"it is an input of this command ({given})")
        if not folder:
            continue
        if _within(source, resolved):
            raise OutputRefused(target, f"it holds an input of this command ({given})")
        if Path(given).is_dir() and _within(resolved, source):
            raise OutputRefused(target, f"it lies inside an input folder of this command ({given})")


def check_output_folder(target: PathLike, inputs: Iterable[Optional[PathLike]] = (),
                        extra_markers: Sequence[str] = ()) -> None:
    """Raise :class:`OutputRefused` unless ``target`` may be (re)written as a folder output.

    :param extra_markers: other marker file names that also mark a folder as openbench's (the
        dataset registry's verification record).
    """
    target = Path(target)
    resolved = _resolved(target)
    cwd = _resolved(os.getcwd())
    if _within(cwd, resolved):
        raise OutputRefused(target, "it is the current directory or one of its ancestors")
    _check_against_inputs(target, inputs)
    if target.is_symlink():
        raise OutputRefused(target, "it is a symbolic link; give the folder itself")
    if not target.exists():
        _check_place(target)
        return
    if not target.is_dir():
        raise OutputRefused(target, "it is a file, not a folder")
    if os.path.ismount(target):
        raise OutputRefused(target, "it is a mount point, which cannot be replaced; give a folder inside it")
    try:
        has_content = any(not path.is_dir() or path.is_symlink() for path in target.rglob("*"))
    except OSError as error:
        raise OutputRefused(target, f"it cannot be read ({error.strerror})") from None
    if not has_content:
        return  # empty, or empty folders only
    marker = _read_marker(target)
    extra = [name for name in extra_markers if (target / name).is_file()]
    if marker is None and not extra:
        raise OutputRefused(target, "a folder with content openbench did not write (no openbench marker); "
                                    "give an empty or new folder")
    foreign = _foreign_entries(target, marker["entries"] if marker else [], extra_markers) if marker else []
    if foreign:
        raise OutputRefused(target, f"it holds {len(foreign)} file(s) openbench did not write (first: {foreign[0]}); "
                                    "give an empty or new folder")


def _check_place(target: Path) -> None:
    """A new output's place must be creatable: every existing ancestor a folder, the nearest one
    writable (probed by creating and removing a file of openbench's own, which tells a read-only or
    virtual file system such as /proc from a writable one where permission bits alone do not)."""
    ancestor = target.absolute().parent
    while not ancestor.exists():
        if ancestor.is_symlink():  # a dangling link among the ancestors
            raise OutputRefused(target, f"{ancestor} is a broken symbolic link")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputRefused(target, f"{ancestor} is a file, not a folder")
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".openbench-probe-", dir=ancestor)
    except OSError as error:
        raise OutputRefused(target, f"nothing can be created in {ancestor} ({error.strerror})") from None
    os.close(descriptor)
    os.unlink(probe)


def check_output_file(path: PathLike, inputs: Iterable[Optional[PathLike]] = (),
                      recognise: Optional[Callable[[Path], bool]] = None) -> None:
    """Raise :class:`OutputRefused` unless ``path`` may be (re)written as a file output: not a
    folder, not an input, and, when it exists and ``recognise`` is given, written by openbench."""
    path = Path(path)
    if path.is_dir():
        raise OutputRefused(path, "it is a folder; give a file name")
    _check_against_inputs(path, inputs, folder=False)
    if not path.exists():
        _check_place(path)
    if path.exists() and not path.is_file():
        raise OutputRefused(path, "it is not a regular file")
    if recognise is not None and path.is_file() and path.stat().st_size and not recognise(path):
        raise OutputRefused(path, "the file exists and was not written by openbench; give a new file name")


def is_openbench_json(path: Path) -> bool:
    """A JSON object carrying :data:`JSON_SIGNATURE` (or an older openbench result record)."""
    try:
        if path.stat().st_size > RECOGNISED_JSON_BYTES:  # no openbench record is that large
            return False
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    legacy = {"metrics", "protocol", "dataset", "model", "version"} <= set(value)
    return value.get("written_by") == "openbench" or legacy


def is_openbench_png(path: Path) -> bool:
    """A PNG whose ``Software`` text chunk says openbench (openbench's plots carry it)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
    except OSError:
        return False
    return head.startswith(b"\x89PNG\r\n\x1a\n") and b"Software\x00openbench" in head


# ------------------------------------------------------------------------------------------
# writing


def _libc_exchange() -> Optional[Callable[[bytes, bytes], int]]:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int

    def exchange(first: bytes, second: bytes) -> int:
        if function(_AT_FDCWD, first, _AT_FDCWD, second, _RENAME_EXCHANGE) == 0:
            return 0
        return ctypes.get_errno()

    return exchange


_EXCHANGE = _libc_exchange()


def exchange_paths(first: Path, second: Path) -> bool:
    """Swap two existing paths in one atomic step; False where the platform cannot."""
    if _EXCHANGE is None:
        return False
    code = _EXCHANGE(os.fsencode(first), os.fsencode(second))
    if code == 0:
        return True
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _swap_in(staging: Path, final: Path, place: Optional[Path] = None) -> None:
    """Put the complete ``staging`` folder at ``final``; the old one, if any, is removed after
    (retired, without an atomic exchange, into ``place``: default beside ``final``)."""
    while True:
        if not final.exists():
            try:
                os.rename(staging, final)
                return
            except OSError as error:
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                continue  # another run put its output there meanwhile: replace that one
        if exchange_paths(staging, final):
            _remove(staging)  # now the old folder
            return
        retired = _side_name(final, "retired", place)
        try:
            os.rename(final, retired)
        except FileNotFoundError:
            continue
        os.rename(staging, final)
        _remove(retired)
        return


def replace_folder(final: PathLike, fill: Callable[[Path], None], *, inputs: Iterable[Optional[PathLike]] = (),
                   kind: str = "output", extra_markers: Sequence[str] = (), checked: bool = True,
                   within: Optional[PathLike] = None) -> Path:
    """Run ``fill`` on a staging folder, mark it, then swap it in atomically.

    :param inputs: the command's input paths; ``final`` must be none of them, hold none and lie
        in none (see :func:`check_output_folder`).
    :param kind: what the folder holds, recorded in the marker ("split", "graph_files", ...).
    :param checked: False only where the caller has already checked ``final``.
    :param within: the folder the user named, where ``final`` is a part of it (generate's
        ``graph_files/`` inside ``--output``): the staging folder then lies beside ``within``
        (on the same filesystem), and a missing ``within`` is created with its part in one rename,
        so that a kill at any instant leaves ``within`` as it was or with the new part, nothing
        else (default: staging beside ``final``).
    """
    final = Path(final)
    inputs = list(inputs)
    if checked:
        check_output_folder(final, inputs, extra_markers)
    with _writing(final):
        place = _staging_place(final, None if within is None else Path(within))
        place.mkdir(parents=True, exist_ok=True)
        clean_leftovers(final, place)
        arriving = _first_missing(final, place)  # final, or its outermost ancestor not yet there
        staging = _side_name(final, "staging", place)
        os.mkdir(staging)  # mode 0o777 less the umask
        filled = staging.joinpath(*final.relative_to(arriving).parts)
        try:
            filled.mkdir(parents=True, exist_ok=True)
            fill(filled)
            write_marker(filled, kind)
            _arrive(staging, filled, arriving, final, place)
        finally:
            if staging.exists():
                _remove(staging)
    return final


def _staging_place(final: Path, within: Optional[Path]) -> Path:
    """Where ``final``'s side folders go: beside ``within`` where given and on ``final``'s
    filesystem (a rename between them is atomic), else beside ``final``."""
    if within is None or not _within(_resolved(final), _resolved(within)):
        return final.parent
    place = within.parent

    def device(path: Path) -> int:
        while not path.exists():
            path = path.parent
        return path.stat().st_dev

    return place if device(place) == device(final.parent) else final.parent


def _first_missing(final: Path, place: Path) -> Path:
    """The outermost folder between ``place`` (exclusive) and ``final`` (inclusive) that does not
    exist yet: it arrives whole, in one rename; ``final`` where all its ancestors exist."""
    arriving = final
    while arriving.parent != place and not arriving.parent.exists() and place in arriving.parent.parents:
        arriving = arriving.parent
    return arriving


def _arrive(staging: Path, filled: Path, arriving: Path, final: Path, place: Path) -> None:
    """Swap ``filled`` in at ``final``: ``staging`` itself renamed to ``arriving`` (``final``'s
    new outermost ancestor, created meanwhile by nobody), else ``filled`` swapped with ``final``."""
    if arriving != final:
        try:
            os.rename(staging, arriving)
            return
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            final.parent.mkdir(parents=True, exist_ok=True)  # another run made the folder: join it
    _swap_in(filled, final, place)


class OutputFailed(OpenbenchError):
    """Writing an output failed for a reason of the system (a full disk, a read-only filesystem);
    what was there before is unchanged and nothing half-written is left."""


_WRITE_PROBLEMS = {
    errno.ENOSPC: "no space left on the device; free some space or write elsewhere",
    errno.EDQUOT: "the disk quota is used up; free some space or write elsewhere",
    errno.EROFS: "a read-only file system; give a place you can write to",
    errno.EACCES: "permission denied; give a place you can write to",
    errno.EPERM: "operation not permitted; give a place you can write to",
    errno.ENAMETOOLONG: "a name too long for the file system; give a shorter one",
    errno.EBUSY: "the place is busy (a mount point, or in use by another program); give another one",
    errno.EXDEV: "the staging folder and the target are on different file systems",
}


@contextmanager
def _writing(final: Path) -> Iterator[None]:
    """Turn a system's refusal to write (full disk, read-only file system, ...) into one
    :class:`OutputFailed` naming the output and what to do."""
    try:
        yield
    except OSError as error:
        code = error_code(error)
        reason = _WRITE_PROBLEMS.get(code)
        written_here = error.filename is None or _within(_resolved(error.filename), _resolved(final.parent))
        if reason is None or not (written_here or code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)):
            raise
        raise OutputFailed(f"{final}: cannot be written: {reason} ({os.strerror(code)}); the output was left as it "
                           "was and nothing half-written remains") from None


def error_code(error: OSError) -> int:
    """The errno of ``error``; Rust libraries (polars) raise plain OSErrors that carry it only in
    their message, as ``(os error 28)``."""
    if error.errno:
        return error.errno
    found = re.search(r"\(os error (\d+)\)", str(error))
    return int(found.group(1)) if found else -1


@contextmanager
def atomic_path(path: PathLike, inputs: Iterable[Optional[PathLike]] = (),
                recognise: Optional[Callable[[Path], bool]] = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The file gets the mode the umask gives; ``inputs`` and ``recognise`` as in
    :func:`check_output_file`.
    """
    path = Path(path)
    check_output_file(path, inputs, recognise)
    with _writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_leftovers(path)
        tmp_path = _side_name(path, "tmp")
        try:
            yield tmp_path
            if tmp_path.exists():
                os.chmod(tmp_path, file_mode())
            os.replace(tmp_path, path)
        finally:
            if tmp_path.exists() or tmp_path.is_symlink():
                tmp_path.unlink()


def write_text_atomic(path: PathLike, text: str, inputs: Iterable[Optional[PathLike]] = (),
                      recognise: Optional[Callable[[Path], bool]] = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path, inputs, recognise) as tmp:
        tmp.write_text(text, encoding="utf-8")


def visible(text: Any) -> str:
    """``text`` as a string whose control and format characters are shown as escapes (C0/C1
    controls: ESC, BEL, CR, LF, ... as ``\\x1b``; bidirectional and other format characters as
    ``\\u202e``; line and paragraph separators): a name someone else wrote cannot move the cursor,
    ring the terminal, start a line of its own or reorder what follows it, and a reader still sees
    that it holds such a character."""
    return "".join(_escape(character) if unicodedata.category(character) in _INVISIBLE else character
                   for character in str(text))


_INVISIBLE = ("Cc", "Cf", "Zl", "Zp")


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def finite(value: Any) -> Any:
    """``value`` (JSON values) with every NaN or infinite float replaced by None: strict JSON
    has no NaN or Infinity, and a parser that follows RFC 8259 refuses them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def strict_json(value: Any, **options: Any) -> str:
    """``json.dumps`` of :func:`finite` ``value``: every JSON text openbench prints, writes or
    serves is strict (undefined numbers are null)."""
    return json.dumps(finite(value), allow_nan=False, **options)


def json_text(document: dict) -> str:
    """How openbench writes a JSON document (a result record): indented by 2, one final newline."""
    return strict_json(document, indent=2) + "\n"


def write_json(path: PathLike, document: dict, inputs: Iterable[Optional[PathLike]] = ()) -> None:
    """Write a JSON document openbench produced (it carries :data:`JSON_SIGNATURE`) atomically; an
    existing file is replaced only if openbench wrote it."""
    write_text_atomic(path, json_text(document), inputs, recognise=is_openbench_json)


def write_array_atomic(path: PathLike, array: np.ndarray) -> None:
    """``np.save`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, array)


class SequentialWriter:
    """Write one large file front to back, bypassing the page cache where the platform allows.

    Bytes are staged in a ``block``-sized buffer aligned for ``O_DIRECT``; each full block goes
    to disk with ``O_DIRECT`` and the last, partial block through the page cache. A file shorter
    than one block, a platform without ``O_DIRECT`` and a filesystem that refuses it (EINVAL) all
    get plain buffered writes: only the speed differs, never the bytes. Why: a written graph file
    is seldom read back at once, and on the 2-core machines we measured, buffered writes of the
    2.6 GB full-scale edges.csv took 4-8 s of kernel time, direct ones 1.6 s.
    """

    def __init__(self, path: Union[str, Path], block: int = DIRECT_BLOCK):
        if block <= 0 or block % ALIGNMENT:
            raise ValueError(f"the block size must be a positive multiple of {ALIGNMENT}, not {block}")
        raw = np.empty(block + ALIGNMENT, dtype=np.uint8)
        start = -raw.ctypes.data % ALIGNMENT
        self._stage, self._fill = raw[start:start + block], 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # less the umask
        self._direct_flag = getattr(os, "O_DIRECT", 0) if fcntl is not None else 0
        self._direct = False

    def __enter__(self) -> "SequentialWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            take = min(len(view), len(self._stage) - self._fill)
            self._stage[self._fill:self._fill + take] = np.frombuffer(view[:take], dtype=np.uint8)
            self._fill += take
            view = view[take:]
            if self._fill == len(self._stage):
                if self._direct_flag and not self._direct:
                    self._set_direct(True)
                self._write_all(self._stage)
                self._fill = 0

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            if self._fill:
                self._set_direct(False)
                self._write_all(self._stage[:self._fill])
                self._fill = 0
        finally:
            os.close(self._fd)
            self._fd = -1

    def _set_direct(self, on: bool) -> None:
        if not self._direct_flag or on == self._direct:
            return
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        try:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | self._direct_flag if on else flags & ~self._direct_flag)
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            self._direct_flag = 0  # the filesystem refuses O_DIRECT: buffered from now on
            return
        self._direct = on

    def _give_up_direct(self) -> None:
        self._set_direct(False)
        self._direct_flag = 0

    def _write_all(self, array: np.ndarray) -> None:
        view = memoryview(array)  # type: ignore[arg-type]  # numpy arrays are buffers
        while len(view):
            try:
                written = os.write(self._fd, view)
            except OSError as error:
                if error.errno != errno.EINVAL or not self._direct:
                    raise
                self._give_up_direct()  # refused at write time: the same bytes again, buffered
                continue
            if written < len(view) and self._direct:
                self._give_up_direct()  # the rest is no longer aligned
            view = view[written:]
