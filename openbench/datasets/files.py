"""Reading a split's files into polars frames and numpy arrays, without torch: what the audit and
the other reading commands need (the loader builds its tensors on these)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import polars as pl

from openbench._io.inputs import line_of_row, read_table
from openbench.datasets.id_maps import labels_by_id
from openbench.errors import InputError

__all__ = ["TRIPLE_COLUMNS", "first_bad_row", "read_sample_rows", "read_sample_triples", "read_id_map",
           "read_id_array"]

TRIPLE_COLUMNS = ("h", "r", "t")


def first_bad_row(frame: pl.DataFrame, problems: pl.Expr) -> Optional[int]:
    rows = frame.select(problems.arg_true()).to_series()
    return int(rows[0]) if len(rows) else None


def read_sample_rows(path: Path) -> pl.DataFrame:
    """Every row of one OpenBioLink sample file as string columns h, r, t, value, source.

    Accepts the 6-column layout (``id1, relation, id2, qscore, value, source``; value 1 marks a
    triple, value 0 a negative) and the 3-column layout (every row a triple: value "1", source "");
    every line has the first line's width.
    """
    frame = read_table(path, None, header=False, widths=(3, 6), comment_prefixes=())
    if frame.height == 0:
        return pl.DataFrame(schema={n: pl.String for n in (*TRIPLE_COLUMNS, "value", "source")})
    columns = frame.columns
    for index, column in enumerate(columns[:3]):
        row = first_bad_row(frame, pl.col(column).is_null() | (pl.col(column).str.strip_chars() == ""))
        if row is not None:
            raise InputError(f"column {index + 1} is empty; expected an identifier", path, line_of_row(path, row))
    if frame.width == 6:
        flag = columns[4]
        row = first_bad_row(frame, ~pl.col(flag).fill_null("").is_in(["0", "1"]))
        if row is not None:
            raise InputError(f"column 5 (value) is {frame[flag][row] or ''!r}; expected 0 or 1", path,
                             line_of_row(path, row))
        value, source = pl.col(flag), pl.col(columns[5]).fill_null("")
    else:
        value, source = pl.lit("1"), pl.lit("")
    return frame.select(*(pl.col(c).alias(n) for c, n in zip(columns[:3], TRIPLE_COLUMNS)), value.alias("value"),
                        source.alias("source"))


def read_sample_triples(path: Path) -> pl.DataFrame:
    """Positive triples (value 1) of one OpenBioLink sample file as string columns h, r, t
    (:func:`read_sample_rows`)."""
    return read_sample_rows(path).filter(pl.col("value") == "1").select(TRIPLE_COLUMNS)


def read_id_map(path: Path, kind: str) -> List[str]:
    """Read an ``id<TAB>label`` file whose ids are exactly 0..N-1; return labels indexed by id."""
    return labels_by_id(path, kind)


def read_id_array(path: Path, num_entities: int, num_relations: int) -> np.ndarray:
    """Integer triples (N, 3) int64 from a headerless ``head<TAB>relation<TAB>tail`` id file,
    range-checked (the first bad line named)."""
    frame = read_table(path, None, header=False, widths=(3,), comment_prefixes=())
    if frame.height == 0:
        return np.zeros((0, 3), dtype=np.int64)
    numbers = frame.select([pl.col(c).cast(pl.Int64, strict=False) for c in frame.columns])
    bad_mask = pl.any_horizontal([pl.col(c).is_null() for c in numbers.columns])
    limits = (num_entities, num_relations, num_entities)
    for column, limit in zip(numbers.columns, limits):
        bad_mask = bad_mask | (pl.col(column) < 0) | (pl.col(column) >= limit)
    row = first_bad_row(numbers, bad_mask)
    if row is not None:
        raise InputError(
            f"expected integer ids head < {num_entities}, relation < {num_relations}, tail < {num_entities}; "
            f"found {frame.row(row)}", path, line_of_row(path, row))
    return numbers.to_numpy().astype(np.int64, copy=False).reshape(-1, 3).copy()
