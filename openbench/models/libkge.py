"""LibKGE checkpoints (``checkpoint_best.pt``) read with torch alone: no ``kge`` import, no code run.

A LibKGE checkpoint is a ``torch.save`` dict: ``"model"`` is ``(state_dict, meta)``,
``"config"`` a pickled ``kge.config.Config`` whose ``options`` hold the nested configuration.
Pickles can run code, so the file is read with torch's weights-only unpickler; the LibKGE classes
it names are let in as inert stand-ins that only keep their saved attributes (torch allows a
global under a given name: :func:`torch.serialization.safe_globals`). Nothing from the file is
ever called, so no ``--trust-pickle`` is needed.

Supported models (the latent models of the OpenBioLink2020 leaderboard): ``rescal``, ``transe``,
``distmult``, ``complex``, ``rotate``, each also inside ``reciprocal_relations_model`` (head
queries scored as tail queries through the inverse relation, rows R..2R-1). LibKGE's layouts:
ComplEx and RotatE entities are ``[real | imaginary]`` halves; RotatE relations are phases
(radians, ``entity_dim / 2`` wide); RESCAL relation rows are row-major (d, d) matrices; TransE
and RotatE use ``l_norm`` (LibKGE's default 1). Entity and relation order: LibKGE's
``entity_ids.del`` / ``relation_ids.del`` (``index<TAB>label``) in the data folder.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Type

import numpy as np
import torch

from openbench.errors import InputError, option
from openbench.datasets.loader import Dataset
from openbench.datasets.id_maps import index_of_labels, rows_for_labels
from openbench.models.scorers import SCORERS, EmbeddingScorer, build_scorer, file_sha256

__all__ = ["CHECKPOINT_NAMES", "RECIPROCAL", "MODELS", "DEFAULT_L_NORM", "find_checkpoint", "read_checkpoint",
           "is_libkge_checkpoint", "read_libkge_ids", "reciprocal_scorer_class", "load_libkge", "libkge_model"]

logger = logging.getLogger(__name__)

CHECKPOINT_NAMES = ("checkpoint_best.pt",)
RECIPROCAL = "reciprocal_relations_model"
MODELS = ("rescal", "transe", "distmult", "complex", "rotate")
DEFAULT_L_NORM = 1.0  # transe.yaml and rotate.yaml in LibKGE


class _Inert:
    """Stands in for any class or function the pickle names (LibKGE's Config, numpy scalars in the
    training trace, anything else): keeps the saved arguments and state, runs nothing."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {"state": state})


def _stand_in(qualified_name: str) -> type:
    module, _, name = qualified_name.rpartition(".")
    return type(name, (_Inert,), {"__module__": module, "__qualname__": name})


def find_checkpoint(folder: Path) -> Optional[Path]:
    """The checkpoint file in ``folder`` (or ``folder`` itself when it is a file), else None."""
    if folder.is_file() and folder.suffix == ".pt":
        return folder
    for name in CHECKPOINT_NAMES:
        if (folder / name).is_file():
            return folder / name
    found = sorted(folder.glob("checkpoint_*.pt"))
    return found[-1] if found else None


def read_checkpoint(path: Path) -> dict:
    """The checkpoint dict; every pickled global beyond torch's tensors becomes an inert stand-in."""
    if not hasattr(torch.serialization, "get_unsafe_globals_in_checkpoint"):
        raise InputError(f"reading LibKGE checkpoints without running their code needs torch >= 2.6 (found "
                         f"{torch.__version__})", path)
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception as error:  # not a torch zip file, truncated, ...
        raise InputError(f"not a readable torch checkpoint ({error})", path) from error
    stand_ins: List[Any] = [(_stand_in(name), name) for name in unsafe]
    try:
        with torch.serialization.safe_globals(stand_ins):
            checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as error:
        raise InputError(f"could not read the checkpoint ({error})", path) from error
    if not isinstance(checkpoint, dict) or "model" not in checkpoint or "config" not in checkpoint:
        raise InputError("not a LibKGE checkpoint: expected a dict with 'model' and 'config'", path)
    return checkpoint


def is_libkge_checkpoint(folder: Path) -> bool:
    return find_checkpoint(folder) is not None


class _Options:
    """Dotted-key access to LibKGE's nested options, with LibKGE's fall-back to the model type's keys."""

    def __init__(self, config, path: Path):
        options = getattr(config, "options", None)
        if not isinstance(options, dict):
            raise InputError("the checkpoint's config holds no options dict", path)
        self.options, self.path = options, path

    def get(self, key: str, default=None):
        value = self.options
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value


def _model_of(options: _Options) -> Tuple[str, bool, str]:
    """(LibKGE model type, reciprocal?, configuration key of the scoring model)."""
    model = options.get("model")
    reciprocal = model == RECIPROCAL
    key = f"{RECIPROCAL}.base_model" if reciprocal else model
    if reciprocal:
        model = options.get(f"{key}.type")
    if model not in MODELS:
        raise InputError(f"LibKGE model {model!r} is not supported; supported: {', '.join(MODELS)} (each also "
                         f"as {RECIPROCAL})", options.path)
    return model, reciprocal, key


def _option(options: _Options, key: str, model: str, name: str, default):
    """LibKGE's get_option: the model's own key first, then the model type's defaults."""
    value = options.get(f"{key}.{name}")
    return options.get(f"{model}.{name}", default) if value is None else value


def _embedding(state: dict, prefix: str, kind: str, options: _Options, key: str, path: Path) -> np.ndarray:
    names = [f"{prefix}_{kind}_embedder._embeddings.weight", f"{prefix}_{kind}_embedder.embeddings.weight"]
    weight = next((state[name] for name in names if name in state), None)
    if weight is None:
        present = ", ".join(sorted(state)[:6])
        raise InputError(f"no {kind} embeddings in the checkpoint (expected {names[0]}; found {present}); only "
                         "LibKGE's lookup_embedder is supported", path)
    embedder = options.get(f"{key}.{kind}_embedder.type", "lookup_embedder")
    if embedder != "lookup_embedder":
        raise InputError(f"the {kind} embedder is {embedder!r}; only lookup_embedder is supported", path)
    weight = weight.detach().to(torch.float64 if weight.dtype == torch.float64 else torch.float32)
    norm = _option(options, f"{key}.{kind}_embedder", "lookup_embedder", "normalize.p", -1.0)
    if norm is not None and float(norm) > 0:  # LibKGE normalises looked-up rows when normalize.p > 0
        weight = torch.nn.functional.normalize(weight, p=float(norm), dim=1)
    return weight.numpy()


def read_libkge_ids(folder: Path, kind: str) -> Dict[str, int]:
    """label -> LibKGE index from ``entity_ids.del`` / ``relation_ids.del`` (``index<TAB>label``)."""
    path = folder / f"{kind}_ids.del"
    if not path.is_file():
        raise InputError(f"no {kind}_ids.del: give LibKGE's dataset folder ({option('libkge_data')})", folder)
    return index_of_labels(path, kind)


def _rows(labels: List[str], mapping: Dict[str, int], rows: int, kind: str, where: Path) -> np.ndarray:
    return rows_for_labels(labels, mapping, rows, kind, where, "LibKGE")


def reciprocal_scorer_class(base: Type[EmbeddingScorer]) -> Type[EmbeddingScorer]:
    """``base`` answering head queries (?, r, t) as tail queries (t, r + R, ?); relations hold 2R rows."""

    class Reciprocal(base):  # type: ignore[valid-type,misc]  # a class built per base
        name = base.name

        def query_vectors(self, batch, side):
            if side == "head":
                inverse = self.relations.shape[0] // 2
                batch = torch.stack([batch[:, 2], batch[:, 1] + inverse, batch[:, 0]], dim=1)
            return super().query_vectors(batch, "tail")

        def candidate_vectors(self, side):
            return super().candidate_vectors("tail")

        def exact_ids(self, batch, side):
            if side == "head":
                inverse = self.relations.shape[0] // 2
                batch = torch.stack([batch[:, 2], batch[:, 1] + inverse, batch[:, 0]], dim=1)
            return super().exact_ids(batch, "tail")

        def score_chunk(self, queries, side, start, stop, out=None, keys=False):
            return super().score_chunk(queries, "tail", start, stop, out=out, keys=keys)

        def provably_finite(self, queries, side, candidate_max=None):
            return super().provably_finite(queries, "tail", candidate_max)

    Reciprocal.__name__ = Reciprocal.__qualname__ = f"Reciprocal{base.__name__}"
    return Reciprocal


def _scorer_name(model: str, l_norm: float, path: Path) -> str:
    if model in ("transe", "rotate"):
        if l_norm not in (1.0, 2.0):
            raise InputError(f"LibKGE {model} with l_norm {l_norm} is not supported (1 or 2)", path)
        if model == "transe":
            return "TransE-L1" if l_norm == 1.0 else "TransE-L2"
        return "RotatE-DGLKE" if l_norm == 1.0 else "RotatE"  # Σ|.| of the moduli, or their 2-norm
    return {"rescal": "RESCAL", "distmult": "DistMult", "complex": "ComplEx"}[model]


def load_libkge(folder, dataset: Dataset, data_dir=None) -> Tuple[EmbeddingScorer, dict]:
    """(scorer over the dataset's entity/relation order, model description) of a LibKGE checkpoint."""
    folder = Path(folder)
    path = find_checkpoint(folder)
    if path is None:
        raise InputError("no LibKGE checkpoint (checkpoint_best.pt)", folder)
    checkpoint = read_checkpoint(path)
    options = _Options(checkpoint["config"], path)
    model, reciprocal, key = _model_of(options)
    state = checkpoint["model"][0] if isinstance(checkpoint["model"], (tuple, list)) else checkpoint["model"]
    prefix = "_base_model." if reciprocal else ""
    entities = _embedding(state, prefix, "entity", options, key, path)
    relations = _embedding(state, prefix, "relation", options, key, path)
    data = Path(data_dir) if data_dir else (folder if folder.is_dir() else folder.parent)
    entity_rows = _rows(dataset.entity_labels, read_libkge_ids(data, "entity"), entities.shape[0], "entity", data)
    relation_map = read_libkge_ids(data, "relation")
    expected_relations = len(relation_map) * (2 if reciprocal else 1)
    if relations.shape[0] != expected_relations:
        raise InputError(f"expected {expected_relations} relation rows ({len(relation_map)} relations"
                         f"{', doubled by the reciprocal model' if reciprocal else ''}), found {relations.shape[0]}",
                         path)
    relation_rows = _rows(dataset.relation_labels, relation_map, len(relation_map), "relation", data)
    if reciprocal:  # the inverse of dataset relation i sits at row (its LibKGE index) + R_libkge
        relation_rows = np.concatenate([relation_rows, relation_rows + len(relation_map)])
    entities, relations = entities[entity_rows], relations[relation_rows]
    l_norm = float(_option(options, key, model, "l_norm", DEFAULT_L_NORM))
    name = _scorer_name(model, l_norm, path)
    if model == "rotate":
        if relations.shape[1] * 2 != entities.shape[1]:
            raise InputError(f"LibKGE RotatE relations are phases of width entity_dim / 2 = "
                             f"{entities.shape[1] // 2}; found {relations.shape[1]}", path)
        relations = np.concatenate([np.cos(relations), np.sin(relations)], axis=1)
    base = SCORERS[name]
    scorer = build_scorer(name, entities, relations, dataset.num_entities, relations.shape[0],
                          complex_layout="halves", entity_path=path, relation_path=path)
    if reciprocal:
        files, scorer = scorer.table_files, reciprocal_scorer_class(base)(scorer.entities, scorer.relations)
        scorer.table_files = files
    elif relations.shape[0] != dataset.num_relations:
        raise InputError(f"expected {dataset.num_relations} relation rows, found {relations.shape[0]}", path)
    description = {"name": name, "kind": "libkge",
                   "params": {"libkge_model": model, "reciprocal": reciprocal, "l_norm": l_norm,
                              "dimension": int(entities.shape[1]), "epoch": checkpoint.get("epoch")},
                   "source_sha256": file_sha256(path)}
    return scorer, description


def libkge_model(folder, dataset: Dataset, data_dir=None) -> EmbeddingScorer:
    """The embedding scorer of a LibKGE checkpoint, carrying its model parameters and sha256."""
    scorer, description = load_libkge(folder, dataset, data_dir)
    return scorer.described(description["params"], description["source_sha256"])
