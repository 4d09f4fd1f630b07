"""Id maps of other tools' checkpoints (DGL-KE's ``entities.dict``, LibKGE's ``entity_ids.del``, ...):
reading ``index<TAB>label`` files and re-ordering a checkpoint's rows to a dataset's labels."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np

from openbench.errors import InputError


def read_index_labels(path: Path) -> Dict[str, int]:
    """label -> index from ``index<TAB>label`` lines (blank lines skipped)."""
    mapping: Dict[str, int] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        index, tab, label = line.partition("\t")
        if not tab or not index.strip().isdigit():
            raise InputError("expected <index><TAB><label>", path, number)
        mapping[label] = int(index)
    return mapping


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
