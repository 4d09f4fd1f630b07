"""PyKEEN models as scorers: a saved model folder, or a model in memory with its TriplesFactory.

A folder written by PyKEEN's ``PipelineResult.save_to_directory`` (what ``openbench train``
writes, plus ``openbench-model.json``) holds ``trained_model.pkl`` and the id maps in
``training_triples/entity_to_id.tsv.gz`` and ``relation_to_id.tsv.gz``; a model in memory comes
with the ``TriplesFactory`` it was trained on, whose maps are the same. Either way the maps are
matched to the dataset's labels, so a split written in any label order evaluates correctly.
Scores come from PyKEEN's own ``predict_t``/``predict_h``, which answer head queries through the
inverse relation for models trained with inverse triples (spec P15), and ``score_hrt``.

The record's ``source_sha256`` is the sha256 of the model's weights (its ``state_dict``: names,
dtypes, shapes and values), the same for the folder and for the model it was saved from.

``trained_model.pkl`` is a pickle: loading it runs code from the file. It is loaded only when the
caller says the file is trusted (``--trust-pickle``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import torch

from openbench.datasets.id_maps import index_of_labels
from openbench.errors import InputError
from openbench.models.base import TRIPLE_BATCH, RowScorer
from openbench.models.finite import module_tables

__all__ = ["MODEL_FILE", "is_pykeen_directory", "read_pykeen_map", "load_pykeen_model", "PyKEENModel", "PyKEENScorer",
           "from_pykeen", "pykeen_folder", "state_sha256"]

MODEL_FILE = "trained_model.pkl"


def is_pykeen_directory(folder: Path) -> bool:
    return (Path(folder) / MODEL_FILE).is_file()


def read_pykeen_map(path: Path) -> Dict[str, int]:
    """label -> PyKEEN id from a ``*_to_id.tsv.gz`` file (header ``id<TAB>label``)."""
    if not path.is_file():
        raise InputError("missing id map; expected PyKEEN's save_to_directory layout "
                         "(training_triples/entity_to_id.tsv.gz, relation_to_id.tsv.gz)", path)
    return index_of_labels(path)


def _positions(labels, mapping: Dict[str, int], kind: str, where) -> torch.Tensor:
    missing = [label for label in labels if label not in mapping]
    if missing:
        raise InputError(f"{len(missing)} {kind} label(s) of the dataset are unknown to the model (first: "
                         f"{missing[0]!r}); was it trained on this graph?", where)
    return torch.tensor([mapping[label] for label in labels], dtype=torch.long)


def load_pykeen_model(folder, trust_pickle: bool = False):
    folder = Path(folder)
    path = folder / MODEL_FILE
    if not trust_pickle:
        raise InputError("trained_model.pkl is a pickle, and loading a pickle runs code from the file; pass "
                         "--trust-pickle if you trust its origin, or evaluate exported weights instead "
                         "(--entity-embeddings/--relation-embeddings .npy files load without running code)", path)
    try:
        import pykeen  # noqa: F401  (the pickle refers to pykeen classes)
    except ImportError as error:  # pragma: no cover - pykeen comes with the test extra
        raise InputError("evaluating a PyKEEN model needs PyKEEN: pip install 'openbench[pykeen]'", path) from error
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # a foreign or corrupt pickle can raise anything
        raise InputError(f"cannot load the PyKEEN model ({type(error).__name__}: {error})", path) from error


def state_sha256(model) -> str:
    """sha256 of a torch module's weights (:func:`~openbench.models.scorers.state_dict_sha256`)."""
    from openbench.models.scorers import state_dict_sha256

    return state_dict_sha256(model.state_dict())


class PyKEENModel:
    """A PyKEEN model with its id maps, not yet matched to a dataset (:meth:`for_dataset` does)."""

    def __init__(self, model, entity_to_id: Dict[str, int], relation_to_id: Dict[str, int], where=None):
        self.model, self.entity_to_id, self.relation_to_id, self.where = model, entity_to_id, relation_to_id, where

    def for_dataset(self, dataset) -> "PyKEENScorer":
        """The scorer over ``dataset``'s entity and relation ids."""
        return PyKEENScorer(self.model, _positions(dataset.entity_labels, self.entity_to_id, "entity", self.where),
                            _positions(dataset.relation_labels, self.relation_to_id, "relation", self.where),
                            len(self.entity_to_id))


class PyKEENScorer(RowScorer):
    """A PyKEEN model scoring through its ``predict_t``/``predict_h`` and ``score_hrt``.

    :param entity_ids: (E,) the model's id of each dataset entity; ``relation_ids`` (R,) likewise.
    """

    kind = "pykeen"
    transductive = True  # a representation per entity of its training factory (inductive: pykeen_inductive)

    def __init__(self, model, entity_ids: torch.Tensor, relation_ids: torch.Tensor, model_entities: int):
        super().__init__(entity_ids.shape[0])
        self.model = model.eval()
        self.name = type(model).__name__
        self.entity_ids, self.relation_ids = entity_ids, relation_ids
        self.warnings: List[str] = []
        if model_entities != entity_ids.shape[0]:
            self.warnings.append(f"the model knows {model_entities} entities, the dataset {entity_ids.shape[0]}; "
                                 "only the dataset's entities are ranked")
        self._sha256 = state_sha256(model)

    def to(self, device: torch.device) -> "PyKEENScorer":
        """The model and the id maps on ``device``."""
        self.device = device
        self.model = self.model.to(device)
        self.entity_ids, self.relation_ids = self.entity_ids.to(device), self.relation_ids.to(device)
        return self

    def description(self) -> dict:
        """PyKEEN's model class, whether it answers head queries through inverse triples, the
        weights' sha256 (:func:`state_sha256`)."""
        return {"name": self.name, "kind": self.kind,
                "params": {"use_inverse_triples": bool(getattr(self.model, "use_inverse_triples", False))},
                "source_sha256": self._sha256}

    def stored_tables(self) -> list:
        """The model's floating parameters (every value must be finite: :mod:`openbench.models.finite`)."""
        return module_tables(self.model, "PyKEEN model")

    @torch.no_grad()
    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) in the dataset's entity order: ``predict_t`` of (h, r) or ``predict_h`` of (r, t)."""
        relations = self.relation_ids[batch[:, 1]]
        if side == "tail":
            scores = self.model.predict_t(torch.stack([self.entity_ids[batch[:, 0]], relations], dim=1))
        else:
            scores = self.model.predict_h(torch.stack([relations, self.entity_ids[batch[:, 2]]], dim=1))
        return scores[:, self.entity_ids]

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64 scores of (T, 3) triples through PyKEEN's ``score_hrt``."""
        out = []
        for start in range(0, triples.shape[0], TRIPLE_BATCH):
            batch = triples[start:start + TRIPLE_BATCH].to(self.device)
            hrt = torch.stack([self.entity_ids[batch[:, 0]], self.relation_ids[batch[:, 1]],
                               self.entity_ids[batch[:, 2]]], dim=1)
            out.append(self.model.score_hrt(hrt).reshape(-1).double().cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def from_pykeen(model, triples_factory) -> PyKEENModel:
    """A PyKEEN ``Model`` in memory with the ``TriplesFactory`` it was trained on (its label maps
    are matched to the dataset's when it is evaluated)."""
    return PyKEENModel(model, dict(triples_factory.entity_to_id), dict(triples_factory.relation_to_id),
                       "the TriplesFactory")


def pykeen_folder(folder, trust_pickle: bool = False) -> PyKEENModel:
    """The model of a PyKEEN ``save_to_directory`` folder, with the maps saved beside it (an
    inductive model's folder: :func:`openbench.models.pykeen_inductive.inductive_folder`)."""
    folder = Path(folder)
    model = load_pykeen_model(folder, trust_pickle)
    maps = folder / "training_triples"
    return PyKEENModel(model, read_pykeen_map(maps / "entity_to_id.tsv.gz"),
                       read_pykeen_map(maps / "relation_to_id.tsv.gz"), folder)
