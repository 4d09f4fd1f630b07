"""Dataset loading, filter index, rank counts, metrics, evaluators, scorers and model sources.

The public names below load on first use (PEP 562), so that importing a light submodule such as
:mod:`openbench.evaluation.catalog` (the CLI does) does not import torch and polars.
"""
from importlib import import_module
from typing import Any

_PUBLIC = {
    "Dataset": "dataset", "load_dataset": "dataset", "read_dataset": "dataset", "resolve_device": "device",
    "Evaluator": "evaluator", "EmbeddingEvaluator": "evaluator", "FilterIndex": "filter_index",
    "RankCounts": "ranking", "rank_counts": "ranking", "SCORERS": "scorers", "build_scorer": "scorers",
    "ModelSpec": "sources", "EvaluationOptions": "sources", "evaluate_model": "sources", "SOURCES": "sources",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'openbench.evaluation' has no attribute {name!r}")
    value = getattr(import_module(f"openbench.evaluation.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
