"""openbench from Python: the stages of the command line as calls.

    import openbench
    dataset = openbench.load_dataset("split_out")                  # a folder or a registry name
    model = openbench.embedding_model("DistMult", entity_embeddings=E, relation_embeddings=R)
    record = openbench.evaluate(dataset, model)                    # an openbench.ResultRecord
    record.metric("both.realistic.mrr"); record.to_dict()          # the CLI's JSON record

A model is a scorer (:class:`openbench.models.base.Scorer`): embedding arrays in memory
(:func:`embedding_model`), a PyKEEN model with its TriplesFactory (:func:`from_pykeen`; an
inductive one with its inference graph's factory too), a
user's scoring function (:func:`score_function`), or a model folder / checkpoint
(:func:`load_model`, what ``openbench evaluate --model-dir`` reads).
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

from openbench.datasets.loader import Dataset, load_dataset
from openbench.evaluation.evaluate import evaluate
from openbench.models.base import score_function
from openbench.models.pykeen import PyKEENModel, from_pykeen as _from_pykeen
from openbench.models.pykeen_inductive import PyKEENInductiveModel, from_pykeen_inductive
from openbench.models.scorers import EmbeddingScorer, array_sha256, build_scorer
from openbench.models.sources import ModelSpec, load_model as _load_model
from openbench.record import ResultRecord

__all__ = ["load_dataset", "embedding_model", "from_pykeen", "score_function", "load_model", "evaluate",
           "ResultRecord", "Dataset"]


def _as_array(values, name: str) -> np.ndarray:
    """A numpy array of ``values`` (numpy arrays as they are, torch tensors from any device)."""
    if hasattr(values, "detach"):
        values = values.detach().cpu()
        if values.is_complex():
            return values.resolve_conj().numpy()
        return values.numpy()
    if values is None:
        raise TypeError(f"{name} is required")
    return np.asarray(values)


def from_pykeen(model, triples_factory, inference_factory=None) -> Union[PyKEENModel, PyKEENInductiveModel]:
    """A PyKEEN ``Model`` in memory with the ``TriplesFactory`` it was trained on (its label maps
    are matched to the dataset's when it is evaluated). An inductive model (``InductiveNodePiece``)
    also takes the ``inference_factory`` of the graph it reads at test time, and evaluates on an
    inductive split (:mod:`openbench.models.pykeen_inductive`)."""
    if inference_factory is not None:
        return from_pykeen_inductive(model, triples_factory, inference_factory)
    return _from_pykeen(model, triples_factory)


def embedding_model(model: str, entity_embeddings, relation_embeddings, complex_layout: str = "halves"
                    ) -> EmbeddingScorer:
    """A built-in scorer (``"DistMult"``, ``"TransE-L2"``, ``"ComplEx"``, ``"RotatE"``, ``"RESCAL"``,
    ``"SimplE"``, ``"TransE-L1"``, ``"RotatE-DGLKE"``) over arrays in memory: numpy arrays or torch
    tensors, entity rows (E, d) in the dataset's entity order (its sorted training labels, or the
    maps it was loaded with), relation rows (R, d) (RESCAL: (R, d, d)). Complex models take complex
    arrays, or real ones in ``complex_layout`` (``"halves"``: [Re | Im], ``"interleaved"``)."""
    entities, relations = _as_array(entity_embeddings, "entity_embeddings"), _as_array(relation_embeddings,
                                                                                      "relation_embeddings")
    scorer = build_scorer(model, entities, relations, int(entities.shape[0]), int(relations.shape[0]),
                          complex_layout=complex_layout)
    params = {"complex_layout": complex_layout} if scorer.complex_valued else {}
    return scorer.described(params, array_sha256(entities, relations))


def load_model(dataset: Dataset, model_dir: Optional[str] = None, *, trust_pickle: bool = False,
               dglke_data: Optional[str] = None, dglke_compat: bool = False, libkge_data: Optional[str] = None,
               predictions: Optional[str] = None, submission: Optional[str] = None):
    """The model of a folder or file, as ``openbench evaluate`` reads it: a PyKEEN folder, a
    DGL-KE or LibKGE checkpoint (``model_dir``), an AnyBURL/SAFRAN file (``predictions``) or an
    OBL2021 submission (``submission``), over ``dataset``'s ids."""
    spec = ModelSpec(model_dir=model_dir, trust_pickle=trust_pickle, dglke_data=dglke_data, dglke_compat=dglke_compat,
                     libkge_data=libkge_data, predictions=predictions, submission=submission)
    return _load_model(dataset, spec)
