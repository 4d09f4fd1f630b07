"""What one ranking evaluation ranks against: the known answers filtered out, the candidates (all,
typed, an entity scope), the evaluated relations and sides, the k of hits@k, and the split.

A :class:`RankingSetup` is built once per dataset and protocol and shared by every producer that
runs under it (:mod:`openbench.evaluation.producers.full`); it knows nothing of how scores are made.
It also answers what the record says of the protocol and of the dataset.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import polars as pl
import torch

from graphgen.edge_types import EDGE_TYPES, NODE_TYPES, PREFIX_TO_NODE_TYPE
from openbench.datasets.cache import cached_filter_index
from openbench.datasets.filter_index import FilterIndex
from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
from openbench.errors import InputError, ScoreError, option
from openbench.evaluation.counting.device import resolve_device
from openbench.progress import stage
from openbench.record import Protocol
from openbench.vocabulary import CANDIDATE_MODES, QUERY_SIDES, SPLITS

__all__ = ["ALL_TYPES", "TypedCandidates", "Exclusion", "SideCandidates", "true_ids_of", "other_known",
           "candidate_counts", "DEFAULT_HITS_AT", "CPU_BLOCK_ELEMENTS", "GPU_BLOCK_FRACTION", "Filter", "RankingSetup", "block_elements",
           "with_reverses"]

logger = logging.getLogger(__name__)

DEFAULT_HITS_AT = (1, 3, 10)
# score-block size (elements) per batch on the CPU: 128 MB of float32. Large enough that a tile of
# queries meets the entities in few chunks (each chunk costs a fixed amount of bookkeeping: 2^23
# was 25 % slower at 1 M entities, benchmarks/bench_scale.py), small beside any machine's memory
CPU_BLOCK_ELEMENTS = 2 ** 25
LARGE_FILTER_TRIPLES = 5_000_000  # known triples from which the filter index's step is announced
GPU_BLOCK_FRACTION = 0.25

Filter = Tuple[torch.Tensor, torch.Tensor]  # (rows (M,), entity ids (M,)) of known answers other than the true one


def true_ids_of(batch: torch.Tensor, side: str) -> torch.Tensor:
    """(B,) the true answers of ``batch`` (B, 3) for ``side``: heads for head queries, else tails."""
    return batch[:, 0] if side == "head" else batch[:, 2]


def other_known(filter_rows: torch.Tensor, filter_cols: torch.Tensor,
                true_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Drop the pairs (row, col) of a filter list whose column is the row's own true answer."""
    keep = filter_cols != true_ids[filter_rows]
    return filter_rows[keep], filter_cols[keep]


def candidate_counts(num_entities: int, filter_rows: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(B,) candidates left per query: all entities less the filtered ones (pairs must exclude the true one)."""
    removed = torch.bincount(filter_rows, minlength=batch_size)
    return num_entities - removed


class Exclusion(NamedTuple):
    """The candidates typed candidates or the entity scope exclude for one side of a batch of B
    queries: candidate ``c`` is admitted for query ``i`` exactly where ``query_bits[i, 0] &
    entity_bits[c]`` is not 0, and the true answer always. The counting writes ``fill`` (the worst
    score) over the excluded entries of each block and takes back, from a true score equal to
    ``fill``, its ties with the ``unfiltered`` (B,) excluded entities that are not known answers
    (the filtered ones were taken back by the filter correction)."""

    query_bits: torch.Tensor  # (B, 1) int16: the type bits each query's relation admits on this side
    entity_bits: torch.Tensor  # (E,) int16: each entity's type bit (0: outside the entity scope)
    fill: float
    unfiltered: torch.Tensor  # (B,) int64


class SideCandidates(NamedTuple):
    """What one side's B queries rank against (:meth:`RankingSetup.side_candidates`): plain values,
    so that the counting reads them without calling back."""

    side: str
    true_ids: torch.Tensor  # (B,) the true answers
    filter_pairs: Filter  # (rows (M,), cols (M,)) known answers other than the true one
    n_candidates: torch.Tensor  # (B,) int64 candidates left, the true answer included
    exclusion: Optional[Exclusion]  # None: every entity is a candidate


def block_elements(device: torch.device) -> int:
    """Score-block elements per batch on ``device``: a quarter of the free memory on CUDA."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return max(2 ** 20, int(free * GPU_BLOCK_FRACTION) // 4)
    return CPU_BLOCK_ELEMENTS


def with_reverses(triples: torch.Tensor, relations: Sequence[int]) -> torch.Tensor:
    """(N + M, 3): ``triples`` (N, 3) int64 (h, r, t), then (t, r, h) of the M of them whose
    relation is one of ``relations`` (undirected relations stored in one orientation)."""
    if not relations or triples.shape[0] == 0:
        return triples
    chosen = torch.isin(triples[:, 1], torch.tensor(list(relations), dtype=triples.dtype, device=triples.device))
    return torch.cat([triples, triples[chosen][:, [2, 1, 0]]])


# -- typed candidates ------------------------------------------------------------------------
#
# Typed candidates: each query ranks only the entities of a node type its relation admits there.
# 
# OpenBioLink ranks every query against all entities, impossible ones included (a GO term as the
# tail of GENE_DIS). With ``candidates="typed"`` the head (tail) query of relation r ranks only the
# entities whose node type is a head (tail) type of one of r's signatures in
# ``graphgen/edge_types.py``; node types come from the CURIE prefixes. A relation the registry does
# not know keeps all candidates (and the result says so). The true answer is always a candidate.
# 
# Counting stays exact: excluded entries of a score block are overwritten with the worst possible
# value (-inf, or +inf when lower is better), so they never beat or tie a finite true score; the
# rare true score that *is* that value is corrected by the number of excluded entries. Candidate
# counts drop the excluded entities that were not already filtered.

ALL_TYPES = 0xFF
_TYPE_BIT = {name: 1 << code for code, name in enumerate(sorted(NODE_TYPES))}
_UNKNOWN_BIT = 1 << 7


class TypedCandidates:
    """Per entity a type bit (E,), per (side, relation) a mask of the admitted type bits (R,).

    :param typed: admit by node type (``False``: every type admitted).
    :param allowed_entities: (E,) bool, the entity scope: an entity outside it gets no type bit,
        so no query admits it (the same exact exclusion as for types).
    """

    def __init__(self, entity_labels: List[str], relation_labels: List[str], device: torch.device,
                 typed: bool = True, allowed_entities: Optional[torch.Tensor] = None):
        bits = [_TYPE_BIT.get(PREFIX_TO_NODE_TYPE.get(label.split(":", 1)[0], ""), _UNKNOWN_BIT)
                for label in entity_labels]
        self.entity_bits = torch.tensor(bits, dtype=torch.int16, device=device)
        if allowed_entities is not None:
            self.entity_bits[~allowed_entities.to(device)] = 0
        self.untyped_relations = [label for label in relation_labels if label not in EDGE_TYPES]
        self.relation_bits = {}
        for side, position in (("head", 0), ("tail", 1)):
            masks = []
            for label in relation_labels:
                edge = EDGE_TYPES.get(label)
                masks.append(ALL_TYPES if edge is None or not typed else
                             sum({_TYPE_BIT[signature[position]] for signature in edge.signatures}))
            self.relation_bits[side] = torch.tensor(masks, dtype=torch.int16, device=device)
        # entities per type bit, so that each relation's number of admitted entities is a sum of 8
        per_bit = torch.stack([(self.entity_bits == (1 << bit)).sum() for bit in range(8)])
        self.allowed_counts = {side: torch.stack([per_bit[[b for b in range(8) if int(mask) >> b & 1]].sum()
                                                  for mask in self.relation_bits[side].tolist()])
                               if len(relation_labels) else torch.zeros(0, dtype=torch.long, device=device)
                               for side in ("head", "tail")}

    def excluded_unfiltered(self, relations: torch.Tensor, side: str, true_ids: torch.Tensor,
                            filter_pairs: Tuple[torch.Tensor, torch.Tensor], num_entities: int) -> torch.Tensor:
        """(B,) excluded entities per query that are not among its filtered known answers."""
        rows, cols = filter_pairs
        allowed_count = self.allowed_counts[side][relations]
        true_excluded = (self.relation_bits[side][relations] & self.entity_bits[true_ids]) == 0
        excluded = num_entities - allowed_count - true_excluded.to(torch.long)
        filtered_excluded = (self.relation_bits[side][relations[rows]] & self.entity_bits[cols]) == 0
        return excluded - torch.bincount(rows[filtered_excluded], minlength=relations.shape[0])


class RankingSetup:
    """Filtered rank-based evaluation of the ``evaluation_split`` triples: the protocol's state.

    :param dataset: a loaded :class:`~openbench.datasets.loader.Dataset`.
    :param filter_sets: splits whose triples are known answers, removed from the candidates
        (the evaluated answer itself is always kept); ``()`` for raw ranking; None: the dataset's
        default (every split; an inductive split's inference graph, validation and test).
    :param hits_at: the k of hits@k.
    :param lower_is_better: scores are distances (smaller ranks first).
    :param exclude_query_entity: also remove the query's own entity from its candidates
        (as rule learners such as SAFRAN do), unless it is the true answer.
    :param sides: the query sides to evaluate (``("head", "tail")``: both).
    :param scope_relations: evaluate only the evaluation triples of these relations (labels).
    :param scope_entities: rank only against these entities (labels); a triple whose evaluated
        answer is not among them is dropped and counted (PyKEEN's ``restrict_entities_to``). An
        inductive split's default: its inference graph's entities.
    :param sampled_negatives: the sampled protocol's negatives per evaluation triple (no filter sets).
    """

    def __init__(self, dataset: Dataset, *, filter_sets: Optional[Sequence[str]] = None,
                 hits_at: Sequence[int] = DEFAULT_HITS_AT, lower_is_better: bool = False, device="auto",
                 exclude_query_entity: bool = False, evaluation_split: str = "test", seed: Optional[int] = None,
                 progress: bool = True, candidates: str = "all", sides: Sequence[str] = QUERY_SIDES,
                 scope_relations: Optional[Sequence[str]] = None, scope_entities: Optional[Sequence[str]] = None,
                 sampled_negatives: Optional[SampledNegatives] = None):
        known_sets = dataset.known_sets()
        filter_sets = dataset.default_filter_sets() if filter_sets is None else filter_sets
        unknown = [name for name in filter_sets if name not in known_sets]
        if unknown:
            raise InputError(f"unknown filter set(s) {', '.join(unknown)}; expected a subset of {', '.join(known_sets)}")
        if evaluation_split not in SPLITS:
            raise InputError(f"unknown evaluation split {evaluation_split!r}; expected one of {', '.join(SPLITS)}")
        bad_k = [k for k in hits_at if int(k) < 1]
        if bad_k or not hits_at:
            raise InputError(f"hits@k needs positive integers k, got {list(hits_at)}")
        self.dataset = dataset
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.filter_sets = [name for name in known_sets if name in filter_sets]
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
        # an undirected relation's edge is stored in one orientation: both are known answers
        self.undirected = list(dataset.undirected_relations) if self.filter_sets else []
        known_triples = with_reverses(known_triples, [dataset.relation_labels.index(label) for label in self.undirected])

        def build(side: str) -> Callable[[], FilterIndex]:
            return lambda: FilterIndex.build(known_triples, dataset.num_relations, side, self.device)

        started = time.perf_counter()
        if known_triples.shape[0] >= LARGE_FILTER_TRIPLES:
            stage("filter index of %d known triples (built once, then read from the dataset cache)",
                  known_triples.shape[0])
        # the cache entry is keyed by the split files, not split_info.json: the relations name the index
        undirected_key = hashlib.sha256("\n".join(self.undirected).encode("utf-8")).hexdigest()[:12]
        variant = [*self.filter_sets, *([f"undirected{undirected_key}"] if self.undirected else [])]
        self.filters = {side: cached_filter_index(dataset, variant, side, build(side)).to(self.device)
                        for side in QUERY_SIDES}
        self.filter_seconds = time.perf_counter() - started  # built, or read from the dataset cache
        if candidates not in CANDIDATE_MODES:
            raise InputError(f"unknown candidates mode {candidates!r}; expected one of {', '.join(CANDIDATE_MODES)}")
        self.candidates = candidates
        self.sides, self.relation_scope, self.entity_scope = _scope(dataset, sides, scope_relations, scope_entities)
        # an inductive split's candidates: the inference graph's entities (ILPC's protocol)
        self.inference_scope = self.entity_scope is None and dataset.inductive
        if self.inference_scope:
            self.entity_scope = dataset.inference_entities().tolist()
        self.sampled_negatives = sampled_negatives
        if sampled_negatives is not None:
            if self.filter_sets:
                raise InputError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                                 f"definition): {option('filter_sets')} does not apply")
            if self.relation_scope is not None or self.entity_scope is not None:
                raise InputError(f"the sampled protocol ranks the whole evaluation split: {option('relations')} and "
                                 f"{option('entities')} do not apply")
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

    # -- the queries ----------------------------------------------------------------------
    def evaluation_triples(self) -> torch.Tensor:
        """(T, 3) the triples to rank, on the evaluation device."""
        return self.dataset.triples[self.evaluation_split].to(self.device)

    def distinct(self, triples: torch.Tensor) -> torch.Tensor:
        """(T', 3): the first occurrence of each triple of ``triples`` (T, 3), in their order. A
        repeated evaluation triple would count its query twice (an OGB folder's test.pt may hold
        repeats; split folders drop them when read): each counts once, and a warning says how
        many were removed."""
        if triples.shape[0] < 2:
            return triples
        keys = triples.cpu().numpy()
        _, first = np.unique(keys, axis=0, return_index=True)
        repeats = triples.shape[0] - first.shape[0]
        if not repeats:
            return triples
        message = f"removed {repeats} repeated {self.evaluation_split} triple(s) (each triple counts once)"
        if message not in self.warnings:
            self.warnings.append(message)
            logger.warning(message)
        keep = torch.from_numpy(np.sort(first)).to(triples.device)
        return triples.index_select(0, keep)

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
            raise InputError(f"no evaluation triple lies in the chosen scope ({option('relations')}, "
                             f"{option('entities')})",
                             self.dataset.path)
        return triples

    # -- the candidates -------------------------------------------------------------------
    def filter_pairs(self, batch: torch.Tensor, side: str) -> Filter:
        """Known answers of the batch's ``side`` queries other than the true one, as (rows, cols)."""
        true_ids = true_ids_of(batch, side)
        known_rows, known_cols = self.filters[side].lookup(batch)
        rows, cols = other_known(known_rows, known_cols, true_ids)
        if self.exclude_query_entity:
            query_entity = batch[:, 2] if side == "head" else batch[:, 0]
            batch_rows = torch.arange(batch.shape[0], device=batch.device)
            codes = rows * self.num_entities + cols
            extra = (query_entity != true_ids) & ~torch.isin(batch_rows * self.num_entities + query_entity, codes)
            rows = torch.cat([rows, batch_rows[extra]])
            cols = torch.cat([cols, query_entity[extra]])
        return rows, cols

    def side_candidates(self, batch: torch.Tensor, side: str) -> "SideCandidates":
        """What the ``side`` queries of ``batch`` (B, 3) rank against, computed once per side of a
        batch and passed down to the counting as values (:class:`SideCandidates`)."""
        true_ids = true_ids_of(batch, side)
        filter_pairs = self.filter_pairs(batch, side)
        candidates = candidate_counts(self.num_entities, filter_pairs[0], batch.shape[0])
        exclusion = None
        if self.admitted is not None:
            relations = batch[:, 1]
            unfiltered = self.admitted.excluded_unfiltered(relations, side, true_ids, filter_pairs, self.num_entities)
            candidates = candidates - unfiltered
            exclusion = Exclusion(self.admitted.relation_bits[side][relations][:, None], self.admitted.entity_bits,
                                  float("inf") if self.lower_is_better else float("-inf"), unfiltered)
        return SideCandidates(side, true_ids, filter_pairs, candidates, exclusion)

    # -- what the record says ---------------------------------------------------------------
    def protocol(self) -> Protocol:
        """How the counts were obtained, before what the producer adds."""
        extra: Dict[str, object] = {}
        if self.relation_scope is not None:
            extra["relations"] = [self.dataset.relation_labels[i] for i in self.relation_scope]
        if self.entity_scope is not None:
            labels = "\n".join(self.dataset.entity_labels[i] for i in self.entity_scope)
            extra["entities"] = {"count": len(self.entity_scope), "dropped_triples": self.scope_dropped,
                                 "sha256": hashlib.sha256(labels.encode("utf-8")).hexdigest(),
                                 **({"of": "the inference graph"} if self.inference_scope else {})}
        sides = len(self.sides)
        candidates = self.candidates
        if self.sampled_negatives is not None:
            candidates = "sampled"
            extra["negatives_per_query"] = self.sampled_negatives.description()
        if self.undirected:
            extra["undirected_relations"] = list(self.undirected)  # filtered in both orientations
        if self.dataset.split is not None:  # the question the split asks (an entity-held-out split)
            extra["split"] = dict(self.dataset.split)
        return Protocol(filter_sets=list(self.filter_sets), hits_at=list(self.hits_at), candidates=candidates,
                        sides=list(self.sides), exclude_query_entity=self.exclude_query_entity,
                        lower_is_better=self.lower_is_better,
                        dropped_queries=sides * (self.dataset.dropped.get(self.evaluation_split, 0)
                                                 + self.scope_dropped),
                        evaluation_split=self.evaluation_split, extra=extra)

    def dataset_description(self) -> dict:
        """What a record says of the dataset: path, fingerprint, id-map hash, counts, registry entry."""
        described = {"path": self.dataset.path, "fingerprint": self.dataset.fingerprint,
                     "id_map_sha256": self.dataset.id_map_sha256, "counts": self.dataset.counts(),
                     "registry": self.dataset.registry}
        made_by = getattr(self.dataset, "made_by", None)
        if made_by:
            described["made_by"] = made_by
        time_cut = getattr(self.dataset, "time_cut", None)
        if time_cut:
            described["time_cut"] = dict(time_cut)
        return described

    def warn(self, message: str) -> None:
        """Record ``message`` in the result (once) and log it."""
        if message not in self.warnings:
            self.warnings.append(message)
            logger.warning(message)

    def nan_error(self, index: int, detail: str, side: Optional[str], overflowed=None) -> ScoreError:
        """The error of a NaN score in the ``side`` query of evaluation triple ``index``;
        ``overflowed``: the dtype of finite embeddings whose keys overflowed into NaN (inf - inf)."""
        h, r, t = self.dataset.triples[self.evaluation_split][index].tolist()
        labels = self.dataset.entity_labels, self.dataset.relation_labels
        triple = f"({labels[0][h]}, {labels[1][r]}, {labels[0][t]})"
        shown = f"{side} " if side else ""
        where = f"{detail} in the scores of {shown}query #{index} of the {self.evaluation_split} split {triple}"
        if overflowed is not None:
            return ScoreError(f"{where}: the embeddings' values are finite, so a key overflowed their precision "
                              f"({overflowed}) and became NaN (inf - inf); give the embeddings as float64, or "
                              "rescale them")
        return ScoreError(f"{where}; NaN cannot be ranked: fix the model or its inputs")


def _scope(dataset: Dataset, sides: Sequence[str], relations: Optional[Sequence[str]],
           entities: Optional[Sequence[str]]):
    """(sides in order, relation ids or None, entity ids or None); unknown names are an InputError
    listing them (and, for relations, the dataset's)."""
    chosen_sides = [side for side in QUERY_SIDES if side in sides]
    if not chosen_sides or any(side not in QUERY_SIDES for side in sides):
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
        # an Enum's physical code is the label's position in the id-ordered list: its id
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
