"""Evaluation: the engine. :mod:`.evaluate` is its one door (:func:`evaluate`); beneath it the
candidates a query ranks against (:mod:`.candidates`), the producers that turn a model into rank
counts (:mod:`.producers`), the counting itself (:mod:`.counting`), what follows from the counts
(:mod:`.statistics`), the tasks (:mod:`.tasks`: ranking, classification, repurposing, one interface)
and sweeps (:mod:`.sweep`).

The public names below load on first use (PEP 562), so that importing a light submodule does not
import torch and polars.
"""
from openbench._lazy import lazy_exports

_PUBLIC = {
    "evaluate": "openbench.evaluation.evaluate", "PROTOCOLS": "openbench.evaluation.tasks.ranking",
    "resolve_device": "openbench.evaluation.counting.device",
    "RankCounts": "openbench.evaluation.counting.counts", "rank_counts": "openbench.evaluation.counting.counts",
    "load_dataset": "openbench.datasets.loader", "SampledNegatives": "openbench.datasets.negatives",
    "ModelSpec": "openbench.models.sources", "SOURCES": "openbench.models.sources",
}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
