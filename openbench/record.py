"""The result record: one typed schema for every evaluator, the report, the registry's standard
protocols and the leaderboard's validation.

A record is written as JSON (:meth:`ResultRecord.to_dict`) with ``schema_version`` and
``written_by: "openbench"`` at the top; :func:`validate_record` is what the leaderboard (and
anyone reading a record) checks: the layout, finite values in range, and *consistency*, which a
record produced by openbench always has and a hand-edited one often lacks:

* per side and rank type: hits@k non-decreasing in k; ``MRR >= hits@1``;
  ``MRR <= hits@k + (1 - hits@k) / (k + 1/2)`` (a query beyond rank k has rank >= k + 1/2);
  ``MRR * MR >= 1`` (the mean of 1/rank is at least 1/mean rank); ``1 <= MR <= entities``;
* across rank types: optimistic >= realistic >= pessimistic for MRR and hits@k (MR the other
  way round), and the expected values between pessimistic and optimistic;
* against the protocol: the hits@k keys are exactly ``protocol.hits_at``; filter sets are
  splits; sides are head/tail; the seed is an integer or null;
* the same for every per-relation block and the macro average (without the MR/MRR inequality,
  which does not survive averaging over relations).

Timings live under one key, ``timing``: everything else is a function of the inputs and the
protocol, so two runs with the same inputs and seed give records equal apart from ``timing``.
Besides ``seconds`` it holds what depends on the machine's order of arithmetic rather than on
the inputs: with exact ranks, ``exact_ranks`` counts the (query, candidate) pairs the fast pass
left undecided and how each was settled (:mod:`openbench.evaluation.counting.exact`), and ``stages`` the
wall seconds of each stage of the run (``load_dataset``, ``load_model``, ``filter_index``,
``evaluation``, ``bootstrap``: those it went through).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Union

from openbench.errors import UsageError
from openbench.task_registry import get_task, task_names, task_of
from openbench.vocabulary import FILTER_SETS, RANK_TYPES, SIDES

__all__ = ["CLASSIFICATION_METRICS", "REPURPOSING_HEADLINE", "repurposing_headline", "SCHEMA_VERSION", "RANK_TYPES", "SIDES", "Protocol", "ResultRecord", "RecordError",
           "validate_record", "check_ranking_record", "check_classification_record", "check_repurposing_record",
           "TIMING_KEY", "task_names"]

SCHEMA_VERSION = 1
TIMING_KEY = "timing"
SLACK = 1e-9  # floating-point rounding of means
FINGERPRINT = re.compile(r"[0-9a-f]{64}")


class RecordError(ValueError):
    """A record that is not a trustworthy openbench result; the message says why."""


@dataclass
class Protocol:
    """How the numbers were obtained. ``extra`` holds what a model source adds (truncated lists:
    ``mrr_is_lower_bound``, ``not_listed``; distributed runs: ``distributed``)."""

    filter_sets: List[str]
    hits_at: List[int]
    candidates: str = "all"
    sides: List[str] = field(default_factory=lambda: ["head", "tail"])
    exclude_query_entity: bool = False
    lower_is_better: bool = False
    dropped_queries: int = 0
    evaluation_split: str = "test"
    headline_rank_type: str = "realistic"
    tie_rule: str = "exact float comparison; realistic rank = g + (k + 1) / 2"
    extra: Dict[str, Any] = field(default_factory=dict)

    # the keys of the JSON object, in the order they have always been written
    ORDER = ("headline_rank_type", "filter_sets", "candidates", "sides", "exclude_query_entity", "lower_is_better",
             "hits_at", "dropped_queries", "evaluation_split", "tie_rule")

    def to_dict(self) -> Dict[str, Any]:
        values = {name: getattr(self, name) for name in self.ORDER}
        values.update(self.extra)
        return values

    def standard_part(self) -> Dict[str, Any]:
        """The fields a benchmark's standard protocol fixes (what the leaderboard compares)."""
        return {"filter_sets": list(self.filter_sets), "candidates": self.candidates, "sides": list(self.sides),
                "headline_rank_type": self.headline_rank_type, "exclude_query_entity": self.exclude_query_entity,
                "evaluation_split": self.evaluation_split, **self.extra}

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "Protocol":
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in values.items() if k in known},
                   extra={k: v for k, v in values.items() if k not in known})


@dataclass
class ResultRecord:
    """One evaluation's result (see the module docstring for the JSON): a ranking record's
    metrics, or a classification record's ``classification`` block (``task``)."""

    metrics: Optional[Dict[str, Any]]
    per_relation: Optional[Dict[str, Any]]
    macro_relation: Optional[Dict[str, Any]]
    protocol: Union[Protocol, Dict[str, Any]]
    dataset: Dict[str, Any]
    model: Dict[str, Any]
    diagnostics: Optional[Dict[str, Any]]
    seed: Optional[int]
    device: str
    version: str
    seconds: float
    warnings: List[str] = field(default_factory=list)
    task: str = "ranking"
    timing: Dict[str, Any] = field(default_factory=dict)  # besides the seconds: see the module docstring
    # a task's own block (its registry entry's ``block_key``: classification's thresholds and metrics, the
    # repurposing task's matrix, views and frequent flyers); None for ranking, whose numbers are the fields above
    block: Optional[Dict[str, Any]] = None
    # per-query ranks (polars DataFrame, openbench.evaluation.statistics.ranks_table) of an evaluation run here;
    # not part of the JSON (--ranks-output writes them), None for a record read back
    ranks: Optional[Any] = field(default=None, repr=False, compare=False)
    # bootstrap intervals of the headline metrics (openbench.evaluation.statistics.intervals); None: not asked for
    confidence: Optional[Dict[str, Any]] = None
    # the metrics by the answer's training degree and node type (openbench.evaluation.statistics.strata)
    by_degree: Optional[Dict[str, Any]] = None
    by_node_type: Optional[Dict[str, Any]] = None
    # another tool's own numbers of the same model, beside openbench's (``{"pyg": ...}``: PyG's
    # KGEModel.test(), openbench.models.pyg); None: not asked for
    compat: Optional[Dict[str, Any]] = None
    # the headline metrics per period of a dated split's test edges (openbench.evaluation.statistics.periods);
    # None: not asked for
    by_period: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The record as the JSON document openbench writes (keys in their written order: the
        head, the task's body (:meth:`~openbench.evaluation.tasks.base.Task.body`), the tail)."""
        head = {"written_by": "openbench", "schema_version": SCHEMA_VERSION, "task": self.task}
        return {**head, **get_task(self.task).body(self), "seed": self.seed, "device": self.device,
                "version": self.version, TIMING_KEY: {"seconds": round(self.seconds, 6), **self.timing},
                "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, record: Dict[str, Any]) -> "ResultRecord":
        """The record of a JSON document openbench wrote (``to_dict``'s inverse)."""
        timing = dict(record.get(TIMING_KEY) or {})
        seconds = float(timing.pop("seconds", 0.0))
        task = task_of(record)
        return cls(metrics=record.get("metrics"), per_relation=record.get("per_relation"),
                   macro_relation=record.get("macro_relation"),
                   protocol=task.protocol_of(record.get("protocol", {})),
                   dataset=record.get("dataset", {}), model=record.get("model", {}),
                   diagnostics=record.get("diagnostics"), seed=record.get("seed"), device=record.get("device", ""),
                   version=record.get("version", ""), seconds=seconds, warnings=list(record.get("warnings", [])),
                   task=task.name, timing=timing,
                   block=record.get(task.block_key) if task.block_key is not None else None,
                   confidence=record.get("confidence"), by_degree=record.get("by_degree"),
                   by_node_type=record.get("by_node_type"), compat=record.get("compat"),
                   by_period=record.get("by_period"))

    def metric(self, path: str):
        """One value by its dotted path: ``"both.realistic.mrr"``, ``"tail.pessimistic.hits@10"``,
        ``"per_relation.GENE_DIS.both.realistic.mrr"``, ``"macro_relation.head.realistic.mr"``;
        classification ``"test.overall.auroc"``; repurposing ``"views.test.full_matrix.auroc"``. An unknown path is a KeyError naming the choices."""
        node, parts = get_task(self.task).metric_node(self, path.split("."))
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                choices = ", ".join(sorted(node)) if isinstance(node, dict) else "none (a value)"
                raise KeyError(f"{path!r}: no {part!r} after {'.'.join(parts[:depth]) or 'the top'}; choices: "
                               f"{choices}")
            node = node[part]
        return node


# ------------------------------------------------------------------------------------------
# validation


def _number(where: str, value, *, null_ok: bool = False) -> Optional[float]:
    if value is None:
        if null_ok:
            return None
        raise RecordError(f"{where} is null, but it is defined for every evaluation")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecordError(f"{where} = {value!r}: expected a finite number")
    return float(value)


def _hits(values: Dict[str, Any], where: str, prefix: str = "hits@") -> List[tuple]:
    hits = []
    for name in values:
        if name.startswith(prefix):
            k = name[len(prefix):]
            if not k.isdigit() or int(k) < 1:
                raise RecordError(f"{where}.{name}: k must be a positive integer")
            hits.append((int(k), name))
    return sorted(hits)


DEGREE_BUCKET = re.compile(r"0|1|([1-9][0-9]*)-([1-9][0-9]*)")  # by_degree's keys (openbench.evaluation.statistics.strata)
def _is_degree_bucket(label: str) -> bool:
    """``0``, ``1`` or ``a-b`` with a a power of two from 2 and b = 2a - 1 (strata.degree_bucket_labels)."""
    match = DEGREE_BUCKET.fullmatch(label)
    if match is None or match.group(1) is None:
        return match is not None
    low, high = int(match.group(1)), int(match.group(2))
    return low >= 2 and low & (low - 1) == 0 and high == 2 * low - 1


ADJUSTED_METRICS = ("amr", "amri", "amrr", "zmr", "zmrr")  # and ahits@k, zhits@k: chance-adjusted (metrics.py)


def _is_adjusted(name: str) -> bool:
    """amr, amri, ... and the chance-adjusted hits@k (ahits@k, zhits@k; a repurposing block's
    arecall@n, zrecall@n)."""
    return name in ADJUSTED_METRICS or name.startswith(("ahits@", "zhits@", "arecall@", "zrecall@"))


def _check_block(where: str, values, rank_type: str, hits_at: Optional[Sequence[int]], entities: Optional[int],
                 averaged: bool, prefix: str = "hits@") -> Dict[str, Optional[float]]:
    """Ranges and the within-block consistency of one {metric: value} block; returns the numbers.
    ``prefix``: what the block calls hits@k (a repurposing full-matrix block: recall@n)."""
    if not isinstance(values, dict):
        raise RecordError(f"{where} must be an object")
    numbers: Dict[str, Optional[float]] = {}
    for name, value in values.items():
        label = f"{where}.{name}"
        # undefined: truncated lists' ranks, or a chance level every query reaches (one candidate each)
        number = _number(label, value, null_ok=name == "mr" or _is_adjusted(name))
        numbers[name] = number
        if number is None:
            continue
        if name == "mrr" or name.startswith(prefix) or name.startswith("mrr@"):
            if not 0.0 <= number <= 1.0:
                raise RecordError(f"{label} = {number}: outside [0, 1]")
        elif name == "mr":
            if number < 1.0:
                raise RecordError(f"{label} = {number}: a mean rank is at least 1")
            if entities is not None and number > entities + SLACK:
                raise RecordError(f"{label} = {number}: a mean rank cannot exceed the {entities} entities")
        elif name == "amri" and not -1.0 - SLACK <= number <= 1.0 + SLACK:
            raise RecordError(f"{label} = {number}: outside [-1, 1]")
        elif name == "amr" and not 0.0 < number <= 2.0 + SLACK:
            raise RecordError(f"{label} = {number}: outside (0, 2] (a mean rank over its chance level (C + 1) / 2)")
        elif (name == "amrr" or name.startswith("a" + prefix)) and number > 1.0 + SLACK:
            raise RecordError(f"{label} = {number}: above 1 (a perfect ranking)")
    hits = _hits(values, where, prefix)
    if hits_at is not None and sorted(k for k, _ in hits) != sorted(set(hits_at)):
        asked = "protocol.hits_at" if prefix == "hits@" else "protocol.recall_at"
        raise RecordError(f"{where}: {prefix}k for k in {[k for k, _ in hits]}, but {asked} is {list(hits_at)}")
    hit_values: Dict[str, float] = {name: value for name, value in numbers.items()
                                    if name.startswith(prefix) and value is not None}
    for (k_low, low), (k_high, high) in zip(hits, hits[1:]):
        if hit_values[high] < hit_values[low] - SLACK:
            raise RecordError(f"{where}: {prefix}{k_high} = {hit_values[high]} < {prefix}{k_low} = {hit_values[low]}; "
                              f"{prefix}k cannot fall as k grows")
    mrr, mr = numbers.get("mrr"), numbers.get("mr")
    if mrr is not None:
        for k, name in hits:
            hit = hit_values[name]
            if k == 1 and mrr < hit - SLACK:
                raise RecordError(f"{where}: MRR {mrr} < {prefix}1 {hit}; every query ranked first adds 1 to both")
            if mrr > hit + (1.0 - hit) / (k + 0.5) + SLACK:
                raise RecordError(f"{where}: MRR {mrr} is impossible with {prefix}{k} = {hit} (at most "
                                  f"{hit + (1.0 - hit) / (k + 0.5):.6g})")
        if mr is not None and not averaged and mrr * mr < 1.0 - 1e-6:
            raise RecordError(f"{where}: MRR {mrr} x MR {mr} < 1; the mean of 1/rank is at least 1/mean rank")
    return numbers


def _check_sides(where: str, sides, hits_at, entities, averaged: bool, required: Sequence[str],
                 evaluated: Sequence[str] = ("head", "tail")) -> None:
    if not isinstance(sides, dict):
        raise RecordError(f"{where} must be an object")
    missing = [side for side in required if side not in sides]
    if missing:
        raise RecordError(f"{where}.{missing[0]} is missing")
    for side, block in sides.items():
        if side not in SIDES:
            raise RecordError(f"{where}.{side}: expected a side of {', '.join(SIDES)}")
        if block is None and side != "both" and side not in evaluated:
            continue  # a side the protocol did not evaluate
        _check_rank_blocks(f"{where}.{side}", block, hits_at, entities, averaged)


def _check_rank_blocks(where: str, blocks, hits_at, entities: Optional[int], averaged: bool,
                       prefix: str = "hits@") -> None:
    """{rank type: block}: every rank type present, each block checked (:func:`_check_block`, with
    ``prefix`` for hits@: a repurposing full-matrix block's recall@n), and optimistic >= realistic >=
    pessimistic across them."""
    if not isinstance(blocks, dict):
        raise RecordError(f"{where} must be an object")
    absent = [rank_type for rank_type in RANK_TYPES if rank_type not in blocks]
    if absent:
        raise RecordError(f"{where}.{absent[0]} is missing")
    numbers = {}
    for rank_type, values in blocks.items():
        if rank_type not in RANK_TYPES + ("expected",):
            raise RecordError(f"{where}.{rank_type}: expected a rank type of {', '.join(RANK_TYPES + ('expected',))}")
        numbers[rank_type] = _check_block(f"{where}.{rank_type}", values, rank_type, hits_at, entities, averaged,
                                          prefix)
    _check_rank_order(where, numbers)


def _check_rank_order(where: str, numbers: Dict[str, Dict[str, Optional[float]]]) -> None:
    """optimistic >= realistic >= pessimistic (MR reversed); expected between the extremes."""
    optimistic, realistic, pessimistic = numbers["optimistic"], numbers["realistic"], numbers["pessimistic"]
    for name in set(optimistic) & set(realistic) & set(pessimistic):
        o, r, p = optimistic[name], realistic[name], pessimistic[name]
        if o is None or r is None or p is None:
            continue
        high, middle, low = (p, r, o) if name in ("mr", "amr") else (o, r, p)
        if not high + SLACK >= middle >= low - SLACK:
            raise RecordError(f"{where}: {name} optimistic {o}, realistic {r}, pessimistic {p}; ties can only "
                              "move a rank between its optimistic and pessimistic value")
        expected = numbers.get("expected", {}).get(name)
        if expected is not None and name != "mr" and not o + SLACK >= expected >= p - SLACK:
            raise RecordError(f"{where}.expected.{name} = {expected} lies outside [pessimistic {p}, optimistic {o}]")


def _check_protocol(protocol) -> Protocol:
    if not isinstance(protocol, dict):
        raise RecordError("protocol must be an object")
    absent = [key for key in ("filter_sets", "candidates", "sides", "hits_at") if key not in protocol]
    if absent:
        raise RecordError(f"protocol field(s) missing: {', '.join(absent)}")
    filters = protocol["filter_sets"]
    if not isinstance(filters, list) or any(name not in FILTER_SETS for name in filters):
        raise RecordError(f"protocol.filter_sets = {filters!r}: expected a list of {', '.join(FILTER_SETS)}")
    hits_at = protocol["hits_at"]
    if (not isinstance(hits_at, list) or not hits_at
            or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in hits_at)):
        raise RecordError(f"protocol.hits_at = {hits_at!r}: expected a list of positive integers")
    sides = protocol["sides"]
    if not isinstance(sides, list) or not sides or any(side not in ("head", "tail") for side in sides):
        raise RecordError(f"protocol.sides = {sides!r}: expected a list of head, tail")
    if not isinstance(protocol["candidates"], str):
        raise RecordError("protocol.candidates must be a string")
    relations = protocol.get("relations")
    if relations is not None and (not isinstance(relations, list) or not all(isinstance(r, str) for r in relations)):
        raise RecordError("protocol.relations must be a list of relation labels")
    entities = protocol.get("entities")
    if entities is not None and (not isinstance(entities, dict) or not isinstance(entities.get("sha256"), str)
                                 or isinstance(entities.get("count"), bool) or not isinstance(entities.get("count"), int)):
        raise RecordError("protocol.entities must be an object with an integer count and a sha256")
    part = protocol.get("benchmark_part")
    if part is not None and not isinstance(part, str):
        raise RecordError("protocol.benchmark_part must be a string")
    return Protocol.from_dict(protocol)


def validate_record(record) -> None:
    """Raise :class:`RecordError` with the reason when ``record`` is not a trustworthy result: the
    layout every record shares, then its task's own checks (the task registry's
    :meth:`~openbench.evaluation.tasks.base.Task.check_record`)."""
    if not isinstance(record, dict):
        raise RecordError("a result record is a JSON object")
    try:
        task = task_of(record)
    except UsageError as error:
        raise RecordError(str(error)) from None
    missing = [key for key in task.required_keys() if key not in record]
    if missing:
        raise RecordError(f"missing key(s): {', '.join(missing)}")
    version = record.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise RecordError(f"schema_version {version!r}: this openbench reads version {SCHEMA_VERSION}")
    task.check_record(record)


def check_ranking_record(record: dict) -> None:
    """The ranking task's checks (see the module docstring): identity, protocol, every side, rank
    type and relation, the intervals, the compatibility block and the strata."""
    _check_identity(record)
    dataset = record["dataset"]
    protocol = _check_protocol(record["protocol"])
    counts: Dict[str, Any] = dataset["counts"] if isinstance(dataset.get("counts"), dict) else {}
    entities = counts.get("entities") if isinstance(counts.get("entities"), int) else None
    evaluated = protocol.sides
    _check_sides("metrics", record["metrics"], protocol.hits_at, entities, False, ("both",), evaluated)
    per_relation = record.get("per_relation", {})
    if not isinstance(per_relation, dict):
        raise RecordError("per_relation must be an object")
    # a hosted benchmark serves each test triple on one side: a relation may lack one of them
    relation_sides = ["both"] if "served_sides" in protocol.extra else evaluated
    for relation, sides in per_relation.items():
        _check_sides(f"per_relation.{relation}", sides, protocol.hits_at, entities, False, (), relation_sides)
    _check_sides("macro_relation", record.get("macro_relation", {}) or {}, protocol.hits_at, entities, True, (),
                 evaluated)
    if record.get("confidence") is not None:
        _check_confidence(record["confidence"], protocol.hits_at)
    if record.get("compat") is not None:
        _check_compat(record["compat"], entities)
    if record.get("by_period") is not None:
        _check_periods(record["by_period"], protocol.hits_at)
    for name in ("by_degree", "by_node_type"):
        groups = record.get(name)
        if groups is None:
            continue
        if not isinstance(groups, dict):
            raise RecordError(f"{name} must be an object or null")
        for label, sides in groups.items():
            if name == "by_degree" and not _is_degree_bucket(str(label)):
                raise RecordError(f"by_degree.{label}: expected a degree bucket (0, 1, 2-3, 4-7, ...)")
            # a group may hold the answers of one side only (a degree no head answer has)
            _check_sides(f"{name}.{label}", sides, protocol.hits_at, entities, False, (), ("both",))


PERIOD_LABEL = {"year": re.compile(r"[0-9]{4}"), "month": re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")}
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _count(where: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RecordError(f"{where} = {value!r}: expected an integer of at least {minimum}")
    return value


def _check_interval(where: str, interval) -> None:
    if not isinstance(interval, list) or len(interval) != 2:
        raise RecordError(f"{where}: expected [low, high]")
    low, high = (float(_number(where, value) or 0.0) for value in interval)  # null refused by _number
    if not -SLACK <= low <= high + SLACK or high > 1.0 + SLACK:
        raise RecordError(f"{where} = [{low}, {high}]: expected 0 <= low <= high <= 1")


def _check_periods(block, hits_at: Sequence[int]) -> None:
    """The ``by_period`` block (:mod:`openbench.evaluation.statistics.periods`): a known period,
    a cut-off date, and per period a label of that period, positive counts (at least as many
    queries as triples, at most two per triple), days after the cut-off, and MRR and each hits@k
    in [0, 1] with an interval."""
    if not isinstance(block, dict):
        raise RecordError("by_period must be an object")
    period = block.get("period")
    if period not in PERIOD_LABEL:
        raise RecordError(f"by_period.period = {str(period)[:40]!r}: expected one of {', '.join(PERIOD_LABEL)}")
    if not isinstance(block.get("cutoff"), str) or not DATE.fullmatch(block["cutoff"]):
        raise RecordError(f"by_period.cutoff = {str(block.get('cutoff'))[:40]!r}: expected a date, YYYY-MM-DD")
    _count("by_period.undated_triples", block.get("undated_triples"))
    _count("by_period.resamples", block.get("resamples"), 1)
    periods = block.get("periods")
    if not isinstance(periods, dict):
        raise RecordError("by_period.periods must be an object")
    expected = ["mrr"] + [f"hits@{k}" for k in hits_at]
    for label, entry in periods.items():
        where = f"by_period.periods.{label}"
        if not PERIOD_LABEL[period].fullmatch(str(label)):
            raise RecordError(f"{where}: expected a {period} label")
        if not isinstance(entry, dict):
            raise RecordError(f"{where} must be an object")
        triples = _count(f"{where}.triples", entry.get("triples"), 1)
        queries = _count(f"{where}.queries", entry.get("queries"), 1)
        if not triples <= queries <= 2 * triples:
            raise RecordError(f"{where}: {queries} queries of {triples} triples; expected one or two per triple")
        days = _number(f"{where}.days_after_cutoff", entry.get("days_after_cutoff"))
        if days is None or days <= 0:
            raise RecordError(f"{where}.days_after_cutoff = {days}: the test edges lie after the cut-off")
        metrics, intervals = entry.get("metrics"), entry.get("intervals")
        if not isinstance(metrics, dict) or sorted(metrics) != sorted(expected):
            raise RecordError(f"{where}.metrics: expected {', '.join(expected)}")
        if not isinstance(intervals, dict) or sorted(intervals) != sorted(expected):
            raise RecordError(f"{where}.intervals: expected intervals of {', '.join(expected)}")
        for name in expected:
            value = _number(f"{where}.metrics.{name}", metrics[name])
            if value is None or not -SLACK <= value <= 1 + SLACK:
                raise RecordError(f"{where}.metrics.{name} = {value}: expected a value in [0, 1]")
            _check_interval(f"{where}.intervals.{name}", intervals[name])


def _check_confidence(block, hits_at: Sequence[int]) -> None:
    """The bootstrap block: resamples and seed, and per side an interval [low, high] in [0, 1] of
    MRR and of each hits@k of the protocol."""
    if not isinstance(block, dict):
        raise RecordError("confidence must be an object")
    resamples = block.get("resamples")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise RecordError(f"confidence.resamples = {resamples!r}: expected a positive integer")
    seed = block.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RecordError(f"confidence.seed = {seed!r}: expected an integer or null")
    expected = ["mrr"] + [f"hits@{k}" for k in hits_at]
    for side in ("both", "head", "tail", "macro_relation"):
        intervals = block.get(side)
        if intervals is None and side != "both":
            continue
        if not isinstance(intervals, dict) or sorted(intervals) != sorted(expected):
            raise RecordError(f"confidence.{side}: expected intervals of {', '.join(expected)}")
        for name, interval in intervals.items():
            _check_interval(f"confidence.{side}.{name}", interval)



CLASSIFICATION_METRICS = ("auroc", "auprc", "accuracy", "precision", "recall", "f1")


def _check_identity(record) -> None:
    """What the record was computed on and by: a fingerprint of 64 lowercase hex digits (a
    sha256), a named model with object params, the dataset's path and registry entry as strings,
    an integer or null seed."""
    dataset, model = record["dataset"], record["model"]
    if not isinstance(dataset, dict) or not isinstance(dataset.get("fingerprint"), str) or not dataset["fingerprint"]:
        raise RecordError("dataset.fingerprint is missing: the record does not say what it was computed on")
    if not FINGERPRINT.fullmatch(dataset["fingerprint"]):
        raise RecordError(f"dataset.fingerprint = {dataset['fingerprint'][:80]!r}: expected a sha256, 64 lowercase "
                          "hex digits")
    if dataset.get("path") is not None and not isinstance(dataset["path"], str):
        raise RecordError("dataset.path must be a string or null")
    made_by = dataset.get("made_by")
    if made_by is not None and (not isinstance(made_by, str) or not made_by or len(made_by) > 200):
        raise RecordError("dataset.made_by must be a short description of what wrote the split (1 to 200 "
                          "characters)")
    time_cut = dataset.get("time_cut")
    if time_cut is not None and (not isinstance(time_cut, dict) or not isinstance(time_cut.get("cutoff"), str)
                                 or not DATE.fullmatch(time_cut["cutoff"])):
        raise RecordError("dataset.time_cut must be null or an object whose cutoff is a date, YYYY-MM-DD")
    registry = dataset.get("registry")
    if registry is not None and (not isinstance(registry, dict) or any(
            registry.get(key) is not None and not isinstance(registry[key], str) for key in ("name", "version"))):
        raise RecordError("dataset.registry must be null or an object whose name and version are strings")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) or not model["name"]:
        raise RecordError("model.name is missing")
    if not isinstance(model.get("params", {}), dict):
        raise RecordError("model.params must be an object")
    seed = record.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RecordError(f"seed = {seed!r}: expected an integer or null")


def _check_classification_block(where: str, block) -> None:
    if not isinstance(block, dict):
        raise RecordError(f"{where} must be an object")
    for key in CLASSIFICATION_METRICS:
        value = _number(f"{where}.{key}", block.get(key), null_ok=True)
        if value is not None and not -SLACK <= value <= 1 + SLACK:
            raise RecordError(f"{where}.{key} = {value}: expected a value in [0, 1]")
    for key in ("positives", "negatives"):
        count = block.get(key)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RecordError(f"{where}.{key} = {count!r}: expected a count")
    if block.get("auroc") is not None and (block["positives"] == 0 or block["negatives"] == 0):
        raise RecordError(f"{where}.auroc is set, but AUROC needs positives and negatives")


def check_classification_record(record) -> None:
    """A classification record: identity, protocol, and every block's values in range."""
    _check_identity(record)
    protocol = record["protocol"]
    if not isinstance(protocol, dict) or protocol.get("threshold_metric") not in ("accuracy", "f1"):
        raise RecordError("protocol.threshold_metric must be accuracy or f1")
    result = record["classification"]
    if not isinstance(result, dict):
        raise RecordError("classification must be an object")
    for split in ("valid", "test"):
        part = result.get(split)
        if not isinstance(part, dict):
            raise RecordError(f"classification.{split} is missing")
        _check_classification_block(f"classification.{split}.overall", part.get("overall"))
        for relation, block in (part.get("per_relation") or {}).items():
            _check_classification_block(f"classification.{split}.per_relation.{relation}", block)


# the repurposing task's blocks: what every view holds and how its numbers relate
REPURPOSING_HEADLINE = ("auroc", "disease_mrr", "disease_auroc", "disease_auprc")


def repurposing_headline(record: dict) -> dict:
    """A repurposing record's test view as one flat row (realistic ranks): the full matrix's AUROC
    and Recall@n, the disease-specific macro MRR and Hit@k, AUROC and AUPRC."""
    view = (record["repurposing"].get("views") or {}).get("test") or {}
    out: Dict[str, Optional[float]] = {}
    full = view.get("full_matrix") or {}
    out["auroc"] = full.get("auroc")
    realistic = ((full.get("ranks") or {}).get("realistic") or {})
    out.update({key: value for key, value in realistic.items() if key.startswith("recall@")})
    disease = view.get("disease_specific") or {}
    macro = ((disease.get("macro") or {}).get("realistic") or {})
    out["disease_mrr"] = macro.get("mrr")
    out.update({f"disease_{key}": value for key, value in macro.items() if key.startswith("hits@")})
    out["disease_auroc"], out["disease_auprc"] = disease.get("auroc"), disease.get("auprc")
    return out


def _check_compat(compat, entities: Optional[int]) -> None:
    """Another tool's numbers beside openbench's: PyG's test() (0-based mean rank below the entity
    count, MRR and hits@k in [0, 1], a query count)."""
    if not isinstance(compat, dict) or set(compat) - {"pyg"}:
        raise RecordError("compat must be an object holding pyg")
    block = compat.get("pyg")
    if not isinstance(block, dict) or not isinstance(block.get("protocol"), str):
        raise RecordError("compat.pyg must be an object naming its protocol")
    queries = block.get("queries")
    if isinstance(queries, bool) or not isinstance(queries, int) or queries < 0:
        raise RecordError(f"compat.pyg.queries = {queries!r}: expected a count")
    for key, value in block.items():
        if key == "mrr" or key.startswith("hits@"):
            if value is not None:
                _unit(f"compat.pyg.{key}", value)
    rank = block.get("mean_rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, (int, float)) or not math.isfinite(rank)
                             or rank < 0 or (entities is not None and rank > entities - 1)):
        raise RecordError(f"compat.pyg.mean_rank = {rank!r}: expected a 0-based rank below the entity count")


def _unit(where: str, value) -> None:
    number = _number(where, value, null_ok=True)
    if number is not None and not -SLACK <= number <= 1 + SLACK:
        raise RecordError(f"{where} = {number}: expected a value in [0, 1]")


def _check_optional_ranks(where: str, blocks, ns: Sequence[int], prefix: str, averaged: bool = False) -> None:
    """A repurposing view's blocks (None where the view has no pairs) checked as a ranking side is."""
    if blocks is not None:
        _check_rank_blocks(where, blocks, ns, None, averaged, prefix)


def check_repurposing_record(record) -> None:
    """A repurposing record: identity, protocol (n of Recall@n, k of Hit@k), the matrix's counts
    and every view's values in range and consistent."""
    _check_identity(record)
    protocol = record["protocol"]
    if not isinstance(protocol, dict):
        raise RecordError("protocol must be an object")
    for name in ("recall_at", "hits_at"):
        values = protocol.get(name)
        if not isinstance(values, list) or not values or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values) or values != sorted(set(values)):
            raise RecordError(f"protocol.{name} = {values!r}: expected increasing positive integers")
    recall_at: List[int] = protocol["recall_at"]
    hits_at: List[int] = protocol["hits_at"]
    result = record["repurposing"]
    if not isinstance(result, dict) or not isinstance(result.get("matrix"), dict) or not isinstance(
            result.get("views"), dict):
        raise RecordError("repurposing must be an object with matrix and views")
    matrix = result["matrix"]
    for key in ("drugs", "diseases", "pairs", "candidates"):
        count = matrix.get(key)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RecordError(f"repurposing.matrix.{key} = {count!r}: expected a count")
    if matrix["pairs"] != matrix["drugs"] * matrix["diseases"] or matrix["candidates"] > matrix["pairs"]:
        raise RecordError("repurposing.matrix: pairs must be drugs × diseases, candidates at most the pairs")
    for name, view in result["views"].items():
        where = f"repurposing.views.{name}"
        if not isinstance(view, dict):
            raise RecordError(f"{where} must be an object")
        full = view.get("full_matrix")
        if full is not None:
            _unit(f"{where}.full_matrix.auroc", full.get("auroc"))
            _check_optional_ranks(f"{where}.full_matrix.ranks", full.get("ranks"), recall_at, "recall@")
        negatives = view.get("known_negatives")
        if negatives is not None:
            _check_optional_ranks(f"{where}.known_negatives.ranks", negatives.get("ranks"), recall_at, "recall@")
        disease = view.get("disease_specific")
        if disease is not None:
            for key in ("auroc", "auprc"):
                _unit(f"{where}.disease_specific.{key}", disease.get(key))
            for average in ("micro", "macro"):
                _check_optional_ranks(f"{where}.disease_specific.{average}", disease.get(average), hits_at, "hits@",
                                      averaged=average == "macro")
            for label, values in (disease.get("per_disease") or {}).items():
                for key in ("mrr", "auroc", "auprc"):
                    _unit(f"{where}.disease_specific.per_disease.{label}.{key}", (values or {}).get(key))
        classification = view.get("classification")
        if classification is not None:
            for key in ("auroc", "auprc", "accuracy", "f1"):
                _unit(f"{where}.classification.{key}", classification.get(key))
