"""PyKEEN models: a saved model directory evaluated by openbench's evaluator.

A directory written by PyKEEN's ``PipelineResult.save_to_directory`` (what ``openbench train``
writes, plus ``openbench-model.json``) holds ``trained_model.pkl`` and the id maps in
``training_triples/entity_to_id.tsv.gz`` and ``relation_to_id.tsv.gz``. The maps are matched to
the split's labels, so a split written in any label order evaluates correctly. Scores come from
PyKEEN's own ``predict_t``/``predict_h``, which answer head queries through the inverse relation
for models trained with inverse triples (spec P15).

``trained_model.pkl`` is a pickle: loading it runs code from the file. It is loaded only when the
caller says the file is trusted (``--trust-pickle``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

from openbench.errors import InputError
from openbench.evaluation.dataset import Dataset
from openbench.evaluation.evaluator import Evaluator
from openbench.evaluation.id_maps import index_of_labels

__all__ = ["MODEL_FILE", "is_pykeen_directory", "read_pykeen_map", "load_pykeen_model", "PyKEENModelEvaluator",
           "pykeen_evaluator"]

MODEL_FILE = "trained_model.pkl"


def is_pykeen_directory(folder: Path) -> bool:
    return (Path(folder) / MODEL_FILE).is_file()


def read_pykeen_map(path: Path) -> Dict[str, int]:
    """label -> PyKEEN id from a ``*_to_id.tsv.gz`` file (header ``id<TAB>label``)."""
    if not path.is_file():
        raise InputError("missing id map; expected PyKEEN's save_to_directory layout "
                         "(training_triples/entity_to_id.tsv.gz, relation_to_id.tsv.gz)", path)
    return index_of_labels(path)


def _positions(labels, mapping: Dict[str, int], kind: str, path: Path) -> torch.Tensor:
    missing = [label for label in labels if label not in mapping]
    if missing:
        raise InputError(f"{len(missing)} {kind} label(s) of the dataset are unknown to the model (first: "
                         f"{missing[0]!r}); was it trained on this graph?", path)
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


class PyKEENModelEvaluator(Evaluator):
    """Evaluates a trained PyKEEN model through its ``predict_t``/``predict_h``."""

    model_kind = "pykeen"

    def __init__(self, dataset: Dataset, model, entity_map: Dict[str, int], relation_map: Dict[str, int],
                 source: Path, **options):
        options.setdefault("device", "cpu")
        super().__init__(dataset, **options)
        self.model = model.to(self.device).eval()
        self.model_name = type(model).__name__
        self.source = source
        self.entity_ids = _positions(dataset.entity_labels, entity_map, "entity", source).to(self.device)
        self.relation_ids = _positions(dataset.relation_labels, relation_map, "relation", source).to(self.device)
        if len(entity_map) != dataset.num_entities:
            self.warnings.append(f"the model knows {len(entity_map)} entities, the dataset {dataset.num_entities}; "
                                 "only the dataset's entities are ranked")

    def model_description(self) -> dict:
        """PyKEEN's model class, whether it answers head queries through inverse triples, the sha256."""
        from openbench.evaluation.scorers import file_sha256

        return {"name": self.model_name, "kind": self.model_kind,
                "params": {"use_inverse_triples": bool(getattr(self.model, "use_inverse_triples", False))},
                "source_sha256": file_sha256(self.source / MODEL_FILE)}

    @torch.no_grad()
    def score_batch(self, batch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(head scores, tail scores), each (B, E) in the dataset's entity order."""
        heads, relations, tails = (self.entity_ids[batch[:, 0]], self.relation_ids[batch[:, 1]],
                                   self.entity_ids[batch[:, 2]])
        tail_scores = self.model.predict_t(torch.stack([heads, relations], dim=1))
        head_scores = self.model.predict_h(torch.stack([relations, tails], dim=1))
        return head_scores[:, self.entity_ids], tail_scores[:, self.entity_ids]


    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of (n, 3) triples through PyKEEN's ``score_hrt``."""
        size = batch_size or 65536
        out = []
        for start in range(0, triples.shape[0], size):
            batch = triples[start:start + size].to(self.device)
            hrt = torch.stack([self.entity_ids[batch[:, 0]], self.relation_ids[batch[:, 1]],
                               self.entity_ids[batch[:, 2]]], dim=1)
            out.append(self.model.score_hrt(hrt).reshape(-1).double().cpu())
        result = torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)
        return -result if self.lower_is_better else result


def pykeen_evaluator(folder, dataset: Dataset, trust_pickle: bool, **options) -> PyKEENModelEvaluator:
    folder = Path(folder)
    model = load_pykeen_model(folder, trust_pickle)
    maps = folder / "training_triples"
    return PyKEENModelEvaluator(dataset, model, read_pykeen_map(maps / "entity_to_id.tsv.gz"),
                                read_pykeen_map(maps / "relation_to_id.tsv.gz"), folder, **options)
