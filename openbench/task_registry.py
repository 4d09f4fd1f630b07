"""The task registry: every evaluation task openbench runs, by name, in one place.

A task is one object (:class:`openbench.evaluation.tasks.base.Task`) with one interface: its
options, how it runs on a dataset and a model, the check of its record block, its board
headline, its summary lines, its figures and the words that reproduce it. The door, the command
line, the record, the store, the page, the report and the board's reproduction ask this registry
for the task a name or a record names; nothing else branches on a task's name.

A new task is one module that defines ``TASK`` and one line of :data:`TASK_MODULES` (or, at run
time, :func:`register_task`: a plugin, a test's toy task). The modules load on first use: the
registry sits in the base layer and imports no engine module at its top.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any, Dict, Tuple

from openbench.errors import UsageError

__all__ = ["TASK_MODULES", "DEFAULT_TASK", "task_names", "get_task", "task_of", "register_task", "unregister_task"]

# name -> the module whose ``TASK`` implements it, in the order the command line lists them
TASK_MODULES: Dict[str, str] = {
    "ranking": "openbench.evaluation.tasks.ranking",
    "classification": "openbench.evaluation.tasks.classification",
    "repurposing": "openbench.evaluation.tasks.repurposing",
}
DEFAULT_TASK = "ranking"
_REGISTERED: Dict[str, Any] = {}  # tasks registered at run time


def task_names() -> Tuple[str, ...]:
    """Every task's name: the listed ones, then those registered at run time."""
    return tuple(TASK_MODULES) + tuple(name for name in _REGISTERED if name not in TASK_MODULES)


def get_task(name: str):
    """The task called ``name``; an unknown name is a :class:`~openbench.errors.UsageError` listing
    the valid ones."""
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    if not isinstance(name, str) or name not in TASK_MODULES:
        raise UsageError(f"task {name!r}: expected one of {', '.join(task_names())}")
    return import_module(TASK_MODULES[name]).TASK


def task_of(record: dict):
    """The task of a record (a JSON object openbench wrote; ``task`` absent: ranking)."""
    return get_task(record.get("task", DEFAULT_TASK))


def register_task(task) -> Any:
    """Add ``task`` (an object with the task interface) under ``task.name``; returns it."""
    if task.name in TASK_MODULES:
        raise UsageError(f"task {task.name!r} is openbench's own; register a task under another name")
    _REGISTERED[task.name] = task
    return task


def unregister_task(name: str) -> None:
    """Remove a task :func:`register_task` added."""
    _REGISTERED.pop(name, None)
