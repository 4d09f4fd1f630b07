"""A model folder of embedding arrays: ``entities.npy`` and ``relations.npy`` in the dataset's id
order (what ``openbench train`` and the demo write), read with ``evaluate --model-dir``.

The score function comes from ``--model`` or from the folder's ``openbench-model.json``
(``{"scorer": "DistMult", "complex_layout": "halves"}``; ``openbench train`` writes it). No pickle
is read: the arrays load as plain numpy files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from openbench.errors import InputError, UsageError

__all__ = ["ENTITY_FILE", "RELATION_FILE", "DESCRIPTION_FILE", "is_arrays_folder", "folder_scorer",
           "arrays_model", "write_arrays"]

ENTITY_FILE, RELATION_FILE = "entities.npy", "relations.npy"
DESCRIPTION_FILE = "openbench-model.json"


def write_arrays(folder: Path, description: dict, entities=None, relations=None) -> None:
    """Write what :func:`arrays_model` reads into ``folder`` (a staging folder: the caller puts it in
    place): the arrays, where given, and ``openbench-model.json`` (``description``, naming its
    ``scorer`` where the arrays are the score function's tables)."""
    import json

    import numpy as np

    if entities is not None and relations is not None:
        np.save(folder / ENTITY_FILE, entities)
        np.save(folder / RELATION_FILE, relations)
    (folder / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")


def is_arrays_folder(folder: Path) -> bool:
    """Whether ``folder`` holds both arrays."""
    return (folder / ENTITY_FILE).is_file() and (folder / RELATION_FILE).is_file()


def folder_scorer(folder: Path) -> Optional[dict]:
    """``{"scorer", "complex_layout"}`` of the folder's ``openbench-model.json``, or None where it has
    none or names no score function."""
    path = folder / DESCRIPTION_FILE
    if not path.is_file():
        return None
    from openbench._io import read_json

    description = read_json(path, "model description")
    if not isinstance(description, dict) or not isinstance(description.get("scorer"), str):
        return None
    return {"scorer": description["scorer"], "complex_layout": description.get("complex_layout", "halves")}


def arrays_model(dataset, folder: Path, model: Optional[str], complex_layout: str):
    """The embedding scorer of the folder's arrays over ``dataset``'s ids."""
    from openbench._io import load_npy
    from openbench.models.scorers import build_scorer, file_sha256, get_scorer_class

    described = folder_scorer(folder)
    if model is None:
        if described is None:
            raise UsageError(f"{folder} holds {ENTITY_FILE} and {RELATION_FILE} but no {DESCRIPTION_FILE} naming "
                             "their score function: add --model (e.g. --model DistMult)")
        model, complex_layout = described["scorer"], described["complex_layout"]
    elif described is not None and described["scorer"] != model:
        raise InputError(f"the folder's {DESCRIPTION_FILE} names the score function {described['scorer']!r}, "
                         f"not --model {model!r}", folder / DESCRIPTION_FILE)
    get_scorer_class(model)
    entity_path, relation_path = folder / ENTITY_FILE, folder / RELATION_FILE
    scorer = build_scorer(model, load_npy(entity_path, mmap=True), load_npy(relation_path), dataset.num_entities,
                          dataset.num_relations, complex_layout=complex_layout, entity_path=str(entity_path),
                          relation_path=str(relation_path))
    params = {"complex_layout": complex_layout} if scorer.complex_valued else {}
    return scorer.described({**params, "model_dir": str(folder)}, file_sha256(entity_path, relation_path))
