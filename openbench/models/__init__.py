"""Models: what openbench scores, as scorers (:mod:`.base`'s protocol): embedding arrays with a
score function (:mod:`.scorers`), PyKEEN models (:mod:`.pykeen`), DGL-KE and LibKGE checkpoints
(:mod:`.dglke`, :mod:`.libkge`); and the model-source registry that tells them apart. The names
below load on first use (PEP 562)."""
from importlib import import_module
from typing import Any

_PUBLIC = {"SCORERS": "scorers", "build_scorer": "scorers", "EmbeddingScorer": "scorers"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'openbench.models' has no attribute {name!r}")
    value = getattr(import_module(f"openbench.models.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
