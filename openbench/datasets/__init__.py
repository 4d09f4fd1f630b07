"""Datasets: the layouts a split comes in, read into label maps and int64 triples
(:mod:`.loader`), cached in binary form (:mod:`.cache`), OGB dataset folders (:mod:`.ogb`),
sampled evaluation negatives (:mod:`.negatives`), id maps (:mod:`.id_maps`) and the filter index
of known answers (:mod:`.filter_index`). The names below load on first use (PEP 562)."""
from importlib import import_module
from typing import Any

_PUBLIC = {"Dataset": "loader", "load_dataset": "loader", "read_dataset": "loader", "FilterIndex": "filter_index",
           "SampledNegatives": "negatives"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'openbench.datasets' has no attribute {name!r}")
    value = getattr(import_module(f"openbench.datasets.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
