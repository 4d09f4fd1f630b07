"""Sampled evaluation negatives beside a split: ``valid_negatives.npz`` and ``test_negatives.npz``.

``openbench split rand|time --eval-negatives K`` writes, next to ``test_sample.csv`` (and
``val_sample.csv``), one ``.npz`` archive per evaluation split holding three string arrays:

* ``triples`` (T, 3): the evaluation triples (head, relation, tail labels), one row per query;
* ``head`` (T, K): K negative heads of row i's head query (?, r, t);
* ``tail`` (T, K): K negative tails of row i's tail query (h, r, ?).

Labels, not ids, so that the file means the same under any label map; rows are matched to the
evaluator's triples by value, so their order does not matter. The archive is written with fixed
zip timestamps (the same seed gives the same bytes) and read without unpickling.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import polars as pl
import torch

from openbench._io import load_npz
from openbench.errors import InputError
from openbench.datasets.layouts import NEGATIVE_FILES, write_negatives

__all__ = ["SampledNegatives", "NEGATIVE_FILES", "write_negatives", "read_negatives", "find_negatives"]  # NEGATIVE_FILES, write_negatives: layouts


@dataclass
class SampledNegatives:
    """Negative candidates per evaluation triple: ``head`` (T, K_h) and ``tail`` (T, K_t) entity
    ids (in the dataset's maps), row i for triple i of the evaluation split."""

    head: torch.Tensor
    tail: torch.Tensor

    def check(self, triples: torch.Tensor, num_entities: int, where=None) -> None:
        for side, negatives in (("head", self.head), ("tail", self.tail)):
            if negatives.dim() != 2 or negatives.shape[0] != triples.shape[0] or negatives.shape[1] < 1:
                raise InputError(f"{side} negatives of shape {tuple(negatives.shape)}: expected ({triples.shape[0]}, K) "
                                 "with K >= 1, one row per evaluation triple", where)
            if negatives.numel() and (int(negatives.min()) < 0 or int(negatives.max()) >= num_entities):
                raise InputError(f"{side} negatives hold entity ids outside [0, {num_entities})", where)

    def description(self) -> Dict[str, object]:
        digest = hashlib.sha256()
        for negatives in (self.head, self.tail):
            digest.update(negatives.to(torch.int64).contiguous().numpy().tobytes())
        return {"head": int(self.head.shape[1]), "tail": int(self.tail.shape[1]), "sha256": digest.hexdigest()}


def read_negatives(path, dataset, split: str) -> SampledNegatives:
    """The negatives of ``path`` for ``dataset``'s ``split`` triples, as entity ids row by row.

    Every evaluation triple of the dataset must have a row, every label must be in the dataset's
    maps, and ``head``/``tail`` must be (T, K) like ``triples`` (T, 3): otherwise an InputError."""
    path = Path(path)
    arrays = load_npz(path)
    missing = [name for name in ("triples", "head", "tail") if name not in arrays]
    if missing:
        raise InputError(f"the negatives archive lacks {', '.join(missing)}; it holds {', '.join(sorted(arrays))}",
                         path)
    triples, head, tail = arrays["triples"], arrays["head"], arrays["tail"]
    if triples.ndim != 2 or triples.shape[1] != 3 or head.ndim != 2 or tail.ndim != 2 or \
            head.shape[0] != triples.shape[0] or tail.shape[0] != triples.shape[0] or not head.shape[1] or \
            not tail.shape[1]:
        raise InputError(f"expected triples (T, 3), head (T, K) and tail (T, K); found {triples.shape}, "
                         f"{head.shape} and {tail.shape}", path)
    if not all(a.dtype.kind == "U" for a in (triples, head, tail)):
        raise InputError("expected arrays of labels (unicode strings)", path)
    entities = pl.Enum(list(dataset.entity_labels))
    relations = pl.Enum(list(dataset.relation_labels))

    def ids(values: np.ndarray, kind: pl.Enum, what: str) -> np.ndarray:
        series = pl.Series(values.ravel(), dtype=pl.String)
        codes = series.cast(kind, strict=False)
        unknown = series.filter(codes.is_null() & series.is_not_null())
        if unknown.len():
            raise InputError(f"{unknown.len()} {what} label(s) not in the dataset's maps (first: "
                             f"{', '.join(unknown.head(3).to_list())})", path)
        return codes.to_physical().to_numpy().astype(np.int64).reshape(values.shape)

    rows = np.stack([ids(triples[:, 0], entities, "entity"), ids(triples[:, 1], relations, "relation"),
                     ids(triples[:, 2], entities, "entity")], axis=1)
    head_ids, tail_ids = ids(head, entities, "negative head"), ids(tail, entities, "negative tail")
    order = _row_of_each(dataset.triples[split].cpu().numpy(), rows, path, split)
    return SampledNegatives(torch.from_numpy(head_ids[order]), torch.from_numpy(tail_ids[order]))


def _row_of_each(wanted: np.ndarray, rows: np.ndarray, path: Path, split: str) -> np.ndarray:
    """(T,) the archive row of each evaluation triple (ids), by value."""
    keys = pl.DataFrame({"h": rows[:, 0], "r": rows[:, 1], "t": rows[:, 2]}).with_row_index("row") \
        .unique(["h", "r", "t"], keep="first", maintain_order=True)
    query = pl.DataFrame({"h": wanted[:, 0], "r": wanted[:, 1], "t": wanted[:, 2]})
    joined = query.join(keys, on=["h", "r", "t"], how="left", maintain_order="left")
    absent = joined.get_column("row").is_null()
    if absent.any():
        first = wanted[int(absent.arg_true()[0])].tolist()
        raise InputError(f"{int(absent.sum())} {split} triple(s) have no negatives row (first, as ids: {first}); "
                         "was the archive written for this split?", path)
    return joined.get_column("row").to_numpy().astype(np.int64)


def find_negatives(folder, dataset, splits=("valid", "test")) -> Dict[str, SampledNegatives]:
    """{split: negatives} for the archives present in ``folder`` (a split folder or fold)."""
    found: Dict[str, SampledNegatives] = {}
    for split in splits:
        path: Optional[Path] = Path(folder) / NEGATIVE_FILES[split]
        if path is not None and path.is_file() and dataset.triples[split].shape[0]:
            found[split] = read_negatives(path, dataset, split)
    return found
