"""The ranking task's options (:class:`Ranking`) and the names they take."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional, Sequence

from openbench.evaluation.tasks.base import TaskOptions
from openbench.vocabulary import QUERY_SIDES

if TYPE_CHECKING:
    from openbench.datasets.negatives import SampledNegatives

__all__ = ["PROTOCOLS", "REPRODUCIBLE_CANDIDATES", "DEFAULT_HITS_AT", "Ranking"]

PROTOCOLS = ("full", "sampled")
REPRODUCIBLE_CANDIDATES = ("all", "typed", "sampled")
DEFAULT_HITS_AT = (1, 3, 10)  # candidates.DEFAULT_HITS_AT: the k of hits@k unless told


@dataclass
class Ranking(TaskOptions):
    """The ranking task's options.

    :param protocol: ``"full"`` (every entity, the known answers of ``filter_sets`` filtered;
        default) or ``"sampled"`` (each query against its own ``negatives``, unfiltered, as OGB;
        the default for OGB folders, whose negatives come with them).
    :param filter_sets: splits whose triples are filtered (default: train, valid and test).
    :param hits_at: the k of hits@k.
    :param candidates: ``"all"`` or ``"typed"`` (only entities of a type the relation admits).
    :param sides: ``("head", "tail")``, or one of them.
    :param relations: evaluate only these relations' triples (labels); ``entities``: rank only
        against these entities (labels).
    :param ranks: embeddings: ``"exact"`` or ``"fast"``.
    :param exclude_query_entity: remove the query's own entity from its candidates.
    :param evaluation_split: the split whose triples are ranked.
    :param entity_chunk: candidates per block (embeddings; default: by memory).
    :param bootstrap: resamples of the test triples for the record's ``confidence`` block (95 %
        percentile intervals of MRR and hits@k; :mod:`openbench.evaluation.statistics.intervals`).
    :param by_period: ``"year"`` or ``"month"``: on a split by dates, the headline metrics per
        period of the test edges' dates, with intervals (the record's ``by_period`` block;
        :mod:`openbench.evaluation.statistics.periods`).
    """

    TASK: ClassVar[str] = "ranking"

    protocol: Optional[str] = None
    negatives: Optional["SampledNegatives"] = None
    filter_sets: Optional[Sequence[str]] = None
    hits_at: Sequence[int] = DEFAULT_HITS_AT
    candidates: str = "all"
    sides: Sequence[str] = QUERY_SIDES
    relations: Optional[Sequence[str]] = None
    entities: Optional[Sequence[str]] = None
    ranks: str = "exact"
    exclude_query_entity: Optional[bool] = None
    evaluation_split: str = "test"
    entity_chunk: Optional[int] = None
    bootstrap: Optional[int] = None
    by_period: Optional[str] = None
