"""Evaluating the model a user named (a :class:`~openbench.models.sources.ModelSpec`) with the
command line's options: the one path the CLI, the demo, the sweeps and :mod:`openbench.compat`
take. The source is recognised (:func:`~openbench.models.sources.select_source`), its options
checked against what it can do, the protocol resolved (:func:`with_protocol`), the model loaded
and run by :func:`openbench.evaluation.evaluate.run`, on several processes where asked."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import List, Optional, Sequence

from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
from openbench.errors import InputError, UsageError, option
from openbench.evaluation.evaluate import producer_for, run, setup_for
from openbench.evaluation.setup import DEFAULT_HITS_AT
from openbench.layouts import SPLITS
from openbench.models.sources import ModelSource, ModelSpec, select_source
from openbench.record import ResultRecord

__all__ = ["EvaluationOptions", "PROTOCOLS", "with_protocol", "source_settings", "evaluate_model", "evaluate_model_record", "classify_model",
           "read_entity_list"]

logger = logging.getLogger(__name__)


@dataclass
class EvaluationOptions:
    """The protocol and run settings of a ranking evaluation (recorded in the result)."""

    filter_sets: Optional[Sequence[str]] = None  # None: train, valid and test
    hits_at: Sequence[int] = DEFAULT_HITS_AT
    lower_is_better: bool = False
    exclude_query_entity: bool = False
    candidates: str = "all"
    device: str = "auto"
    batch_size: Optional[int] = None
    seed: int = 0
    progress: bool = True
    distributed: bool = False
    shard: str = "queries"
    filter_given: bool = field(default=False, repr=False)  # the user chose the filter sets explicitly
    sides: Sequence[str] = ("head", "tail")
    relations: Optional[Sequence[str]] = None  # None: every relation
    entities: Optional[Sequence[str]] = None  # None: every entity is a candidate
    ranks: str = "exact"  # embeddings: "exact" or "fast" (compare the computed scores as they are)
    # "sampled": each query against its own negatives (OGB's protocol); "full": against every
    # entity, filtered; None: sampled for OGB folders, else full
    protocol: Optional[str] = None
    sampled_negatives: Optional[SampledNegatives] = field(default=None, repr=False)  # set by build_evaluator
    bootstrap: Optional[int] = None  # resamples of the test triples for the confidence block

    def evaluator_options(self) -> dict:
        return dict(filter_sets=list(SPLITS if self.filter_sets is None else self.filter_sets),
                    hits_at=list(self.hits_at), lower_is_better=self.lower_is_better,
                    exclude_query_entity=self.exclude_query_entity, seed=self.seed, progress=self.progress,
                    candidates=self.candidates, sides=list(self.sides), scope_relations=self.relations,
                    scope_entities=self.entities,
                    **({"sampled_negatives": self.sampled_negatives} if self.sampled_negatives is not None else {}))


PROTOCOLS = ("sampled", "full")


def with_protocol(dataset: Dataset, source: ModelSource, options: EvaluationOptions) -> EvaluationOptions:
    """``options`` with the protocol resolved: under the sampled protocol the test split's
    negatives (``dataset.sampled``) and no filter sets (OGB's definition)."""
    protocol = options.protocol or ("sampled" if dataset.layout == "ogb" else "full")
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    if protocol == "full":
        return replace(options, protocol="full", sampled_negatives=None)
    if "test" not in dataset.sampled:
        raise UsageError(f"{option('protocol', 'sampled')} needs negatives per test triple: an OGB dataset folder, "
                         "or a split written with openbench split --eval-negatives (test_negatives.npz)")
    if options.filter_given and options.filter_sets:
        raise UsageError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                         f"definition): {option('filter_sets')} does not apply (use {option('protocol', 'full')})")
    if not source.scores_every_entity or source.name == "obl2021":
        raise UsageError(f"the sampled protocol scores each query's own negatives: a {source.name} input has no "
                         f"scores for them (use {option('protocol', 'full')})")
    if options.distributed:
        raise UsageError("the sampled protocol runs on one process (its candidates are few per query)")
    return replace(options, protocol="sampled", filter_sets=[], sampled_negatives=dataset.sampled["test"])


def source_settings(source: ModelSource, options: EvaluationOptions) -> dict:
    """The setup options of ``options`` for ``source``, with what it cannot take refused: top-k
    files rank what they list (no ``--entities``; the query entity always excluded, as SAFRAN
    does), an OBL2021 submission is scored as submitted (no ``--filter``, no scope)."""
    settings = dict(options.evaluator_options(), device=options.device)
    if source.name == "anyburl":
        if options.entities is not None:
            raise UsageError(f"{option('entities')} restricts the candidates a model scores; top-k prediction files "
                             f"rank only what they list: use {option('relations')} or {option('sides')} to scope them")
        for key in ("candidates", "lower_is_better", "exclude_query_entity"):
            settings.pop(key)
        settings["progress"] = False
    if source.name == "obl2021":
        if options.filter_given:
            raise UsageError(f"OBL2021 submissions are filtered by the submitter; {option('filter_sets')} does not "
                             "apply")
        if options.relations is not None or options.entities is not None or list(options.sides) != ["head", "tail"]:
            raise UsageError(f"an OBL2021 submission is scored on the whole test split: {option('relations')}, "
                             f"{option('sides')} and {option('entities')} do not apply")
        settings = {"hits_at": list(options.hits_at), "seed": options.seed, "progress": False}
    return settings


def evaluate_model(dataset: Dataset, spec: ModelSpec, options: Optional[EvaluationOptions] = None) -> Optional[dict]:
    """Evaluate the model ``spec`` names on ``dataset``; returns the result record (JSON values).

    In a distributed run every rank evaluates its share and only rank 0 returns the record (the
    others return None); the process group is closed afterwards.
    """
    record = evaluate_model_record(dataset, spec, options)
    return None if record is None else record.to_dict()


def evaluate_model_record(dataset: Dataset, spec: ModelSpec,
                          options: Optional[EvaluationOptions] = None) -> Optional[ResultRecord]:
    """:func:`evaluate_model`'s record as a :class:`~openbench.record.ResultRecord` (its per-query
    ``ranks`` included)."""
    options = options or EvaluationOptions()
    source = select_source(spec)
    if options.distributed and not source.distributable:
        raise UsageError(f"{option('shard')} evaluates embedding scorers (embeddings, DGL-KE and LibKGE checkpoints), "
                         f"not a {source.name} model")
    options = with_protocol(dataset, source, options)
    settings = source_settings(source, options)
    logger.info("evaluating a %s model", source.name)
    started = time.perf_counter()
    model = source.load(dataset, spec)
    loaded = time.perf_counter() - started
    producer = producer_for(model, protocol=options.protocol or "full", negatives=options.sampled_negatives,
                            ranks=options.ranks)
    if not options.distributed:
        record = run(setup_for(dataset, producer, **settings), producer, options.batch_size, options.bootstrap)
        return _with_model_load(record, loaded)
    import torch.distributed as dist

    from openbench.evaluation.device import resolve_device
    from openbench.evaluation.distributed import ShardedProducer, init_from_environment

    init_from_environment()
    settings["device"] = resolve_device(options.device, local_rank=int(os.environ.get("LOCAL_RANK", 0)))
    try:
        sharded = ShardedProducer(producer, options.shard)
        result = _with_model_load(run(setup_for(dataset, sharded, **settings), sharded, options.batch_size,
                                      options.bootstrap), loaded)
    finally:
        rank = dist.get_rank()
        dist.destroy_process_group()
    return result if rank == 0 else None


def _with_model_load(record: ResultRecord, seconds: float) -> ResultRecord:
    """``record`` with the model's load time among its stages, after the dataset's."""
    stages = record.timing.get("stages", {})
    first = {key: stages[key] for key in ("load_dataset",) if key in stages}
    record.timing["stages"] = {**first, "load_model": round(seconds, 6),
                               **{key: value for key, value in stages.items() if key not in first}}
    return record


def classify_model(dataset: Dataset, spec: ModelSpec, options: Optional[EvaluationOptions] = None,
                   threshold_metric: str = "accuracy", fold: Optional[int] = None) -> dict:
    """Triple classification of the validation and test positives and negatives by the model
    ``spec`` names (:mod:`openbench.evaluation.classification`); returns the record."""
    from openbench.evaluation.evaluate import classify

    options = options or EvaluationOptions()
    source = select_source(spec)
    if options.distributed and not source.distributable:
        raise UsageError(f"{option('shard')} evaluates embedding scorers (embeddings, DGL-KE and LibKGE checkpoints), "
                         f"not a {source.name} model")
    options = with_protocol(dataset, source, options)
    model = source.load(dataset, spec)
    record = classify(dataset, model, threshold_metric=threshold_metric, batch_size=options.batch_size,
                      device=options.device, seed=options.seed, lower_is_better=options.lower_is_better,
                      progress=options.progress, fold=fold)
    return record.to_dict()


def read_entity_list(path) -> List[str]:
    """The entity labels of an ``--entities`` file: one per line (blank lines and a BOM ignored)."""
    from openbench._io import read_text

    labels = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not labels:
        raise InputError("the entity list is empty; expected one entity label per line", path)
    return labels
