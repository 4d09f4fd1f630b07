"""The classification task's options (:class:`Classification`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from openbench.errors import UsageError, option
from openbench.evaluation.tasks.base import TaskOptions

__all__ = ["THRESHOLD_METRICS", "Classification"]

THRESHOLD_METRICS = ("accuracy", "f1")  # what each relation's threshold maximises on validation


@dataclass
class Classification(TaskOptions):
    """The classification task's options.

    :param threshold_metric: what each relation's threshold maximises on validation (``"accuracy"``
        or ``"f1"``).
    :param fold: the cross-validation fold whose split files are read (``train_test_data/fold_<I>``).
    """

    TASK: ClassVar[str] = "classification"

    threshold_metric: str = "accuracy"
    fold: Optional[int] = None

    def check(self) -> "Classification":
        """A threshold metric of :data:`THRESHOLD_METRICS`."""
        if self.threshold_metric not in THRESHOLD_METRICS:
            raise UsageError(f"{option('threshold_metric', self.threshold_metric)}: expected one of "
                             f"{', '.join(THRESHOLD_METRICS)}")
        return self
