"""The on-disk layouts of a link-prediction dataset: their file names and how a folder is recognised.

* ``samples``: OpenBioLink's split files ``train_sample.csv``, ``test_sample.csv`` and optionally
  ``val_sample.csv`` (headerless TSV, ``id1, relation, id2, qscore, value, source`` or 3 columns),
  in the folder itself, in ``train_test_data/``, or in ``fold_<i>/`` below either.
* sampled evaluation negatives beside a split's files: ``valid_negatives.npz`` and
  ``test_negatives.npz`` (:func:`write_negatives`; read by :mod:`openbench.datasets.negatives`).
* ``ids``: the integer-id layout (OBL2021's KGID): ``entities.tsv``, ``relations.tsv``
  (``id<TAB>label``) and ``train.tsv``, ``valid.tsv``, ``test.tsv`` (id triples).
* ``inductive``: ILPC 2022's (``openbench split inductive`` writes it; PyKEEN's inductive datasets
  read it): ``train.txt`` (the training graph), ``inference.txt`` (the graph of new entities a
  model reads at test time), ``inference_validation.txt`` and ``inference_test.txt``, each
  ``head<TAB>relation<TAB>tail`` without a header.

Shared by the loader (:mod:`openbench.datasets.loader`), the writers (splits, KGID export) and
the registry, which checks that an archive unpacks into the layout it promises.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from openbench.errors import InputError
from openbench.vocabulary import SPLITS

__all__ = ["is_ogb_folder", "SPLITS", "SAMPLE_FILES", "ID_FILES", "LABEL_FILES", "INDUCTIVE_FILES", "NEGATIVE_FILES", "resolve_layout",
           "write_negatives"]

SAMPLE_FILES = {"train": "train_sample.csv", "valid": "val_sample.csv", "test": "test_sample.csv"}
ID_FILES = {"train": "train.tsv", "valid": "valid.tsv", "test": "test.tsv"}
LABEL_FILES = {"entity": "entities.tsv", "relation": "relations.tsv"}
# ILPC 2022's names; "inference" is the graph a model may read at test time
INDUCTIVE_FILES = {"train": "train.txt", "inference": "inference.txt", "valid": "inference_validation.txt",
                   "test": "inference_test.txt"}


def is_ogb_folder(path) -> bool:
    """True for a folder as OGB leaves it: ``split/<split type>/train.pt``."""
    split = Path(path) / "split"
    return split.is_dir() and any((kind / "train.pt").is_file() for kind in split.iterdir() if kind.is_dir())


def resolve_layout(path: Path, fold: Optional[int] = None) -> Tuple[str, Path]:
    """Return (layout, folder holding the files) for a dataset folder; layout is ``"samples"``,
    ``"ids"`` or ``"inductive"``."""
    path = Path(path)
    if not path.is_dir():
        raise InputError("dataset path is not a directory", path)
    present = [name for name in INDUCTIVE_FILES.values() if (path / name).is_file()]
    if len(present) == len(INDUCTIVE_FILES):
        if fold is not None:
            raise InputError("--fold applies to OpenBioLink sample folders, not to an inductive split", path)
        return "inductive", path
    if present and (path / INDUCTIVE_FILES["inference"]).is_file():
        missing = [name for name in INDUCTIVE_FILES.values() if name not in present]
        raise InputError(f"an inductive split (ILPC's layout) lacks {', '.join(missing)}", path)
    if all((path / name).is_file() for name in (*LABEL_FILES.values(), *ID_FILES.values())):
        if fold is not None:
            raise InputError("--fold applies to OpenBioLink sample folders, not to the integer-id layout", path)
        return "ids", path
    for folder in (path, path / "train_test_data"):
        if fold is not None:
            fold_dir = folder / f"fold_{fold}"
            if fold_dir.is_dir():
                folder = fold_dir
            elif folder.is_dir() and any(folder.glob("fold_*")):
                folds = sorted(p.name for p in folder.glob("fold_*"))
                raise InputError(f"fold {fold} not found; available: {', '.join(folds)}", folder)
            else:
                continue
        if (folder / SAMPLE_FILES["train"]).is_file() and (folder / SAMPLE_FILES["test"]).is_file():
            return "samples", folder
    raise InputError(
        "no dataset found: expected train_sample.csv and test_sample.csv (optionally val_sample.csv), "
        "a train_test_data/ folder holding them, entities.tsv, relations.tsv, train.tsv, valid.tsv and test.tsv, "
        "or ILPC's train.txt, inference.txt, inference_validation.txt and inference_test.txt",
        path)


NEGATIVE_FILES = {"valid": "valid_negatives.npz", "test": "test_negatives.npz"}
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def write_negatives(path, triples: np.ndarray, head: np.ndarray, tail: np.ndarray) -> None:
    """Write a negatives archive: string arrays ``triples`` (T, 3) of (head, relation, tail)
    labels, ``head`` and ``tail`` (T, K) of negative entity labels per row, as ``.npy`` members
    of a zip with fixed timestamps (the same content gives the same bytes); never pickled."""
    arrays = {"triples": triples, "head": head, "tail": tail}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, values in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(values, dtype=np.str_), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())
