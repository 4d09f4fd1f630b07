"""The one interface every evaluation task implements (ranking, classification, repurposing, and
whatever a module adds through :mod:`openbench.task_registry`).

A task declares its options as a dataclass (:class:`TaskOptions`: validated once; an option of
another task is an error naming the task that takes it) and answers, for the door, the command
line, the record, the store, the page, the report and the board's reproduction:

* :meth:`Task.run`: a dataset and a model (and the run's :class:`RunSettings`) -> the record;
* :meth:`Task.body` / :meth:`Task.check_record` / :meth:`Task.metric_node`: its part of the record;
* :attr:`Task.headline`, :meth:`Task.board_metrics`, :meth:`Task.board_cells`, :meth:`Task.scope`,
  :attr:`Task.page_metrics`, :meth:`Task.protocol_text`: how the board shows it;
* :meth:`Task.summary_lines`: what the command line prints;
* :meth:`Task.reproduce_options` and :meth:`Task.command_words`: how the board runs it again and
  the ``openbench evaluate`` words that do.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from openbench.errors import UsageError, option
from openbench.task_registry import get_task, task_names

__all__ = ["TaskOptions", "RunSettings", "Task", "resolve_task"]


@dataclass
class TaskOptions:
    """A task's options: subclasses are dataclasses of the task's own fields (their defaults the
    task's defaults); :attr:`TASK` names the task."""

    TASK: ClassVar[str] = ""

    @classmethod
    def field_names(cls) -> Tuple[str, ...]:
        return tuple(item.name for item in dataclasses.fields(cls))

    def check(self) -> "TaskOptions":
        """Refuse values that cannot be right (the task's own checks; by default none); returns self."""
        return self


@dataclass
class RunSettings:
    """How any task runs, whatever it measures: the device, the seed recorded (and seeding what is
    drawn), the progress bar, whether lower scores rank first, queries per batch, and the
    torch.distributed shard mode (None: one process)."""

    device: Any = "auto"
    seed: Optional[int] = 0
    progress: bool = False
    lower_is_better: bool = False
    batch_size: Optional[int] = None
    shard: Optional[str] = None


SETTINGS = tuple(item.name for item in dataclasses.fields(RunSettings))


class Task:
    """A task; subclasses set the class attributes and implement the methods."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line: what the task measures (the command line's help)
    options_type: ClassVar[Type[TaskOptions]] = TaskOptions
    aliases: ClassVar[Dict[str, str]] = {}  # other keyword spellings of its options -> the field
    flags: ClassVar[Tuple[str, ...]] = ()  # the command line's flags of this task's own options
    flag_aliases: ClassVar[Tuple[str, ...]] = ()  # other tasks' flags it also reads (older spellings)
    block_key: ClassVar[Optional[str]] = None  # the record's key holding its numbers (None: ranking's)
    headline: ClassVar[str] = ""  # the board's default sort metric
    page_metrics: ClassVar[Tuple[str, ...]] = ()  # the page's bars, in the 0..1 range
    table_columns: ClassVar[Tuple[str, ...]] = ()  # the board table's metric columns (those present)
    keeps_ranks: ClassVar[bool] = False  # per-query ranks travel with its records (the board's evidence)
    draws_report: ClassVar[bool] = False  # ``openbench report`` draws its records (:meth:`report`)
    shards: ClassVar[Tuple[Optional[str], ...]] = (None,)  # shard modes it runs under
    sweeps: ClassVar[bool] = False  # several models in one run (--model-dir repeated, --sweep)
    shows_published: ClassVar[bool] = False  # the board's published reference rows (OpenBioLink's) are of this task

    # -- options ----------------------------------------------------------------------------
    def options(self, given: Optional[TaskOptions] = None, **keywords) -> TaskOptions:
        """The task's options: ``given`` (an options object of this task) with ``keywords`` (its
        fields, or their :attr:`aliases`) set; a keyword of another task is an error naming it."""
        if given is not None and not isinstance(given, self.options_type):
            raise UsageError(f"the {self.name} task takes {self.options_type.__name__} options, not "
                             f"{type(given).__name__}")
        fields = self.options_type.field_names()
        values: Dict[str, Any] = {}
        for keyword, value in keywords.items():
            field = self.aliases.get(keyword, keyword)
            if field not in fields:
                raise UsageError(_foreign(self.name, keyword))
            values[field] = value
        base = given if given is not None else self.options_type()
        return dataclasses.replace(base, **values).check()

    def check_settings(self, settings: RunSettings) -> None:
        """Refuse settings the task cannot run under (a shard mode it does not take)."""
        if settings.shard not in self.shards:
            modes = [mode for mode in self.shards if mode is not None]
            raise UsageError(f"the {self.name} task runs on one process" if not modes else
                             f"the {self.name} task shards {option('shard', modes[0])}")

    # -- running ----------------------------------------------------------------------------
    def run(self, dataset, model, options: TaskOptions, settings: RunSettings):
        """The :class:`~openbench.record.ResultRecord` of ``model`` (loaded over ``dataset``'s ids)."""
        raise NotImplementedError

    # -- the record -------------------------------------------------------------------------
    def body(self, record) -> Dict[str, Any]:
        """The record's JSON between its head (``written_by``, ``schema_version``, ``task``) and its
        tail (seed, device, version, timing, warnings): the task's block, protocol, dataset, model."""
        protocol = record.protocol.to_dict() if hasattr(record.protocol, "to_dict") else dict(record.protocol)
        return {str(self.block_key): record.block, "protocol": protocol, "dataset": record.dataset,
                "model": record.model}

    def required_keys(self) -> Tuple[str, ...]:
        """The keys a record of this task must hold."""
        return (str(self.block_key), "protocol", "dataset", "model")

    def check_record(self, record: dict) -> None:
        """Raise :class:`~openbench.record.RecordError` unless the record's block is consistent."""
        raise NotImplementedError

    def metric_node(self, record, parts: List[str]) -> Tuple[Any, List[str]]:
        """(where ``record.metric`` looks up a dotted path, the path's parts within it)."""
        return record.block, parts

    def protocol_of(self, protocol: Any) -> Any:
        """A record's protocol block as the record keeps it (read back from JSON)."""
        return dict(protocol)

    # -- the board --------------------------------------------------------------------------
    def board_metrics(self, record: dict) -> dict:
        """What a board row stores and shows of a record."""
        raise NotImplementedError

    def board_cells(self, cells: Sequence[dict], side: str, rank_type: str) -> Tuple[List[dict], str, str]:
        """(per run the metrics a row averages, the side and the rank type the row reports) from the
        stored :meth:`board_metrics` of a group's runs and the side and rank type asked for."""
        return [dict(cell) for cell in cells], "test", "realistic"

    def interval(self, record: dict, metric: str) -> Optional[Tuple[float, float]]:
        """The record's own 95 % interval of a board ``metric`` (a task whose records carry
        bootstrap intervals); None where it has none."""
        return None

    def scope(self, protocol: dict) -> Optional[str]:
        """The scope a protocol restricts the evaluation to (its rows then rank apart), or None."""
        return None

    def nonstandard(self, dataset_name: Optional[str], protocol: dict) -> Optional[bool]:
        """Whether the protocol differs from the dataset's standard one (None: no standard known)."""
        return None

    def protocol_text(self, protocol: dict) -> Optional[str]:
        """What the page says a table of this task holds (None: the generic text)."""
        return None

    # -- the report --------------------------------------------------------------------------
    def report(self, models: Dict[str, Tuple[dict, Any]], output, seed: int, resamples: int, inputs: Sequence):
        """Write ``openbench report``'s folder of records {model name: (record, ranks or None)} of
        this task into ``output`` (replacing only what openbench wrote); returns its page."""
        raise UsageError(f"openbench report draws no {self.name} records")

    # -- the command line ------------------------------------------------------------------
    def summary_lines(self, record: dict) -> List[str]:
        """What ``openbench evaluate`` prints of a record."""
        raise NotImplementedError

    # -- reproduction ----------------------------------------------------------------------
    def reproduce_options(self, record: dict) -> TaskOptions:
        """The options that give ``record`` again (a record naming what it used by hash alone is
        refused with :class:`~openbench.errors.UsageError`)."""
        raise NotImplementedError

    def command_words(self, options: TaskOptions, settings: RunSettings) -> List[str]:
        """The ``openbench evaluate`` words of ``options`` and the settings a record keeps."""
        raise NotImplementedError


def _foreign(name: str, keyword: str) -> str:
    """The error of ``keyword`` given to task ``name``: the task(s) that take it, where any does."""
    takers = []
    for other in task_names():
        if other == name:
            continue
        task = get_task(other)
        if task.aliases.get(keyword, keyword) in task.options_type.field_names():
            takers.append(other)
    where = f"; it belongs to the {' and '.join(takers)} task{'s' if len(takers) > 1 else ''}" if takers else ""
    return f"the {name} task takes no option {option(keyword)}{where}"


def resolve_task(task, keywords: Dict[str, Any]) -> Tuple[Task, TaskOptions]:
    """(the task, its options) of the door's ``task`` (a name, or an options object such as
    ``openbench.Repurposing(relation="indication")``) and its keyword options."""
    if isinstance(task, TaskOptions):
        chosen = get_task(type(task).TASK)
        return chosen, chosen.options(task, **keywords)
    chosen = get_task(task)
    return chosen, chosen.options(**keywords)
