"""A hosted benchmark's query protocol: which test queries are served, in what order, in which part.

The protocol has to leak no test answer *by construction*, whatever a participant does with the
served queries. Serving both ``(h, r, ?)`` and ``(?, r, t)`` for every test triple gives the
answers away: the head queries of a relation name its test tails and the tail queries its test
heads (ranking those first scored MRR 0.84 against 0.11 without them on the sample), and two
lists in any order pair up again. So (``served-v1``):

1. **Each test triple is served as at most one query**, of one side; a query ``(h, r, ?)`` with
   several test tails is served once and each of its answers is ranked with the others filtered.
2. **No served query names an entity that answers a served query of the same relation.** Within
   relation r, entities get one of two roles, *anchor* (named by queries) or *answer*; a triple is
   served when its ends have different roles, as a tail query when the head is the anchor, else as
   a head query. The roles are a 2-colouring of the graph of r's test triples: each connected
   component is coloured by breadth-first search; a component with an odd cycle (only possible
   where heads and tails share entities, as in protein-protein interactions) keeps the colouring a
   local search finds, and the triples whose ends got one colour are left out (and counted).
   Self-loops are left out. A component whose triples all run from one colour to the other is
   served as tail queries (a gene-disease relation is served as OGB-LSC's WikiKG90Mv2 serves
   everything: ``(h, r, ?)`` only); any other component is oriented by the server secret.
3. **Everything random comes from the server secret** (32 random bytes made at the first ``serve``
   of the benchmark, kept in the store, never served): the orientation of mixed components, the
   local search's order, the served order of the queries and the split of the queries into
   ``test-dev`` (scores shown at once) and ``test-challenge`` (shown after ``leaderboard reveal``):
   within each relation, its queries in a secret order alternate between the parts from a secret
   first part, so a relation with one served query is no more likely in one part than the other.
4. **What the protocol makes known is worth nothing** (``served-v2``): rule 2 tells everyone that
   an anchor of relation r answers no served query of r, so at scoring every anchor of the query's
   relation is removed from each list like a known answer (and from its candidates). An honest
   list that ranks anchors pays nothing for them, and a list that drops them gains nothing
   (``served-v1`` filtered known answers only: dropping anchors gained up to +49 % MRR on a
   same-type power-law split). The records state no count that depends on the parts (the served
   queries per side are the benchmark's, as public as the queries).
"""
from __future__ import annotations

import hashlib
import hmac
import logging
from collections import deque
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from openbench.vocabulary import QUERY_SIDES

__all__ = ["HOSTED_PROTOCOL", "PARTS", "SIDE_NAMES", "ServedQueries", "serve_queries", "secret_rng"]

logger = logging.getLogger(__name__)

HOSTED_PROTOCOL = "served-v2"
PARTS = ("test-dev", "test-challenge")
SIDE_NAMES = QUERY_SIDES  # ServedQueries.side: 0 a head query (?, r, t), 1 a tail query (h, r, ?)
LOCAL_SEARCH_PASSES = 50


def secret_rng(secret: bytes, purpose: str) -> np.random.Generator:
    """A generator seeded by the secret and what it is for (independent streams, none public)."""
    digest = hmac.new(secret, purpose.encode("utf-8"), hashlib.sha256).digest()
    return np.random.default_rng(np.frombuffer(digest, dtype=np.uint32))


@dataclass
class ServedQueries:
    """The served queries of a benchmark, in served order (row j of a submission ranks query j).

    ``side`` (Q,) int8, 0 for a head query ``(?, r, anchor)``, 1 for a tail query ``(anchor, r,
    ?)``; ``relation`` and ``anchor`` (Q,) int64 ids; ``part`` (Q,) int8 index into :data:`PARTS`;
    the answers of query j are the test triples ``answer_triples[answer_offsets[j]:answer_offsets[j
    + 1]]`` (indices into the test split's rows). ``kept`` and ``test_triples`` map relation ids to
    the number of test triples served and held; ``left_out`` counts self-loops and odd-cycle cuts.
    """

    side: np.ndarray
    relation: np.ndarray
    anchor: np.ndarray
    part: np.ndarray
    answer_offsets: np.ndarray
    answer_triples: np.ndarray
    kept: Dict[int, int]
    test_triples: Dict[int, int]
    left_out: Dict[str, int]

    def __len__(self) -> int:
        return int(self.side.shape[0])

    def anchor_pairs(self) -> tuple:
        """(relation ids (N,), entity ids (N,)) of the distinct anchors of each relation's served
        queries: what rule 2 makes known to be no answer of that relation."""
        pairs = np.unique(np.stack([self.relation, self.anchor], axis=1), axis=0) if len(self) else \
            np.zeros((0, 2), dtype=np.int64)
        return pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)

    def answers_of(self, rows: np.ndarray) -> tuple:
        """(query row (A,), test triple index (A,)) of every answer of the served ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.answer_offsets[rows + 1] - self.answer_offsets[rows]
        query = np.repeat(rows, lengths)
        first = np.repeat(self.answer_offsets[rows], lengths)
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return query, self.answer_triples[first + within]


def serve_queries(test: np.ndarray, secret: bytes) -> ServedQueries:
    """The served queries of the test triples ``test`` (T, 3) int64 under the module's protocol."""
    sides, anchors, triple_ids = [], [], []
    kept: Dict[int, int] = {}
    held: Dict[int, int] = {}
    left_out = {"self_loops": 0, "odd_cycles": 0}
    orientation = secret_rng(secret, "orientation")
    relations = test[:, 1]
    for relation in np.unique(relations).tolist():
        rows = np.flatnonzero(relations == relation)
        held[relation] = len(rows)
        heads, tails = test[rows, 0], test[rows, 2]
        loops = heads == tails
        left_out["self_loops"] += int(loops.sum())
        rows, heads, tails = rows[~loops], heads[~loops], tails[~loops]
        tail_side, cut = _roles(heads, tails, orientation)
        left_out["odd_cycles"] += int((~cut).sum())
        rows, tail_side, heads, tails = rows[cut], tail_side[cut], heads[cut], tails[cut]
        kept[relation] = len(rows)
        sides.append(tail_side.astype(np.int8))
        anchors.append(np.where(tail_side, heads, tails))
        triple_ids.append(rows)
    side = np.concatenate(sides) if sides else np.zeros(0, np.int8)
    anchor = np.concatenate(anchors) if anchors else np.zeros(0, np.int64)
    triple = np.concatenate(triple_ids) if triple_ids else np.zeros(0, np.int64)
    return _grouped(test, side, anchor, triple, secret, kept, held, left_out)


def _grouped(test, side, anchor, triple, secret, kept, held, left_out) -> ServedQueries:
    """One query per (side, relation, anchor), its answers the triples it serves; parts and the
    served order drawn from the secret."""
    relation = test[triple, 1]
    key = np.stack([side.astype(np.int64), relation, anchor], axis=1)
    unique, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    n_queries = unique.shape[0]
    part = np.zeros(n_queries, dtype=np.int8)
    parts_rng = secret_rng(secret, "parts")
    shuffled = parts_rng.permutation(n_queries)
    by_relation = shuffled[np.argsort(unique[shuffled, 1], kind="stable")]  # each relation's queries, shuffled
    starts = np.searchsorted(unique[by_relation, 1], unique[by_relation, 1], side="left")
    relations, first_of = np.unique(unique[by_relation, 1], return_inverse=True)
    first_part = parts_rng.integers(0, len(PARTS), size=len(relations))  # each relation's first part: secret
    part[by_relation] = (np.arange(n_queries) - starts + first_part[first_of.reshape(-1)]) % len(PARTS)
    served = secret_rng(secret, "order").permutation(n_queries)  # served row j is query served[j]
    position = np.empty(n_queries, dtype=np.int64)
    position[served] = np.arange(n_queries)
    row_of_triple = position[inverse]
    order = np.lexsort((triple, row_of_triple))
    counts = np.bincount(row_of_triple, minlength=n_queries)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return ServedQueries(side=unique[served, 0].astype(np.int8), relation=unique[served, 1],
                         anchor=unique[served, 2], part=part[served], answer_offsets=offsets,
                         answer_triples=triple[order].astype(np.int64), kept=kept, test_triples=held,
                         left_out=left_out)


def _roles(heads: np.ndarray, tails: np.ndarray, orientation: np.random.Generator) -> tuple:
    """For one relation's triples (heads, tails (n,), no self-loops): (served as a tail query (n,)
    bool, served at all (n,) bool) from the anchor/answer 2-colouring described in the module."""
    entities, ends = np.unique(np.concatenate([heads, tails]), return_inverse=True)
    n = len(heads)
    head_node, tail_node = ends[:n], ends[n:]
    colour, component = _two_colouring(len(entities), head_node, tail_node, orientation)
    cut = colour[head_node] != colour[tail_node]
    # per component: the colour of its anchors. A component whose cut triples all start in one
    # colour is served as tail queries; the rest by a secret coin
    components = int(component.max()) + 1 if len(component) else 0
    of_triple = component[head_node]
    head_colour = colour[head_node]
    starts_in = np.zeros((components, 2), dtype=np.int64)
    np.add.at(starts_in, (of_triple[cut], head_colour[cut]), 1)
    coin = orientation.integers(0, 2, size=components)
    anchor_colour = np.where(starts_in[:, 1] == 0, 0, np.where(starts_in[:, 0] == 0, 1, coin))
    tail_side = head_colour == anchor_colour[of_triple]
    return tail_side, cut


def _two_colouring(n_nodes: int, head_node: np.ndarray, tail_node: np.ndarray,
                   orientation: np.random.Generator) -> tuple:
    """(colour (N,) int8, component (N,) int64) of the undirected graph of the edges: breadth-first
    parity per component; components with an odd cycle then improved by a local search that
    flips a node while most of its neighbours share its colour (each flip cuts more edges)."""
    adjacency: List[List[int]] = [[] for _ in range(n_nodes)]
    for a, b in zip(head_node.tolist(), tail_node.tolist()):
        adjacency[a].append(b)
        adjacency[b].append(a)
    colour = np.full(n_nodes, -1, dtype=np.int8)
    component = np.full(n_nodes, -1, dtype=np.int64)
    odd: List[List[int]] = []
    label = -1
    for root in range(n_nodes):
        if colour[root] >= 0:
            continue
        label += 1
        colour[root], component[root] = 0, label
        members, queue, conflict = [root], deque([root]), False
        while queue:
            node = queue.popleft()
            for other in adjacency[node]:
                if colour[other] < 0:
                    colour[other], component[other] = 1 - colour[node], label
                    members.append(other)
                    queue.append(other)
                elif colour[other] == colour[node]:
                    conflict = True
        if conflict:
            odd.append(members)
    for members in odd:
        _local_search(members, adjacency, colour, orientation)
    return colour, component


def _local_search(members: List[int], adjacency: List[List[int]], colour: np.ndarray,
                  orientation: np.random.Generator) -> None:
    for _ in range(LOCAL_SEARCH_PASSES):
        flipped = False
        for node in orientation.permutation(np.asarray(members)).tolist():
            same = sum(1 for other in adjacency[node] if colour[other] == colour[node] and other != node)
            if 2 * same > len(adjacency[node]):
                colour[node] = 1 - colour[node]
                flipped = True
        if not flipped:
            return
