"""The repurposing task's options: :class:`Repurposing`, what a user asks (the door's
``task=openbench.Repurposing(relation="indication")``, or its keyword form), and
:class:`RepurposingOptions`, what a run reads (that, with the run's settings)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, List, Optional, Sequence, Union

from openbench.evaluation.tasks.base import TaskOptions

__all__ = ["DEFAULT_RECALL_AT", "DEFAULT_KEEP_TOP", "PROTOCOLS", "DRUG_WORDS", "SPLIT_NAMES", "NAMED", "FLYERS_AT",
           "OUTCOMES", "DEFAULT_POSITIVE_OUTCOMES", "DEFAULT_NEGATIVE_OUTCOMES", "Repurposing", "RepurposingOptions"]

DEFAULT_RECALL_AT = (10, 100, 1000, 10000)  # and 1 % of the matrix, added per matrix
DEFAULT_KEEP_TOP = 1000
PROTOCOLS = ("full", "txgnn")
DRUG_WORDS = ("drug", "compound", "chemical")
SPLIT_NAMES = ("train", "valid", "test")
NAMED = 20  # entities or rows named in a record's lists (the count is always whole)
FLYERS_AT = 100  # the best pairs whose drugs and diseases the frequent flyers count
# Every Cure's clinical-trial outcomes, best first, and those its clinical-trials transformer labels 1 and 0
OUTCOMES = ("significantly_better", "non_significantly_better", "non_significantly_worse", "significantly_worse")
DEFAULT_POSITIVE_OUTCOMES = ("significantly_better",)
DEFAULT_NEGATIVE_OUTCOMES = ("significantly_worse",)


@dataclass
class RepurposingOptions:
    """What a repurposing evaluation asks (the door's arguments, checked)."""

    relations: Sequence[str]
    negative_relations: Sequence[str] = ()
    drugs: Optional[Sequence[str]] = None
    diseases: Optional[Sequence[str]] = None
    recall_at: Optional[Sequence[int]] = None
    hits_at: Sequence[int] = (1, 3, 10)
    keep_top: int = DEFAULT_KEEP_TOP
    ground_truth: Optional[str] = None
    cutoff: Optional[str] = None
    positive_outcomes: Sequence[str] = DEFAULT_POSITIVE_OUTCOMES
    negative_outcomes: Sequence[str] = DEFAULT_NEGATIVE_OUTCOMES
    protocol: str = "full"
    bootstrap: Optional[int] = None
    seed: Optional[int] = 0
    ranks: str = "exact"
    lower_is_better: bool = False
    progress: bool = False
    shard: Optional[object] = None  # openbench.evaluation.counting.matrix.Shard under torch.distributed


@dataclass
class Repurposing(TaskOptions):
    """The repurposing task's options.

    :param relation: the treats relation, or several (the first is the one scored), either
        orientation (keyword form: ``relations=``; the command line: ``--relation``, repeated).
    :param negative_relations: known negatives (contraindications, true-negative edges).
    :param drugs: a curated list of the matrix's drugs (labels); ``diseases`` likewise (default: the
        node types of the treats relations' ends).
    :param recall_at: the n of Recall@n (default 10, 100, 1000, 10000 and 1 % of the matrix).
    :param hits_at: the k of the disease-specific Hit@k.
    :param keep_top: the best pairs the record keeps (default 1000).
    :param ground_truth: a CSV/TSV of (drug, disease, label or trial outcome, optional date) scored
        as an extra test set (:mod:`~openbench.evaluation.tasks.repurposing.ground_truth`).
    :param cutoff: the graph's cut-off (``YYYY-MM-DD``): ground-truth rows dated on or before it are
        scored apart (default: the cut-off of a split by dates).
    :param positive_outcomes: the trial outcomes that are positives (default ``significantly_better``);
        ``negative_outcomes`` those that are negatives (default ``significantly_worse``).
    :param protocol: ``"full"`` (default) or ``"txgnn"`` (TxGNN's own protocol beside the filtered numbers).
    :param bootstrap: resamples of the pairs and diseases for 95 % intervals.
    :param ranks: ``"exact"`` or ``"fast"``.
    """

    TASK: ClassVar[str] = "repurposing"

    relation: Union[str, Sequence[str]] = ()
    negative_relations: Sequence[str] = ()
    drugs: Optional[Sequence[str]] = None
    diseases: Optional[Sequence[str]] = None
    recall_at: Optional[Sequence[int]] = None
    hits_at: Sequence[int] = (1, 3, 10)
    keep_top: Optional[int] = None
    ground_truth: Optional[str] = None
    cutoff: Optional[str] = None
    positive_outcomes: Sequence[str] = DEFAULT_POSITIVE_OUTCOMES
    negative_outcomes: Sequence[str] = DEFAULT_NEGATIVE_OUTCOMES
    protocol: Optional[str] = None
    bootstrap: Optional[int] = None
    ranks: str = "exact"

    def relations(self) -> List[str]:
        """The treats relations, the scored one first."""
        return [self.relation] if isinstance(self.relation, str) else list(self.relation or [])

    def check(self) -> "Repurposing":
        """One spelling of the treats relations: a list (a name given alone becomes one)."""
        self.relation = self.relations()
        return self
