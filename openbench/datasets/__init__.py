"""Datasets: the layouts a split comes in (:mod:`.layouts`), read into label maps and int64 triples
(:mod:`.loader`), cached in binary form (:mod:`.cache`), OGB dataset folders (:mod:`.ogb`),
sampled evaluation negatives (:mod:`.negatives`), id maps (:mod:`.id_maps`) and the filter index
of known answers (:mod:`.filter_index`). The names below load on first use (PEP 562)."""
from openbench._lazy import lazy_exports

_PUBLIC = {"Dataset": ".loader", "load_dataset": ".loader", "read_dataset": ".loader", "FilterIndex": ".filter_index",
           "SampledNegatives": ".negatives"}
__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
