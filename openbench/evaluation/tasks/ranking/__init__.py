"""The ranking task: filtered link prediction, each test triple's head and tail queries ranked
against every candidate (or OGB's sampled negatives), counted by the producers and reduced to
MRR, hits@k, AMRI and the rest (:mod:`openbench.evaluation.statistics.metrics`).

``openbench.evaluate(dataset, model)`` and ``openbench evaluate`` run it by default; its options
are :class:`Ranking`. It picks the producer (:mod:`openbench.evaluation.producers`), which declares
the options it takes by default, those it requires and those it refuses, runs it under one
:class:`~openbench.evaluation.candidates.RankingSetup` and builds the record with the one
reduction (:func:`build_record`); on several processes it joins the process group torchrun
describes and wraps the producer in the sharded one.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from openbench.errors import UsageError
from openbench.evaluation.tasks.base import RunSettings, Task, TaskOptions
from openbench.evaluation.tasks.ranking.options import DEFAULT_HITS_AT, PROTOCOLS, REPRODUCIBLE_CANDIDATES, Ranking
from openbench.record import Protocol, check_ranking_record

__all__ = ["PROTOCOLS", "REPRODUCIBLE_CANDIDATES", "DEFAULT_HITS_AT", "Ranking", "RankingTask", "TASK", "scope_of"]


def scope_of(protocol: dict) -> Optional[str]:
    """A scoped protocol's description (relations, sides, entity subset; not an inductive split's
    inference-graph candidates, which are its protocol); None for the full one.
    A hosted benchmark's sides are the server's choice (a part may happen to serve tail queries
    only), never a scope: its parts rank with each other."""
    parts = []
    if protocol.get("relations"):
        parts.append("relations " + ",".join(protocol["relations"]))
    if list(protocol.get("sides", ["head", "tail"])) != ["head", "tail"] and "hosted_protocol" not in protocol:
        parts.append("/".join(protocol["sides"]) + " only")
    entities = protocol.get("entities")
    if entities and not (isinstance(entities, dict) and entities.get("of") == "the inference graph"):
        # an inductive split's candidates are its protocol, not a chosen subset: its own table says so
        parts.append(f"{entities.get('count')} entities ({str(entities.get('sha256', ''))[:8]})")
    return "; ".join(parts) or None


class RankingTask(Task):
    """Filtered link prediction (see the module docstring)."""

    name = "ranking"
    summary = "filtered link prediction: each test triple's head and tail queries ranked (MRR, hits@k, AMRI)"
    options_type = Ranking
    flags = ("--filter", "--no-filter", "--candidates", "--relations", "--sides", "--entities", "--exclude-query-entity",
             "--protocol", "--ranks-output", "--dglke-compat", "--pyg-compat", "--predictions", "--submission",
             "--hits-at", "--fast", "--bootstrap", "--by-period", "--distributed", "--shard", "--sweep")
    block_key = None
    headline = "mrr"
    page_metrics = ("mrr", "hits@10")
    table_columns = ("mrr", "hits@1", "hits@3", "hits@10")
    keeps_ranks = True
    draws_report = True
    shards = (None, "queries", "entities")
    flag_aliases = ("--drugs", "--diseases")  # a dense matrix of scores' row and column labels
    sweeps = True
    shows_published = True

    def check_settings(self, settings: RunSettings) -> None:
        """Any shard mode the producers take (the sharded producer refuses what cannot be sharded)."""
        return None

    def run(self, dataset, model, options: TaskOptions, settings: RunSettings):
        """The ranking record of ``model`` (a scorer, ranked lists or a producer) on ``dataset``
        (:func:`~.run.run_ranking`)."""
        from openbench.evaluation.tasks.ranking.run import run_ranking

        assert isinstance(options, Ranking)
        return run_ranking(dataset, model, options, settings)

    # -- the record -------------------------------------------------------------------------
    def body(self, record) -> Dict[str, Any]:
        """Metrics, per relation, macro, the optional blocks, protocol, dataset, model, diagnostics."""
        protocol = record.protocol.to_dict() if isinstance(record.protocol, Protocol) else dict(record.protocol)
        return {"metrics": record.metrics, "per_relation": record.per_relation, "macro_relation": record.macro_relation,
                **({"confidence": record.confidence} if record.confidence is not None else {}),
                **({"by_degree": record.by_degree, "by_node_type": record.by_node_type}
                   if record.by_degree is not None else {}),
                **({"compat": record.compat} if record.compat is not None else {}),
                **({"by_period": record.by_period} if record.by_period is not None else {}),
                "protocol": protocol, "dataset": record.dataset, "model": record.model,
                "diagnostics": record.diagnostics}

    def required_keys(self) -> Tuple[str, ...]:
        """Metrics, protocol, dataset and model."""
        return ("metrics", "protocol", "dataset", "model")

    def check_record(self, record: dict) -> None:
        """Every side, rank type, relation and interval consistent (:func:`~openbench.record.check_ranking_record`)."""
        check_ranking_record(record)

    def metric_node(self, record, parts: List[str]) -> Tuple[Any, List[str]]:
        """``both.realistic.mrr`` in the metrics; ``per_relation.R...`` and ``macro_relation...`` in theirs."""
        if parts and parts[0] in ("per_relation", "macro_relation"):
            return getattr(record, parts[0]), parts[1:]
        return record.metrics, parts

    def protocol_of(self, protocol: Any) -> Any:
        """The typed :class:`~openbench.record.Protocol`."""
        return Protocol.from_dict(protocol)

    # -- the board --------------------------------------------------------------------------
    def board_metrics(self, record: dict) -> dict:
        """The record's metrics (every side and rank type)."""
        return record["metrics"]

    def board_cells(self, cells, side: str, rank_type: str):
        """The asked side and rank type of each run."""
        return [(cell.get(side) or {}).get(rank_type, {}) for cell in cells], side, rank_type

    def scope(self, protocol: dict) -> Optional[str]:
        """:func:`scope_of`."""
        return scope_of(protocol)

    def nonstandard(self, dataset_name: Optional[str], protocol: dict) -> Optional[bool]:
        """True where the protocol differs from the registry's standard one (a scoped protocol always
        does); None without a registry entry."""
        if scope_of(protocol) is not None:
            return True
        if not dataset_name:
            return None
        from openbench.datasets.published.catalogue import REGISTRY

        entry = REGISTRY.get(dataset_name)
        if entry is None:
            return None
        return any(protocol.get(key) != value for key, value in entry.protocol.standard_part().items())

    def report(self, models, output, seed: int, resamples: int, inputs: Sequence):
        """Per relation, the rank distribution, the degree strata and a paired comparison
        (:func:`~openbench.evaluation.statistics.figures.ranking_report`)."""
        from openbench.evaluation.statistics.figures import ranking_report

        return ranking_report(models, output, seed, resamples, inputs)

    # -- the command line ------------------------------------------------------------------
    def summary_lines(self, record: dict) -> List[str]:
        """The fixed-width table of the headline metrics (:func:`~openbench.evaluation.statistics.report.format_table`)."""
        from openbench.evaluation.statistics.report import format_table

        return [format_table(record)]

    # -- reproduction ----------------------------------------------------------------------
    def reproduce_options(self, record: dict) -> TaskOptions:
        """The options of the record's protocol; a protocol that names no options to rerun it (listed
        candidates, an entity subset known by its hash alone) is refused."""
        protocol = record.get("protocol") or {}
        candidates = protocol.get("candidates", "all")
        if candidates not in REPRODUCIBLE_CANDIDATES:
            raise UsageError(f"a record ranked against {candidates!r} candidates cannot be reproduced from a model "
                             "(ranked lists are scored by a served benchmark: submit-predictions)")
        if protocol.get("entities"):
            raise UsageError("a record ranked against an entity subset names the subset by its hash only; it "
                             "cannot be reproduced here")
        sampled = candidates == "sampled"
        return self.options(
            protocol="sampled" if sampled else "full",
            filter_sets=None if sampled else list(protocol.get("filter_sets") or []),
            candidates="all" if sampled else candidates, sides=list(protocol.get("sides") or ["head", "tail"]),
            relations=list(protocol["relations"]) if protocol.get("relations") else None,
            exclude_query_entity=bool(protocol.get("exclude_query_entity", False)),
            hits_at=list(protocol.get("hits_at") or [1, 3, 10]),
            evaluation_split=protocol.get("evaluation_split", "test"),
            ranks="exact" if protocol.get("ranks", "exact") == "exact" else "fast")

    def command_words(self, options: TaskOptions, settings: RunSettings) -> List[str]:
        """Protocol, filter, candidates, sides, relations, flags, fast ranks and hits@k."""
        assert isinstance(options, Ranking)
        words: List[str] = []
        if options.protocol == "sampled":
            words += ["--protocol", "sampled"]
        elif options.filter_sets == []:
            words.append("--no-filter")
        elif options.filter_sets is not None:
            words += ["--filter", ",".join(options.filter_sets)]
        if options.candidates != "all":
            words += ["--candidates", options.candidates]
        if list(options.sides) != ["head", "tail"]:
            words += ["--sides", options.sides[0]]
        if options.relations:
            words += ["--relations", ",".join(options.relations)]
        if options.exclude_query_entity:
            words.append("--exclude-query-entity")
        if settings.lower_is_better:
            words.append("--lower-is-better")
        if options.ranks == "fast":
            words.append("--fast")
        if options.by_period:
            words += ["--by-period", options.by_period]
        return words + ["--hits-at", ",".join(map(str, options.hits_at))]


TASK = RankingTask()
