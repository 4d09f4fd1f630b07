"""Evaluation: the engine (:mod:`.evaluate`: its setup, producers and count chain), rank
counts, the exact-ranks machinery and kernels, metrics and the evaluator classes.

The public names below load on first use (PEP 562), so that importing a light submodule does not
import torch and polars.
"""
from openbench._lazy import lazy_exports

_PUBLIC = {
    "resolve_device": "openbench.evaluation.device",
    "Evaluator": "openbench.evaluation.evaluator", "EmbeddingEvaluator": "openbench.evaluation.evaluator",
    "RankCounts": "openbench.evaluation.ranking", "rank_counts": "openbench.evaluation.ranking",
    "EvaluationOptions": "openbench.evaluation.sources", "evaluate_model": "openbench.evaluation.sources",
    "load_dataset": "openbench.datasets.loader", "SampledNegatives": "openbench.datasets.negatives",
    "ModelSpec": "openbench.models.sources", "SOURCES": "openbench.models.sources",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
