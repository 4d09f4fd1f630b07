"""Label coding at scale: the labels of every split mapped to integer codes in one hashing pass.

A large split (Wikidata5M: 20.6 M training triples over 4.6 M entities) costs seconds per pass
over its label strings, so :func:`code_labels` touches each string column a fixed number of
times: 64-bit hashes of the labels (one pass), the distinct hashes grouped in order of first
occurrence (integers: one pass of the C helper ``_coding.c``'s hash table, else polars'
``arg_unique`` and an integer join), those few labels sorted, every row's code by an integer
gather, and one equality check of each row's label against the label its code names. A code is a label's position among the sorted
distinct labels (byte order, as :func:`openbench.datasets.loader` numbers entities), so codes
compare as the labels do. Where two distinct labels share a hash the check fails and the caller
takes the string path (about one chance in 10¹² at 4.6 M labels).

With codes, repeated rows (:func:`first_occurrences`) and the canonical fingerprint
(:func:`coded_fingerprint`, equal to :func:`openbench.datasets.loader.triples_fingerprint`) are
integer work; only the fingerprint's lines are rendered as text, once, in order (by the C helper
into a buffer hashed on a thread while the next is written, else by polars in chunks).
"""
from __future__ import annotations

import ctypes
import hashlib
import io
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from openbench._native import OptionalLibrary

__all__ = ["Coded", "group_keys", "code_labels", "code_splits", "first_occurrences", "coded_fingerprint", "lookup_of"]

HASH_SEED = 0x6F70656E  # any fixed seed: codes never leave the process
RENDER_ROWS = 1 << 22  # fingerprint lines rendered per chunk (bounded memory)
_BELOW_TAB = r"[\x01-\x08]"  # a byte that sorts below the tab separating the fingerprint's fields


def _configure(library) -> None:
    library.openbench_group_keys.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    library.openbench_group_keys.restype = ctypes.c_int64
    library.openbench_render_lines.argtypes = [ctypes.c_char_p, ctypes.c_int64] + [ctypes.c_void_p] * 8 + \
        [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    library.openbench_render_lines.restype = ctypes.c_int64


CODING_LIBRARY = OptionalLibrary(Path(__file__).resolve().parent, "_coding", _configure, "OPENBENCH_CODING", "polars")
RENDER_BYTES = 1 << 25  # the C helper's line buffer (two: one hashed while the other is filled)


def group_keys(keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(group of each row (n,) int64, first row of each group (G,) int64) of ``keys`` (n,)
    uint64, the groups numbered in order of first occurrence: the C helper's one pass, else
    polars (``arg_unique`` and an integer join)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    library = CODING_LIBRARY.get()
    if library is not None and keys.shape[0]:
        group_of_row = np.empty(keys.shape[0], dtype=np.int64)
        first_row = np.empty(keys.shape[0], dtype=np.int64)  # only the groups' entries are touched
        groups = library.openbench_group_keys(keys.ctypes.data, keys.shape[0], group_of_row.ctypes.data,
                                              first_row.ctypes.data)
        if groups < 0:
            raise MemoryError("no memory for the hash table of the labels' codes")
        return group_of_row, first_row[:groups].copy()
    series = pl.Series("key", keys)
    first = series.arg_unique().to_numpy().astype(np.int64)
    table = pl.DataFrame({"key": series.gather(first), "group": np.arange(first.shape[0], dtype=np.int64)})
    group_of_row = (series.to_frame().join(table, on="key", how="left", maintain_order="left")
                    .get_column("group").to_numpy())
    return group_of_row, first


def code_labels(columns: Sequence[pl.Series]) -> Optional[tuple]:
    """(sorted distinct labels (U,), [codes (n_i,) int64 per column]) of string ``columns`` (no
    nulls), or None when two distinct labels share a 64-bit hash."""
    lengths = [len(column) for column in columns]
    strings = pl.concat([column.cast(pl.String).rename("label") for column in columns])
    if len(strings) == 0:
        return pl.Series("label", [], dtype=pl.String), [np.zeros(0, dtype=np.int64) for _ in columns]
    group_of_row, first = group_keys(strings.hash(HASH_SEED).to_numpy())
    representatives = strings.gather(first)
    order = representatives.arg_sort()
    labels = representatives.gather(order)
    code_of_group = np.empty(first.shape[0], dtype=np.int64)
    code_of_group[order.to_numpy()] = np.arange(first.shape[0], dtype=np.int64)
    array = np.take(code_of_group, group_of_row)
    del group_of_row
    if not bool((labels.gather(array) == strings).all()):
        return None
    bounds = np.cumsum([0] + lengths)
    return labels, [array[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]


@dataclass
class Coded:
    """The splits' triples as codes: ``columns[split]`` the (n,) int64 head, relation and tail
    codes, entity codes into ``entities`` and relation codes into ``relations`` (each sorted,
    distinct, over all splits)."""

    entities: pl.Series
    relations: pl.Series
    columns: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]

    def key(self, split: str) -> Optional[np.ndarray]:
        """(n,) int64 keys of ``split``'s triples ordered as (h, r, t), or None where they would
        overflow int64."""
        entities, relations = len(self.entities), max(len(self.relations), 1)
        if entities * entities * relations >= 2 ** 63:
            return None
        heads, kinds, tails = self.columns[split]
        key = heads * relations
        key += kinds
        key *= entities
        key += tails
        return key

    def filter(self, split: str, keep: np.ndarray) -> None:
        """Keep only the rows ``keep`` (n,) bool of ``split``."""
        heads, kinds, tails = self.columns[split]
        self.columns[split] = (heads[keep], kinds[keep], tails[keep])


def code_splits(frames: Dict[str, pl.DataFrame]) -> Optional[Coded]:
    """:class:`Coded` of labelled frames {split: columns h, r, t}; None on a hash collision."""
    names = list(frames)
    entities = code_labels([frames[name].get_column(column) for name in names for column in ("h", "t")])
    relations = code_labels([frames[name].get_column("r") for name in names])
    if entities is None or relations is None:
        return None
    entity_labels, entity_codes = entities
    relation_labels, relation_codes = relations
    columns = {name: (entity_codes[2 * i], relation_codes[i], entity_codes[2 * i + 1]) for i, name in enumerate(names)}
    return Coded(entity_labels, relation_labels, columns)


def first_occurrences(coded: Coded, split: str, key: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """(n,) bool: the first row of each distinct triple of ``split`` (``key``: :meth:`Coded.key`);
    None when every row is distinct (the common case, decided by one count of distinct keys)."""
    heads, kinds, tails = coded.columns[split]
    if heads.shape[0] < 2:
        return None
    frame = (pl.DataFrame({"key": key}) if key is not None
             else pl.DataFrame({"h": heads, "r": kinds, "t": tails}))
    rows = pl.col("key") if key is not None else pl.struct(frame.columns)
    if frame.select(rows.n_unique()).item() == heads.shape[0]:
        return None
    return frame.select(rows.is_first_distinct()).to_series().to_numpy()


def lookup_of(labels: pl.Series, chosen: Sequence[str]) -> np.ndarray:
    """(U,) int64: for each of the sorted ``labels``, its position in ``chosen`` (distinct), -1
    where it is not there."""
    table = pl.DataFrame({"label": pl.Series(list(chosen), dtype=pl.String),
                          "position": pl.int_range(0, len(chosen), dtype=pl.Int64, eager=True)})
    found = labels.rename("label").to_frame().join(table, on="label", how="left", maintain_order="left")
    return found.get_column("position").fill_null(-1).to_numpy()


def coded_fingerprint(coded: Coded, keys: Dict[str, Optional[np.ndarray]]) -> Optional[str]:
    """:func:`openbench.datasets.loader.triples_fingerprint` of the distinct coded triples
    (``keys``: each split's :meth:`Coded.key`): the lines ``split<TAB>head<TAB>relation<TAB>tail``
    in byte order, each ending in a newline. Codes follow the labels' byte order and a tab sorts
    below every byte a label can hold here, so the lines' order is the codes' order; None where a
    label holds a byte below the tab (the caller sorts the text instead)."""
    if bool(coded.entities.str.contains(_BELOW_TAB).any()) or bool(coded.relations.str.contains(_BELOW_TAB).any()):
        return None
    digest = hashlib.sha256()
    library = CODING_LIBRARY.get()
    blobs = (_blob(coded.entities), _blob(coded.relations)) if library is not None else None
    for split in sorted(name for name, columns in coded.columns.items() if columns[0].shape[0]):
        heads, kinds, tails = coded.columns[split]
        key = keys[split]
        order = pl.Series(key).arg_sort().to_numpy() if key is not None else np.lexsort((tails, kinds, heads))
        if blobs is not None:
            _digest_rendered(library, digest, split, blobs, coded.columns[split], order)
            continue
        for start in range(0, order.shape[0], RENDER_ROWS):
            rows = order[start:start + RENDER_ROWS]
            digest.update(_lines(split, coded.entities.gather(heads[rows]), coded.relations.gather(kinds[rows]),
                                 coded.entities.gather(tails[rows])))
    return digest.hexdigest()


def _blob(labels: pl.Series) -> Tuple[bytes, np.ndarray]:
    """(the UTF-8 bytes of ``labels`` (U,) one after another, offsets (U + 1,) int64 into them)."""
    offsets = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(labels.str.len_bytes().to_numpy(), out=offsets[1:])
    blob = labels.str.join("").item().encode("utf-8") if len(labels) else b""
    assert len(blob) == offsets[-1]
    return blob, offsets


def _digest_rendered(library, digest, split: str, blobs, columns, order: np.ndarray) -> None:
    """Feed ``digest`` the lines of ``split``'s rows ``order`` (n,) (head, relation, tail codes
    ``columns``), rendered by the C helper into two buffers in turn: one is hashed on a thread
    (hashlib and ctypes both release the GIL) while the next lines are written into the other."""
    (entity_blob, entity_offsets), (relation_blob, relation_offsets) = blobs
    heads, kinds, tails = (np.ascontiguousarray(column, dtype=np.int64) for column in columns)
    order = np.ascontiguousarray(order, dtype=np.int64)
    prefix = split.encode("utf-8")
    buffers = [np.empty(RENDER_BYTES, dtype=np.uint8), np.empty(RENDER_BYTES, dtype=np.uint8)]
    written = ctypes.c_int64()
    pending = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="openbench-fingerprint") as hashing:
        start, turn = 0, 0
        while start < order.shape[0]:
            buffer = buffers[turn]
            stop = library.openbench_render_lines(
                prefix, len(prefix), entity_blob, entity_offsets.ctypes.data, relation_blob,
                relation_offsets.ctypes.data, heads.ctypes.data, kinds.ctypes.data, tails.ctypes.data,
                order.ctypes.data, start, order.shape[0], buffer.ctypes.data, buffer.shape[0],
                ctypes.addressof(written))
            if stop == start:  # one line longer than the buffer: a larger one for it (the pending hash reads the other)
                buffers[turn] = np.empty(2 * buffer.shape[0], dtype=np.uint8)
                continue
            if pending is not None:
                pending.result()
            pending = hashing.submit(digest.update, buffer[:written.value].data)
            start, turn = stop, 1 - turn
        if pending is not None:
            pending.result()


def _lines(split: str, heads: pl.Series, relations: pl.Series, tails: pl.Series) -> bytes:
    frame = pl.DataFrame({"h": heads, "r": relations, "t": tails})
    lines = frame.select(pl.concat_str([pl.lit(split), pl.col("h"), pl.col("r"), pl.col("t")], separator="\t"))
    buffer = io.BytesIO()
    lines.write_csv(buffer, include_header=False, quote_style="never", line_terminator="\n")
    return buffer.getvalue()

