"""Evaluating truncated rankings: AnyBURL/SAFRAN prediction files and OBL2021 submissions.

These tools hand over only the best few candidates of each query, not a score per entity, so a
true answer outside the list gets no credit (reciprocal rank 0, no hit) and the MRR is a lower
bound of the full-ranking MRR (spec evaluators.md P13). Every one of the 2T tasks of the
evaluation split counts in the denominator, also those the file does not list (P17).

* **AnyBURL/SAFRAN** (three lines per triple: ``h r t`` / ``Heads: e<TAB>conf<TAB>…`` /
  ``Tails: …``): the listed candidates are re-filtered with openbench's own index (other known
  answers leave the list; the query entity too with ``exclude_query_entity``, which SAFRAN itself
  always does), then the true answer is ranked among what remains by confidence, ties counted as
  everywhere else (optimistic, realistic, pessimistic). A full list whose last confidence equals
  the true answer's is a tie at the cut-off: the tie block may continue past the list, so the
  rank is reported as listed and the case is counted.
* **OBL2021** (``pred_top10`` (2T, 10) integer ids, tail queries first): exactly as OBL2021
  defines it, without re-filtering (the participant's job): hits@k = the true id among the first k,
  MRR = 1 / its position, else 0. A row repeating an id is refused.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from openbench.errors import InputError, UsageError, option
from openbench.evaluation.producers.base import Producer
from openbench.evaluation.counting.counts import RankCounts
from openbench.evaluation.candidates import RankingSetup
from openbench.models.lists import OBL2021Submission, TopKLists
from openbench.record import Protocol
from openbench.vocabulary import QUERY_SIDES

__all__ = ["QUERY_CHUNK", "TopKListing", "OBL2021Listing", "ServedListing", "obl2021_counts", "listed_counts",
           "LISTS_SCORE_NOTHING", "is_ranked_lists"]

QUERY_CHUNK = 4096
LISTS_SCORE_NOTHING = ("--task classification needs a model that scores any given triple (embeddings, --model-dir); "
                       "top-k prediction lists give no score to triples outside the lists")


def is_ranked_lists(model) -> bool:
    """Whether ``model`` is ranked lists (top-k files, an OBL2021 submission, a hosted benchmark's
    lists, or their producers), which score no triple outside the lists."""
    from openbench.models.lists import ServedLists

    return isinstance(model, (TopKLists, OBL2021Submission, ServedLists, TopKListing, OBL2021Listing, ServedListing))


class TopKListing(Producer):
    """Ranks from an AnyBURL/SAFRAN file's listed candidates (see the module docstring)."""

    model_name = "AnyBURL/SAFRAN predictions"
    model_kind = "topk"

    def __init__(self, lists: TopKLists):
        self.lists = lists
        self.stats: Dict[str, int] = {}

    def refuse(self, given: dict) -> None:
        """A list ranks what it lists: an entity scope, typed candidates or distances do not apply."""
        if given.get("scope_entities") is not None:
            raise UsageError(f"{option('entities')} restricts the candidates a model scores; top-k prediction files "
                             f"rank only what they list: use {option('relations')} or {option('sides')} to scope them")
        if given.get("candidates") not in (None, "all"):
            raise UsageError(f"{option('candidates', given['candidates'])}: top-k prediction files rank only what "
                             "they list")
        if given.get("lower_is_better"):
            raise UsageError(f"{option('lower_is_better')}: top-k prediction files give confidences, higher is better")

    def setup_defaults(self) -> dict:
        """The query entity excluded from the candidates: SAFRAN never proposes it."""
        return {"exclude_query_entity": True}

    def setup_options(self) -> dict:
        """Lists are counted on the CPU, without a progress bar (there is nothing to wait for)."""
        return {"device": "cpu", "progress": False}

    def bind(self, setup: RankingSetup) -> None:
        """Refuse the sampled protocol: a list ranks what it lists."""
        if setup.sampled_negatives is not None:
            raise UsageError("top-k prediction files rank what they list: the sampled protocol does not apply")

    def model_description(self) -> dict:
        """The file's longest list and sha256."""
        return {"name": self.model_name, "kind": self.model_kind,
                "params": {"list_length": self.stats.get("list_length", 0)},
                "source_sha256": self.lists.source_sha256()}

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """Counts from the listed candidates: ``n_greater`` (T,) float64, +inf where the answer is
        not listed (see :class:`RankCounts`); ``n_equal`` and ``n_candidates`` (T,) int64."""
        keys = [tuple(row) for row in triples.tolist()]
        split_keys = {tuple(row) for row in setup.dataset.triples[setup.evaluation_split].tolist()}  # scope aside
        extra = [key for key in self.lists.listings if key not in split_keys]
        if extra:
            h, r, t = extra[0]
            labels = setup.dataset.entity_labels, setup.dataset.relation_labels
            raise InputError(f"{len(extra)} triple(s) of the prediction file are not in the {setup.evaluation_split} "
                             f"split (first: {labels[0][h]} {labels[1][r]} {labels[0][t]}); wrong dataset?",
                             self.lists.source)
        length = max((len(listing[side][0]) for listing in self.lists.listings.values() for side in ("head", "tail")),
                     default=0)
        self.stats = {"list_length": length,
                      "missing_from_file": sum(1 for key in keys if key not in self.lists.listings)}
        counts = {side: self._count_side(setup, triples, keys, side, length) for side in ("head", "tail")}
        for name in ("not_listed", "tie_at_cutoff"):
            self.stats[name] = sum(self.stats.pop(f"{side}.{name}") for side in ("head", "tail"))
        if any(k > length for k in setup.hits_at):
            setup.warnings.append(f"hits@k for k > {length} (the longest list) cannot reward anything past the list")
        if self.stats["tie_at_cutoff"]:
            setup.warnings.append(f"{self.stats['tie_at_cutoff']} true answer(s) tie with the last entry of a full "
                                  "list; the tie may continue past the cut-off, so their ranks are optimistic")
        return counts

    def adjust(self, protocol: Protocol) -> Protocol:
        """Listed candidates, re-filtered; the MRR a lower bound; what was not listed, counted."""
        protocol.candidates = "listed (top-k)"
        protocol.extra.update(mrr_is_lower_bound=True, refiltered=True,
                              **{key: value for key, value in self.stats.items() if key != "list_length"})
        return protocol

    def _count_side(self, setup: RankingSetup, triples: torch.Tensor, keys: List[tuple], side: str,
                    length: int) -> RankCounts:
        n = len(keys)
        greater = np.full(n, np.inf)
        equal = np.zeros(n, dtype=np.int64)
        candidates = np.full(n, setup.num_entities, dtype=np.int64)
        not_listed = tie_at_cutoff = 0
        true_column = 0 if side == "head" else 2
        for start in range(0, n, QUERY_CHUNK):
            batch = triples[start:start + QUERY_CHUNK]
            rows, cols = setup.filter_pairs(batch, side)
            removed = set((rows * setup.num_entities + cols).tolist())
            candidates[start:start + len(batch)] -= np.bincount(rows.numpy(), minlength=len(batch))
            for offset, key in enumerate(keys[start:start + len(batch)]):
                listing = self.lists.listings.get(key)
                true_id = key[true_column]
                if listing is None:
                    not_listed += 1
                    continue
                ids, confidences = listing[side]
                keep = np.array([offset * setup.num_entities + int(c) not in removed for c in ids], dtype=bool)
                ids, confidences = ids[keep], confidences[keep]
                where = np.flatnonzero(ids == true_id)
                if len(where) == 0:
                    not_listed += 1
                    continue
                true_confidence = confidences[where[0]]
                others = np.delete(confidences, where[0])
                greater[start + offset] = float(np.sum(others > true_confidence))
                equal[start + offset] = int(np.sum(others == true_confidence))
                full = len(listing[side][0]) == length and length > 0
                if full and listing[side][1][-1] == true_confidence:
                    tie_at_cutoff += 1
        self.stats[f"{side}.not_listed"] = not_listed
        self.stats[f"{side}.tie_at_cutoff"] = tie_at_cutoff
        return RankCounts(torch.from_numpy(greater), torch.from_numpy(equal), torch.from_numpy(candidates))


def obl2021_counts(predictions: np.ndarray, test: torch.Tensor, num_entities: int,
                   path: Optional[Path] = None) -> Tuple[RankCounts, RankCounts]:
    """(head, tail) counts from OBL2021's tail-then-head rows: position p of the true id gives
    ``n_greater = p`` (no ties: the order is the submitter's); not listed gives +inf."""
    tasks = test.shape[0]
    if predictions.shape[0] != 2 * tasks:
        raise InputError(f"expected {2 * tasks} rows (tail predictions for the {tasks} test triples, then head "
                         f"predictions), found {predictions.shape[0]}", path)
    if predictions.size and (predictions.min() < 0 or predictions.max() >= num_entities):
        raise InputError(f"entity ids must lie in [0, {num_entities})", path)
    ordered = np.sort(predictions, axis=1)
    repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if len(repeated):
        raise InputError(f"row {int(repeated[0])} lists an entity twice; each row must hold distinct ids", path)
    truths = {"tail": test[:, 2].numpy(), "head": test[:, 0].numpy()}
    counts = {}
    for side, rows in (("tail", predictions[:tasks]), ("head", predictions[tasks:])):
        match = rows == truths[side][:, None]
        position = np.where(match.any(axis=1), match.argmax(axis=1).astype(np.float64), np.inf)
        counts[side] = RankCounts(torch.from_numpy(position), torch.zeros(tasks, dtype=torch.long),
                                  torch.full((tasks,), num_entities, dtype=torch.long))
    return counts["head"], counts["tail"]


class OBL2021Listing(Producer):
    """An OBL2021 submission against the test triples of the integer-id layout."""

    model_name = "OBL2021 submission"
    model_kind = "obl2021"

    def refuse(self, given: dict) -> None:
        """OBL2021 scores the whole test split as submitted: the submitter filters, and no scope,
        side or candidate option applies."""
        if given.get("filter_sets") is not None:
            raise UsageError(f"OBL2021 submissions are filtered by the submitter; {option('filter_sets')} does not "
                             "apply")
        if given.get("scope_relations") is not None or given.get("scope_entities") is not None or \
                list(given.get("sides") or QUERY_SIDES) != list(QUERY_SIDES):
            raise UsageError(f"an OBL2021 submission is scored on the whole test split: {option('relations')}, "
                             f"{option('sides')} and {option('entities')} do not apply")

    def setup_options(self) -> dict:
        """On the CPU, without filter sets: the submitter filters, OBL2021 scores the order as given."""
        return {"device": "cpu", "filter_sets": [], "progress": False, "candidates": "all", "lower_is_better": False,
                "exclude_query_entity": False}

    def __init__(self, submission: OBL2021Submission):
        self.submission = submission
        self.not_listed = 0

    def model_description(self) -> dict:
        """The submission's list length and sha256."""
        return {"name": self.model_name, "kind": self.model_kind,
                "params": {"list_length": self.submission.predictions.shape[1]},
                "source_sha256": self.submission.source_sha256()}

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """Counts from the submitted order (see :func:`obl2021_counts`), each (T,)."""
        head, tail = obl2021_counts(self.submission.predictions, triples, setup.num_entities, self.submission.source)
        self.not_listed = int(torch.isinf(head.n_greater).sum() + torch.isinf(tail.n_greater).sum())
        return {"head": head, "tail": tail}

    def adjust(self, protocol: Protocol) -> Protocol:
        """OBL2021's definition: the submitted order is the rank, no re-filtering."""
        protocol.candidates = "listed (OBL2021 top-10, order as submitted)"
        protocol.tie_rule = "none visible: the submitted order is the rank"
        protocol.extra.update(mrr_is_lower_bound=True, refiltered=False, not_listed=self.not_listed)
        return protocol


def listed_counts(lists: np.ndarray, true_ids: np.ndarray, known: Tuple[torch.Tensor, torch.Tensor],
                  num_entities: int, excluded: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> RankCounts:
    """Counts of ranked lists with the other known answers filtered out.

    :param lists: (n, k) int64 entity ids, best first, distinct within a row.
    :param true_ids: (n,) the answer each row is scored for.
    :param known: (rows (M,), entity ids (M,)): the other known answers of each row's query (the
        answer itself excluded), removed from its list before the answer's position is read.
    :param excluded: None, or (codes (X,) sorted distinct int64 ``key * num_entities + entity``,
        keys (n,) int64 each row's key, its relation): entities known to answer nothing of a row's
        key (a hosted benchmark's anchors of the row's relation), removed from the list and from
        the candidates like known answers. Never the row's answer.
    :returns: ``n_greater`` (n,) float64, the listed entries left before the answer (+inf where it
        is not listed); ``n_equal`` zeros (the order is the rank); ``n_candidates`` (n,) the
        entities less the known answers and the excluded ones.
    """
    rows, cols = (tensor.cpu().numpy() for tensor in known)
    n = len(true_ids)
    greater = np.full(n, np.inf)
    for start in range(0, n, QUERY_CHUNK):
        chunk = lists[start:start + QUERY_CHUNK]
        inside = (rows >= start) & (rows < start + len(chunk))
        known_codes = (rows[inside] - start) * num_entities + cols[inside]
        entries = np.arange(len(chunk))[:, None] * num_entities + chunk
        kept = ~np.isin(entries, known_codes)
        if excluded is not None:
            codes, keys = excluded
            kept &= ~np.isin(keys[start:start + len(chunk), None] * num_entities + chunk, codes)
        match = (chunk == true_ids[start:start + len(chunk), None]) & kept
        listed = match.any(axis=1)
        position = match.argmax(axis=1)
        before: np.ndarray = np.cumsum(kept, axis=1) - kept  # kept entries strictly before each column
        found: np.ndarray = before[np.arange(len(chunk)), position].astype(np.float64)
        greater[start:start + len(chunk)] = np.where(listed, found, np.inf)
    candidates = num_entities - np.bincount(rows, minlength=n)
    if excluded is not None:
        # excluded entities that are not known answers already leave the candidates too
        codes, keys = excluded
        first = np.searchsorted(codes, keys * num_entities)
        last = np.searchsorted(codes, (keys + 1) * num_entities)
        overlap = np.isin(keys[rows] * num_entities + cols, codes)
        candidates = candidates - (last - first) + np.bincount(rows[overlap], minlength=n)
    return RankCounts(torch.from_numpy(greater), torch.zeros(n, dtype=torch.long), torch.from_numpy(candidates))


class ServedListing(Producer):
    """Ranked lists of served queries, scored against the answers only the server knows.

    Each answer is one test triple ranked on the side its query was served; the known answers of
    every split (the query's other test answers included) are filtered out of the list first, so
    the metrics are the filtered ones, truncated at the list length.

    :param answers: (A, 3) the answered test triples; ``tail_side`` (A,) bool, True where the
        triple was served as a tail query ``(h, r, ?)``; ``lists`` (A, k) int64 the submitted list
        of each answer's query.
    :param extra: what the record's protocol adds (the hosted protocol, the part, the counts).
    :param anchors: (relation ids (N,), entity ids (N,)) known to answer nothing of their relation
        (the served queries' anchors): removed from every list of that relation and from its
        candidates, like known answers.
    """

    model_name = "served predictions"
    model_kind = "served"

    def __init__(self, answers: torch.Tensor, tail_side: np.ndarray, lists: np.ndarray, extra: dict,
                 source_sha256: Optional[str] = None, anchors: Optional[Tuple[np.ndarray, np.ndarray]] = None):
        order = np.argsort(tail_side, kind="stable")  # head answers first, then tail answers
        self.answers, self.lists = answers[torch.from_numpy(order)], lists[order]
        self.n_head = int((~tail_side).sum())
        self.sides = [side for side, present in (("head", self.n_head > 0), ("tail", self.n_head < len(order)))
                      if present]
        self.extra, self.source_sha256 = dict(extra), source_sha256
        self.anchors = anchors

    def setup_options(self) -> dict:
        """On the CPU, on the sides the queries were served on."""
        return {"device": "cpu", "sides": self.sides}

    def model_description(self) -> dict:
        """The list length and the upload's sha256."""
        return {"name": self.model_name, "kind": self.model_kind, "params": {"list_length": int(self.lists.shape[1])},
                "source_sha256": self.source_sha256}

    def evaluation_triples(self, setup: RankingSetup) -> torch.Tensor:
        """(A, 3) the answered triples, head answers first."""
        return self.answers

    def side_triples(self, setup: RankingSetup, triples: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Head answers are the first ``n_head`` triples, tail answers the rest."""
        parts = {"head": triples[:self.n_head], "tail": triples[self.n_head:]}
        return {side: parts[side] for side in setup.sides}

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """(A_side,) counts of each side's answers (see :func:`listed_counts`)."""
        counts = {}
        codes = None
        if self.anchors is not None:
            codes = np.unique(self.anchors[0] * setup.num_entities + self.anchors[1])
        for side, rows in (("head", slice(0, self.n_head)), ("tail", slice(self.n_head, None))):
            if side in setup.sides:
                batch = triples[rows]
                excluded = None if codes is None else (codes, batch[:, 1].numpy().astype(np.int64))
                counts[side] = listed_counts(self.lists[rows], batch[:, 0 if side == "head" else 2].numpy(),
                                             setup.filter_pairs(batch, side), setup.num_entities, excluded)
        return counts

    def adjust(self, protocol: Protocol) -> Protocol:
        """Served queries, each ranked list re-filtered with every known answer (and the anchors of
        its relation, where given)."""
        protocol.candidates = "listed (served queries, re-filtered)"
        protocol.tie_rule = "none visible: the submitted order is the rank"
        protocol.extra.update(mrr_is_lower_bound=True, refiltered=True, **self.extra)
        return protocol
