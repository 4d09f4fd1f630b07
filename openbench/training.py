"""Training embedding baselines with PyKEEN, deterministic for a given seed.

The trained arrays come out in openbench's label order (the dataset's maps), ready for the
built-in scorers, so what PyKEEN trained is evaluated by openbench's evaluator.
"""
from __future__ import annotations

import logging
import sys
import warnings
from typing import Dict, Tuple

import numpy as np
import torch

from openbench.errors import InputError
from openbench.evaluation.dataset import Dataset

logger = logging.getLogger(__name__)

# openbench scorer name -> (PyKEEN model name, extra model arguments)
PYKEEN_MODELS: Dict[str, Tuple[str, dict]] = {
    "TransE-L1": ("TransE", {"scoring_fct_norm": 1}),
    "TransE-L2": ("TransE", {"scoring_fct_norm": 2}),
    "DistMult": ("DistMult", {}),
    "ComplEx": ("ComplEx", {}),
    "RotatE": ("RotatE", {}),
    "RESCAL": ("RESCAL", {}),
}


def _require_pykeen():
    try:
        import pykeen  # noqa: F401
    except ImportError as error:  # pragma: no cover - pykeen is installed with the test extra
        raise InputError("training needs PyKEEN: pip install 'openbench[pykeen]'") from error


def train_embeddings(dataset: Dataset, model: str = "DistMult", dim: int = 32, epochs: int = 50,
                     batch_size: int = 256, learning_rate: float = 0.01, seed: int = 0,
                     progress: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Train ``model`` on the training triples; return (entity array, relation array).

    Arrays are float32; complex models come as [real | imaginary] halves, openbench's default
    ``--complex-layout``. The same seed gives byte-identical arrays on the same machine.
    """
    _require_pykeen()
    from pykeen.models import model_resolver
    from pykeen.training import SLCWATrainingLoop
    from pykeen.triples import TriplesFactory
    from pykeen.utils import set_random_seed

    if model not in PYKEEN_MODELS:
        raise InputError(f"unknown model {model!r} for training; valid models: {', '.join(PYKEEN_MODELS)}")
    name, arguments = PYKEEN_MODELS[model]
    set_random_seed(seed)
    factory = TriplesFactory(mapped_triples=dataset.triples["train"],
                             entity_to_id={label: i for i, label in enumerate(dataset.entity_labels)},
                             relation_to_id={label: i for i, label in enumerate(dataset.relation_labels)})
    kge = model_resolver.make(name, triples_factory=factory, embedding_dim=dim, random_seed=seed, **arguments)
    loop = SLCWATrainingLoop(model=kge, triples_factory=factory, optimizer="Adam",
                             optimizer_kwargs={"lr": learning_rate})
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    try:
        # deterministic kernels (e.g. the embedding gradients' scatter-add) for byte-identical arrays
        torch.use_deterministic_algorithms(True, warn_only=True)
        with warnings.catch_warnings():
            # PyKEEN's data loader asks for pinned memory and warns about shuffling on every CPU run
            warnings.filterwarnings("ignore", message=".*pin_memory.*")
            warnings.filterwarnings("ignore", message="Training instances are always shuffled")
            losses = loop.train(triples_factory=factory, num_epochs=epochs, batch_size=batch_size,
                                use_tqdm=progress and sys.stderr.isatty(), use_tqdm_batch=False)
    finally:
        torch.use_deterministic_algorithms(deterministic_before)
    logger.info("trained %s for %d epochs, final loss %.4f", model, epochs, losses[-1] if losses else float("nan"))
    with torch.no_grad():
        entities = kge.entity_representations[0](indices=None).detach().cpu()
        relations = kge.relation_representations[0](indices=None).detach().cpu()
    return _to_array(entities), _to_array(relations)


def _to_array(values: torch.Tensor) -> np.ndarray:
    if values.is_complex():
        values = torch.cat([values.real, values.imag], dim=-1)
    return np.ascontiguousarray(values.reshape(values.shape[0], -1).numpy(), dtype=np.float32)
