"""Training embedding baselines with PyKEEN, deterministic for a given seed.

The trained arrays come out in openbench's label order (the dataset's maps), ready for the
built-in scorers, so what PyKEEN trained is evaluated by openbench's evaluator.
"""
from __future__ import annotations

import gc
import logging
import warnings
from contextlib import contextmanager
from typing import Dict, Sequence, Tuple

import numpy as np
import torch

from openbench._io import check_output_folder, replace_folder
from openbench.progress import stage
from openbench.errors import InputError
from openbench.datasets.loader import Dataset

__all__ = ["PYKEEN_MODELS", "pykeen_model", "train_embeddings", "train_pipeline", "train_dataset"]

logger = logging.getLogger(__name__)

# openbench scorer name -> (PyKEEN model name, extra model arguments)
PYKEEN_MODELS: Dict[str, Tuple[str, dict]] = {
    "TransE-L1": ("TransE", {"scoring_fct_norm": 1}),
    "TransE-L2": ("TransE", {"scoring_fct_norm": 2}),
    "DistMult": ("DistMult", {}),
    "ComplEx": ("ComplEx", {}),
    "RotatE": ("RotatE", {}),
    "RESCAL": ("RESCAL", {}),
    "SimplE": ("SimplE", {}),
}


@contextmanager
def _deterministic_training():
    """Deterministic kernels (e.g. the scatter-add of embedding gradients) for byte-identical
    arrays, and PyKEEN's per-run CPU warnings (pinned memory, shuffling) silenced; restored after.

    The objects alive before training are frozen out of the garbage collector meanwhile: PyKEEN
    calls ``gc.collect()`` after every epoch, and a full collection over everything the process
    holds (torch, PyKEEN, polars and matplotlib imported: millions of objects) costs about 0.3 s,
    two thirds of the demo's time; frozen, each collection looks only at training's own objects."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    gc.freeze()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*pin_memory.*")
            warnings.filterwarnings("ignore", message="Training instances are always shuffled")
            yield
    finally:
        gc.unfreeze()
        torch.use_deterministic_algorithms(before)


def _epoch_progress(label: str, epochs: int, enabled: bool):
    """A PyKEEN training callback that shows the epochs as openbench's progress (a labelled bar on
    a terminal, a line every few seconds elsewhere) instead of PyKEEN's unlabelled bars."""
    from pykeen.training.callbacks import TrainingCallback

    from openbench.progress import progress

    class EpochProgress(TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.bar = progress(total=epochs, desc=label, unit="epoch", enabled=enabled)

        def post_epoch(self, epoch: int, epoch_loss: float, **kwargs) -> None:
            self.bar.set_postfix_str(f"loss {epoch_loss:.4f}", refresh=False)
            self.bar.update(1)

        def close(self) -> None:
            self.bar.close()

    return EpochProgress()


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
    from pykeen.utils import set_random_seed

    if model not in PYKEEN_MODELS:
        raise InputError(f"unknown model {model!r} for training; valid models: {', '.join(PYKEEN_MODELS)}")
    name, arguments = PYKEEN_MODELS[model]
    set_random_seed(seed)
    factory = dataset.triples_factory("train")
    kge = model_resolver.make(name, triples_factory=factory, embedding_dim=dim, random_seed=seed, **arguments)
    loop = SLCWATrainingLoop(model=kge, triples_factory=factory, optimizer="Adam",
                             optimizer_kwargs={"lr": learning_rate})
    shown = _epoch_progress(f"training {model}", epochs, progress)
    try:
        with _deterministic_training():
            losses = loop.train(triples_factory=factory, num_epochs=epochs, batch_size=batch_size,
                                use_tqdm=False, callbacks=[shown])
    finally:
        shown.close()
    logger.info("trained %s for %d epochs, final loss %.4f", model, epochs, losses[-1] if losses else float("nan"))
    return _scorer_arrays(kge)


# the models whose PyKEEN tables are the arrays of openbench's scorer of the same name (one entity
# and one relation table, complex ones as [Re | Im] halves): train writes them beside the pickle
ARRAY_MODELS = ("TransE-L1", "TransE-L2", "DistMult", "ComplEx", "RotatE")


def _scorer_arrays(model) -> Tuple[np.ndarray, np.ndarray]:
    """(entity array, relation array) of a trained PyKEEN model, rows in its factory's id order."""
    with torch.no_grad():
        entities = model.entity_representations[0](indices=None).detach().cpu()
        relations = model.relation_representations[0](indices=None).detach().cpu()
    return _to_array(entities), _to_array(relations)


def _to_array(values: torch.Tensor) -> np.ndarray:
    if values.is_complex():
        values = torch.cat([values.real, values.imag], dim=-1)
    return np.ascontiguousarray(values.reshape(values.shape[0], -1).numpy(), dtype=np.float32)


def train_pipeline(dataset: Dataset, output, model: str = "TransE", dim: int = 200, epochs: int = 100,
                   batch_size: int = 256, learning_rate: float = 0.01, seed: int = 0, device: str = "cpu",
                   early_stopping: bool = True, inputs: Sequence = (), progress: bool = True) -> dict:
    """Train any PyKEEN model by name with PyKEEN's pipeline; save it to ``output`` atomically.

    ``output`` is checked before training (:func:`openbench._io.check_output_folder`; ``inputs``:
    the dataset's files or folder, which it may not be, hold or lie in).

    Ids are the dataset's (the factories use its label maps), validation triples drive early
    stopping when there are any, and PyKEEN's own test evaluation lands in ``results.json``. The
    folder gets ``openbench-model.json`` describing the run. Returns that description.
    """
    _require_pykeen()
    from pathlib import Path

    check_output_folder(output, inputs)

    from pykeen.pipeline import pipeline
    from openbench import __version__

    model_class, model_kwargs = pykeen_model(model)
    factories = {split: dataset.triples_factory(split) for split in dataset.triples}
    validation = factories["valid"] if dataset.triples["valid"].shape[0] else None
    stopper = "early" if early_stopping and validation is not None else None
    label = model if model in PYKEEN_MODELS else model_class.__name__
    stage("training %s on %d triples: up to %d epochs%s", label, dataset.triples["train"].shape[0], epochs,
          ", early stopping on validation hits@10 every 5 epochs" if stopper else "")
    shown = _epoch_progress(f"training {label}", epochs, progress)
    try:
        with _deterministic_training():
            result = pipeline(training=factories["train"], validation=validation, testing=factories["test"],
                              model=model_class, model_kwargs=model_kwargs or None, dimensions=dim,
                              optimizer="Adam", optimizer_kwargs={"lr": learning_rate},
                              training_kwargs={"num_epochs": epochs, "batch_size": batch_size, "use_tqdm": False,
                                               "callbacks": [shown]},
                              evaluation_kwargs={"use_tqdm": False},
                              stopper=stopper, stopper_kwargs={"frequency": 5, "patience": 2,
                                                               "result_callbacks": [_announce_check]}
                              if stopper else None,
                              random_seed=seed, device=device)
    finally:
        shown.close()
    description = {"kind": "pykeen", "model": model_class.__name__, "openbench_model": label,
                   "model_kwargs": model_kwargs, "dimensions": dim, "epochs": epochs,
                   "epochs_run": len(result.losses), "batch_size": batch_size, "learning_rate": learning_rate,
                   "seed": seed, "early_stopping": stopper is not None, "dataset": dataset.path,
                   "dataset_fingerprint": dataset.fingerprint, "final_loss": result.losses[-1] if result.losses else None,
                   "openbench_version": __version__}
    if stopper is not None:
        description["stopping"] = _stopping(result.stopper, len(result.losses), epochs)
    if validation is not None:
        description["validation"] = _validation_mrr(dataset, result.model, factories["train"], device)

    arrays = _scorer_arrays(result.model) if label in ARRAY_MODELS else None
    if arrays is not None:
        description["scorer"] = label  # evaluate --model-dir reads the arrays: no pickle needed

    def fill(folder: Path) -> None:
        from openbench.models.arrays import write_arrays

        result.save_to_directory(folder)
        write_arrays(folder, description, *(arrays or (None, None)))

    replace_folder(Path(output), fill, inputs=inputs, kind="model")
    logger.info("trained %s for %d epochs into %s", model_class.__name__, len(result.losses), output)
    return description


def pykeen_model(model: str) -> Tuple[type, dict]:
    """(PyKEEN model class, its extra arguments) of a name ``evaluate --model`` offers (TransE-L1
    and TransE-L2 choose TransE's norm) or of any PyKEEN model name; one clear error otherwise,
    naming the baselines that need no training."""
    from pykeen.models import model_resolver

    from openbench import vocabulary

    name, arguments = PYKEEN_MODELS.get(model, (model, {}))
    if model.lower() in {vocabulary.POPULARITY, vocabulary.RULES, vocabulary.NEIGHBOURS}:
        raise InputError(f"{model!r} is a baseline computed from the training graph: it needs no training "
                         f"(openbench evaluate --model {model})")
    if model == "RotatE-DGLKE":
        raise InputError("RotatE-DGLKE scores DGL-KE's trained RotatE (sum of complex moduli); PyKEEN trains "
                         "RotatE: openbench train --model RotatE")
    try:
        return model_resolver.lookup(name), dict(arguments)
    except (KeyError, ValueError):
        raise InputError(f"unknown model {model!r}: expected one of {', '.join(PYKEEN_MODELS)} or any PyKEEN "
                         "model name (TransE, DistMult, RotatE, ...)") from None


def _announce_check(stopper, result: float, epoch: int) -> None:
    """PyKEEN's early stopper checked validation: say so, with the best so far."""
    best = max(stopper.results) if stopper.results else result
    stage("epoch %d: validation hits@10 %.4f (best so far %.4f)", epoch, result, best)


# PyKEEN's early stopper as openbench configures it (stopper_kwargs above): what it watches, in words
STOPPING_CRITERION = ("PyKEEN's validation hits@10 (filtered by the training triples), checked every 5 epochs; training stops after 2 checks "
                      "without a 1 % relative improvement and keeps the best epoch's weights")


def _stopping(stopper, epochs_run: int, epochs: int) -> dict:
    """What early stopping did: whether it stopped before ``epochs``, at which epoch, the best
    epoch and its validation hits@10, and the criterion in words."""
    best = stopper.best_metric  # PyKEEN's EarlyStopper: None before its first check
    return {"stopped_early": bool(stopper.stopped) and epochs_run < epochs, "epochs_run": epochs_run,
            "best_epoch": stopper.best_epoch, "best_validation_hits@10": None if best is None else float(best),
            "criterion": STOPPING_CRITERION}


def _validation_mrr(dataset: Dataset, model, factory, device: str) -> dict:
    """The trained model's realistic MRR on the validation triples next to the popularity
    baseline's (filtered full ranking, openbench's evaluator)."""
    from openbench.api import from_pykeen
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.popularity import popularity_model

    values = {}
    for name, scorer in (("model", from_pykeen(model, factory)), ("popularity", popularity_model(dataset))):
        record = evaluate(dataset, scorer, evaluation_split="valid", device=device)
        values[f"{name}_mrr"] = record.metric("both.realistic.mrr")
    return values


def train_dataset(dataset_path, output, **settings) -> dict:
    """Load a split folder or registry name and train on it (:func:`train_pipeline`'s settings); the
    output is checked before the dataset is read."""
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.counting.device import resolve_device
    from openbench.datasets.published.names import resolve

    folder = resolve(dataset_path)
    check_output_folder(output, [folder])
    settings["device"] = str(resolve_device(settings.get("device", "auto")))
    return train_pipeline(load_dataset(folder), output, inputs=[folder], **settings)
