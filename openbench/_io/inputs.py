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
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from openbench.errors import InputError

__all__ = ["open_binary", "iter_raw_lines", "iter_lines", "read_text", "read_json", "parse_json", "load_npy",
           "load_npz", "read_npz", "NPZ_MAX_MEMBERS", "read_table", "line_of_row", "strip_bom", "JSON_MAX_DEPTH"]

PathLike = Union[str, Path]
Selection = Union[Dict[str, str], Dict[int, str]]
# decompression and container failures, as the standard library raises them
_ARCHIVE_ERRORS = (OSError, EOFError, zlib.error, zipfile.BadZipFile, gzip.BadGzipFile)
JSON_MAX_DEPTH = 200  # openbench's records nest a few levels; a deeper file is refused before parsing
BOM = codecs.BOM_UTF8


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
    the standard library's exceptions: read through :func:`iter_raw_lines` or :func:`read_text`,
    which name them.
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


def iter_raw_lines(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(1-based number, line without its line ending) of every line, strictly UTF-8 decoded."""
    path = Path(path)
    number = 0
    with open_binary(path) as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM):]
                yield number, _decode(raw, path, number).rstrip("\r\n")
        except _ARCHIVE_ERRORS as error:
            raise InputError(_archive_problem(path, error), path, number + 1 if number else None) from None


def iter_lines(path: PathLike, comment_prefixes: Sequence[str] = ()) -> Iterator[Tuple[int, str]]:
    """(1-based line number, line) of the non-comment, non-empty lines."""
    comments = tuple(comment_prefixes)
    for number, line in iter_raw_lines(path):
        if line.strip() and not (comments and line.startswith(comments)):
            yield number, line


def read_bytes(path: PathLike, keep_bom: bool = False) -> bytes:
    """The whole (decompressed) content, a leading BOM removed unless ``keep_bom``."""
    path = Path(path)
    with open_binary(path) as handle:
        try:
            data = handle.read()
        except _ARCHIVE_ERRORS as error:
            raise InputError(_archive_problem(path, error), path) from None
    return data[len(BOM):] if data.startswith(BOM) and not keep_bom else data


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


def read_json(path: PathLike, what: str = "JSON") -> Any:
    """A JSON file (UTF-8, BOM accepted) parsed; every failure an InputError naming the file."""
    return parse_json(read_text(path), path, what)


# ------------------------------------------------------------------------------------------
# NumPy arrays


def _numpy_problem(path: Path, error: BaseException, kind: str) -> InputError:
    if path.exists() and path.is_file() and path.stat().st_size == 0:
        return InputError(f"the file is empty; expected a {kind} array file", path)
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return InputError(f"not a readable {kind} array ({detail})", path)


def load_npy(path: PathLike) -> np.ndarray:
    """A ``.npy`` array (never unpickled), fully read; every failure an InputError naming the file."""
    path = Path(path)
    _require_file(path)
    try:
        array = np.load(path, allow_pickle=False)
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
    import io

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


def _polars_source(path: Path):
    """What polars should read: the path itself, or the decompressed bytes of a zip member."""
    if path.suffix == ".zip":
        return read_bytes(path)
    return path


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
        _raise_first_bad_line(path, comments, separator, skip, expected, header_line is not None, widths)

    def fail(default: str) -> None:
        scan()
        raise InputError(default, path)

    try:
        frame = pl.read_csv(_polars_source(path), separator=separator, has_header=False, quote_char=quote_char,
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
    nul = result.select(pl.any_horizontal([pl.col(c).str.contains("\x00", literal=True) for c in result.columns])
                        .arg_true()).to_series()
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


def _raise_first_bad_line(path: Path, comments, separator: str, skip: int, expected: Optional[int],
                          exact: bool, widths: Optional[Sequence[int]] = None) -> None:
    """The slow, exact reference of the format, run once the fast reader found a problem: raise
    an InputError at the first bad line (decoding, width, empty leading columns)."""
    first_width = None
    for number, line in iter_lines(path, comments):
        if number <= skip:
            continue
        fields = line.split(separator)
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
        if expected is None:
            expected = len(fields)
        elif len(fields) != expected if exact else len(fields) < expected:
            wording = f"expected {expected}" if exact else f"expected at least {expected}"
            raise InputError(f"{wording} {_describe(separator)}-separated columns, found {len(fields)}", path, number)
