"""The one door into the engine: a dataset, a model, a protocol -> a :class:`~openbench.record.ResultRecord`.

:func:`evaluate` is how the command line, the sweeps, the demo, :mod:`openbench.compat` and the
tests reach the engine. It

1. reads the dataset (a loaded :class:`~openbench.datasets.loader.Dataset`, a folder or a
   registry name) and the model: a scorer (:mod:`openbench.models.base`), ranked lists
   (:mod:`openbench.models.lists`), a producer, or a :class:`~openbench.models.sources.ModelSpec`
   (files the user named; loaded here, the load timed);
2. resolves the protocol (:data:`PROTOCOLS`: full filtered ranking, or OGB's sampled one) and
   picks the producer (:mod:`openbench.evaluation.producers`), which declares the options it
   takes by default, those it requires and those it refuses;
3. on several processes (``shard``), joins the process group torchrun describes and wraps the
   producer in the sharded one;
4. runs it under one :class:`~openbench.evaluation.candidates.RankingSetup` (one call,
   :meth:`~openbench.evaluation.producers.base.Producer.run`, whose value holds everything the
   record takes of the producer) and builds the record with the one reduction
   (:func:`~openbench.evaluation.statistics.metrics.summarize`), or, for
   ``task="classification"``, hands the scorer to :mod:`openbench.evaluation.tasks.classification`.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Sequence

import torch

from openbench import __version__
from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
from openbench.errors import UsageError, option
from openbench.evaluation.candidates import DEFAULT_HITS_AT, RankingSetup
from openbench.evaluation.producers.base import Produced, Producer
from openbench.evaluation.producers.full import FullRanking
from openbench.evaluation.producers.sampled import SampledRanking
from openbench.evaluation.producers.topk import LISTS_SCORE_NOTHING, OBL2021Listing, ServedListing, TopKListing
from openbench.evaluation.statistics.evidence import queries_digest
from openbench.evaluation.statistics.metrics import summarize
from openbench.evaluation.statistics.ranks_table import ranks_table
from openbench.evaluation.statistics.strata import stratified
from openbench.models.base import Scorer
from openbench.models.finite import refuse_nonfinite
from openbench.models.lists import OBL2021Submission, ServedLists, TopKLists
from openbench.models.sources import ModelSpec, select_source
from openbench.record import ResultRecord
from openbench.vocabulary import QUERY_SIDES

__all__ = ["PROTOCOLS", "TASKS", "evaluate", "run", "build_record"]

PROTOCOLS = ("full", "sampled")
TASKS = ("ranking", "classification", "repurposing")


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


# -- the door's steps ----------------------------------------------------------------------------

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


def _setup(dataset: Dataset, producer: Producer, given: Dict[str, Any]) -> RankingSetup:
    """The :class:`RankingSetup` of the ``given`` options (None: not given) for ``producer``: what
    it refuses first, then its defaults where an option was not given, then what it requires
    (:meth:`~openbench.evaluation.producers.base.Producer.options`)."""
    return RankingSetup(dataset, **producer.options(given))


def _join_process_group(device: str) -> tuple:
    """(whether this call joined the group torchrun describes, this rank's device)."""
    import torch.distributed as dist

    from openbench.evaluation.counting.device import resolve_device
    from openbench.evaluation.producers.sharded import init_from_environment

    joined = not dist.is_initialized()
    init_from_environment()
    local_rank = os.environ.get("LOCAL_RANK")
    return joined, resolve_device(device, local_rank=int(local_rank) if local_rank is not None else None)


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


def _with_model_load(record: ResultRecord, seconds: Optional[float]) -> ResultRecord:
    """``record`` with the model's load time among its stages, after the dataset's."""
    if seconds is None:
        return record
    stages = record.timing.get("stages", {})
    first = {key: stages[key] for key in ("load_dataset",) if key in stages}
    record.timing["stages"] = {**first, "load_model": round(seconds, 6),
                               **{key: value for key, value in stages.items() if key not in first}}
    return record


def evaluate(dataset, model, *, task: str = "ranking", protocol: Optional[str] = None,
             negatives: Optional[SampledNegatives] = None, filter_sets: Optional[Sequence[str]] = None,
             hits_at: Sequence[int] = DEFAULT_HITS_AT, candidates: str = "all",
             sides: Sequence[str] = QUERY_SIDES, relations: Optional[Sequence[str]] = None,
             entities: Optional[Sequence[str]] = None, ranks: str = "exact", batch_size: Optional[int] = None,
             device="auto", seed: Optional[int] = 0, lower_is_better: bool = False,
             exclude_query_entity: Optional[bool] = None, evaluation_split: str = "test", progress: bool = False,
             entity_chunk: Optional[int] = None, threshold_metric: str = "accuracy", fold: Optional[int] = None,
             shard: Optional[str] = None, bootstrap: Optional[int] = None,
             negative_relations: Sequence[str] = (), drugs: Optional[Sequence[str]] = None,
             diseases: Optional[Sequence[str]] = None, recall_at: Optional[Sequence[int]] = None,
             keep_top: Optional[int] = None, ground_truth=None) -> ResultRecord:
    """Evaluate ``model`` on ``dataset``; returns the typed result record (its per-query ranks in
    ``record.ranks``).

    :param dataset: a :class:`~openbench.datasets.loader.Dataset`, a split folder or a registry name.
    :param model: a scorer (:func:`openbench.embedding_model`, :func:`openbench.from_pykeen`,
        :func:`openbench.score_function`, any object with the
        :class:`~openbench.models.base.Scorer` methods), ranked lists
        (:class:`~openbench.models.lists.TopKLists`, :class:`~openbench.models.lists.OBL2021Submission`,
        a hosted benchmark's :class:`~openbench.models.lists.ServedLists`),
        a producer, or a :class:`~openbench.models.sources.ModelSpec` naming the model's files
        (what ``openbench evaluate`` reads; the load is timed as the record's ``load_model`` stage).
    :param task: ``"ranking"`` or ``"classification"`` (the split's positives against its
        negatives, thresholds per relation chosen on validation by ``threshold_metric``).
    :param protocol: ``"full"`` (every entity, the known answers of ``filter_sets`` filtered;
        default) or ``"sampled"`` (each query against its own ``negatives``, unfiltered, as OGB;
        the default for OGB folders, whose negatives come with them).
    :param filter_sets: splits whose triples are filtered (default: train, valid and test).
    :param candidates: ``"all"`` or ``"typed"`` (only entities of a type the relation admits).
    :param sides: ``("head", "tail")``, or one of them.
    :param relations: evaluate only these relations' triples (labels); ``entities``: rank only
        against these entities (labels).
    :param ranks: embeddings: ``"exact"`` or ``"fast"``.
    :param seed: recorded in the record (the run's seed, as ``--seed``; the ranking itself is
        deterministic and draws nothing; it seeds ``bootstrap``).
    :param bootstrap: resamples of the test triples for the record's ``confidence`` block (95 %
        percentile intervals of MRR and hits@k; :mod:`openbench.evaluation.statistics.intervals`).
    :param relations: repurposing: the treats relation(s) (the first is the one scored), either
        orientation; ``negative_relations`` the known negatives; ``drugs`` and ``diseases``
        curated lists of labels (default: the node types of the relations' ends); ``recall_at``
        the n of Recall@n (default 10, 100, 1000, 10000 and 1 % of the matrix); ``hits_at`` the k
        of the disease-specific Hit@k; ``keep_top`` the best pairs the record keeps (1000);
        ``ground_truth`` a CSV/TSV of (drug, disease, label) scored as an extra test set;
        ``protocol="txgnn"`` adds TxGNN's own protocol beside the filtered numbers; ``bootstrap``
        resamples the pairs and diseases for 95 % intervals
        (:mod:`openbench.evaluation.tasks.repurposing`).
    :param shard: ``"queries"`` or ``"entities"``: evaluate on every rank of the torch.distributed
        process group (joined from torchrun's environment where it is not yet initialised, and
        left again afterwards), each rank's device its own GPU under ``device="auto"``
        (:class:`~openbench.evaluation.producers.sharded.ShardedProducer`). Every rank returns
        the same record.
    """
    if task not in TASKS:
        raise UsageError(f"task {task!r}: expected one of {', '.join(TASKS)}")
    if not isinstance(dataset, Dataset):
        from openbench.datasets.loader import load_dataset

        dataset = load_dataset(dataset)
    if task == "classification" and shard is not None:
        raise UsageError("triple classification runs on one process: sharding is for ranking")
    if task == "repurposing" and shard not in (None, "entities"):
        raise UsageError(f"the repurposing task shards the matrix's drugs: {option('shard', 'entities')}")
    loaded, load_seconds = _load(dataset, model, shard)
    if task == "repurposing":
        from openbench.evaluation.tasks.repurposing import DEFAULT_KEEP_TOP, RepurposingOptions

        options = RepurposingOptions(
            relations=list(relations or []), negative_relations=list(negative_relations), drugs=drugs,
            diseases=diseases, recall_at=recall_at, hits_at=hits_at, ground_truth=ground_truth,
            keep_top=DEFAULT_KEEP_TOP if keep_top is None else keep_top, protocol=protocol or "full",
            bootstrap=bootstrap, seed=seed, ranks=ranks, lower_is_better=lower_is_better, progress=progress)
        if shard is None:
            return _with_model_load(_repurpose(dataset, loaded, options, device), load_seconds)
        import torch.distributed as dist

        from openbench.evaluation.counting.matrix import Shard

        joined, _ = _join_process_group("cpu")
        try:
            options.shard = Shard(dist.get_rank(), dist.get_world_size())
            return _with_model_load(_repurpose(dataset, loaded, options, "cpu"), load_seconds)
        finally:
            if joined:
                dist.destroy_process_group()
    if task == "classification":
        return _classify(dataset, loaded, threshold_metric=threshold_metric, batch_size=batch_size, device=device,
                         seed=seed, lower_is_better=lower_is_better, progress=progress, fold=fold)
    _refuse_untrained_rows(dataset, loaded, evaluation_split)
    protocol, negatives, filters = _protocol(dataset, protocol, negatives, filter_sets, shard)
    producer = _producer(loaded, protocol, negatives, ranks, entity_chunk)
    given = dict(filter_sets=filters if filter_sets is not None or protocol == "sampled" else None,
                 hits_at=hits_at, lower_is_better=lower_is_better, device=device,
                 exclude_query_entity=exclude_query_entity, evaluation_split=evaluation_split, seed=seed,
                 progress=progress, candidates=candidates, sides=sides, scope_relations=relations,
                 scope_entities=entities, sampled_negatives=negatives)
    if shard is None:
        record = run(_setup(dataset, producer, given), producer, batch_size, bootstrap)
        return _with_model_load(_with_compat(record, loaded, dataset, evaluation_split, hits_at), load_seconds)
    import torch.distributed as dist

    from openbench.evaluation.producers.sharded import ShardedProducer

    joined, given["device"] = _join_process_group(device if isinstance(device, str) else str(device))
    try:
        sharded = ShardedProducer(producer, shard)
        return _with_model_load(run(_setup(dataset, sharded, given), sharded, batch_size, bootstrap), load_seconds)
    finally:
        if joined:
            dist.destroy_process_group()


class _Classifying:
    """What :func:`~openbench.evaluation.tasks.classification.classification_record` reads of a model:
    its scores of given triples (higher: more plausible), the dataset, the run's settings."""

    def __init__(self, setup: RankingSetup, scorer):
        self.setup, self.scorer = setup, scorer
        self.dataset, self.seed, self.device, self.warnings = setup.dataset, setup.seed, setup.device, setup.warnings

    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) float64 scores of (n, 3) triples, higher is more plausible."""
        scores = self.scorer.score_triples(triples)
        return -scores if self.setup.lower_is_better else scores

    def dataset_description(self) -> dict:
        """The setup's dataset block."""
        return self.setup.dataset_description()

    def model_description(self) -> dict:
        """The scorer's model block."""
        return self.scorer.description()


def _repurpose(dataset: Dataset, model, options, device) -> ResultRecord:
    """The drug × disease matrix of a scorer (:mod:`openbench.evaluation.tasks.repurposing`)."""
    from openbench.evaluation.tasks.repurposing import repurposing_record

    if isinstance(model, (TopKLists, OBL2021Submission, ServedLists, TopKListing, OBL2021Listing, ServedListing)):
        raise UsageError(LISTS_SCORE_NOTHING)
    setup = RankingSetup(dataset, device=device, seed=options.seed, lower_is_better=options.lower_is_better,
                         progress=options.progress)
    scorer = model.to(setup.device) if hasattr(model, "to") else model
    if setup.device.type != "cpu" and hasattr(scorer, "to"):
        # the scorer's tables on the host (its exact steps); the matrix's blocks are computed and
        # counted on the device (count_matrix's device pass), the scores as computed on the host
        scorer = scorer.to(torch.device("cpu"))
    record = repurposing_record(dataset, scorer, options, setup.dataset_description(), str(setup.device))
    record["warnings"] = list(setup.warnings) + [w for w in getattr(scorer, "warnings", []) if w not in setup.warnings] \
        + record["warnings"]
    return ResultRecord.from_dict(record)


def _classify(dataset: Dataset, model, *, threshold_metric: str, batch_size: Optional[int], device,
              seed: Optional[int], lower_is_better: bool, progress: bool, fold: Optional[int]) -> ResultRecord:
    """Triple classification of the validation and test positives and negatives by a scorer."""
    from openbench.evaluation.tasks.classification import classification_record

    if isinstance(model, (TopKLists, OBL2021Submission, ServedLists, TopKListing, OBL2021Listing, ServedListing)):
        raise UsageError(LISTS_SCORE_NOTHING)
    setup = RankingSetup(dataset, device=device, seed=seed, lower_is_better=lower_is_better, progress=progress)
    scorer = model.to(setup.device) if hasattr(model, "to") else model
    setup.warnings.extend(message for message in getattr(scorer, "warnings", []) if message not in setup.warnings)
    return ResultRecord.from_dict(classification_record(_Classifying(setup, scorer), threshold_metric, batch_size,
                                                        fold))
