"""Ranked lists a model hands over instead of scores: AnyBURL/SAFRAN top-k prediction files,
OBL2021 submissions and a hosted benchmark's uploads, in the dataset's ids (the producers that
rank them are in :mod:`openbench.evaluation.producers.topk`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import numpy as np

from openbench._io import load_npz, read_text
from openbench.datasets.loader import Dataset
from openbench.errors import InputError
from openbench.models.scorers import file_sha256

if TYPE_CHECKING:
    import torch

__all__ = ["Listing", "TopKLists", "OBL2021Submission", "ServedLists", "read_safran_predictions", "read_obl2021_submission",
           "topk_lists", "obl2021_submission"]

Listing = Tuple[np.ndarray, np.ndarray]  # (candidate ids (k,) int64, confidences (k,) float64), best first


@dataclass
class TopKLists:
    """A rule learner's top-k candidates: ``listings[(h, r, t)] = {"head": listing, "tail": listing}``
    (dataset ids), read from ``source`` (its sha256 recorded)."""

    listings: Dict[Tuple[int, int, int], Dict[str, Listing]]
    source: Optional[Path] = None

    def source_sha256(self) -> Optional[str]:
        return file_sha256(self.source) if self.source else None


@dataclass
class ServedLists:
    """A hosted benchmark's upload, as the server hands it to the door: each answered test triple
    (``answers`` (A, 3) torch int64) with the side its query was served on (``tail_side`` (A,) bool,
    True for a tail query), the submitted list of that query (``lists`` (A, k) int64), what the
    record's protocol adds (``extra``), the upload's sha256 and the anchors every list of their
    relation is filtered of (``anchors``: (relation ids (N,), entity ids (N,)))."""

    answers: "torch.Tensor"
    tail_side: np.ndarray
    lists: np.ndarray
    extra: dict
    source_sha256: Optional[str] = None
    anchors: Optional[Tuple[np.ndarray, np.ndarray]] = None


@dataclass
class OBL2021Submission:
    """OBL2021's ``pred_top10``: (2T, k) entity ids, tail queries of the test triples first, best first."""

    predictions: np.ndarray
    source: Optional[Path] = None

    def source_sha256(self) -> Optional[str]:
        return file_sha256(self.source) if self.source else None


def topk_lists(path, dataset: Dataset) -> TopKLists:
    """The AnyBURL/SAFRAN prediction file at ``path``, in ``dataset``'s ids."""
    return TopKLists(read_safran_predictions(path, dataset), Path(path))


def obl2021_submission(path) -> OBL2021Submission:
    """The OBL2021 submission ``.npz`` at ``path``."""
    return OBL2021Submission(read_obl2021_submission(path), Path(path))


def read_safran_predictions(path, dataset: Dataset) -> Dict[Tuple[int, int, int], Dict[str, Listing]]:
    """(h, r, t) ids -> {"head": listing, "tail": listing} from an AnyBURL/SAFRAN top-k file."""
    path = Path(path)
    entity_id = {label: i for i, label in enumerate(dataset.entity_labels)}
    relation_id = {label: i for i, label in enumerate(dataset.relation_labels)}
    lines = read_text(path).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InputError("the prediction file is empty; expected three lines per test triple (triple, Heads:, "
                         "Tails:)", path)
    if len(lines) % 3:
        raise InputError(f"expected three lines per triple (triple, Heads:, Tails:), found {len(lines)} lines",
                         path, len(lines))
    listings: Dict[Tuple[int, int, int], Dict[str, Listing]] = {}
    for start in range(0, len(lines), 3):
        parts = lines[start].strip().split(" ")
        if len(parts) != 3:
            raise InputError(f"expected a space-separated triple 'head relation tail', found {lines[start]!r}",
                             path, start + 1)
        try:
            triple = (entity_id[parts[0]], relation_id[parts[1]], entity_id[parts[2]])
        except KeyError as error:
            raise InputError(f"{error.args[0]!r} is not an entity or relation of the dataset", path,
                             start + 1) from None
        sides = {}
        for offset, side, prefix in ((1, "head", "Heads:"), (2, "tail", "Tails:")):
            sides[side] = _listing(lines[start + offset], prefix, entity_id, path, start + offset + 1)
        listings.setdefault(triple, sides)
    return listings


def _listing(line: str, prefix: str, entity_id: Dict[str, int], path: Path, number: int) -> Listing:
    line = line.rstrip("\r")
    if not line.startswith(prefix):
        raise InputError(f"expected a line starting with {prefix!r}", path, number)
    fields = [f for f in line[len(prefix):].strip(" ").split("\t") if f != ""]
    if len(fields) % 2:
        raise InputError("expected entity<TAB>confidence pairs", path, number)
    try:
        ids = np.array([entity_id[name] for name in fields[0::2]], dtype=np.int64)
    except KeyError as error:
        raise InputError(f"candidate {error.args[0]!r} is not an entity of the dataset", path, number) from None
    try:
        confidences = np.array([float(value) for value in fields[1::2]], dtype=np.float64)
    except ValueError as error:
        raise InputError(f"expected numeric confidences ({error})", path, number) from None
    if not np.isfinite(confidences).all():
        bad = fields[1::2][int(np.flatnonzero(~np.isfinite(confidences))[0])]
        raise InputError(f"confidence {bad!r} is not a finite number; expected finite confidences", path, number)
    return ids, confidences


def read_obl2021_submission(path) -> np.ndarray:
    """``pred_top10`` of an OBL2021 submission (``.npz``) as an int64 (2T, k) array."""
    path = Path(path)
    arrays = load_npz(path)
    if "pred_top10" not in arrays:
        raise InputError(f"expected an array named pred_top10, found {', '.join(arrays) or 'none'}", path)
    predictions = arrays["pred_top10"]
    if predictions.ndim != 2 or not np.issubdtype(predictions.dtype, np.integer):
        raise InputError(f"expected a 2-d integer array (2T, 10), found {predictions.dtype} {predictions.shape}", path)
    return predictions.astype(np.int64)
