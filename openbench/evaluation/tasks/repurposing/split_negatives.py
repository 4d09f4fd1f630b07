"""Known negatives a split folder states itself: the value-0 rows of its negative files
(``negative_train_sample.csv``, ``negative_val_sample.csv``, ``negative_test_sample.csv``) whose
relation is a treats relation and whose source is not ``GENERATED`` (a random corruption is no
knowledge): true-negative edges from the sources, and the edges a later snapshot retracted
(``openbench split time --removed-as-negatives``, source ``REMOVED``). The repurposing task adds
their pairs to the known negatives of the negative relations (:func:`split_negatives`)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import polars as pl

from openbench.errors import InputError
from openbench.evaluation.tasks.repurposing.matrix import Matrix

__all__ = ["SPLIT_NEGATIVE_FILES", "split_negatives"]

SPLIT_NEGATIVE_FILES = {"train": "negative_train_sample.csv", "valid": "negative_val_sample.csv",
                        "test": "negative_test_sample.csv"}


def _folder(dataset) -> Optional[Path]:
    """The folder of a sample-layout split's files, or None (another layout states no negatives)."""
    from openbench.datasets.layouts import resolve_layout

    try:
        layout, folder = resolve_layout(Path(dataset.path))
    except InputError:  # a registry copy, a fold's parent: no negative files at this path
        return None
    return folder if layout == "samples" else None


def split_negatives(dataset, matrix: Matrix, relations) -> Tuple[np.ndarray, Dict[str, int]]:
    """(the pair codes, sorted and unique, of the split files' known negatives of ``relations``
    inside the matrix; their rows counted by source)."""
    from openbench.datasets.files import read_sample_rows

    folder = _folder(dataset)
    if folder is None:
        return np.zeros(0, np.int64), {}
    frames = [read_sample_rows(folder / name) for name in SPLIT_NEGATIVE_FILES.values() if (folder / name).is_file()]
    if not frames:
        return np.zeros(0, np.int64), {}
    rows = pl.concat(frames).filter((pl.col("value") == "0") & (pl.col("source") != "GENERATED")
                                    & pl.col("r").is_in(list(relations)))
    if rows.height == 0:
        return np.zeros(0, np.int64), {}
    position = {label: index for index, label in enumerate(dataset.entity_labels)}
    row_of = {int(entity): row for row, entity in enumerate(matrix.drugs.tolist())}
    col_of = {int(entity): col for col, entity in enumerate(matrix.diseases.tolist())}
    codes: list = []
    by_source: Dict[str, int] = {}
    for head, tail, source in rows.select("h", "t", "source").iter_rows():
        a, b = position.get(head), position.get(tail)
        drug, disease = (a, b) if a in row_of and b in col_of else (b, a)
        if drug not in row_of or disease not in col_of:
            continue
        codes.append(row_of[drug] * matrix.width + col_of[disease])
        by_source[source or "unnamed"] = by_source.get(source or "unnamed", 0) + 1
    return np.unique(np.array(codes, dtype=np.int64)), dict(sorted(by_source.items()))
