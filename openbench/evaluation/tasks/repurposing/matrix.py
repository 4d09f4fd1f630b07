"""The drug × disease matrix of a dataset (:func:`define_matrix`): its drugs and diseases, from the
node types of the treats relations' ends or curated lists, and its pairs per split (codes
``row * S + col``): known positives, test pairs and known negatives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench.errors import InputError, UsageError, option
from openbench.evaluation.counting.matrix import MatrixSpec
from openbench.evaluation.tasks.repurposing.options import DRUG_WORDS, SPLIT_NAMES, RepurposingOptions

__all__ = ["node_type", "Matrix", "define_matrix"]


def node_type(label: str) -> Optional[str]:
    """An entity's node type from its label: ``type::...`` (PrimeKG, Hetionet, DRKG as openbench
    converts them) or an OpenBioLink CURIE prefix; None when the label says none."""
    if "::" in label:
        return label.split("::", 1)[0]
    if ":" in label:
        from graphgen.edge_types import PREFIX_TO_NODE_TYPE

        return PREFIX_TO_NODE_TYPE.get(label.split(":", 1)[0])
    return None


def _drug_like(kind: Optional[str]) -> bool:
    return kind is not None and any(word in kind.lower() for word in DRUG_WORDS)


# -- the matrix -----------------------------------------------------------------------------------

@dataclass
class Matrix:
    """The drug × disease matrix of a dataset and its pairs (codes ``row * S + col``)."""

    drugs: np.ndarray  # (D,) entity ids, sorted
    diseases: np.ndarray  # (S,) entity ids, sorted
    spec: MatrixSpec
    pairs: Dict[str, np.ndarray]  # split -> (N,) sorted unique codes of the treats relations' pairs
    negatives: Dict[str, np.ndarray]  # split -> codes of the negative relations' pairs
    description: dict
    outside: Dict[str, np.ndarray]  # split -> (M, 3) treats triples with an end outside the matrix

    @property
    def width(self) -> int:
        return int(self.diseases.shape[0])

    @property
    def size(self) -> int:
        return int(self.drugs.shape[0]) * self.width

    def rows_cols(self, codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        return codes // self.width, codes % self.width


def _relation_ids(dataset, labels: Sequence[str], what: str) -> List[int]:
    index = {label: i for i, label in enumerate(dataset.relation_labels)}
    unknown = [label for label in labels if label not in index]
    if unknown:
        import difflib

        hints = [hint for label in unknown for hint in difflib.get_close_matches(label, index, n=1)]
        shown = ", ".join(sorted(index)[:30]) + (" ..." if len(index) > 30 else "")
        raise UsageError(f"{what} {', '.join(map(repr, unknown))}: not a relation of the dataset"
                         + (f" (did you mean {', '.join(map(repr, hints))}?)" if hints else "") + f"; it has {shown}")
    return [index[label] for label in labels]


def _triples_of(dataset, relation_ids: Sequence[int]) -> Dict[str, torch.Tensor]:
    chosen = torch.tensor(list(relation_ids), dtype=torch.long)
    out = {}
    for split in SPLIT_NAMES:
        triples = dataset.triples.get(split, torch.empty((0, 3), dtype=torch.long))
        out[split] = triples[torch.isin(triples[:, 1], chosen)] if triples.shape[0] else triples
    return out


def _listed(dataset, labels: Sequence[str], what: str) -> np.ndarray:
    """Entity ids of a curated list (labels), unknown labels refused with their position."""
    index = {label: i for i, label in enumerate(dataset.entity_labels)}
    unknown = [(position, label) for position, label in enumerate(labels, 1) if label not in index]
    if unknown:
        shown = "; ".join(f"line {position}: {label!r}" for position, label in unknown[:5])
        raise InputError(f"{len(unknown)} {what} of the list are not entities of the dataset ({shown}"
                         f"{' ...' if len(unknown) > 5 else ''})")
    ids = np.unique(np.array([index[label] for label in labels], dtype=np.int64))
    if ids.size == 0:
        raise InputError(f"the {what} list is empty")
    return ids


def _ends(dataset, triples: Dict[str, torch.Tensor]) -> np.ndarray:
    every = torch.cat([t for t in triples.values()]) if triples else torch.empty((0, 3), dtype=torch.long)
    return torch.unique(torch.cat([every[:, 0], every[:, 2]])).numpy() if every.shape[0] else np.zeros(0, np.int64)


def define_matrix(dataset, options: RepurposingOptions) -> Matrix:
    """The matrix of ``dataset`` for ``options`` (see the module docstring); one clear error for a
    relation that does not exist, a list of unknown entities, or an empty matrix."""
    if not options.relations:
        raise UsageError(f"the repurposing task needs the treats relation(s): {option('relations')} (e.g. PrimeKG's "
                         "indication, OpenBioLink's DIS_DRUG)")
    treat_ids = _relation_ids(dataset, options.relations, "treats relation")
    negative_ids = _relation_ids(dataset, options.negative_relations, "negative relation")
    overlap = set(treat_ids) & set(negative_ids)
    if overlap:
        raise UsageError(f"{dataset.relation_labels[min(overlap)]!r} is both a treats and a negative relation")
    treats = _triples_of(dataset, treat_ids)
    negatives = _triples_of(dataset, negative_ids)
    labels = dataset.entity_labels
    ends = _ends(dataset, treats)
    if ends.size == 0:
        raise InputError(f"no triple of {', '.join(options.relations)} in the dataset: the matrix would be empty",
                         dataset.path)
    end_types = {int(entity): node_type(labels[int(entity)]) for entity in ends}
    untyped = [entity for entity, kind in end_types.items() if kind is None]
    named_types = {kind for kind in end_types.values() if kind is not None}
    drug_types = sorted(kind for kind in named_types if _drug_like(kind))
    disease_types = sorted(kind for kind in named_types if not _drug_like(kind))
    how: Dict[str, str] = {}
    if options.drugs is not None:
        drugs = _listed(dataset, options.drugs, "drugs")
        how["drugs"] = f"a list of {len(options.drugs)} labels"
    elif untyped or not drug_types:
        raise UsageError("the labels at the ends of the treats relation(s) name no node type that reads as a drug "
                         f"({', '.join(sorted(named_types)) or 'none'}): give the drugs "
                         f"and diseases as lists ({option('drugs')} FILE, {option('diseases')} FILE)")
    else:
        drugs = np.array([i for i, label in enumerate(labels) if node_type(label) in drug_types], dtype=np.int64)
        how["drugs"] = f"every entity of node type {', '.join(drug_types)}"
    if options.diseases is not None:
        diseases = _listed(dataset, options.diseases, "diseases")
        how["diseases"] = f"a list of {len(options.diseases)} labels"
    elif untyped or not disease_types:
        if options.drugs is None:
            raise UsageError("the diseases cannot be told from the node types: give them as a list "
                             f"({option('diseases')} FILE)")
        drug_set = set(drugs.tolist())
        diseases = np.array(sorted(int(e) for e in ends if int(e) not in drug_set), dtype=np.int64)
        how["diseases"] = "the entities at the other end of the treats relation(s)"
    else:
        diseases = np.array([i for i, label in enumerate(labels) if node_type(label) in disease_types],
                            dtype=np.int64)
        how["diseases"] = f"every entity of node type {', '.join(disease_types)}"
    if drugs.size == 0 or diseases.size == 0:
        raise InputError("the drug × disease matrix is empty (no drug or no disease)", dataset.path)
    row_of = np.full(dataset.num_entities, -1, np.int64)
    col_of = np.full(dataset.num_entities, -1, np.int64)
    row_of[drugs], col_of[diseases] = np.arange(drugs.size), np.arange(diseases.size)

    def pairs(triples: torch.Tensor) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes of the pairs, forward (drug at the head) flags, the rows outside the matrix)."""
        heads, tails = triples[:, 0].numpy(), triples[:, 2].numpy()
        forward = (row_of[heads] >= 0) & (col_of[tails] >= 0)
        backward = ~forward & (row_of[tails] >= 0) & (col_of[heads] >= 0)
        rows = np.where(forward, row_of[heads], row_of[tails])
        cols = np.where(forward, col_of[tails], col_of[heads])
        inside = forward | backward
        return rows[inside] * diseases.size + cols[inside], forward[inside], triples.numpy()[~inside]

    split_pairs, split_negatives, outside = {}, {}, {}
    forward_count = backward_count = 0
    scored = treat_ids[0]
    for split in SPLIT_NAMES:
        codes, _, out = pairs(treats[split])
        split_pairs[split], outside[split] = np.unique(codes), out
        scored_triples = treats[split][treats[split][:, 1] == scored]
        _, forward, _ = pairs(scored_triples)
        forward_count += int(forward.sum())
        backward_count += int((~forward).sum())
        split_negatives[split] = np.unique(pairs(negatives[split])[0])
    rows_are_heads = forward_count >= backward_count
    spec = MatrixSpec(torch.from_numpy(drugs), torch.from_numpy(diseases), scored, rows_are_heads)
    description = {"relations": list(options.relations), "score_relation": dataset.relation_labels[scored],
                   "scored_as": "(drug, relation, disease)" if rows_are_heads else "(disease, relation, drug)",
                   "pairs_stored_drug_first": forward_count, "pairs_stored_disease_first": backward_count,
                   "negative_relations": list(options.negative_relations), "drugs": int(drugs.size),
                   "diseases": int(diseases.size), "pairs": int(drugs.size) * int(diseases.size),
                   "drugs_from": how["drugs"], "diseases_from": how["diseases"]}
    return Matrix(drugs, diseases, spec, split_pairs, split_negatives, description, outside)
