"""Id maps: one reader for every ``id<TAB>label`` file openbench meets, and the re-ordering of a
checkpoint's rows to a dataset's labels.

The files: the integer-id layout's ``entities.tsv``/``relations.tsv`` and ``--entity-map``
(ids exactly 0..N-1), DGL-KE's ``entities.dict``/``.tsv``, LibKGE's ``entity_ids.del`` and
PyKEEN's ``training_triples/entity_to_id.tsv.gz`` (with an ``id<TAB>label`` header).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
import polars as pl

from openbench._io.inputs import iter_lines, line_of_row, read_table
from openbench.errors import InputError

__all__ = ["read_index_map", "labels_by_id", "index_of_labels", "rows_for_labels"]


HEADER_NAMES = ("id", "index")


def _has_header(path: Path) -> bool:
    """True when the first line is a header such as PyKEEN's ``id<TAB>label``."""
    for _, line in iter_lines(path):
        return line.split("\t", 1)[0].strip().lower() in HEADER_NAMES
    return False


def read_index_map(path, kind: str = "entity") -> pl.DataFrame:
    """An ``index<TAB>label`` file as a frame (``index`` Int64, ``label`` String, file order).

    Checked: two tab-separated columns on every line (a header line is recognised and skipped),
    a non-negative integer index and a non-empty label on each, no label and no index twice.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{kind} map file does not exist", path)
    skip = 1 if _has_header(path) else 0
    frame = read_table(path, {0: "index", 1: "label"}, header=False, widths=(2,), comment_prefixes=())
    if skip:
        frame = frame.slice(1)
    if frame.height == 0:
        raise InputError(f"the {kind} map is empty; expected one id<TAB>label line per {kind}", path)
    index = frame.get_column("index").cast(pl.Int64, strict=False)
    bad = (index.is_null() | (index < 0) | frame.get_column("label").is_null()).arg_true()
    if len(bad):
        row = int(bad[0])
        raise InputError(f"expected an integer id and a label, found {frame['index'][row]!r}, "
                         f"{frame['label'][row]!r}", path, line_of_row(path, row + skip))
    frame = frame.with_columns(index)
    for column, wording in (("label", "label {!r} appears more than once; labels must be unique"),
                            ("index", "id {} is out of range or repeated; expected each id once")):
        repeated = (~frame.get_column(column).is_first_distinct()).arg_true()
        if len(repeated):
            row = int(repeated[0])
            raise InputError(wording.format(frame[column][row]), path, line_of_row(path, row + skip))
    return frame


def labels_by_id(path, kind: str = "entity") -> List[str]:
    """Labels indexed by id from an ``id<TAB>label`` file whose ids are exactly 0..N-1."""
    frame = read_index_map(path, kind)
    ids = frame.get_column("index").to_numpy()
    n = len(ids)
    outside = np.flatnonzero((ids < 0) | (ids >= n))
    if len(outside):
        row = int(outside[0])
        raise InputError(f"id {ids[row]} is out of range or repeated; expected each id 0..{n - 1} exactly once",
                         path, line_of_row(path, row))
    return frame.get_column("label").gather(np.argsort(ids)).to_list()


def index_of_labels(path, kind: str = "entity") -> Dict[str, int]:
    """label -> index from an ``index<TAB>label`` file (any non-negative, distinct indices)."""
    frame = read_index_map(path, kind)
    return dict(zip(frame.get_column("label").to_list(), frame.get_column("index").to_list()))


def rows_for_labels(labels: List[str], mapping: Dict[str, int], rows: int, kind: str, where: Path,
                    tool: str) -> np.ndarray:
    """(len(labels),) int64: the checkpoint row of each dataset label, in the dataset's order.

    :param rows: rows the checkpoint's array has; ``tool`` names it in errors ("DGL-KE", "LibKGE").
    """
    missing = [label for label in labels if label not in mapping]
    if missing:
        raise InputError(f"{len(missing)} {kind}(s) of the dataset are not in {tool}'s {kind} map (first: "
                         f"{missing[0]!r}); was the model trained on this graph?", where)
    ids = np.array([mapping[label] for label in labels], dtype=np.int64)
    if len(ids) and ids.max() >= rows:
        raise InputError(f"the {kind} map points at row {int(ids.max())} but the {tool} array has {rows} rows",
                         where)
    return ids
