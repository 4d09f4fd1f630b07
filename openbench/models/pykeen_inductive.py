"""PyKEEN's inductive models (``InductiveNodePiece``, ``InductiveNodePieceGNN``, any model with an
inference graph) as scorers of an inductive split.

Such a model is trained on the training graph and, at test time, reads the inference graph it was
built with (its ``inference_factory``): it scores the inference graph's entities only, with their
ids in that factory, and relations with the training factory's ids. The scorer matches both maps
to the dataset's labels, checks that the model reads the dataset's own inference graph (the same
labelled triples), and scores through PyKEEN's ``predict_t``/``predict_h``/``score_hrt`` in
``mode="testing"`` — what ``RankBasedEvaluator(mode="testing")`` calls. Entities outside the
inference graph are no candidates of an inductive split; their columns are ``-inf``.

A saved model is a folder: ``trained_model.pkl`` (``torch.save(model)``), ``training_triples/``
and ``inference_triples/`` (``TriplesFactory.to_path_binary``), as :func:`save_inductive` writes
it. The pickles run code when loaded: only with ``trust_pickle`` (``--trust-pickle``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import torch

from openbench.errors import InputError, UsageError
from openbench.models.base import TRIPLE_BATCH, RowScorer
from openbench.models.finite import module_tables
from openbench.models.pykeen import MODEL_FILE, load_pykeen_model, read_pykeen_map, state_sha256

__all__ = ["INFERENCE_FOLDER", "is_inductive_folder", "PyKEENInductiveModel", "PyKEENInductiveScorer",
           "save_inductive", "inductive_folder"]

INFERENCE_FOLDER = "inference_triples"
TESTING = "testing"


def is_inductive_folder(folder: Path) -> bool:
    return (Path(folder) / MODEL_FILE).is_file() and (Path(folder) / INFERENCE_FOLDER).is_dir()


def _ids_of(labels, mapping: Dict[str, int], kind: str, where) -> torch.Tensor:
    missing = [label for label in labels if label not in mapping]
    if missing:
        raise InputError(f"{len(missing)} {kind}(s) of the dataset are unknown to the model (first: {missing[0]!r}); "
                         "was it built on this split?", where)
    return torch.tensor([mapping[label] for label in labels], dtype=torch.long)


class PyKEENInductiveModel:
    """An inductive PyKEEN model with its maps and inference graph, not yet matched to a dataset.

    :param inference_triples: (G, 3) the model's inference graph in its own ids.
    """

    def __init__(self, model, relation_to_id: Dict[str, int], inference_entity_to_id: Dict[str, int],
                 inference_triples: torch.Tensor, where=None):
        self.model, self.relation_to_id, self.where = model, relation_to_id, where
        self.inference_entity_to_id = inference_entity_to_id
        self.inference_triples = inference_triples

    def for_dataset(self, dataset) -> "PyKEENInductiveScorer":
        """The scorer over ``dataset``'s ids; an error unless ``dataset`` is an inductive split whose
        inference graph is the model's."""
        if not getattr(dataset, "inductive", False):
            raise UsageError(f"{type(self.model).__name__} reads an inference graph at test time: evaluate it on an "
                             "inductive split (openbench split inductive; ILPC's train.txt, inference.txt, "
                             "inference_validation.txt, inference_test.txt)")
        relation_ids = _ids_of(dataset.relation_labels, self.relation_to_id, "relation", self.where)
        inference = dataset.inference_entities()
        labels = [dataset.entity_labels[i] for i in inference.tolist()]
        if len(labels) != len(self.inference_entity_to_id):
            raise InputError(f"the model's inference graph has {len(self.inference_entity_to_id)} entities, the "
                             f"dataset's {len(labels)}: it was built on another inference graph", self.where)
        model_ids = _ids_of(labels, self.inference_entity_to_id, "inference entit", self.where)
        entity_ids = torch.full((dataset.num_entities,), -1, dtype=torch.long)
        entity_ids[inference] = model_ids
        self._check_graph(dataset, entity_ids, relation_ids)
        return PyKEENInductiveScorer(self.model, entity_ids, relation_ids)

    def _check_graph(self, dataset, entity_ids: torch.Tensor, relation_ids: torch.Tensor) -> None:
        """The model's inference triples, in the dataset's ids, are the dataset's inference graph."""
        to_dataset = torch.full((len(self.inference_entity_to_id),), -1, dtype=torch.long)
        known = entity_ids >= 0
        to_dataset[entity_ids[known]] = torch.nonzero(known).squeeze(1)
        relation_back = torch.full((max(self.relation_to_id.values(), default=-1) + 1,), -1, dtype=torch.long)
        relation_back[relation_ids] = torch.arange(relation_ids.shape[0])
        theirs = self.inference_triples.long()
        mapped = torch.stack([to_dataset[theirs[:, 0]], relation_back[theirs[:, 1]], to_dataset[theirs[:, 2]]], dim=1)
        ours = dataset.triples["inference"]
        same = mapped.shape == ours.shape and bool((mapped >= 0).all()) and torch.equal(
            torch.unique(mapped, dim=0), torch.unique(ours, dim=0))
        if not same:
            raise InputError(f"the model reads another inference graph ({theirs.shape[0]} triples) than the dataset's "
                             f"({ours.shape[0]}): scores would answer other questions", self.where)


class PyKEENInductiveScorer(RowScorer):
    """Rows of an inductive PyKEEN model in testing mode (see the module docstring).

    :param entity_ids: (E,) each dataset entity's id in the model's inference graph, -1 outside it;
        ``relation_ids`` (R,) each dataset relation's training id.
    """

    kind = "pykeen"
    transductive = False  # it reads the inference graph: the split's new entities have rows

    def __init__(self, model, entity_ids: torch.Tensor, relation_ids: torch.Tensor):
        super().__init__(entity_ids.shape[0])
        self.model = model.eval()
        self.name = type(model).__name__
        self.entity_ids, self.relation_ids = entity_ids, relation_ids
        self.inference = torch.nonzero(entity_ids >= 0).squeeze(1)
        self._sha256 = state_sha256(model)

    def to(self, device: torch.device) -> "PyKEENInductiveScorer":
        super().to(device)
        self.model = self.model.to(device)
        self.entity_ids, self.relation_ids = self.entity_ids.to(device), self.relation_ids.to(device)
        self.inference = self.inference.to(device)
        return self

    def description(self) -> dict:
        """PyKEEN's model class, inductive, in testing mode, and the weights' sha256."""
        return {"name": self.name, "kind": self.kind,
                "params": {"use_inverse_triples": bool(getattr(self.model, "use_inverse_triples", False)),
                           "inductive": True, "mode": TESTING},
                "source_sha256": self._sha256}

    def _query_ids(self, entities: torch.Tensor) -> torch.Tensor:
        ids = self.entity_ids[entities]
        if bool((ids < 0).any()):
            raise UsageError("a query entity lies outside the model's inference graph: an inductive model answers "
                             "queries about the inference graph's entities only")
        return ids

    def stored_tables(self) -> list:
        """The model's floating parameters (every value must be finite: :mod:`openbench.models.finite`)."""
        return module_tables(self.model, "PyKEEN model")

    @torch.no_grad()
    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E): PyKEEN's testing-mode scores of the inference entities, ``-inf`` elsewhere."""
        relations = self.relation_ids[batch[:, 1]]
        if side == "tail":
            scores = self.model.predict_t(torch.stack([self._query_ids(batch[:, 0]), relations], dim=1), mode=TESTING)
        else:
            scores = self.model.predict_h(torch.stack([relations, self._query_ids(batch[:, 2])], dim=1), mode=TESTING)
        rows = torch.full((batch.shape[0], self.num_entities), float("-inf"), dtype=scores.dtype, device=scores.device)
        rows[:, self.inference] = scores[:, self.entity_ids[self.inference]]
        return rows

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64 testing-mode ``score_hrt`` of (T, 3) triples of the inference graph's entities."""
        out = []
        for start in range(0, triples.shape[0], TRIPLE_BATCH):
            batch = triples[start:start + TRIPLE_BATCH].to(self.device)
            hrt = torch.stack([self._query_ids(batch[:, 0]), self.relation_ids[batch[:, 1]],
                               self._query_ids(batch[:, 2])], dim=1)
            out.append(self.model.score_hrt(hrt, mode=TESTING).reshape(-1).double().cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def from_pykeen_inductive(model, training_factory, inference_factory) -> PyKEENInductiveModel:
    """An inductive PyKEEN model in memory with its training and inference ``TriplesFactory``."""
    return PyKEENInductiveModel(model, dict(training_factory.relation_to_id), dict(inference_factory.entity_to_id),
                                inference_factory.mapped_triples, "the inference TriplesFactory")


def save_inductive(folder, model, training_factory, inference_factory) -> Path:
    """Write an inductive model's folder (see the module docstring); returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model, folder / MODEL_FILE)
    training_factory.to_path_binary(folder / "training_triples")
    inference_factory.to_path_binary(folder / INFERENCE_FOLDER)
    return folder


def inductive_folder(folder, trust_pickle: bool = False) -> PyKEENInductiveModel:
    """The model of a folder :func:`save_inductive` wrote (its pickles only with ``trust_pickle``)."""
    folder = Path(folder)
    model = load_pykeen_model(folder, trust_pickle)  # refuses without trust_pickle
    from pykeen.triples import TriplesFactory

    try:
        inference = TriplesFactory.from_path_binary(folder / INFERENCE_FOLDER)
    except Exception as error:  # a foreign or damaged pickle can raise anything
        raise InputError(f"cannot read the inference graph ({type(error).__name__}: {error})",
                         folder / INFERENCE_FOLDER) from error
    relations = read_pykeen_map(folder / "training_triples" / "relation_to_id.tsv.gz")
    return PyKEENInductiveModel(model, relations, dict(inference.entity_to_id), inference.mapped_triples, folder)
