"""The triple classification task: a split's validation and test positives against its negatives
(true negatives, GENERATED corruptions, a time split's REMOVED edges), AUROC, AUPRC and thresholds
chosen per relation on validation. Its definitions, and what each number means, are in
:mod:`.metrics`; its options are :class:`Classification`.
"""
from __future__ import annotations

from typing import List, Optional

from openbench._lazy import lazy_exports
from openbench.errors import UsageError
from openbench.evaluation.tasks.base import RunSettings, Task, TaskOptions
from openbench.evaluation.tasks.classification.options import THRESHOLD_METRICS, Classification


# the metrics module's names, loaded on first use (numpy, polars, scipy): the task object stays light
_PUBLIC = {name: "openbench.evaluation.tasks.classification.metrics" for name in (
    "LabelledTriples", "auroc", "average_precision", "choose_threshold", "threshold_metrics", "read_labelled_split",
    "classification_record", "summary_lines")}
__all__ = ["THRESHOLD_METRICS", "Classification", "ClassificationTask", "TASK", *sorted(_PUBLIC)]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)


class ClassificationTask(Task):
    """Triple classification of a split's positives and negatives (see the module docstring)."""

    name = "classification"
    summary = "triple classification of the split's positives and negatives (AUROC, AUPRC, thresholds per relation)"
    options_type = Classification
    flags = ("--threshold-metric",)
    block_key = "classification"
    headline = "auroc"
    page_metrics = ("auroc", "auprc")
    table_columns = ("auroc", "auprc", "accuracy", "precision", "recall", "f1")  # record.CLASSIFICATION_METRICS
    shards = (None,)
    flag_aliases = ("--drugs", "--diseases")  # a dense matrix of scores' row and column labels

    def check_settings(self, settings: RunSettings) -> None:
        """One process."""
        if settings.shard is not None:
            raise UsageError("triple classification runs on one process: sharding is for ranking")

    def run(self, dataset, model, options: TaskOptions, settings: RunSettings):
        """The classification record of a scorer (ranked lists score no triple: refused)."""
        from openbench.evaluation.candidates import RankingSetup
        from openbench.evaluation.producers.topk import LISTS_SCORE_NOTHING, is_ranked_lists
        from openbench.evaluation.tasks.classification.metrics import Classifying, classification_record
        from openbench.record import ResultRecord

        assert isinstance(options, Classification)
        if is_ranked_lists(model):
            raise UsageError(LISTS_SCORE_NOTHING)
        setup = RankingSetup(dataset, device=settings.device, seed=settings.seed,
                             lower_is_better=settings.lower_is_better, progress=settings.progress)
        scorer = model.to(setup.device) if hasattr(model, "to") else model
        setup.warnings.extend(message for message in getattr(scorer, "warnings", []) if message not in setup.warnings)
        return ResultRecord.from_dict(classification_record(Classifying(setup, scorer), options.threshold_metric,
                                                            settings.batch_size, options.fold))

    def check_record(self, record: dict) -> None:
        """:func:`~openbench.record.check_classification_record`."""
        from openbench.record import check_classification_record

        check_classification_record(record)

    def board_metrics(self, record: dict) -> dict:
        """The test split's overall block."""
        return dict(record["classification"]["test"]["overall"])

    def board_cells(self, cells, side: str, rank_type: str):
        """Each run's metrics of :data:`~openbench.record.CLASSIFICATION_METRICS`; the test split, overall."""
        from openbench.record import CLASSIFICATION_METRICS

        return [{k: v for k, v in cell.items() if k in CLASSIFICATION_METRICS} for cell in cells], "test", "overall"

    def protocol_text(self, protocol: dict) -> Optional[str]:
        """Thresholds per relation, chosen on validation."""
        return ("what this table holds: triple classification of the test positives and negatives, thresholds "
                "per relation chosen on validation; AUROC 0.5 = chance")

    def summary_lines(self, record: dict) -> List[str]:
        """:func:`~.metrics.summary_lines`."""
        from openbench.evaluation.tasks.classification.metrics import summary_lines

        return summary_lines(record)

    def reproduce_options(self, record: dict) -> TaskOptions:
        """The record's threshold metric."""
        return self.options(threshold_metric=(record.get("protocol") or {}).get("threshold_metric", "accuracy"))

    def command_words(self, options: TaskOptions, settings: RunSettings) -> List[str]:
        """The threshold metric."""
        assert isinstance(options, Classification)
        return ["--threshold-metric", options.threshold_metric]


TASK = ClassificationTask()
