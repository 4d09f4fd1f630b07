"""Evaluation: the engine (:mod:`.evaluate`: its setup, producers and count chain), rank
counts, the exact-ranks machinery and kernels, metrics and the evaluator classes.

The public names below load on first use (PEP 562), so that importing a light submodule does not
import torch and polars.
"""
from importlib import import_module
from typing import Any

_PUBLIC = {
    "resolve_device": "openbench.evaluation.device",
    "Evaluator": "openbench.evaluation.evaluator", "EmbeddingEvaluator": "openbench.evaluation.evaluator",
    "RankCounts": "openbench.evaluation.ranking", "rank_counts": "openbench.evaluation.ranking",
    "EvaluationOptions": "openbench.evaluation.sources", "evaluate_model": "openbench.evaluation.sources",
    "load_dataset": "openbench.datasets.loader", "SampledNegatives": "openbench.datasets.negatives",
    "ModelSpec": "openbench.models.sources", "SOURCES": "openbench.models.sources",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'openbench.evaluation' has no attribute {name!r}")
    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
