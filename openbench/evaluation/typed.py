"""Typed candidates: each query ranks only the entities of a node type its relation admits there.

OpenBioLink ranks every query against all entities, impossible ones included (a GO term as the
tail of GENE_DIS). With ``candidates="typed"`` the head (tail) query of relation r ranks only the
entities whose node type is a head (tail) type of one of r's signatures in
``graphgen/edge_types.py``; node types come from the CURIE prefixes. A relation the registry does
not know keeps all candidates (and the result says so). The true answer is always a candidate.

Counting stays exact: excluded entries of a score block are overwritten with the worst possible
value (-inf, or +inf when lower is better), so they never beat or tie a finite true score; the
rare true score that *is* that value is corrected by the number of excluded entries. Candidate
counts drop the excluded entities that were not already filtered.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from graphgen.edge_types import EDGE_TYPES, NODE_TYPES, PREFIX_TO_NODE_TYPE

__all__ = ["ALL_TYPES", "TypedCandidates"]

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

    def excluded(self, relations: torch.Tensor, side: str, start: int, stop: int,
                 true_ids: torch.Tensor) -> torch.Tensor:
        """(B, stop - start) bool: candidates ``start .. stop - 1`` the queries do not admit."""
        allowed = self.relation_bits[side][relations][:, None] & self.entity_bits[None, start:stop]
        excluded = allowed == 0
        inside = ((true_ids >= start) & (true_ids < stop)).nonzero().squeeze(1)
        excluded[inside, true_ids[inside] - start] = False
        return excluded

    def apply(self, block: torch.Tensor, relations: torch.Tensor, side: str, start: int, true_ids: torch.Tensor,
              lower_is_better: bool) -> None:
        """Overwrite the excluded entries of ``block`` (B, w), candidates from ``start`` on, with the worst value."""
        excluded = self.excluded(relations, side, start, start + block.shape[1], true_ids)
        block.masked_fill_(excluded, float("inf") if lower_is_better else float("-inf"))

    def excluded_unfiltered(self, relations: torch.Tensor, side: str, true_ids: torch.Tensor,
                            filter_pairs: Tuple[torch.Tensor, torch.Tensor], num_entities: int) -> torch.Tensor:
        """(B,) excluded entities per query that are not among its filtered known answers."""
        rows, cols = filter_pairs
        allowed_count = self.allowed_counts[side][relations]
        true_excluded = (self.relation_bits[side][relations] & self.entity_bits[true_ids]) == 0
        excluded = num_entities - allowed_count - true_excluded.to(torch.long)
        filtered_excluded = (self.relation_bits[side][relations[rows]] & self.entity_bits[cols]) == 0
        return excluded - torch.bincount(rows[filtered_excluded], minlength=relations.shape[0])
