"""One way through the engine: a dataset, a model, a protocol -> a :class:`~openbench.record.ResultRecord`.

:func:`evaluate` resolves the protocol (full filtered ranking, or OGB's sampled one), chooses the
producer for the model (:mod:`openbench.evaluation.producers`: a scorer's rows or embedding chunks,
its sampled candidates, ranked lists), runs it under one
:class:`~openbench.evaluation.setup.RankingSetup` and builds the record with the one reduction
(:func:`~openbench.evaluation.metrics.summarize`). Triple classification is the second task on
the same scorers (:mod:`openbench.evaluation.classification`) and returns the same record type.
"""
from __future__ import annotations

import time
from typing import Dict, Optional, Sequence

import torch

from openbench import __version__
from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
from openbench.errors import UsageError
from openbench.evaluation.evidence import queries_digest
from openbench.evaluation.metrics import summarize
from openbench.evaluation.producers import FullRanking, Producer, SampledRanking
from openbench.evaluation.ranking import RankCounts
from openbench.evaluation.ranks import ranks_table
from openbench.evaluation.strata import stratified
from openbench.evaluation.setup import DEFAULT_HITS_AT, RankingSetup
from openbench.evaluation.topk import LISTS_SCORE_NOTHING, OBL2021Listing, TopKListing
from openbench.models.base import Scorer
from openbench.models.lists import OBL2021Submission, TopKLists
from openbench.record import ResultRecord
from openbench.vocabulary import QUERY_SIDES, SPLITS

__all__ = ["PROTOCOLS", "evaluate", "classify", "for_dataset", "producer_for", "setup_for", "run", "build_record"]

PROTOCOLS = ("full", "sampled")


def build_record(setup: RankingSetup, producer: Producer, counts: Dict[str, RankCounts],
                 triples: Dict[str, torch.Tensor], seconds: float) -> ResultRecord:
    """The one reduction (metrics per side, relation and macro) and the one record, with its
    per-query ranks (:mod:`openbench.evaluation.ranks`).

    :param counts: {"head", "tail"} counts, each (T_side,); ``triples`` {side: (T_side, 3)} the
        triples of those counts (the producer's ``side_triples``).
    """
    relations = {side: side_triples[:, 1] for side, side_triples in triples.items()}
    metrics, per_relation, macro = summarize(counts.get("head"), counts.get("tail"), relations,
                                             setup.dataset.relation_labels, setup.hits_at)
    ranks = ranks_table(setup.evaluation_split, counts, triples, setup.dataset.entity_labels,
                        setup.dataset.relation_labels)
    by_degree, by_node_type = stratified(counts, triples, setup.dataset.triples["train"],
                                         setup.dataset.entity_labels, setup.hits_at)
    # an exact integer count, divided once on the host: the same float on every device
    queries = sum(side.n_equal.numel() for side in counts.values())
    tied = sum(int((side.n_equal > 0).sum()) for side in counts.values())
    return ResultRecord(metrics=metrics, per_relation=per_relation, macro_relation=macro, by_degree=by_degree,
                        by_node_type=by_node_type,
                        protocol=producer.adjust(setup.protocol()), dataset=setup.dataset_description(),
                        model=producer.model_description(),
                        diagnostics={"queries": queries, "tied_query_fraction": tied / queries if queries else 0.0,
                                     "queries_sha256": queries_digest(ranks)},
                        seed=setup.seed, device=str(setup.device), version=__version__, seconds=seconds,
                        warnings=list(setup.warnings), timing={**producer.timing(), "stages": stages(setup, seconds)},
                        ranks=ranks)


def stages(setup: RankingSetup, seconds: float) -> Dict[str, float]:
    """Wall seconds of the stages a run went through (``load_dataset`` where the dataset came
    from :func:`~openbench.datasets.loader.load_dataset`, the filter index, the evaluation)."""
    timed = {} if setup.dataset.load_seconds is None else {"load_dataset": round(setup.dataset.load_seconds, 6)}
    return {**timed, "filter_index": round(setup.filter_seconds, 6), "evaluation": round(seconds, 6)}


def run(setup: RankingSetup, producer: Producer, batch_size: Optional[int] = None,
        bootstrap: Optional[int] = None) -> ResultRecord:
    """Every evaluation triple through ``producer`` under ``setup``, reduced into the record;
    ``bootstrap`` resamples of the test triples add its ``confidence`` block (seeded by the setup's seed)."""
    started = time.perf_counter()
    producer.bind(setup)
    triples = producer.evaluation_triples(setup)
    counts = producer.produce(setup, triples, batch_size)
    counts = {side: counts[side] for side in setup.sides}
    record = build_record(setup, producer, counts, producer.side_triples(setup, triples),
                          time.perf_counter() - started)
    if bootstrap is not None and record.ranks is not None:
        from openbench.evaluation.confidence import confidence_block

        resampled = time.perf_counter()
        record.confidence = confidence_block(record.ranks, setup.hits_at, bootstrap, setup.seed)
        record.seconds = time.perf_counter() - started
        record.timing["stages"]["bootstrap"] = round(time.perf_counter() - resampled, 6)
    return record


def producer_for(model, *, protocol: str = "full", negatives: Optional[SampledNegatives] = None,
                 ranks: str = "exact", entity_chunk: Optional[int] = None) -> Producer:
    """The producer that ranks ``model``: a producer itself, ranked lists (top-k files, OBL2021
    submissions), or a scorer under the full or the sampled protocol."""
    if isinstance(model, Producer):
        return model
    if isinstance(model, TopKLists):
        return TopKListing(model)
    if isinstance(model, OBL2021Submission):
        if protocol == "sampled":
            raise UsageError("the sampled protocol scores each query's own negatives: an OBL2021 submission has no "
                             "scores for them (use the full protocol)")
        return OBL2021Listing(model)
    if not isinstance(model, Scorer):
        missing = [name for name in ("num_entities", "description", "score_rows", "score_candidates", "score_triples")
                   if not hasattr(model, name)]
        raise UsageError(f"cannot evaluate a {type(model).__name__}: a model is a scorer (openbench.embedding_model, "
                         f"from_pykeen, score_function, load_model, or an object with the Scorer methods; this one "
                         f"lacks {', '.join(missing)}), ranked lists or a producer")
    if protocol == "sampled":
        if negatives is None:
            raise UsageError("the sampled protocol needs negatives per evaluation triple")
        return SampledRanking(model, negatives)
    return FullRanking(model, ranks=ranks, entity_chunk=entity_chunk)


def setup_for(dataset: Dataset, producer: Producer, **options) -> RankingSetup:
    """The :class:`RankingSetup` of ``options`` for ``producer``: its defaults where an option was
    not given (None), then what it requires (ranked lists are counted on the CPU, an OBL2021
    submission without re-filtering, a hosted benchmark on its served sides)."""
    for key, value in producer.setup_defaults().items():
        if options.get(key) is None:
            options[key] = value
    options.update(producer.setup_options())
    options = {key: value for key, value in options.items() if value is not None}
    return RankingSetup(dataset, **options)


def _resolve_protocol(dataset: Dataset, protocol: Optional[str], negatives: Optional[SampledNegatives],
                      filter_sets: Optional[Sequence[str]]):
    """(protocol, negatives, filter sets): sampled for OGB folders unless told, then the split's
    test negatives and no filter sets (OGB's definition)."""
    protocol = protocol or ("sampled" if dataset.layout == "ogb" else "full")
    if protocol not in PROTOCOLS:
        raise UsageError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    if protocol == "full":
        return protocol, None, SPLITS if filter_sets is None else filter_sets
    if filter_sets:
        raise UsageError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                         "definition): give no filter_sets (or protocol='full')")
    if negatives is None:
        if "test" not in dataset.sampled:
            raise UsageError("protocol='sampled' needs negatives per test triple: an OGB dataset folder, a split "
                             "written with --eval-negatives (test_negatives.npz), or negatives=SampledNegatives(...)")
        negatives = dataset.sampled["test"]
    return protocol, negatives, []


def evaluate(dataset, model, *, task: str = "ranking", protocol: Optional[str] = None,
             negatives: Optional[SampledNegatives] = None, filter_sets: Optional[Sequence[str]] = None,
             hits_at: Sequence[int] = DEFAULT_HITS_AT, candidates: str = "all",
             sides: Sequence[str] = QUERY_SIDES, relations: Optional[Sequence[str]] = None,
             entities: Optional[Sequence[str]] = None, ranks: str = "exact", batch_size: Optional[int] = None,
             device="auto", seed: Optional[int] = 0, lower_is_better: bool = False,
             exclude_query_entity: Optional[bool] = None, evaluation_split: str = "test", progress: bool = False,
             entity_chunk: Optional[int] = None, threshold_metric: str = "accuracy",
             shard: Optional[str] = None, bootstrap: Optional[int] = None) -> ResultRecord:
    """Evaluate ``model`` on ``dataset``; returns the typed result record (its per-query ranks in
    ``record.ranks``).

    :param dataset: a :class:`~openbench.datasets.loader.Dataset`, a split folder or a registry name.
    :param model: a scorer (:func:`openbench.embedding_model`, :func:`openbench.from_pykeen`,
        :func:`openbench.score_function`, any object with the
        :class:`~openbench.models.base.Scorer` methods), ranked lists
        (:class:`~openbench.models.lists.TopKLists`, :class:`~openbench.models.lists.OBL2021Submission`)
        or a producer.
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
        percentile intervals of MRR and hits@k; :mod:`openbench.evaluation.confidence`).
    :param shard: ``"queries"`` or ``"entities"``: evaluate on every rank of the initialised
        torch.distributed process group (:class:`~openbench.evaluation.distributed.ShardedProducer`).
    """
    if not isinstance(dataset, Dataset):
        from openbench.datasets.loader import load_dataset

        dataset = load_dataset(dataset)
    model = for_dataset(model, dataset)
    if task == "classification":
        return classify(dataset, model, threshold_metric=threshold_metric, batch_size=batch_size, device=device,
                        seed=seed, lower_is_better=lower_is_better, progress=progress)
    if task != "ranking":
        raise UsageError(f"task {task!r}: expected ranking or classification")
    protocol, negatives, filters = _resolve_protocol(dataset, protocol, negatives, filter_sets)
    producer = producer_for(model, protocol=protocol, negatives=negatives, ranks=ranks, entity_chunk=entity_chunk)
    if shard is not None:
        from openbench.evaluation.distributed import ShardedProducer

        producer = ShardedProducer(producer, shard)
    setup = setup_for(dataset, producer, filter_sets=filters, hits_at=hits_at, lower_is_better=lower_is_better,
                      device=device, exclude_query_entity=exclude_query_entity, evaluation_split=evaluation_split,
                      seed=seed, progress=progress, candidates=candidates, sides=sides, scope_relations=relations,
                      scope_entities=entities, sampled_negatives=negatives)
    return run(setup, producer, batch_size, bootstrap)


class _Classifying:
    """What :func:`~openbench.evaluation.classification.classification_record` reads of a model:
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


def for_dataset(model, dataset: Dataset):
    """``model`` over ``dataset``'s ids: a model that has to match its own label maps to the
    dataset's first (a PyKEEN model with its TriplesFactory) does it here."""
    return model.for_dataset(dataset) if hasattr(model, "for_dataset") else model


def classify(dataset: Dataset, model, *, threshold_metric: str = "accuracy", batch_size: Optional[int] = None,
             device="auto", seed: Optional[int] = 0, lower_is_better: bool = False, progress: bool = False,
             fold: Optional[int] = None) -> ResultRecord:
    """Triple classification of the validation and test positives and negatives by a scorer."""
    from openbench.evaluation.classification import classification_record

    if isinstance(model, (TopKLists, OBL2021Submission, TopKListing, OBL2021Listing)):
        raise UsageError(LISTS_SCORE_NOTHING)
    setup = RankingSetup(dataset, device=device, seed=seed, lower_is_better=lower_is_better, progress=progress)
    scorer = for_dataset(model, dataset)
    scorer = scorer.to(setup.device) if hasattr(scorer, "to") else scorer
    setup.warnings.extend(message for message in getattr(scorer, "warnings", []) if message not in setup.warnings)
    return ResultRecord.from_dict(classification_record(_Classifying(setup, scorer), threshold_metric, batch_size,
                                                        fold))
