"""How the ranking task runs (:func:`run_ranking`): it picks the producer
(:mod:`openbench.evaluation.producers`), which declares the options it takes by default, those it
requires and those it refuses, runs it under one :class:`~openbench.evaluation.candidates.RankingSetup`
and builds the record with the one reduction (:func:`build_record`); on several processes it joins
the process group torchrun describes and wraps the producer in the sharded one."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Optional, Sequence

from openbench import __version__
from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
from openbench.errors import UsageError, option
from openbench.evaluation.candidates import RankingSetup
from openbench.evaluation.producers.base import Produced, Producer
from openbench.evaluation.producers.full import FullRanking
from openbench.evaluation.producers.sampled import SampledRanking
from openbench.evaluation.producers.topk import OBL2021Listing, ServedListing, TopKListing
from openbench.evaluation.statistics.evidence import queries_digest
from openbench.evaluation.statistics.metrics import summarize
from openbench.evaluation.statistics.ranks_table import ranks_table
from openbench.evaluation.statistics.strata import stratified
from openbench.evaluation.tasks.ranking.options import PROTOCOLS
from openbench.models.base import Scorer
from openbench.models.lists import OBL2021Submission, ServedLists, TopKLists
from openbench.record import ResultRecord

__all__ = ["build_record", "run", "run_ranking"]


def build_record(setup: RankingSetup, produced: Produced, seconds: float) -> ResultRecord:
    """The one reduction (metrics per side, relation and macro) and the one record, with its
    per-query ranks (:mod:`openbench.evaluation.statistics.ranks_table`), from what the producer
    handed back (:class:`~openbench.evaluation.producers.base.Produced`: the {"head", "tail"}
    counts, each (T_side,), and the (T_side, 3) triples they rank)."""
    counts, triples = produced.counts, produced.triples
    relations = {side: side_triples[:, 1] for side, side_triples in triples.items()}
    metrics, per_relation, macro = summarize(counts.get("head"), counts.get("tail"), relations,
                                             setup.dataset.relation_labels, setup.hits_at)
    ranks = ranks_table(setup.evaluation_split, counts, triples, setup.dataset.entity_labels,
                        setup.dataset.relation_labels)
    by_degree, by_node_type = stratified(counts, triples, setup.dataset.test_graph(),
                                         setup.dataset.entity_labels, setup.hits_at)
    # an exact integer count, divided once on the host: the same float on every device
    queries = sum(side.n_equal.numel() for side in counts.values())
    tied = sum(int((side.n_equal > 0).sum()) for side in counts.values())
    return ResultRecord(metrics=metrics, per_relation=per_relation, macro_relation=macro, by_degree=by_degree,
                        by_node_type=by_node_type, protocol=produced.protocol, dataset=setup.dataset_description(),
                        model=produced.model,
                        diagnostics={"queries": queries, "tied_query_fraction": tied / queries if queries else 0.0,
                                     "queries_sha256": queries_digest(ranks)},
                        seed=setup.seed, device=str(setup.device), version=__version__, seconds=seconds,
                        warnings=list(setup.warnings), timing={**produced.timing, "stages": _stages(setup, seconds)},
                        ranks=ranks)


def _stages(setup: RankingSetup, seconds: float) -> Dict[str, float]:
    """Wall seconds of the stages a run went through (``load_dataset`` where the dataset came
    from :func:`~openbench.datasets.loader.load_dataset`, the filter index, the evaluation)."""
    timed = {} if setup.dataset.load_seconds is None else {"load_dataset": round(setup.dataset.load_seconds, 6)}
    return {**timed, "filter_index": round(setup.filter_seconds, 6), "evaluation": round(seconds, 6)}


def run(setup: RankingSetup, producer: Producer, batch_size: Optional[int] = None,
        bootstrap: Optional[int] = None) -> ResultRecord:
    """Every evaluation triple through ``producer`` under ``setup``, reduced into the record;
    ``bootstrap`` resamples of the test triples add its ``confidence`` block (seeded by the setup's seed)."""
    started = time.perf_counter()
    record = build_record(setup, producer.run(setup, batch_size), time.perf_counter() - started)
    if bootstrap is not None and record.ranks is not None:
        from openbench.evaluation.statistics.intervals import confidence_block

        resampled = time.perf_counter()
        record.confidence = confidence_block(record.ranks, setup.hits_at, bootstrap, setup.seed)
        record.seconds = time.perf_counter() - started
        record.timing["stages"]["bootstrap"] = round(time.perf_counter() - resampled, 6)
    return record


def _refuse_untrained_rows(dataset: Dataset, model, split: str) -> None:
    """A transductive model (one row per entity, learnt from the training triples: embeddings, a
    PyKEEN model) has no trained row for an evaluation entity no training triple has (a fully cold
    entity-held-out split, an inductive split): it would rank it at random. Refused, with the
    count, on a split that asks about such entities (its kind says so); elsewhere (a published
    official split with a few unseen entities) the model is scored as it is, as before."""
    if not getattr(model, "transductive", False) or split not in dataset.triples or dataset.split is None:
        return
    unseen = dataset.unseen_entities(split)
    if unseen:
        raise UsageError(f"{unseen} entities of the {split} triples occur in no training triple (a held-out split): "
                         f"{getattr(model, 'name', type(model).__name__)} learns one row per entity from the training "
                         "triples and has no trained row for them, so it would rank them at random. Evaluate a model "
                         "that reads the graph around them (--model neighbours, popularity, rules, an inductive "
                         "model or your own score_function), or split with --relations so that held-out entities "
                         "keep their other edges in training")


def _protocol(dataset: Dataset, protocol: Optional[str], negatives: Optional[SampledNegatives],
              filter_sets: Optional[Sequence[str]], shard: Optional[str]):
    """(protocol, negatives, filter sets): sampled for OGB folders unless told, then the split's
    test negatives and no filter sets (OGB's definition); full otherwise, filtered by every split
    unless ``filter_sets`` says otherwise."""
    protocol = protocol or ("sampled" if dataset.layout == "ogb" else "full")
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    if protocol == "full":
        return protocol, None, list(dataset.default_filter_sets() if filter_sets is None else filter_sets)
    if dataset.inductive:
        raise UsageError("an inductive split ranks against its inference graph's entities, filtered by its inference, "
                         f"validation and test triples (ILPC's protocol): {option('protocol', 'sampled')} does not apply")
    if filter_sets:
        raise UsageError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                         f"definition): {option('filter_sets')} does not apply (use {option('protocol', 'full')})")
    if shard is not None:
        raise UsageError("the sampled protocol runs on one process (its candidates are few per query)")
    if negatives is None:
        if "test" not in dataset.sampled:
            raise UsageError(f"{option('protocol', 'sampled')} needs negatives per test triple: an OGB dataset "
                             "folder, a split written with openbench split --eval-negatives (test_negatives.npz), "
                             "or negatives=SampledNegatives(...)")
        negatives = dataset.sampled["test"]
    return protocol, negatives, []


def _producer(model, protocol: str, negatives: Optional[SampledNegatives], ranks: str,
              entity_chunk: Optional[int]) -> Producer:
    """The producer that ranks ``model``: a producer itself, ranked lists (top-k files, OBL2021
    submissions), or a scorer under the full or the sampled protocol."""
    if isinstance(model, Producer):
        return model
    if isinstance(model, TopKLists):
        return TopKListing(model)
    if isinstance(model, ServedLists):
        return ServedListing(model.answers, model.tail_side, model.lists, model.extra, model.source_sha256,
                             model.anchors)
    if isinstance(model, OBL2021Submission):
        if protocol == "sampled":
            raise UsageError("the sampled protocol scores each query's own negatives: an OBL2021 submission has no "
                             f"scores for them (use {option('protocol', 'full')})")
        return OBL2021Listing(model)
    if not isinstance(model, Scorer):
        missing = [name for name in ("num_entities", "description", "score_rows", "score_candidates", "score_triples")
                   if not hasattr(model, name)]
        raise UsageError(f"cannot evaluate a {type(model).__name__}: a model is a scorer (openbench.embedding_model, "
                         f"from_pykeen, score_function, load_model, or an object with the Scorer methods; this one "
                         f"lacks {', '.join(missing)}), ranked lists, a producer or a ModelSpec")
    if protocol == "sampled":
        return SampledRanking(model, negatives)  # type: ignore[arg-type]
    return FullRanking(model, ranks=ranks, entity_chunk=entity_chunk)


def _with_compat(record: ResultRecord, model, dataset, split: str, hits_at: Sequence[int]) -> ResultRecord:
    """``record`` with a compatibility block beside openbench's numbers where the model asks for
    one: PyG's own ``test()`` numbers (``compat.pyg``, :mod:`openbench.models.pyg`)."""
    source = getattr(model, "pyg_compat", None)
    if source is None:
        return record
    from openbench.models.pyg import pyg_test_numbers

    started = time.perf_counter()
    record.compat = {"pyg": pyg_test_numbers(source, dataset.triples[split], dataset.num_entities, hits_at)}
    record.timing.setdefault("stages", {})["pyg_compat"] = round(time.perf_counter() - started, 6)
    return record


def run_ranking(dataset, model, options, settings) -> ResultRecord:
    """The ranking record of ``model`` (a scorer, ranked lists or a producer) on ``dataset`` under
    ``options`` (:class:`~openbench.evaluation.tasks.ranking.Ranking`) and ``settings``."""
    _refuse_untrained_rows(dataset, model, options.evaluation_split)
    protocol, negatives, filters = _protocol(dataset, options.protocol, options.negatives, options.filter_sets,
                                             settings.shard)
    producer = _producer(model, protocol, negatives, options.ranks, options.entity_chunk)
    given = dict(filter_sets=filters if options.filter_sets is not None or protocol == "sampled" else None,
                 hits_at=options.hits_at, lower_is_better=settings.lower_is_better, device=settings.device,
                 exclude_query_entity=options.exclude_query_entity, evaluation_split=options.evaluation_split,
                 seed=settings.seed, progress=settings.progress, candidates=options.candidates,
                 sides=options.sides, scope_relations=options.relations, scope_entities=options.entities,
                 sampled_negatives=negatives)
    dates = _dates_file(dataset, options)
    if settings.shard is None:
        record = run(RankingSetup(dataset, **producer.options(given)), producer, settings.batch_size,
                     options.bootstrap)
        record = _with_compat(record, model, dataset, options.evaluation_split, options.hits_at)
    else:
        from openbench.evaluation.producers.sharded import ShardedProducer, process_group

        device = settings.device if isinstance(settings.device, str) else str(settings.device)
        with process_group(device) as given["device"]:
            sharded = ShardedProducer(producer, settings.shard)
            record = run(RankingSetup(dataset, **sharded.options(given)), sharded, settings.batch_size,
                         options.bootstrap)
    return _with_periods(record, dataset, dates, options, settings.seed)


def _dates_file(dataset: Dataset, options) -> Optional[Path]:
    """The ``test_dates.tsv`` that ``--by-period`` groups the test ranks by (checked before any
    ranking); None where no period is asked for."""
    if options.by_period is None:
        return None
    time_cut = getattr(dataset, "time_cut", None)
    if not time_cut or not time_cut.get("dates_file"):
        raise UsageError(f"{option('by_period', options.by_period)} groups the test edges by their dates: it needs "
                         f"a split by dates (openbench split time --cutoff DATE writes test_dates.tsv); {dataset.path} "
                         "is not one")
    if options.evaluation_split != "test":
        raise UsageError(f"{option('by_period', options.by_period)}: only the test edges are dated (test_dates.tsv)")
    return Path(dataset.path) / time_cut["dates_file"]


def _with_periods(record: ResultRecord, dataset: Dataset, dates: Optional[Path], options, seed) -> ResultRecord:
    """``record`` with its ``by_period`` block (:mod:`openbench.evaluation.statistics.periods`)
    where one is asked for."""
    if dates is None or record.ranks is None:
        return record
    from openbench.evaluation.statistics.periods import period_block

    started = time.perf_counter()
    record.by_period = period_block(record.ranks, dates, dataset.time_cut["cutoff"],  # type: ignore[index]
                                    options.by_period, options.hits_at, options.bootstrap, seed)
    record.timing.setdefault("stages", {})["by_period"] = round(time.perf_counter() - started, 6)
    return record
