"""DGL-KE checkpoints, read with NumPy (no dgl or dglke import; spec evaluators.md §4, P16).

A checkpoint folder holds ``config.json`` (the training arguments) and
``<dataset>_<model>_entity.npy`` / ``_relation.npy``. The id maps come from the training data
folder: ``entities.dict``/``relations.dict`` (built-in datasets) or ``entities.tsv``/
``relations.tsv`` (user data), ``id<TAB>name`` lines; rows are re-ordered to the dataset's labels,
so a split written in any label order evaluates correctly.

Score functions as DGL-KE defines them, ranked exactly (γ shifts TransE scores uniformly and is
dropped; it matters for RotatE's phases and is taken from config.json, never assumed):

==========  ===================================================  =====================
DGL-KE      score                                                openbench scorer
==========  ===================================================  =====================
TransE_l2   γ - ‖h + r - t‖₂                                     TransE-L2
TransE_l1   γ - ‖h + r - t‖₁                                     TransE-L1
DistMult    Σ h∘r∘t                                              DistMult
ComplEx     Re⟨h, r, conj(t)⟩, [real | imaginary] halves          ComplEx
RESCAL      hᵀ M_r t, M_r = rel[r].view(d, d) row-major          RESCAL (both sides correct;
                                                                 DGL-KE's tail side uses M_rᵀ)
RotatE      γ - Σ_k |h_k e^{iθ_k} - t_k|, θ = rel·π / ((γ+2)/d)  RotatE-DGLKE
SimplE      ½ Σ (h_head∘r∘t_tail + t_head∘r_inv∘h_tail)          SimplE (unclamped; DGL-KE
                                                                 clamps to ±20, making ties)
==========  ===================================================  =====================

TransR checkpoints are recognised and refused with a clear message (not yet ported: its
candidates are projected per relation).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from openbench.errors import InputError
from openbench.evaluation.dataset import Dataset
from openbench.evaluation.scorers import EmbeddingScorer, build_scorer, file_sha256, load_array

SCORER_OF_MODEL = {"TransE": "TransE-L2", "TransE_l2": "TransE-L2", "TransE_l1": "TransE-L1", "DistMult": "DistMult",
           "ComplEx": "ComplEx", "RESCAL": "RESCAL", "RotatE": "RotatE-DGLKE", "SimplE": "SimplE"}
NOT_PORTED = ("TransR",)
EMB_INIT_EPS = 2.0  # DGL-KE's EMB_INIT_EPS


def is_dglke_checkpoint(folder: Path) -> bool:
    return (Path(folder) / "config.json").is_file() and any(Path(folder).glob("*_entity.npy"))


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(f"unreadable DGL-KE config ({error})", path) from error
    missing = [key for key in ("model_name", "dataset", "hidden_dim", "gamma") if key not in config]
    if missing:
        raise InputError(f"config.json lacks {', '.join(missing)}; expected DGL-KE's saved training arguments", path)
    if config["model_name"] in NOT_PORTED:
        raise InputError(f"DGL-KE {config['model_name']} checkpoints are not supported yet; supported: "
                         f"{', '.join(SCORER_OF_MODEL)}", path)
    if config["model_name"] not in SCORER_OF_MODEL:
        raise InputError(f"unknown DGL-KE model {config['model_name']!r}; supported: {', '.join(SCORER_OF_MODEL)}", path)
    return config


PLURALS = {"entity": "entities", "relation": "relations"}


def read_id_map(folder: Path, kind: str) -> Dict[str, int]:
    """name -> DGL-KE id from ``entities.dict``/``.tsv`` (``relations.…``): ``id<TAB>name`` lines."""
    stem = PLURALS[kind]
    for name in (f"{stem}.dict", f"{stem}.tsv"):
        path = folder / name
        if path.is_file():
            mapping = {}
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                parts = line.split("\t")
                if len(parts) != 2 or not parts[0].strip().isdigit():
                    raise InputError("expected id<TAB>name", path, number)
                mapping[parts[1]] = int(parts[0])
            return mapping
    raise InputError(f"no {stem}.dict or {stem}.tsv: give the DGL-KE training data folder (--dglke-data)", folder)


def _rows_for(labels: List[str], mapping: Dict[str, int], rows: int, kind: str, where: Path) -> np.ndarray:
    """DGL-KE row of each dataset label, in the dataset's order."""
    missing = [label for label in labels if label not in mapping]
    if missing:
        raise InputError(f"{len(missing)} {kind}(s) of the dataset are not in DGL-KE's {kind} map (first: "
                         f"{missing[0]!r}); was the model trained on this graph?", where)
    ids = np.array([mapping[label] for label in labels], dtype=np.int64)
    if len(ids) and ids.max() >= rows:
        raise InputError(f"the {kind} map points at row {int(ids.max())} but the array has {rows} rows", where)
    return ids


def _expected_widths(config: dict) -> Tuple[int, int]:
    hidden = int(config["hidden_dim"])
    entity = 2 * hidden if config.get("double_ent") else hidden
    relation = 2 * hidden if config.get("double_rel") else hidden
    if config["model_name"] == "RESCAL":
        relation = relation * entity
    return entity, relation


def load_dglke(folder, dataset: Dataset, data_dir=None) -> Tuple[EmbeddingScorer, dict]:
    """(scorer over the dataset's entity/relation order, model description) of a checkpoint."""
    folder = Path(folder)
    config = read_config(folder)
    model, name = config["model_name"], config["dataset"]
    paths = {kind: folder / f"{name}_{model}_{kind}.npy" for kind in ("entity", "relation")}
    arrays = {kind: load_array(path) for kind, path in paths.items()}
    if model in ("RotatE", "ComplEx") and not config.get("double_ent"):
        raise InputError(f"DGL-KE {model} is trained with -de (double_ent: complex entities of 2 x hidden_dim); "
                         "config.json says double_ent is false", folder / "config.json")
    if model == "ComplEx" and not config.get("double_rel"):
        raise InputError("DGL-KE ComplEx is trained with -dr (double_rel); config.json says double_rel is false",
                         folder / "config.json")
    entity_width, relation_width = _expected_widths(config)
    for kind, width in (("entity", entity_width), ("relation", relation_width)):
        array = arrays[kind]
        if array.ndim != 2 or array.shape[1] != width:
            raise InputError(f"expected ({PLURALS[kind]}, {width}) for {model} with hidden_dim "
                             f"{config['hidden_dim']}, "
                             f"double_ent {bool(config.get('double_ent'))}, double_rel "
                             f"{bool(config.get('double_rel'))}; found {array.shape}", paths[kind])
    data = Path(data_dir) if data_dir else folder
    entity_rows = _rows_for(dataset.entity_labels, read_id_map(data, "entity"), arrays["entity"].shape[0], "entity",
                            data)
    relation_rows = _rows_for(dataset.relation_labels, read_id_map(data, "relation"), arrays["relation"].shape[0],
                              "relation", data)
    entities, relations = arrays["entity"][entity_rows], arrays["relation"][relation_rows]
    gamma = float(config["gamma"])
    if model == "RotatE":
        # DGL-KE stores phases scaled by emb_init / π; e^{iθ} as [cos | sin] halves, unit modulus
        phase = relations.astype(np.float64) / ((gamma + EMB_INIT_EPS) / int(config["hidden_dim"]) / math.pi)
        relations = np.concatenate([np.cos(phase), np.sin(phase)], axis=1).astype(entities.dtype)
    scorer = build_scorer(SCORER_OF_MODEL[model], entities, relations, dataset.num_entities, dataset.num_relations,
                          complex_layout="halves", entity_path=paths["entity"], relation_path=paths["relation"])
    description = {"name": SCORER_OF_MODEL[model], "kind": "dglke",
                   "params": {"dglke_model": model, "hidden_dim": int(config["hidden_dim"]), "gamma": gamma,
                              "double_ent": bool(config.get("double_ent")),
                              "double_rel": bool(config.get("double_rel"))},
                   "source_sha256": file_sha256(paths["entity"], paths["relation"])}
    return scorer, description

