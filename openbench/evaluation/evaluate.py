"""The one door into the engine: a dataset, a model, a task -> a :class:`~openbench.record.ResultRecord`.

:func:`evaluate` is how the command line, the sweeps, the demo, :mod:`openbench.compat`, the
board and the tests reach the engine. It

1. resolves the task (:mod:`openbench.task_registry`: a name with its options as keywords, or a
   task's options object such as ``openbench.Repurposing(relation="indication")``) and checks
   the run's settings against it (the shard modes it takes);
2. reads the dataset (a loaded :class:`~openbench.datasets.loader.Dataset`, a folder or a
   registry name) and the model: a scorer (:mod:`openbench.models.base`), ranked lists
   (:mod:`openbench.models.lists`), a producer, or a :class:`~openbench.models.sources.ModelSpec`
   (files the user named; loaded here, the load timed), its stored values checked finite
   (:mod:`openbench.models.finite`);
3. hands both to the task's :meth:`~openbench.evaluation.tasks.base.Task.run` (ranking:
   :mod:`.tasks.ranking`, classification: :mod:`.tasks.classification`, repurposing:
   :mod:`.tasks.repurposing`), which returns the record.
"""
from __future__ import annotations

import time
from typing import Optional, Union

from openbench.datasets.loader import Dataset
from openbench.errors import UsageError, option
from openbench.evaluation.producers.base import Producer
from openbench.evaluation.tasks.base import RunSettings, TaskOptions, resolve_task
from openbench.models.finite import refuse_nonfinite
from openbench.models.sources import ModelSpec, select_source
from openbench.record import ResultRecord

__all__ = ["evaluate"]


def _load(dataset: Dataset, model, shard: Optional[str]):
    """(the model over ``dataset``'s ids, seconds its files took to load or None), its stored
    values checked finite (:mod:`openbench.models.finite`: one rule for every task and source)."""
    if isinstance(model, ModelSpec):
        source = select_source(model)
        if shard is not None and not source.distributable:
            raise UsageError(f"{option('shard')} evaluates embedding scorers (embeddings, DGL-KE and LibKGE "
                             f"checkpoints), not a {source.name} model")
        started = time.perf_counter()
        loaded = source.load(dataset, model)
        refuse_nonfinite(loaded, dataset)
        return loaded, time.perf_counter() - started
    loaded = model.for_dataset(dataset) if hasattr(model, "for_dataset") else model
    refuse_nonfinite(getattr(loaded, "scorer", loaded) if isinstance(loaded, Producer) else loaded, dataset)
    return loaded, None


def _with_model_load(record: ResultRecord, seconds: Optional[float]) -> ResultRecord:
    """``record`` with the model's load time among its stages, after the dataset's."""
    if seconds is None:
        return record
    stages = record.timing.get("stages", {})
    first = {key: stages[key] for key in ("load_dataset",) if key in stages}
    record.timing["stages"] = {**first, "load_model": round(seconds, 6),
                               **{key: value for key, value in stages.items() if key not in first}}
    return record


def evaluate(dataset, model, task: Union[str, TaskOptions] = "ranking", *, device="auto", seed: Optional[int] = 0,
             progress: bool = False, lower_is_better: bool = False, batch_size: Optional[int] = None,
             shard: Optional[str] = None, **options) -> ResultRecord:
    """Evaluate ``model`` on ``dataset`` under ``task``; returns the typed result record (a ranking
    record's per-query ranks in ``record.ranks``).

    :param dataset: a :class:`~openbench.datasets.loader.Dataset`, a split folder or a registry name.
    :param model: a scorer (:func:`openbench.embedding_model`, :func:`openbench.from_pykeen`,
        :func:`openbench.score_function`, any object with the
        :class:`~openbench.models.base.Scorer` methods), ranked lists
        (:class:`~openbench.models.lists.TopKLists`, :class:`~openbench.models.lists.OBL2021Submission`,
        a hosted benchmark's :class:`~openbench.models.lists.ServedLists`),
        a producer, or a :class:`~openbench.models.sources.ModelSpec` naming the model's files
        (what ``openbench evaluate`` reads; the load is timed as the record's ``load_model`` stage).
    :param task: a task's name (``"ranking"``, the default; ``"classification"``;
        ``"repurposing"``; :func:`openbench.task_registry.task_names` lists them) with its options
        as keywords (``options``: the fields of :class:`~openbench.evaluation.tasks.ranking.Ranking`,
        :class:`~openbench.evaluation.tasks.classification.Classification` or
        :class:`~openbench.evaluation.tasks.repurposing.Repurposing`); or one of those options
        objects itself (``task=openbench.Repurposing(relation="indication")``), which keywords may
        amend. An option of another task is an error naming the task that takes it.
    :param device: ``"auto"`` (a GPU where there is one), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    :param seed: recorded in the record (the run's seed, as ``--seed``; ranking itself is
        deterministic and draws nothing; it seeds bootstrap resamples and sampled negatives).
    :param lower_is_better: the model's scores are distances: smaller ranks first.
    :param batch_size: queries per batch (default: by memory).
    :param shard: ``"queries"`` or ``"entities"``: evaluate on every rank of the torch.distributed
        process group (joined from torchrun's environment where it is not yet initialised, and
        left again afterwards), each rank's device its own GPU under ``device="auto"``
        (:class:`~openbench.evaluation.producers.sharded.ShardedProducer`); the repurposing task
        shards the matrix's drugs (``"entities"``). Every rank returns the same record.
    """
    chosen, task_options = resolve_task(task, options)
    settings = RunSettings(device, seed, progress, lower_is_better, batch_size, shard)
    if not isinstance(dataset, Dataset):
        from openbench.datasets.loader import load_dataset

        dataset = load_dataset(dataset)
    chosen.check_settings(settings)
    loaded, load_seconds = _load(dataset, model, shard)
    if hasattr(loaded, "rank_lower_first"):  # predictions whose unlisted candidates take the losing side
        loaded.rank_lower_first(lower_is_better)
    return _with_model_load(chosen.run(dataset, loaded, task_options, settings), load_seconds)
