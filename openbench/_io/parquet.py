"""What a Parquet file declares, read from its footer before any of its data is materialised.

A Parquet file ends with its metadata (a Thrift *compact protocol* ``FileMetaData`` struct), the
metadata's length as a 4-byte little-endian integer and the magic ``PAR1``. The footer names the
row count, the columns and, per column chunk, the bytes its pages decode to, so a file that
declares 150 million rows in half a megabyte (a decompression bomb) can be refused in
microseconds instead of aborting the process while polars allocates for it.

Only the fields openbench checks are kept (the Parquet format specification, ``parquet.thrift``):

* ``FileMetaData``: 2 ``schema`` (list of ``SchemaElement``: 3 ``repetition_type``, 4 ``name``,
  5 ``num_children``),
  3 ``num_rows``, 4 ``row_groups``, 5 ``key_value_metadata`` (list of ``KeyValue``: 1 ``key``,
  2 ``value``);
* ``RowGroup``: 1 ``columns`` (list of ``ColumnChunk``: 1 ``file_path``, 3 ``meta_data``, 4/5 the
  offset index's offset and length, 6/7 the column index's; ``meta_data`` a ``ColumnMetaData``:
  5 ``num_values``, 6 ``total_uncompressed_size``, 7 ``total_compressed_size``,
  9 ``data_page_offset``, 11 ``dictionary_page_offset``), 2 ``total_byte_size``, 3 ``num_rows``.

The counts and byte ranges are checked against each other and the file's size (flat columns: a
chunk holds one value per row), because polars' reader trusts them: a value count of -1 or a page
range past the end ends the process in a Rust panic instead of an error.

pyarrow reads the same footer, but it is a 40 MB dependency for these few fields; the format is
a published, stable specification, and the reader below is bounded in depth, lengths and bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from openbench.errors import InputError

__all__ = ["ParquetFooter", "read_footer", "MAX_FOOTER_BYTES"]

MAGIC = b"PAR1"
MAX_FOOTER_BYTES = 64 << 20  # a footer larger than this describes no file openbench writes or reads
_MAX_DEPTH = 32

# compact protocol type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
_REPETITIONS = {0: "required", 1: "optional", 2: "repeated"}  # FieldRepetitionType


class _Malformed(Exception):
    pass


class _Reader:
    """A cursor over compact-protocol bytes; every read checks the bytes are there."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise _Malformed("the metadata ends inside a value")
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift, value = 0, 0
        while True:
            piece = self.byte()
            value |= (piece & 0x7F) << shift
            if piece < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise _Malformed("a variable-length integer longer than 64 bits")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def take(self, count: int) -> bytes:
        if count < 0 or self.at + count > len(self.data):
            raise _Malformed("a length beyond the end of the metadata")
        piece = self.data[self.at:self.at + count]
        self.at += count
        return piece

    def value(self, kind: int, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise _Malformed(f"nested deeper than {_MAX_DEPTH} levels")
        if kind in (_TRUE, _FALSE):
            return kind == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == _BINARY:
            return self.take(self.varint())
        if kind in (_LIST, _SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            if size > len(self.data) - self.at and element not in (_TRUE, _FALSE):
                raise _Malformed("a list longer than the metadata")  # every element takes at least a byte
            if element in (_TRUE, _FALSE):  # booleans in a list take one byte each
                return [self.byte() == 1 for _ in range(size)]
            return [self.value(element, depth + 1) for _ in range(size)]
        if kind == _MAP:
            size = self.varint()
            if size == 0:
                return {}
            if 2 * size > len(self.data) - self.at:
                raise _Malformed("a map longer than the metadata")
            types = self.byte()
            return [(self.value(types >> 4, depth + 1), self.value(types & 0x0F, depth + 1)) for _ in range(size)]
        if kind == _STRUCT:
            return self.struct(depth + 1)
        raise _Malformed(f"unknown value type {kind}")

    def struct(self, depth: int) -> Dict[int, Any]:
        fields: Dict[int, Any] = {}
        last = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == _STOP:
                return fields
            delta = header >> 4
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind, depth)


@dataclass(frozen=True)
class ParquetFooter:
    """What the footer of a Parquet file declares: ``rows``; ``columns`` the leaf column names;
    ``row_groups``; ``decoded_bytes`` the sum of every column chunk's uncompressed page bytes
    (a lower bound of what reading the file materialises); ``metadata`` the key-value pairs;
    ``repetitions`` each column's "required", "optional" or "repeated"."""

    rows: int
    columns: Tuple[str, ...]
    row_groups: int
    decoded_bytes: int
    metadata: Dict[str, str]
    repetitions: Tuple[str, ...] = ()


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else ""


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(f"{what} is not a count")
    return value


def _interpret(meta: Dict[int, Any], data_end: int) -> ParquetFooter:
    schema = meta.get(2)
    if not isinstance(schema, list) or not schema or not all(isinstance(element, dict) for element in schema):
        raise _Malformed("no schema")
    leaves = [element for element in schema[1:] if not element.get(5)]
    columns = tuple(_text(element.get(4)) for element in leaves)
    if any(element.get(3, 0) not in _REPETITIONS for element in leaves):
        raise _Malformed("a column's repetition type is none of required, optional, repeated")
    repetitions = tuple(_REPETITIONS[element.get(3, 0)] for element in leaves)
    groups = meta.get(4) or []
    if not isinstance(groups, list):
        raise _Malformed("row_groups is not a list")
    rows = _count(meta.get(3), "num_rows")
    decoded, grouped_rows = 0, 0
    for number, group in enumerate(groups, 1):
        if not isinstance(group, dict):
            raise _Malformed("a row group is not a struct")
        group_rows = _count(group.get(3, 0), "a row group's num_rows")
        grouped_rows += group_rows
        chunks = group.get(1) or []
        if not isinstance(chunks, list) or len(chunks) != len(columns):
            raise _Malformed(f"row group {number} holds {len(chunks) if isinstance(chunks, list) else 'no'} column "
                             f"chunks for {len(columns)} columns")
        for chunk in chunks:
            decoded += _check_chunk(chunk, group_rows, data_end, number)
    if grouped_rows != rows:
        raise _Malformed(f"its row groups hold {grouped_rows} rows, its num_rows says {rows}")
    pairs: List[Any] = meta.get(5) or []
    metadata = {_text(pair.get(1)): _text(pair.get(2)) for pair in pairs if isinstance(pair, dict)}
    return ParquetFooter(rows=rows, columns=columns, row_groups=len(groups), decoded_bytes=decoded, metadata=metadata,
                         repetitions=repetitions)


def _check_chunk(chunk: Any, group_rows: int, data_end: int, group: int) -> int:
    """A column chunk's decoded bytes, once its counts and byte ranges agree with its row group
    and lie inside the file's data (``data_end``: where the footer begins). openbench writes and
    reads flat columns only, whose value count is the row count; a chunk in another file
    (``file_path``) is refused. The parquet reader trusts these fields: a count of -1 or a range
    past the end ends the process in a panic rather than an error."""
    column = chunk.get(3) if isinstance(chunk, dict) else None
    if not isinstance(column, dict):
        raise _Malformed(f"a column chunk of row group {group} has no metadata")
    if chunk.get(1) is not None:
        raise _Malformed("a column chunk refers to another file")
    values = _count(column.get(5), "a column chunk's num_values")
    if values != group_rows:
        raise _Malformed(f"a column chunk of row group {group} holds {values} values for {group_rows} rows")
    stored = _count(column.get(7), "a column chunk's total_compressed_size")
    first = _count(column.get(9), "a column chunk's data_page_offset")
    dictionary = column.get(11)
    if dictionary is not None:  # the dictionary page comes first: the chunk's bytes begin there
        dictionary = _count(dictionary, "a column chunk's dictionary_page_offset")
        if dictionary > first:
            raise _Malformed(f"a column chunk of row group {group} puts its dictionary after its data pages")
        first = dictionary
    if first < len(MAGIC) or first + stored > data_end:
        raise _Malformed(f"a column chunk of row group {group} spans bytes {first}..{first + stored}, outside the "
                         f"file's data (4..{data_end})")
    for offset_field, length_field, what in ((4, 5, "offset index"), (6, 7, "column index")):
        offset, length = chunk.get(offset_field), chunk.get(length_field)
        if offset is not None or length is not None:
            offset, length = _count(offset, f"a chunk's {what} offset"), _count(length, f"a chunk's {what} length")
            if offset < len(MAGIC) or offset + length > data_end:
                raise _Malformed(f"a column chunk's {what} lies outside the file's data")
    return _count(column.get(6, 0), "a column chunk's total_uncompressed_size")


def read_footer(source: Union[str, Path, bytes], label: Union[str, Path, None] = None) -> ParquetFooter:
    """The footer of the Parquet file at ``source`` (a path, or the file's bytes); an
    :class:`~openbench.errors.InputError` naming ``label`` (or the path) when it is not Parquet."""
    name = label if label is not None else (None if isinstance(source, bytes) else source)
    try:
        if isinstance(source, bytes):
            size, tail = len(source), source[-8:]
            head = source[:4]
        else:
            with open(source, "rb") as handle:
                head = handle.read(4)
                handle.seek(0, 2)
                size = handle.tell()
                handle.seek(max(0, size - 8))
                tail = handle.read(8)
        if size < 12 or head != MAGIC or tail[4:] != MAGIC:
            raise _Malformed("it does not begin and end with PAR1")
        length = struct.unpack("<I", tail[:4])[0]
        if length > MAX_FOOTER_BYTES or length + 12 > size:
            raise _Malformed(f"its footer declares {length} bytes in a file of {size}")
        if isinstance(source, bytes):
            data = source[size - 8 - length:size - 8]
        else:
            with open(source, "rb") as handle:
                handle.seek(size - 8 - length)
                data = handle.read(length)
        return _interpret(_Reader(data).struct(0), size - 8 - length)
    except _Malformed as problem:
        raise InputError(f"not a readable Parquet file: {problem}", name) from None
    except OSError as problem:
        raise InputError(f"cannot be read ({problem.strerror or problem})", name) from None
