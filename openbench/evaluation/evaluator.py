"""Filtered rank-based evaluation: the Evaluator base class and the embedding evaluator.

An evaluation is one producer of :class:`~openbench.evaluation.ranking.RankCounts` per query, one
reduction (:func:`~openbench.evaluation.metrics.summarize`) and one record
(:class:`~openbench.record.ResultRecord`). :meth:`Evaluator.evaluate` runs them; model sources
change only the producer (:meth:`Evaluator.produce`: full score rows, embedding chunks, top-k lists,
shards), the triples they walk (:meth:`Evaluator.evaluation_triples`) and what they add to the
protocol (:meth:`Evaluator.protocol`), never ``evaluate`` itself.

A subclass of :class:`Evaluator` implements ``score_batch(batch)`` and returns either
``(head_scores, tail_scores)``, each (B, E) (OpenBioLink's contract: ``head_scores[i, j]`` is the
score of (j, r_i, t_i), ``tail_scores[i, j]`` that of (h_i, r_i, j)), or the older 4-tensor
contract ``(pos_head, neg_head, pos_tail, neg_tail)``, where the true score is read from the full
row and a warning is recorded whenever it differs from ``pos_*``.

:class:`EmbeddingEvaluator` scores embedding arrays itself, in entity chunks, without calling
``score_batch``.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Dict, List, Optional, Sequence, Tuple

import polars as pl
import torch
from openbench.progress import progress

from openbench import __version__
from openbench.errors import InputError, ScoreError
from openbench.record import Protocol, ResultRecord
from openbench.evaluation import catalog
from openbench.evaluation.dataset import SPLITS, Dataset
from openbench.evaluation.dataset_cache import cached_filter_index
from openbench.evaluation.exact import RANK_MODES, ExactRanks
from openbench.evaluation.device import resolve_device
from openbench.evaluation.filter_index import SIDES, FilterIndex
from openbench.evaluation.kernels import kernel_name
from openbench.evaluation.metrics import summarize
from openbench.evaluation.ranking import (NonFiniteRows, RankCounts, candidate_counts, count_block, other_known,
                                          true_ids_of)
from openbench.evaluation.sampled import SampledNegatives, sampled_counts
from openbench.evaluation.scorers import EmbeddingScorer
from openbench.evaluation.typed import TypedCandidates

__all__ = ["DEFAULT_HITS_AT", "CPU_BLOCK_ELEMENTS", "GPU_BLOCK_FRACTION", "MIN_FULL_ROWS", "CANDIDATE_MODES",
           "Evaluator", "EmbeddingEvaluator"]

logger = logging.getLogger(__name__)

DEFAULT_HITS_AT = (1, 3, 10)
# score-block size (elements) per batch: large enough for efficient GEMMs, small enough for caches
CPU_BLOCK_ELEMENTS = 2 ** 23
GPU_BLOCK_FRACTION = 0.25
MIN_FULL_ROWS = 8
LIST_BLOCK_ELEMENTS = 1 << 24  # (queries × candidates × width) values gathered at once by score_candidates
CANDIDATE_MODES = catalog.CANDIDATE_MODES

Filter = Tuple[torch.Tensor, torch.Tensor]


def _is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


class Evaluator:
    """Filtered rank-based link-prediction evaluation of the ``evaluation_split`` triples.

    :param dataset: a loaded :class:`~openbench.evaluation.dataset.Dataset`.
    :param filter_sets: splits whose triples are known answers, removed from the candidates
        (the evaluated answer itself is always kept); ``()`` for raw ranking.
    :param hits_at: the k of hits@k.
    :param lower_is_better: scores are distances (smaller ranks first).
    :param exclude_query_entity: also remove the query's own entity from its candidates
        (as rule learners such as SAFRAN do), unless it is the true answer.
    :param sides: the query sides to evaluate (``("head", "tail")``: both).
    :param scope_relations: evaluate only the evaluation triples of these relations (labels).
    :param scope_entities: rank only against these entities (labels); a triple whose evaluated
        answer is not among them is dropped and counted (PyKEEN's ``restrict_entities_to``).
    """

    model_name = "custom"
    model_kind = "score_batch"

    def __init__(self, dataset: Dataset, *, filter_sets: Sequence[str] = SPLITS,
                 hits_at: Sequence[int] = DEFAULT_HITS_AT, lower_is_better: bool = False, device="auto",
                 exclude_query_entity: bool = False, evaluation_split: str = "test", seed: Optional[int] = None,
                 progress: bool = True, candidates: str = "all", sides: Sequence[str] = SIDES,
                 scope_relations: Optional[Sequence[str]] = None, scope_entities: Optional[Sequence[str]] = None,
                 sampled_negatives: Optional[SampledNegatives] = None):
        unknown = [name for name in filter_sets if name not in SPLITS]
        if unknown:
            raise InputError(f"unknown filter set(s) {', '.join(unknown)}; expected a subset of {', '.join(SPLITS)}")
        if evaluation_split not in SPLITS:
            raise InputError(f"unknown evaluation split {evaluation_split!r}; expected one of {', '.join(SPLITS)}")
        bad_k = [k for k in hits_at if int(k) < 1]
        if bad_k or not hits_at:
            raise InputError(f"hits@k needs positive integers k, got {list(hits_at)}")
        self.dataset = dataset
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.filter_sets = [name for name in SPLITS if name in filter_sets]
        self.hits_at = sorted({int(k) for k in hits_at})
        self.lower_is_better = lower_is_better
        self.exclude_query_entity = exclude_query_entity
        self.evaluation_split = evaluation_split
        self.seed = seed
        self.progress = progress
        self.warnings: List[str] = list(dataset.warnings)
        self.num_entities = dataset.num_entities
        known = [dataset.triples[name] for name in self.filter_sets]
        known_triples = torch.cat(known) if known else torch.empty((0, 3), dtype=torch.long)
        self.filters = {side: cached_filter_index(
            dataset, self.filter_sets, side, lambda side=side: FilterIndex.build(known_triples, dataset.num_relations,
                                                                                side, self.device)).to(self.device)
                        for side in SIDES}
        if candidates not in CANDIDATE_MODES:
            raise InputError(f"unknown candidates mode {candidates!r}; expected one of {', '.join(CANDIDATE_MODES)}")
        self.candidates = candidates
        self.sides, self.relation_scope, self.entity_scope = _scope(dataset, sides, scope_relations, scope_entities)
        self.sampled_negatives = sampled_negatives
        if sampled_negatives is not None:
            if self.filter_sets:
                raise InputError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                                 "definition): give no filter sets")
            if self.relation_scope is not None or self.entity_scope is not None:
                raise InputError("the sampled protocol ranks the whole evaluation split: --relations and --entities "
                                 "do not apply")
            sampled_negatives.check(dataset.triples[evaluation_split], dataset.num_entities)
        self.scope_dropped = 0  # evaluation triples whose answer lies outside the entity scope
        self.admitted: Optional[TypedCandidates] = None  # typed candidates and/or the entity scope
        self.entity_mask: Optional[torch.Tensor] = None  # (E,) bool: the entity scope
        if self.entity_scope is not None:
            self.entity_mask = torch.zeros(dataset.num_entities, dtype=torch.bool)
            self.entity_mask[torch.tensor(self.entity_scope, dtype=torch.long)] = True
        if candidates == "typed" or self.entity_mask is not None:
            self.admitted = TypedCandidates(dataset.entity_labels, dataset.relation_labels, self.device,
                                            typed=candidates == "typed", allowed_entities=self.entity_mask)
            if candidates == "typed" and self.admitted.untyped_relations:
                self.warnings.append(f"typed candidates: {len(self.admitted.untyped_relations)} relation(s) not in the "
                                     f"edge-type registry keep all candidates (first: {self.admitted.untyped_relations[0]})")

    # -- the model contract ---------------------------------------------------------------
    def score_batch(self, batch: torch.Tensor):
        """Scores for ``batch`` (B, 3) of (h, r, t) ids on the evaluation device.

        Return ``(head_scores, tail_scores)``, each (B, E), or the 4-tuple
        ``(pos_head (B,), neg_head (B, E), pos_tail (B,), neg_tail (B, E))``.
        """
        raise NotImplementedError("subclasses implement score_batch(batch)")

    def model_description(self) -> dict:
        return {"name": self.model_name, "kind": self.model_kind, "params": {}, "source_sha256": None}

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of the given (n, 3) triples, for triple classification; higher is more
        plausible (distances are negated when ``lower_is_better``). This generic path reads each
        triple's score from the full tail row of :meth:`score_batch`; sources that score a triple
        directly override it."""
        size = batch_size or self.default_batch_size()
        out = []
        for start in range(0, triples.shape[0], size):
            batch = triples[start:start + size].to(self.device)
            scores = self.score_batch(batch)
            tail_rows = scores[1] if len(scores) == 2 else scores[3]
            out.append(tail_rows[torch.arange(batch.shape[0], device=tail_rows.device), batch[:, 2]].double().cpu())
        result = torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)
        return -result if self.lower_is_better else result

    def default_batch_size(self) -> int:
        return max(1, min(self._block_elements() // max(self.num_entities, 1), 1024))

    # -- counting -------------------------------------------------------------------------
    def _block_elements(self) -> int:
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            return max(2 ** 20, int(free * GPU_BLOCK_FRACTION) // 4)
        return CPU_BLOCK_ELEMENTS

    def _filter_pairs(self, batch: torch.Tensor, side: str) -> Filter:
        """Known answers of the batch's ``side`` queries other than the true one, as (rows, cols)."""
        true_ids = true_ids_of(batch, side)
        rows, cols = other_known(*self.filters[side].lookup(batch), true_ids)
        if self.exclude_query_entity:
            query_entity = batch[:, 2] if side == "head" else batch[:, 0]
            batch_rows = torch.arange(batch.shape[0], device=batch.device)
            codes = rows * self.num_entities + cols
            extra = (query_entity != true_ids) & ~torch.isin(batch_rows * self.num_entities + query_entity, codes)
            rows = torch.cat([rows, batch_rows[extra]])
            cols = torch.cat([cols, query_entity[extra]])
        return rows, cols

    def count_sides(self, batch: torch.Tensor, filters: Dict[str, Filter]) -> Dict[str, Tuple[torch.Tensor, ...]]:
        """(n_greater, n_equal) per side for ``batch``, from ``score_batch``'s full rows."""
        output = self.score_batch(batch)
        if not isinstance(output, (tuple, list)) or len(output) not in (2, 4):
            raise ScoreError("score_batch must return (head_scores, tail_scores) or "
                             "(pos_head, neg_head, pos_tail, neg_tail)")
        if len(output) == 2:
            rows_by_side, positives = dict(zip(("head", "tail"), output)), {}
        else:
            rows_by_side = {"head": output[1], "tail": output[3]}
            positives = {"head": output[0], "tail": output[2]}
        counts = {}
        for side in self.sides:
            scores = torch.as_tensor(rows_by_side[side], device=self.device)
            expected = (batch.shape[0], self.num_entities)
            if tuple(scores.shape) != expected:
                raise ScoreError(f"score_batch returned {side} scores of shape {tuple(scores.shape)}; expected {expected}")
            if not scores.is_floating_point() or scores.dtype not in (torch.float32, torch.float64):
                scores = scores.to(torch.float32 if scores.is_floating_point() else torch.float64)
            true_ids = true_ids_of(batch, side)
            true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
            if side in positives:
                self._check_positive_scores(side, torch.as_tensor(positives[side], device=self.device), true_scores)
            try:
                work = scores if kernel_name(scores) != "torch" else scores.clone()  # the torch path writes
                self.exclude_untyped(work, batch, side, 0, true_ids)
                gt, eq, _ = count_block(work, 0, true_ids, true_scores, *filters[side], self.lower_is_better)
                eq = self.untie_worst(eq, true_scores, batch, side, filters[side])
            except NonFiniteRows as error:
                error.side = side
                raise
            counts[side] = (gt, eq)
        return counts

    def _check_positive_scores(self, side: str, positive: torch.Tensor, from_rows: torch.Tensor) -> None:
        """Warn where ``pos_*`` (B,) and the true answer's entry of the full row (B,) differ by
        more than rounding: the same score computed two ways may differ in its last bits."""
        positive = positive.reshape(-1).to(from_rows.dtype)
        tolerance = 64 * torch.finfo(from_rows.dtype).eps
        differs = ~torch.isclose(positive, from_rows, rtol=tolerance, atol=tolerance, equal_nan=True)
        if bool(differs.any()):
            largest = float((positive - from_rows)[differs].abs().max())
            message = (f"{int(differs.sum())} {side} positive score(s) differ from the true answer's entry of the full "
                       f"score row by more than rounding (up to {largest:.3g}); ranked with the full-row value")
            if message not in self.warnings:
                self.warnings.append(message)
                logger.warning(message)

    def _count_batch(self, batch: torch.Tensor) -> Dict[str, RankCounts]:
        filters = {side: self._filter_pairs(batch, side) for side in self.sides}
        try:
            pairs = self.count_sides(batch, filters)
        except NonFiniteRows as error:
            raise _NaNQuery(error.row, str(error), getattr(error, "side", None)) from error
        counts = {}
        for side in self.sides:
            candidates = candidate_counts(self.num_entities, filters[side][0], batch.shape[0])
            if self.admitted is not None:
                candidates = candidates - self.admitted.excluded_unfiltered(batch[:, 1], side, true_ids_of(batch, side),
                                                                         filters[side], self.num_entities)
            counts[side] = RankCounts(pairs[side][0], pairs[side][1], candidates)
        return counts

    def exclude_untyped(self, block: torch.Tensor, batch: torch.Tensor, side: str, start: int,
                        true_ids: torch.Tensor) -> None:
        """With typed candidates: overwrite the non-admitted entries of ``block`` (B, w), candidates
        ``start .. start + w - 1`` of the ``batch`` (B, 3) queries, with the worst value."""
        if self.admitted is not None:
            self.admitted.apply(block, batch[:, 1], side, start, true_ids, self.lower_is_better)

    def untie_worst(self, eq: torch.Tensor, true_scores: torch.Tensor, batch: torch.Tensor, side: str,
                     filter_pairs: Filter) -> torch.Tensor:
        """``eq`` (B,) less the ties a true score equal to the fill value had with every excluded
        entry (``true_scores`` (B,)); excluded entries that are also filtered were already taken
        back by the filter correction."""
        if self.admitted is None:
            return eq
        worst = float("inf") if self.lower_is_better else float("-inf")
        at_worst = true_scores == worst
        if not bool(at_worst.any()):
            return eq
        unfiltered = self.admitted.excluded_unfiltered(batch[:, 1], side, true_ids_of(batch, side), filter_pairs,
                                                    self.num_entities)
        return eq - torch.where(at_worst, unfiltered, torch.zeros_like(unfiltered))

    # -- producer, reduction, record ------------------------------------------------------
    def evaluate(self, batch_size: Optional[int] = None) -> dict:
        """Evaluate every triple of the evaluation split; returns the result record as JSON values."""
        started = time.perf_counter()
        triples = self.scoped(self.evaluation_triples())
        counts = self.produce(triples, batch_size)
        counts = {side: counts[side] for side in self.sides}
        return self.record(counts, self.side_relations(triples), time.perf_counter() - started).to_dict()

    def side_relations(self, triples: torch.Tensor) -> Dict[str, torch.Tensor]:
        """{side: (T_side,) relation id of each of that side's counts}; here every side ranks every
        triple of ``triples`` (T, 3), so each is ``triples[:, 1]``."""
        return {side: triples[:, 1] for side in self.sides}

    def scoped(self, triples: torch.Tensor) -> torch.Tensor:
        """(T', 3): the triples of ``triples`` (T, 3) in the evaluation scope (the chosen relations,
        and answers among the chosen entities; the latter dropped triples are counted)."""
        if self.relation_scope is not None:
            chosen = torch.tensor(self.relation_scope, dtype=triples.dtype, device=triples.device)
            triples = triples[torch.isin(triples[:, 1], chosen)]
        if self.entity_mask is not None:
            allowed = self.entity_mask.to(triples.device)
            inside = torch.ones(triples.shape[0], dtype=torch.bool, device=triples.device)
            for side in self.sides:
                inside &= allowed[true_ids_of(triples, side)]
            self.scope_dropped = int((~inside).sum())
            triples = triples[inside]
        if triples.shape[0] == 0:
            raise InputError("no evaluation triple lies in the chosen scope (--relations, --entities)",
                             self.dataset.path)
        return triples

    def evaluation_triples(self) -> torch.Tensor:
        """(T, 3) the triples to rank, in the order :meth:`produce` walks them (any order: the
        metrics do not depend on it)."""
        return self.dataset.triples[self.evaluation_split].to(self.device)

    def produce(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """The producer: {"head", "tail"} counts, each (T,) per query of ``triples`` (T, 3),
        batch by batch (halving the batch on out-of-memory); under the sampled protocol each
        query against its own negatives (:func:`~openbench.evaluation.sampled.sampled_counts`)."""
        if self.sampled_negatives is not None:
            return sampled_counts(self, triples, self.sampled_negatives, batch_size)
        return self._evaluate_triples(triples, batch_size)

    def protocol(self) -> Protocol:
        """How the counts were obtained; subclasses add what their source changes."""
        extra: Dict[str, object] = {}
        if self.relation_scope is not None:
            extra["relations"] = [self.dataset.relation_labels[i] for i in self.relation_scope]
        if self.entity_scope is not None:
            labels = "\n".join(self.dataset.entity_labels[i] for i in self.entity_scope)
            extra["entities"] = {"count": len(self.entity_scope), "dropped_triples": self.scope_dropped,
                                 "sha256": hashlib.sha256(labels.encode("utf-8")).hexdigest()}
        sides = len(self.sides)
        candidates = self.candidates
        if self.sampled_negatives is not None:
            candidates = "sampled"
            extra["negatives_per_query"] = self.sampled_negatives.description()
        return Protocol(filter_sets=list(self.filter_sets), hits_at=list(self.hits_at), candidates=candidates,
                        sides=list(self.sides), exclude_query_entity=self.exclude_query_entity,
                        lower_is_better=self.lower_is_better,
                        dropped_queries=sides * (self.dataset.dropped.get(self.evaluation_split, 0)
                                                 + self.scope_dropped),
                        evaluation_split=self.evaluation_split, extra=extra)

    def timing(self) -> dict:
        """What the record keeps under ``timing`` besides the seconds (machine-dependent counts)."""
        return {}

    def dataset_description(self) -> dict:
        """What a record says of the dataset: path, fingerprint, id-map hash, counts, registry entry."""
        return {"path": self.dataset.path, "fingerprint": self.dataset.fingerprint,
                "id_map_sha256": self.dataset.id_map_sha256, "counts": self.dataset.counts(),
                "registry": self.dataset.registry}

    def record(self, counts: Dict[str, RankCounts], relations: Dict[str, torch.Tensor],
               seconds: float) -> ResultRecord:
        """The one reduction (metrics per side, relation and macro) and the one record.

        :param counts: {"head", "tail"} counts, each (T_side,); ``relations`` {side: (T_side,)}
            the relation ids of those counts (:meth:`side_relations`).
        """
        metrics, per_relation, macro = summarize(counts.get("head"), counts.get("tail"), relations,
                                                 self.dataset.relation_labels, self.hits_at)
        # an exact integer count, divided once on the host: the same float on every device
        queries = sum(side.n_equal.numel() for side in counts.values())
        tied = sum(int((side.n_equal > 0).sum()) for side in counts.values())
        dataset = self.dataset_description()
        return ResultRecord(metrics=metrics, per_relation=per_relation, macro_relation=macro,
                            protocol=self.protocol(), dataset=dataset, model=self.model_description(),
                            diagnostics={"queries": queries, "tied_query_fraction": tied / queries if queries else 0.0},
                            seed=self.seed, device=str(self.device), version=__version__, seconds=seconds,
                            warnings=list(self.warnings), timing=self.timing())

    def _evaluate_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """Counts per side for ``triples`` (T, 3), batch by batch (halving the batch on OOM)."""
        total = triples.shape[0]
        size = int(batch_size) if batch_size else self.default_batch_size()
        if size < 1:
            raise InputError(f"batch size must be positive, got {size}")
        parts: Dict[str, List[RankCounts]] = {side: [] for side in self.sides}
        position = 0
        with progress(total=total, desc="evaluating", unit="triple", enabled=self.progress) as bar:
            while position < total:
                batch = triples[position:position + size]
                try:
                    counts = self._count_batch(batch)
                except _NaNQuery as error:
                    raise self._nan_error(error, position) from None
                except (RuntimeError, MemoryError) as error:
                    if not _is_out_of_memory(error) or size == 1:
                        raise
                    self._record_fallback(size)
                    size = max(1, size // 2)
                    continue
                for side in self.sides:
                    parts[side].append(counts[side])
                position += batch.shape[0]
                bar.update(batch.shape[0])
        if not total:
            empty = torch.zeros(0, dtype=torch.long, device=self.device)
            return {side: RankCounts(empty, empty, empty) for side in self.sides}
        return {side: RankCounts.cat(parts[side]) for side in self.sides}

    def _record_fallback(self, size: int) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        message = f"out of memory at batch size {size}; continued with batch size {max(1, size // 2)}"
        self.warnings.append(message)
        logger.warning(message)

    def _nan_error(self, error: "_NaNQuery", position: int) -> ScoreError:
        index = position + error.row
        h, r, t = self.dataset.triples[self.evaluation_split][index].tolist()
        labels = self.dataset.entity_labels, self.dataset.relation_labels
        triple = f"({labels[0][h]}, {labels[1][r]}, {labels[0][t]})"
        side = f"{error.side} " if error.side else ""
        return ScoreError(f"{error.detail} in the scores of {side}query #{index} of the {self.evaluation_split} "
                          f"split {triple}; NaN cannot be ranked: fix the model or its inputs")

def _scope(dataset: Dataset, sides: Sequence[str], relations: Optional[Sequence[str]],
           entities: Optional[Sequence[str]]):
    """(sides in order, relation ids or None, entity ids or None); unknown names are an InputError
    listing them (and, for relations, the dataset's)."""
    chosen_sides = [side for side in SIDES if side in sides]
    if not chosen_sides or any(side not in SIDES for side in sides):
        raise InputError(f"sides {list(sides)!r}: expected head, tail or both")
    relation_ids = None
    if relations is not None:
        index = {label: i for i, label in enumerate(dataset.relation_labels)}
        unknown = [name for name in relations if name not in index]
        if unknown or not relations:
            raise InputError(f"unknown relation(s) {', '.join(unknown) or '(none given)'}; the dataset has "
                             f"{', '.join(dataset.relation_labels)}")
        relation_ids = sorted({index[name] for name in relations})
    entity_ids = None
    if entities is not None:
        # an Enum's physical code is the label's position in the id-ordered list (as map_labels does)
        labels = pl.Series("label", list(entities), dtype=pl.String)
        codes = labels.cast(pl.Enum(dataset.entity_labels), strict=False)
        unknown = labels.filter(codes.is_null())
        if unknown.len():
            raise InputError(f"{unknown.len()} entity label(s) not in the dataset (first: "
                             f"{', '.join(unknown.head(5).to_list())})")
        entity_ids = codes.to_physical().unique().sort().to_list()
        if not entity_ids:
            raise InputError("the entity list is empty: nothing to rank against")
    return chosen_sides, relation_ids, entity_ids


class _NaNQuery(Exception):
    def __init__(self, row: int, detail: str, side: Optional[str]):
        super().__init__(detail)
        self.row, self.detail, self.side = row, detail, side


class EmbeddingEvaluator(Evaluator):
    """Evaluates embedding arrays with a built-in scorer, streaming entity chunks.

    Full score rows are used whenever at least ``MIN_FULL_ROWS`` rows fit the block budget; then
    each true score is read from the very row it is compared against. Otherwise candidates come
    in chunks, and the true scores are read in a first pass over the same chunks (the second
    pass recomputes identical blocks; a mismatch is reported as a warning).
    """

    model_kind = "embeddings"

    def __init__(self, dataset: Dataset, scorer: EmbeddingScorer, *, model_params: Optional[dict] = None,
                 source_sha256: Optional[str] = None, entity_chunk: Optional[int] = None,
                 entity_range: Optional[Tuple[int, int]] = None, ranks: str = "exact", **kwargs):
        """:param entity_range: [start, stop): the candidate entities the scorer holds rows of (an
        entity shard; None: all of them).
        :param ranks: ``"exact"``: better and tied candidates as exact arithmetic on the stored
            values decides (:mod:`openbench.evaluation.exact`); ``"fast"``: as the scores computed
            in the embeddings' precision compare."""
        super().__init__(dataset, **kwargs)
        if ranks not in RANK_MODES:
            raise InputError(f"unknown ranks mode {ranks!r}; expected one of {', '.join(RANK_MODES)}")
        start, stop = entity_range if entity_range is not None else (0, dataset.num_entities)
        if scorer.num_entities != stop - start:
            raise InputError(f"the model has {scorer.num_entities} entities, the dataset {dataset.num_entities}"
                             + (f" (entity range {start}..{stop - 1})" if entity_range is not None else ""))
        self.entity_range = (start, stop)
        self.scorer = scorer.to(self.device)
        self.model_name = scorer.name
        self.model_params = dict(model_params or {})
        self.source_sha256 = source_sha256
        self.entity_chunk = entity_chunk
        self._buffer: Optional[torch.Tensor] = None
        exact = ranks == "exact" and self.sampled_negatives is None  # sampled ranks compare float32 scores
        if exact and not scorer.exact_keys:
            logger.warning("%s post-processes its scores (%s): ranks compare the computed scores, not exact ones",
                           scorer.name, type(scorer).__name__)
            exact = False
        self.exact = ExactRanks(self.scorer, self.lower_is_better, self.reduce_max,
                                entity_offset=self.entity_range[0]) if exact else None

    reduce_max = None  # entity shards: an all_reduce(MAX) of this process's largest candidate norms

    def protocol(self) -> Protocol:
        """The base protocol plus how ranks were counted: ``ranks`` is ``"exact"`` or the precision
        the scores were compared in; ``embedding_precision`` the stored values' dtype."""
        protocol = super().protocol()
        precision = str(self.scorer.entities.dtype).replace("torch.", "")
        compared = str(self.scorer.entities.real.dtype).replace("torch.", "")
        protocol.extra["ranks"] = "exact" if self.exact is not None else compared
        protocol.extra["embedding_precision"] = precision
        return protocol

    def timing(self) -> dict:
        """Exact ranks: how many (query, candidate) pairs the fast pass left undecided and what
        settled them; these depend on the arithmetic's order, so they live with the timings."""
        if self.exact is None:
            return {}
        return {"exact_ranks": self.exact.stats.as_dict()}

    def model_description(self) -> dict:
        """The scorer's name, kind and parameters (dimension, dtype) and the files' sha256."""
        params = {"dimension": int(self.scorer.entities.shape[1]), "dtype": str(self.scorer.entities.dtype)}
        params.update(self.model_params)
        return {"name": self.model_name, "kind": self.model_kind, "params": params,
                "source_sha256": self.source_sha256}

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of (n, 3) triples, each against its own tail only: O(n · d); higher is more
        plausible (negated when ``lower_is_better``)."""
        start, _ = self.entity_range
        size = batch_size or 65536
        out = [self.scorer.score_pairs(triples[i:i + size].to(self.device), start).double().cpu()
               for i in range(0, triples.shape[0], size)]
        result = torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)
        return -result if self.lower_is_better else result

    @torch.no_grad()
    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) float64 scores of the ``side`` queries of ``batch`` (B, 3) against their own
        candidate entities ``candidates`` (B, W), higher is more plausible: each query vector once,
        only its W candidates gathered, in row groups of at most ``LIST_BLOCK_ELEMENTS`` values."""
        start, _ = self.entity_range
        batch, candidates = batch.to(self.device), candidates.to(self.device)
        width = candidates.shape[1] * max(1, self.scorer._cached_candidates(side).shape[1])
        rows = max(1, LIST_BLOCK_ELEMENTS // max(1, width))
        parts = []
        for first in range(0, batch.shape[0], rows):
            queries = self.scorer.query_vectors(batch[first:first + rows], side)
            parts.append(self.scorer.score_lists(queries, side, candidates[first:first + rows], start).double().cpu())
        result = torch.cat(parts) if parts else torch.zeros((0, candidates.shape[1]), dtype=torch.float64)
        return -result if self.lower_is_better else result

    def default_batch_size(self) -> int:
        """Queries per batch: as many full (E,) score rows as the block budget holds, at most 4096."""
        budget = self._block_elements()
        if self.num_entities * MIN_FULL_ROWS <= budget:
            return max(1, min(budget // self.num_entities, 4096))
        return 256

    def _chunk_width(self, batch_size: int) -> int:
        if self.entity_chunk:
            return min(self.entity_chunk, self.num_entities)
        budget = self._block_elements()
        if batch_size * self.num_entities <= max(budget, MIN_FULL_ROWS * self.num_entities):
            return self.num_entities
        return max(1, min(self.num_entities, budget // batch_size))

    def scratch_block(self, rows: int, width: int) -> torch.Tensor:
        """A contiguous (rows, width) scratch view of one reusable buffer (avoids page faults)."""
        needed = rows * width
        if self._buffer is None or self._buffer.numel() < needed:
            self._buffer = torch.empty(needed, dtype=self.scorer.entities.real.dtype, device=self.device)
        return self._buffer[:needed].view(rows, width)

    def count_sides(self, batch, filters):
        """{side: (n_greater (B,), n_equal (B,))} for ``batch`` (B, 3), scored in entity chunks."""
        width = self._chunk_width(batch.shape[0])
        counts = {}
        for side in self.sides:
            try:
                counts[side] = self.count_side(batch, side, filters[side], width)
            except NonFiniteRows as error:
                error.side = side
                raise
        return counts

    def count_side(self, batch: torch.Tensor, side: str, filter_pairs: Filter, width: int):
        """(n_greater, n_equal), each (B,) int64, for the ``side`` queries of ``batch`` (B, 3).

        :param filter_pairs: (rows (M,), cols (M,)) known answers other than the true one.
        :param width: candidate entities scored per block.
        """
        queries = self.scorer.query_vectors(batch, side)
        true_ids = true_ids_of(batch, side)
        rows = batch.shape[0]
        offset = self.entity_range[0]
        keys = self.exact is not None  # exact ranks compare ranking keys (no square root for L2)
        if self.exact is not None:  # the window's float64 work, while the query rows are in cache
            true_rows = self.scorer.entities.index_select(0, true_ids - offset)
            self.exact.prepare(self.scorer, batch, side, queries, true_rows)
        block = self.scratch_block(rows, min(width, self.num_entities))
        # NaN costs the C kernel nothing to find; the torch path skips its NaN pass when the
        # scorer proves every score finite
        check_nan = kernel_name(block) != "torch" or not self.scorer.provably_finite(queries, side)
        starts = range(0, self.num_entities, width)
        if width >= self.num_entities:
            block = self.scorer.score_chunk(queries, side, 0, self.num_entities, out=block, keys=keys)
            true_scores = block.gather(1, true_ids[:, None]).squeeze(1)
            self.exclude_untyped(block, batch, side, 0, true_ids)
            window = self.exact_window(true_scores)
            gt, eq, _ = self.count_chunk(block, 0, batch, side, true_scores, filter_pairs, check_nan, window,
                                         self.scorer)
            return gt, self.untie_worst(eq, true_scores, batch, side, filter_pairs)
        true_scores = torch.empty(rows, dtype=block.dtype, device=self.device)
        for start in starts:
            stop = min(start + width, self.num_entities)
            here = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
            if here.numel():
                block = self.scorer.score_chunk(queries, side, start, stop, out=self.scratch_block(rows, stop - start),
                                                keys=keys)
                true_scores[here] = block[here, true_ids[here] - start]
        gt = torch.zeros(rows, dtype=torch.long, device=self.device)
        eq = torch.zeros_like(gt)
        mismatched = 0
        window = self.exact_window(true_scores)
        for start in starts:
            stop = min(start + width, self.num_entities)
            block = self.scorer.score_chunk(queries, side, start, stop, out=self.scratch_block(rows, stop - start),
                                            keys=keys)
            self.exclude_untyped(block, batch, side, start, true_ids)
            chunk_gt, chunk_eq, true_differs = self.count_chunk(block, start, batch, side, true_scores, filter_pairs,
                                                                check_nan, window, self.scorer)
            gt += chunk_gt
            eq += chunk_eq
            mismatched += int(true_differs.sum())
        if mismatched:
            message = f"{mismatched} true score(s) differed between two computations of the same chunk"
            self.warnings.append(message)
            logger.warning(message)
        return gt, self.untie_worst(eq, true_scores, batch, side, filter_pairs)

    def exact_window(self, true_scores: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """Exact ranks: (lows (B,), highs (B,)) around the true keys (B,) of the batch and side
        :meth:`ExactRanks.prepare` saw last (None: fast ranks)."""
        if self.exact is None:
            return None
        if self.admitted is not None and bool(self.exact.overflowed(true_scores).any()):
            # the excluded candidates hold the same ±inf: they cannot be told from the overflowed ones
            raise ScoreError("typed candidates with exact ranks: some scores overflow the embeddings' precision "
                             f"({self.scorer.entities.dtype}); give the embeddings as float64, or use --fast")
        return self.exact.finish(true_scores)

    def count_chunk(self, block: torch.Tensor, start: int, batch: torch.Tensor, side: str, true_scores: torch.Tensor,
                    filter_pairs: Filter, check_nan: bool, window,
                    query_scorer: EmbeddingScorer) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(n_greater, n_equal, true_differs) (B,) of one block of candidates ``start ..``; with a
        ``window`` (:meth:`exact_window` of this batch and side), the candidates inside it
        re-scored exactly (``query_scorer`` built the queries)."""
        true_ids = true_ids_of(batch, side)
        positions = None if window is None or self.exact is None else self.exact.positions_buffer(block)
        gt, eq, differs = count_block(block, start, true_ids, true_scores, *filter_pairs, self.lower_is_better,
                                      check_nan, window, positions)
        if window is None or self.exact is None:
            return gt, eq, differs
        gt, eq = self.exact.settle(block, start, (gt, eq), window, true_ids, filter_pairs, self.num_entities,
                                   query_scorer, positions)
        return gt, eq, differs
