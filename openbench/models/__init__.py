"""Models: what openbench scores, as scorers (:mod:`.base`'s protocol): embedding arrays with a
score function (:mod:`.scorers`), PyKEEN models (:mod:`.pykeen`), DGL-KE and LibKGE checkpoints
(:mod:`.dglke`, :mod:`.libkge`); and the model-source registry that tells them apart. The names
below load on first use (PEP 562)."""
from openbench._lazy import lazy_exports

_PUBLIC = {"SCORERS": ".scorers", "build_scorer": ".scorers", "EmbeddingScorer": ".scorers"}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
