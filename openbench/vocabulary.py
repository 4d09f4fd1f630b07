"""openbench's vocabulary, defined once and importable without torch: the splits, query sides,
rank types and tasks every stage speaks of, and the names the registries answer to (the CLI builds
its ``click.Choice`` lists and ``--help`` from here). Each heavy registry checks at import that its
keys are exactly these (:func:`check_names`), so a list here cannot drift from what works."""
from __future__ import annotations

from typing import Dict, Iterable

__all__ = ["SPLITS", "FILTER_SETS", "QUERY_SIDES", "SIDES", "RANK_TYPES", "SCORERS", "MODEL_SOURCES", "CANDIDATE_MODES", "SHARDS",
           "COMPLEX_LAYOUTS", "check_names"]

SPLITS = ("train", "valid", "test")
# what a filter may hold: the splits, and an inductive split's inference graph
FILTER_SETS = SPLITS + ("inference",)
QUERY_SIDES = ("head", "tail")  # head queries (?, r, t) and tail queries (h, r, ?)
SIDES = ("both",) + QUERY_SIDES  # what metrics are reported for: both sides together, or one
RANK_TYPES = ("realistic", "optimistic", "pessimistic")

# score functions of embedding arrays (openbench.models.scorers.SCORERS)
SCORERS: Dict[str, str] = {
    "TransE-L1": "-‖h + r - t‖₁",
    "TransE-L2": "-‖h + r - t‖₂",
    "DistMult": "Σ h ∘ r ∘ t",
    "ComplEx": "Re Σ h ∘ r ∘ conj(t)",
    "RotatE": "-‖h ∘ r - t‖₂, |r| = 1",
    "RotatE-DGLKE": "-Σ_k |h_k r_k - t_k| (DGL-KE)",
    "RESCAL": "hᵀ M_r t",
    "SimplE": "½ Σ (h_head ∘ r ∘ t_tail + t_head ∘ r⁻¹ ∘ h_tail)",
}

# what openbench evaluates (openbench.models.sources.SOURCES), in detection order
MODEL_SOURCES: Dict[str, str] = {
    "embeddings": "entity and relation .npy arrays with a score function (--entity-embeddings, "
                  "--relation-embeddings, --model)",
    "arrays": "a folder of entities.npy and relations.npy, openbench train's or the demo's (--model-dir; the score "
              "function from its openbench-model.json or --model; no pickle)",
    "pyg": "a PyTorch Geometric KGE model folder (openbench-pyg.json, model.pt: openbench.save_pyg; --model-dir, "
           "read weights-only, no pickle)",
    "pykeen": "a PyKEEN model folder (trained_model.pkl; --model-dir, --trust-pickle)",
    "dglke": "a DGL-KE checkpoint (config.json, <dataset>_<model>_entity.npy; --model-dir, --dglke-data)",
    "libkge": "a LibKGE checkpoint (checkpoint_best.pt; --model-dir, --libkge-data)",
    "anyburl": "an AnyBURL/SAFRAN top-k prediction file (--predictions)",
    "obl2021": "an OBL2021 submission, pred_top10 in a .npz (--submission)",
    "popularity": "the popularity baseline: each candidate scored by its training degree within the query's "
                  "relation and side, how often it answers that relation on that side in training (--model "
                  "popularity, no embeddings)",
    "rules": "the leakage baseline: answers implied by the training triples' symmetric, inverse and duplicate "
             "relations first, then popularity (--model rules, no embeddings)",
    "neighbours": "the structure baseline: each candidate scored by how many of the query entity's training "
                  "neighbours it answers under the query's relation, then popularity (--model neighbours, no "
                  "embeddings)",
    "scores": "any model's predictions as a table of scores (--scores: Parquet, a Spark folder of part-files, "
              "CSV/TSV, a dense .npy, TxGNN's pickled results) or a ranked list of names (--ranked-list with "
              "--names); unlisted candidates rank below every scored one, tied",
}
POPULARITY = "popularity"  # --model popularity: the baseline, not a score function of embeddings
RULES = "rules"  # --model rules: what the audit's leakage patterns alone score
NEIGHBOURS = "neighbours"  # --model neighbours: what the training graph's structure alone scores

CANDIDATE_MODES = ("all", "typed")
SHARDS = ("queries", "entities")
COMPLEX_LAYOUTS = ("halves", "interleaved")


def check_names(registry: str, names: Iterable[str], expected: Iterable[str]) -> None:
    """Raise at import time when a registry and its catalog list differ."""
    names, expected = list(names), list(expected)
    if names != expected:
        raise RuntimeError(f"the {registry} registry ({names}) differs from openbench.vocabulary ({expected})")
