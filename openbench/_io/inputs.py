"""The one reading layer: decompression, decoding, delimited tables, JSON and NumPy arrays.

Every failure to read a user's file becomes an :class:`~openbench.errors.InputError` naming the
file, the 1-based line where there are lines, and what was expected: a truncated or foreign
``.gz``/``.zip``, bytes that are not UTF-8, ragged or empty columns, malformed or too deeply
nested JSON, empty or foreign ``.npy``/``.npz`` files. A UTF-8 byte-order mark is accepted
everywhere (and never becomes part of the first value).

Tables go through polars' fast path; only when it finds a problem is the file scanned line by
line (:func:`iter_lines`, strict decoding) to name the first bad line.
"""
from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from openbench.errors import InputError

__all__ = ["open_binary", "iter_chunks", "inflate_budget", "iter_raw_lines", "iter_lines", "read_bytes", "read_text",
           "MAX_LINE_BYTES", "MAX_INFLATE_RATIO", "MIN_INFLATE_BUDGET", "read_json", "parse_json", "load_npy",
           "load_npz", "read_npz", "NPZ_MAX_MEMBERS", "read_table", "polars_source", "line_of_row", "strip_bom", "JSON_MAX_DEPTH"]

PathLike = Union[str, Path]
Selection = Union[Dict[str, str], Dict[int, str]]
# decompression and container failures, as the standard library raises them
_ARCHIVE_ERRORS = (OSError, EOFError, zlib.error, zipfile.BadZipFile, gzip.BadGzipFile)
JSON_MAX_DEPTH = 200  # openbench's records nest a few levels; a deeper file is refused before parsing
BOM = codecs.BOM_UTF8
# what a compressed input may inflate to: no input of 10 MB drives reading past ~1 GB
MAX_INFLATE_RATIO = 100
MIN_INFLATE_BUDGET = 256 << 20
MAX_LINE_BYTES = 16 << 20  # line-oriented inputs: a longer line is refused, never held whole
CHUNK_BYTES = 1 << 20


def strip_bom(text: str) -> str:
    """``text`` without a leading byte-order mark (U+FEFF)."""
    return text[1:] if text.startswith("\ufeff") else text


# ------------------------------------------------------------------------------------------
# bytes and lines


def _require_file(path: Path) -> None:
    if not path.exists():
        raise InputError("file does not exist", path)
    if not path.is_file():
        raise InputError("expected a file, found a folder" if path.is_dir() else "expected a regular file", path)


def _zip_member(archive: zipfile.ZipFile, path: Path) -> str:
    names = [n for n in archive.namelist() if not n.endswith("/")]
    if len(names) != 1:
        raise InputError(f"expected one file in the zip archive, found {len(names)}", path)
    return names[0]


def open_binary(path: PathLike) -> BinaryIO:
    """A binary stream of the file's content: plain, gzip (``.gz``) or a one-member ``.zip``.

    Errors while opening are InputErrors; errors while reading (a truncated archive) surface as
    the standard library's exceptions. Prefer :func:`iter_chunks`, :func:`iter_raw_lines` and
    :func:`read_text`, which bound what a compressed file may inflate to and name every failure.
    """
    path = Path(path)
    _require_file(path)
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb")  # type: ignore[return-value]
        if path.suffix == ".zip":
            archive = zipfile.ZipFile(path)
            return archive.open(_zip_member(archive, path))  # type: ignore[return-value]
        return open(path, "rb")
    except InputError:
        raise
    except _ARCHIVE_ERRORS as error:
        raise InputError(_archive_problem(path, error), path) from None


def _archive_problem(path: Path, error: BaseException) -> str:
    kind = {".gz": "gzip", ".zip": "zip"}.get(path.suffix)
    if isinstance(error, EOFError) or "end of file" in str(error).lower() or "ended before" in str(error):
        return f"the {kind or 'file'} data ends early: the file is truncated"
    if kind:
        return f"not a readable {kind} file ({error})"
    return f"cannot read the file ({error})"


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 text: byte 0x{raw[error.start]:02x} at column {error.start + 1}; expected "
                         "UTF-8 (re-save the file as UTF-8)", path, number) from None


def inflate_budget(path: Path) -> Optional[int]:
    """How many bytes a compressed ``path`` may inflate to: :data:`MAX_INFLATE_RATIO` times its
    size, at least :data:`MIN_INFLATE_BUDGET` (``OPENBENCH_MAX_INFLATE_RATIO`` sets the ratio);
    None for a plain file, whose size is its own bound."""
    if path.suffix not in (".gz", ".zip"):
        return None
    ratio = os.environ.get("OPENBENCH_MAX_INFLATE_RATIO", "")
    factor = float(ratio) if ratio.replace(".", "", 1).isdigit() and float(ratio) > 0 else MAX_INFLATE_RATIO
    return max(MIN_INFLATE_BUDGET, int(factor * path.stat().st_size))


def iter_chunks(path: PathLike, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The file's (decompressed) content in chunks, streamed: a compressed file that inflates past
    :func:`inflate_budget` is refused once it gets there (a decompression bomb costs nothing), a
    truncated or broken archive is an InputError naming the file. gzip members are inflated with
    ISA-L where the ``isal`` package is installed (2.2x zlib's speed, measured), else zlib."""
    path = Path(path)
    budget = inflate_budget(path)
    total = 0
    pieces = _gzip_pieces(path, size) if path.suffix == ".gz" else _raw_pieces(path, size)
    for chunk in pieces:
        total += len(chunk)
        if budget is not None and total > budget:
            raise InputError(f"inflates to more than {budget} bytes ({budget // max(path.stat().st_size, 1)}x its "
                             "size): a decompression bomb or a damaged archive? (OPENBENCH_MAX_INFLATE_RATIO "
                             "raises the limit for a file you trust)", path)
        yield chunk


def _raw_pieces(path: Path, size: int) -> Iterator[bytes]:
    """A plain file's bytes, or a one-member zip's, in pieces of ``size``."""
    with open_binary(path) as handle:
        while True:
            try:
                chunk = handle.read(size)
            except _ARCHIVE_ERRORS as error:
                raise InputError(_archive_problem(path, error), path) from None
            if not chunk:
                return
            yield chunk


def _gzip_pieces(path: Path, size: int) -> Iterator[bytes]:
    """A gzip file's inflated bytes (every member, CRCs checked), at most ``4 * size`` at a time
    whatever the compression ratio (``max_length``: a bomb's megabyte never becomes a gigabyte in
    one call). Zero bytes after a member are padding, as Python's gzip module takes them."""
    _require_file(path)
    inflate = _INFLATE.decompressobj(31)
    started = False
    with open(path, "rb") as handle:
        while True:
            data = handle.read(size)
            if not data:
                break
            while data:
                if inflate.eof:  # the member ended: what follows is zero padding or another member
                    data = data.lstrip(b"\x00")
                    if not data:
                        break
                    if not b"\x1f\x8b".startswith(data[:2]):
                        raise InputError("not a readable gzip file (bytes after a member that start no other member)",
                                         path)
                    inflate = _INFLATE.decompressobj(31)
                try:
                    out = inflate.decompress(data, 4 * size)
                except _INFLATE.error as error:
                    raise InputError(f"not a readable gzip file ({error})", path) from None
                started = True
                if out:
                    yield out
                data = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
        while started and not inflate.eof:  # output still held back by max_length once the input ended
            out = inflate.decompress(b"", 4 * size)
            if not out:
                break
            yield out
    if not started or not inflate.eof:
        raise InputError("the gzip data ends early: the file is truncated" if started else "an empty gzip file", path)


def _inflater() -> Any:
    """ISA-L's inflate, a drop-in for zlib's (the same streams, errors and checks), else zlib."""
    try:
        from isal import isal_zlib

        return isal_zlib
    except ImportError:  # pragma: no cover - platforms without an isal wheel
        return zlib


_INFLATE: Any = _inflater()


def _line_too_long(path: Path, number: int) -> InputError:
    return InputError(f"a line longer than {MAX_LINE_BYTES} bytes; expected a line-oriented text file (is this a "
                      "binary, truncated or hostile file?)", path, number)


def _cr_only(path: Path, number: int) -> InputError:
    return InputError("carriage returns without line feeds: the file's line endings look like CR only (classic "
                      "Mac OS); expected LF or CRLF (convert it, e.g. tr '\\r' '\\n')", path, number)


def iter_raw_lines(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(1-based number, line without its line ending) of every line, strictly UTF-8 decoded;
    streamed in chunks, each line at most :data:`MAX_LINE_BYTES` long. A first line holding a
    carriage return without a line feed (CR-only line endings) is refused."""
    path = Path(path)
    number, pending = 0, b""
    for chunk in iter_chunks(path):
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for raw in parts:
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _line_too_long(path, number)
            yield number, _line(raw, path, number)
        if len(pending) > MAX_LINE_BYTES:
            raise _line_too_long(path, number + 1)
    if pending:
        yield number + 1, _line(pending, path, number + 1)


def _line(raw: bytes, path: Path, number: int) -> str:
    if number == 1 and raw.startswith(BOM):
        raw = raw[len(BOM):]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if number == 1 and b"\r" in raw:
        raise _cr_only(path, number)
    return _decode(raw, path, number)


def iter_lines(path: PathLike, comment_prefixes: Sequence[str] = ()) -> Iterator[Tuple[int, str]]:
    """(1-based line number, line) of the non-comment, non-empty lines."""
    comments = tuple(comment_prefixes)
    for number, line in iter_raw_lines(path):
        if line.strip() and not (comments and line.startswith(comments)):
            yield number, line


def read_bytes(path: PathLike, keep_bom: bool = False, lines: bool = False) -> bytes:
    """The whole (decompressed) content, a leading BOM removed unless ``keep_bom``; a compressed
    file inflating past :func:`inflate_budget` is refused. With ``lines``, also every line at most
    :data:`MAX_LINE_BYTES` long and no CR-only line endings (what a table reader needs)."""
    path = Path(path)
    buffer = io.BytesIO()
    for chunk in (_checked_lines(path) if lines else iter_chunks(path)):
        buffer.write(chunk)
    data = buffer.getvalue()
    return data[len(BOM):] if data.startswith(BOM) and not keep_bom else data


def _checked_lines(path: Path) -> Iterator[bytes]:
    """:func:`iter_chunks` with the line checks of :func:`read_bytes` (``lines``). A chunk is far
    shorter than :data:`MAX_LINE_BYTES`, so only the runs between line feeds that cross chunks
    need adding up: ``find``/``rfind`` per chunk (memchr speed), line numbers only on error."""
    lines, run = 0, 0  # complete lines in the chunks before, bytes since the last line feed
    first, pending_cr = True, False  # still in the first line; its last chunk ended in a CR
    for chunk in iter_chunks(path):
        head, tail = chunk.find(b"\n"), chunk.rfind(b"\n")
        if first:
            segment = chunk[:head] if head >= 0 else chunk
            body = segment[:-1] if segment.endswith(b"\r") else segment
            if (pending_cr and segment) or b"\r" in body:
                raise _cr_only(path, 1)
            first, pending_cr = head < 0, segment.endswith(b"\r")
        if head < 0:
            run += len(chunk)
        else:
            if run + head > MAX_LINE_BYTES:
                raise _line_too_long(path, lines + 1)
            if len(chunk) > MAX_LINE_BYTES:  # only then can a line inside one chunk be too long
                inner = [len(line) for line in chunk[head + 1:tail].split(b"\n")]
                longer = [number for number, length in enumerate(inner) if length > MAX_LINE_BYTES]
                if longer:
                    raise _line_too_long(path, lines + 2 + longer[0])
            lines += chunk.count(b"\n")
            run = len(chunk) - tail - 1
        if run > MAX_LINE_BYTES:
            raise _line_too_long(path, lines + 1)
        yield chunk


def read_text(path: PathLike, keep_bom: bool = False) -> str:
    """The whole (decompressed) content as strictly decoded UTF-8 text, a leading BOM removed
    (kept as U+FEFF with ``keep_bom``, where character offsets into the text must stay as written)."""
    path = Path(path)
    data = read_bytes(path, keep_bom)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[error.start]:02x} at column {column}; expected UTF-8 (re-save "
                         "the file as UTF-8)", path, line) from None


def line_of_row(path: PathLike, row: int, comment_prefixes: Sequence[str] = (), skip: int = 0) -> int:
    """1-based line number of the ``row``-th (0-based) data line: non-empty, not a comment, after
    the first ``skip`` raw lines."""
    seen = -1
    try:
        for number, _ in iter_lines(path, comment_prefixes):
            if number <= skip:
                continue
            seen += 1
            if seen == row:
                return number
    except InputError:
        pass
    return row + 1


# ------------------------------------------------------------------------------------------
# JSON


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text, outside strings (a linear scan)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json(text: str, path: Optional[PathLike] = None, what: str = "JSON") -> Any:
    """Parse JSON ``text`` (from ``path``, for messages); malformed or too deeply nested → InputError."""
    text = strip_bom(text)
    if "[" in text or "{" in text:
        if text.count("[") + text.count("{") > JSON_MAX_DEPTH and _nesting_depth(text) > JSON_MAX_DEPTH:
            raise InputError(f"{what} nested deeper than {JSON_MAX_DEPTH} levels; expected a flat record", path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid {what} ({error.msg} at column {error.colno}); expected a JSON document",
                         path, error.lineno) from None
    except RecursionError:
        raise InputError(f"{what} nested too deeply to read", path) from None


# binary formats openbench meets where text is expected: their magic bytes and what they are
BINARY_KINDS = ((b"PAR1", "a Parquet file (evaluate --ranks-output writes a model's ranks as Parquet)"),
                (b"\x93NUMPY", "a NumPy .npy array"), (b"PK\x03\x04", "a zip archive (or a .npz of arrays)"),
                (b"\x89PNG", "a PNG image"), (b"SQLite format 3\x00", "an SQLite database (a leaderboard)"),
                (b"\x80", "a Python pickle"))


def binary_kind(path: PathLike) -> Optional[str]:
    """What a binary file is, from its first bytes (:data:`BINARY_KINDS`), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return None
    return next((kind for magic, kind in BINARY_KINDS if head.startswith(magic)), None)


def read_json(path: PathLike, what: str = "JSON") -> Any:
    """A JSON file (UTF-8, BOM accepted) parsed; every failure an InputError naming the file (a
    binary file by its kind: "a Parquet file …; expected a result record")."""
    kind = binary_kind(path) if Path(path).is_file() else None
    if kind is not None:
        expected = "JSON text" if what == "JSON" else f"{'an' if what[0] in 'aeiou' else 'a'} {what} (JSON text)"
        raise InputError(f"{kind}; expected {expected}", path)
    return parse_json(read_text(path), path, what)


# ------------------------------------------------------------------------------------------
# NumPy arrays


def _numpy_problem(path: Path, error: BaseException, kind: str) -> InputError:
    if path.exists() and path.is_file() and path.stat().st_size == 0:
        return InputError(f"the file is empty; expected a {kind} array file", path)
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return InputError(f"not a readable {kind} array ({detail})", path)


def load_npy(path: PathLike, mmap: bool = False) -> np.ndarray:
    """A ``.npy`` array (never unpickled); every failure an InputError naming the file.

    ``mmap``: memory-mapped copy-on-write instead of read (an embedding table of millions of
    rows is paged in from the file as it is used, never copied into the process's own memory;
    writes stay private). The file must then not be rewritten while the array is in use."""
    path = Path(path)
    _require_file(path)
    try:
        array = np.load(path, allow_pickle=False, mmap_mode="c" if mmap else None)
    except Exception as error:  # truncated, empty, pickled or foreign files raise many kinds
        raise _numpy_problem(path, error, ".npy") from None
    if isinstance(array, np.lib.npyio.NpzFile):
        array.close()
        raise InputError("this is a .npz archive; expected a single .npy array", path)
    return array


def load_npz(path: PathLike, max_bytes: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Every array of a ``.npz`` archive (never unpickled), fully read into a dict; with
    ``max_bytes``, refused before any data is inflated when its members' ``.npy`` headers declare
    more (see :func:`read_npz`)."""
    path = Path(path)
    _require_file(path)
    if path.stat().st_size == 0:
        raise InputError("the file is empty; expected a .npz array file", path)
    with open(path, "rb") as handle:
        if handle.read(len(_NPY_MAGIC)) == _NPY_MAGIC:
            raise InputError("this is a single .npy array; expected a .npz archive", path)
    return read_npz(path, str(path), max_bytes)


_NPY_MAGIC = b"\x93NUMPY"
NPZ_MAX_MEMBERS = 64


def read_npz(source: Union[PathLike, bytes], label: Optional[str] = None,
             max_bytes: Optional[int] = None) -> Dict[str, np.ndarray]:
    """The arrays of a ``.npz`` (a path, or its bytes: an upload), each member's ``.npy`` header
    read and checked *before* its data is inflated: no object arrays (pickles), at most
    :data:`NPZ_MAX_MEMBERS` members, their declared sizes summing to at most ``max_bytes``, and
    exactly the declared bytes inflated (a member that holds more is refused after one byte more,
    so a small archive that expands to gigabytes costs nothing). Failures are InputErrors naming
    ``label`` and the member."""
    where = label or "the .npz"
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise InputError(f"not a readable .npz archive ({type(error).__name__}: {error})", where) from None
    arrays: Dict[str, np.ndarray] = {}
    declared = 0
    with archive:
        members = [info for info in archive.infolist() if not info.is_dir()]
        if len(members) > NPZ_MAX_MEMBERS:
            raise InputError(f"{len(members)} members; a .npz of openbench holds at most {NPZ_MAX_MEMBERS}", where)
        for info in members:
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as member:
                    shape, fortran, dtype = _npy_header(member)
                    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    declared += size
                    if max_bytes is not None and declared > max_bytes:
                        raise InputError(f"member {name!r} declares {dtype} {tuple(shape)}, more than the "
                                         f"{max_bytes} bytes accepted here", where)
                    data = member.read(size + 1)
            except InputError:
                raise
            except Exception as error:  # bad headers, CRCs, truncated or encrypted members
                raise InputError(f"member {name!r} is not a readable .npy array ({type(error).__name__}: {error})",
                                 where) from None
            if len(data) != size:
                state = "ends early (truncated)" if len(data) < size else "holds more data than its header declares"
                raise InputError(f"member {name!r} {state}", where)
            arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()
    return arrays


def _npy_header(member) -> tuple:
    """(shape, fortran order, dtype) of a ``.npy`` stream, positioned after the header; object
    dtypes (which only a pickle can hold) are refused."""
    version = np.lib.format.read_magic(member)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        raise ValueError(f"unsupported .npy format version {version}")
    shape, fortran, dtype = readers[version](member)
    if dtype.hasobject:
        raise ValueError("the array holds Python objects, which only a pickle can store; pickles are never loaded")
    return shape, fortran, dtype


# ------------------------------------------------------------------------------------------
# delimited tables


def polars_source(path: Path):
    """What polars should read: a plain file itself (memory-mapped) once its lines are checked
    (:data:`MAX_LINE_BYTES`, CR-only endings: one streamed pass at memchr speed, nothing held),
    else the decompressed bytes, inflated through the bounded reader with the same checks
    (:func:`read_bytes` ``lines``). Every table reader goes through here: one line bound for all."""
    return _checked_source(path)[0]


def _checked_source(path: Path) -> Tuple[Union[Path, bytes], bool]:
    """(:func:`polars_source`, whether its bytes hold a NUL), from the same pass."""
    if path.suffix in (".zip", ".gz"):
        data = read_bytes(path, lines=True)
        return data, b"\x00" in data
    holds_nul = False
    for chunk in _checked_lines(path):
        holds_nul = holds_nul or b"\x00" in chunk
    return path, holds_nul


def read_table(path: PathLike, selection: Optional[Selection] = None, *, separator: str = "\t",
               header: bool = True, header_prefix: Optional[str] = None, width: Optional[int] = None,
               widths: Optional[Sequence[int]] = None, comment_prefixes: Sequence[str] = ("#",),
               quote_char: Optional[str] = None, required: Sequence[str] = (), numeric: Sequence[str] = ()):
    """Selected columns of a delimited file as string columns named by ``selection``'s values.

    :param selection: {header name: new name} when ``header``, else {0-based position: new name};
        None: every column, named ``column_1 …``.
    :param header_prefix: the header is the first line starting with this (for headers that
        look like comments, e.g. ``#DatabaseID``); default: the first non-comment line.
    :param width: headerless files: the number of fields every line has at least.
    :param widths: headerless files: every line has exactly as many fields as the first, and
        that number is one of these.
    :param required: new names of columns that must not be empty.
    :param numeric: new names of columns whose non-empty values must be finite numbers (scores).
    :returns: a polars DataFrame of String columns; fully empty lines are dropped.
    """
    import polars as pl

    path = Path(path)
    _require_file(path)
    comments = tuple(comment_prefixes)
    header_line = _find_header(path, comments, header_prefix) if header else None
    skip = header_line[0] if header_line else _leading_lines(path, comments)
    expected = len(header_line[1].split(separator)) if header_line else width

    def scan() -> None:
        _raise_first_bad_line(path, comments, separator, skip, expected, header_line is not None, widths, quote_char)

    def fail(default: str) -> None:
        scan()
        raise InputError(default, path)

    source, holds_nul = _checked_source(path)
    try:
        frame = pl.read_csv(source, separator=separator, has_header=False, quote_char=quote_char,
                            infer_schema=False, skip_rows=skip, truncate_ragged_lines=False)
    except pl.exceptions.NoDataError:
        frame = pl.DataFrame()
    except (pl.exceptions.ComputeError, pl.exceptions.ShapeError, OSError, EOFError) as error:
        fail(f"unreadable as {_describe(separator)}-separated text ({error})")
    if frame.width:
        first = frame.columns[0]
        keep = ~pl.all_horizontal(pl.all().is_null())
        if comments:
            keep = keep & ~pl.col(first).fill_null("").str.starts_with(comments[0])
        frame = frame.filter(keep)
        if frame.height and any("\r" in (value or "") for value in frame.row(0)):
            fail("a carriage return inside the first line: CR-only line endings? expected LF or CRLF")
    if frame.height and widths is not None:
        if frame.width not in widths:
            fail(f"expected {' or '.join(str(w) for w in widths)} {_describe(separator)}-separated columns, "
                 f"found {frame.width}")
        if frame.select(pl.col(frame.columns[-1]).is_null().any()).item():
            scan()  # a short line reads as trailing nulls, like empty trailing fields: the scan tells them apart
    if frame.height and expected is not None and (frame.width != expected if header_line else frame.width < expected):
        fail(f"expected {expected} {_describe(separator)}-separated columns, found {frame.width}")
    if selection is None:
        selection = {i: f"column_{i + 1}" for i in range(frame.width)}
    positions = _positions(path, selection, header_line, separator, quote_char)
    if frame.height == 0:
        return pl.DataFrame({name: [] for name in selection.values()}, schema={n: pl.String for n in selection.values()})
    if max(positions) >= frame.width:
        raise InputError(f"expected at least {max(positions) + 1} columns, found {frame.width}", path)
    columns = frame.columns
    result = frame.select([pl.col(columns[p]).alias(name) for p, name in zip(positions, selection.values())])
    if quote_char:
        result = result.with_columns(pl.all().str.strip_chars(quote_char))
        broken = result.select(pl.any_horizontal([pl.col(c).str.contains(r"[\r\n]") for c in result.columns])
                               .arg_true()).to_series()
        if len(broken):
            raise InputError("a quoted field holds a line break; expected one record per line", path,
                             _quoted_line_of_row(path, int(broken[0]), skip, separator, quote_char))
    nul = (result.select(pl.any_horizontal([pl.col(c).str.contains("\x00", literal=True) for c in result.columns])
                         .arg_true()).to_series() if holds_nul else pl.Series(dtype=pl.UInt32))  # bytes without a NUL: no row
    if len(nul):
        raise InputError("a NUL byte: expected text (is this a binary file?)", path,
                         line_of_row(path, int(nul[0]), comments, skip))
    missing = (result.select(pl.any_horizontal([pl.col(c).is_null() for c in required]).arg_true()).to_series()
               if required else pl.Series(dtype=pl.UInt32))
    if len(missing):
        scan()
        row = int(missing[0])
        empty = [c for c in required if result[c][row] is None]
        raise InputError(f"column(s) {', '.join(empty)} empty or missing; expected a value", path,
                         line_of_row(path, row, comments, skip))
    for name in numeric:
        values = result.get_column(name).cast(pl.Float64, strict=False)
        bad = (result.get_column(name).is_not_null() & (values.is_null() | ~values.is_finite())).arg_true()
        if len(bad):
            row = int(bad[0])
            raise InputError(f"column {name} is {result[name][row]!r}; expected a finite number", path,
                             line_of_row(path, row, comments, skip))
    return result


def _quoted_line_of_row(path: Path, row: int, skip: int, separator: str, quote_char: str) -> Optional[int]:
    """1-based line where the ``row``-th (0-based) data record of a quoted file starts (a quoted
    field may span lines; the csv module honours the quotes as polars does)."""
    import csv

    lines = (line for _, line in iter_raw_lines(path))
    reader = csv.reader(lines, delimiter=separator, quotechar=quote_char)
    started, seen = skip + 1, -1
    for record in reader:
        if reader.line_num <= skip:
            started = reader.line_num + 1
            continue
        if any(field for field in record):
            seen += 1
            if seen == row:
                return started
        started = reader.line_num + 1
    return None


def _find_header(path: Path, comments, header_prefix: Optional[str]):
    for number, line in iter_lines(path, () if header_prefix else comments):
        if header_prefix is None or line.startswith(header_prefix):
            return number, line
    raise InputError("no header line found" + (f" starting with {header_prefix!r}" if header_prefix else ""), path)


def _leading_lines(path: Path, comments) -> int:
    """How many raw lines precede the first data line (comments and blank lines)."""
    for number, _ in iter_lines(path, comments):
        return number - 1
    return 0


def _describe(separator: str) -> str:
    return {"\t": "tab", " ": "space", ",": "comma", ";": "semicolon"}.get(separator, repr(separator))


def _positions(path: Path, selection: Selection, header_line, separator: str, quote_char) -> List[int]:
    if not header_line:
        return [int(key) for key in selection.keys()]
    number, line = header_line
    names = [name.strip().strip(quote_char or "").lower() for name in line.split(separator)]
    positions = []
    for wanted in selection:
        key = str(wanted).lower()
        if key not in names:
            raise InputError(f"header has no column {wanted!r}; found {', '.join(names)}", path, number)
        positions.append(names.index(key))
    return positions


def _split_line(line: str, separator: str, quote_char: Optional[str]) -> List[str]:
    """A line's fields; a quoted field may hold the separator (CSV)."""
    if not quote_char:
        return line.split(separator)
    import csv

    return next(csv.reader([line], delimiter=separator, quotechar=quote_char), [""])


def _raise_first_bad_line(path: Path, comments, separator: str, skip: int, expected: Optional[int],
                          exact: bool, widths: Optional[Sequence[int]] = None, quote_char: Optional[str] = None) -> None:
    """The slow, exact reference of the format, run once the fast reader found a problem: raise
    an InputError at the first bad line (decoding, width, empty leading columns)."""
    first_width = None
    for number, line in iter_lines(path, comments):
        if number <= skip:
            continue
        fields = _split_line(line, separator, quote_char)
        if widths is not None:
            if first_width is None:
                first_width = len(fields)
                if first_width not in widths:
                    shown = " or ".join(str(w) for w in widths)
                    raise InputError(f"expected {shown} {_describe(separator)}-separated columns, found {first_width}",
                                     path, number)
            elif len(fields) != first_width:
                raise InputError(f"expected {first_width} {_describe(separator)}-separated columns like the first "
                                 f"line, found {len(fields)}", path, number)
            continue
        if first_width is None:
            first_width = len(fields)
        if expected is None:
            expected = len(fields)
        elif len(fields) != expected if exact else len(fields) < expected:
            wording = f"expected {expected}" if exact else f"expected at least {expected}"
            raise InputError(f"{wording} {_describe(separator)}-separated columns, found {len(fields)}", path, number)
        if len(fields) > first_width:  # what a table reader cannot take: a row wider than the first
            raise InputError(f"expected {first_width} {_describe(separator)}-separated columns like the first line, "
                             f"found {len(fields)}", path, number)
