"""DGL-KE checkpoints, read with NumPy (no dgl or dglke import; spec evaluators.md §4, P16).

A checkpoint folder holds ``config.json`` (the training arguments) and
``<dataset>_<model>_entity.npy`` / ``_relation.npy``. The id maps come from the training data
folder: ``entities.dict``/``relations.dict`` (built-in datasets) or ``entities.tsv``/
``relations.tsv`` (user data), ``id<TAB>name`` lines; rows are re-ordered to the dataset's labels,
so a split written in any label order evaluates correctly.

Score functions as DGL-KE defines them, ranked exactly (γ shifts TransE scores uniformly and is
dropped; it matters for RotatE's phases and is taken from config.json, never assumed):

==========  ===================================================  =====================
DGL-KE      score                                                openbench scorer
==========  ===================================================  =====================
TransE_l2   γ - ‖h + r - t‖₂                                     TransE-L2
TransE_l1   γ - ‖h + r - t‖₁                                     TransE-L1
DistMult    Σ h∘r∘t                                              DistMult
ComplEx     Re⟨h, r, conj(t)⟩, [real | imaginary] halves          ComplEx
RESCAL      hᵀ M_r t, M_r = rel[r].view(d, d) row-major          RESCAL (both sides correct;
                                                                 DGL-KE's tail side uses M_rᵀ)
RotatE      γ - Σ_k |h_k e^{iθ_k} - t_k|, θ = rel·π / ((γ+2)/d)  RotatE-DGLKE
SimplE      ½ Σ (h_head∘r∘t_tail + t_head∘r_inv∘h_tail)          SimplE (unclamped; DGL-KE
                                                                 clamps to ±20, making ties)
==========  ===================================================  =====================

TransR      γ - ‖h M_r + r - t M_r‖₁, M_r = projection[r] as a     TransRScorer (candidates
            (entity_dim, relation_dim) row-major matrix            projected per relation)

``--dglke-compat`` reproduces DGL-KE's own evaluator where it departs from these definitions:
RESCAL's tail side scored with M_rᵀ (dglke issue #225), SimplE clamped to ±20; DGL-KE reports
pessimistic ranks (``rank = 1 + #(negatives >= positive)``): compare ``metrics.*.pessimistic``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from openbench.errors import InputError, option
from openbench.datasets.loader import Dataset
from openbench.models.base import RowScorer
from openbench.models.finite import StoredTable
from openbench.datasets.id_maps import index_of_labels, rows_for_labels
from openbench._io import load_npy, read_json
from openbench.models.scorers import RESCAL, EmbeddingScorer, SimplE, build_scorer, file_sha256

__all__ = ["SCORER_OF_MODEL", "PROJECTED", "SIMPLE_CLAMP", "EMB_INIT_EPS", "is_dglke_checkpoint", "read_config",
           "PLURALS", "read_id_map", "load_dglke", "RESCALTransposedTails", "ClampedSimplE", "COMPAT_SCORERS",
           "TransRScorer", "dglke_transr", "dglke_model"]

SCORER_OF_MODEL = {"TransE": "TransE-L2", "TransE_l2": "TransE-L2", "TransE_l1": "TransE-L1", "DistMult": "DistMult",
           "ComplEx": "ComplEx", "RESCAL": "RESCAL", "RotatE": "RotatE-DGLKE", "SimplE": "SimplE"}
PROJECTED = ("TransR",)
SIMPLE_CLAMP = 20.0  # DGL-KE clamps SimplE scores to [-20, 20]
EMB_INIT_EPS = 2.0  # DGL-KE's EMB_INIT_EPS


def is_dglke_checkpoint(folder: Path) -> bool:
    return (Path(folder) / "config.json").is_file() and any(Path(folder).glob("*_entity.npy"))


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    config = read_json(path, "DGL-KE config")
    if not isinstance(config, dict):
        raise InputError("expected a JSON object of DGL-KE's training arguments", path)
    missing = [key for key in ("model_name", "dataset", "hidden_dim", "gamma") if key not in config]
    if missing:
        raise InputError(f"config.json lacks {', '.join(missing)}; expected DGL-KE's saved training arguments", path)
    supported = [*SCORER_OF_MODEL, *PROJECTED]
    if config["model_name"] not in supported:
        raise InputError(f"unknown DGL-KE model {config['model_name']!r}; supported: {', '.join(supported)}", path)
    return config


PLURALS = {"entity": "entities", "relation": "relations"}


def read_id_map(folder: Path, kind: str) -> Dict[str, int]:
    """name -> DGL-KE id from ``entities.dict``/``.tsv`` (``relations.…``): ``id<TAB>name`` lines."""
    stem = PLURALS[kind]
    for name in (f"{stem}.dict", f"{stem}.tsv"):
        if (folder / name).is_file():
            return index_of_labels(folder / name, kind)
    raise InputError(f"no {stem}.dict or {stem}.tsv: give the DGL-KE training data folder "
                     f"({option('dglke_data')})", folder)


def _rows_for(labels: List[str], mapping: Dict[str, int], rows: int, kind: str, where: Path) -> np.ndarray:
    return rows_for_labels(labels, mapping, rows, kind, where, "DGL-KE")


def _expected_widths(config: dict) -> Tuple[int, int]:
    hidden = int(config["hidden_dim"])
    entity = 2 * hidden if config.get("double_ent") else hidden
    relation = 2 * hidden if config.get("double_rel") else hidden
    if config["model_name"] == "RESCAL":
        relation = relation * entity
    return entity, relation


def _reordered(folder: Path, config: dict, dataset: Dataset, data_dir) -> Tuple[dict, dict, np.ndarray]:
    """(arrays by kind in the dataset's order, their paths, the relation rows used) after shape checks."""
    model, name = config["model_name"], config["dataset"]
    paths = {kind: folder / f"{name}_{model}_{kind}.npy" for kind in ("entity", "relation")}
    arrays = {kind: load_npy(path) for kind, path in paths.items()}
    if model in ("RotatE", "ComplEx") and not config.get("double_ent"):
        raise InputError(f"DGL-KE {model} is trained with -de (double_ent: complex entities of 2 x hidden_dim); "
                         "config.json says double_ent is false", folder / "config.json")
    if model == "ComplEx" and not config.get("double_rel"):
        raise InputError("DGL-KE ComplEx is trained with -dr (double_rel); config.json says double_rel is false",
                         folder / "config.json")
    entity_width, relation_width = _expected_widths(config)
    for kind, width in (("entity", entity_width), ("relation", relation_width)):
        array = arrays[kind]
        if array.ndim != 2 or array.shape[1] != width:
            raise InputError(f"expected ({PLURALS[kind]}, {width}) for {model} with hidden_dim "
                             f"{config['hidden_dim']}, "
                             f"double_ent {bool(config.get('double_ent'))}, double_rel "
                             f"{bool(config.get('double_rel'))}; found {array.shape}", paths[kind])
    data = Path(data_dir) if data_dir else folder
    entity_rows = _rows_for(dataset.entity_labels, read_id_map(data, "entity"), arrays["entity"].shape[0], "entity",
                            data)
    relation_rows = _rows_for(dataset.relation_labels, read_id_map(data, "relation"), arrays["relation"].shape[0],
                              "relation", data)
    return ({"entity": arrays["entity"][entity_rows], "relation": arrays["relation"][relation_rows]}, paths,
            relation_rows)


def _description(name: str, config: dict, compat: bool, source: str) -> dict:
    return {"name": name, "kind": "dglke",
            "params": {"dglke_model": config["model_name"], "hidden_dim": int(config["hidden_dim"]),
                       "gamma": float(config["gamma"]), "double_ent": bool(config.get("double_ent")),
                       "double_rel": bool(config.get("double_rel")), "dglke_compat": compat},
            "source_sha256": source}


def load_dglke(folder, dataset: Dataset, data_dir=None, compat: bool = False) -> Tuple[EmbeddingScorer, dict]:
    """(scorer over the dataset's entity/relation order, model description) of a checkpoint.

    :param compat: reproduce DGL-KE's evaluator (RESCAL tail side with M_rᵀ, SimplE clamped).
    """
    folder = Path(folder)
    config = read_config(folder)
    model = config["model_name"]
    if model in PROJECTED:
        raise InputError(f"DGL-KE {model} projects candidates per relation; evaluate it with dglke_transr",
                         folder / "config.json")
    arrays, paths, _ = _reordered(folder, config, dataset, data_dir)
    entities, relations = arrays["entity"], arrays["relation"]
    gamma = float(config["gamma"])
    if model == "RotatE":
        # DGL-KE stores phases scaled by emb_init / π; e^{iθ} as [cos | sin] halves, unit modulus
        phase = relations.astype(np.float64) / ((gamma + EMB_INIT_EPS) / int(config["hidden_dim"]) / math.pi)
        relations = np.concatenate([np.cos(phase), np.sin(phase)], axis=1).astype(entities.dtype)
    scorer = build_scorer(SCORER_OF_MODEL[model], entities, relations, dataset.num_entities, dataset.num_relations,
                          complex_layout="halves", entity_path=paths["entity"], relation_path=paths["relation"])
    if compat and model in COMPAT_SCORERS:
        files, scorer = scorer.table_files, COMPAT_SCORERS[model](scorer.entities, scorer.relations)
        scorer.table_files = files
    return scorer, _description(SCORER_OF_MODEL[model], config, compat, file_sha256(paths["entity"], paths["relation"]))


class RESCALTransposedTails(RESCAL):
    """DGL-KE's evaluator: tail queries scored as (M_r h)·t = hᵀ M_rᵀ t (dglke issue #225)."""

    def query_vectors(self, batch, side):
        """(B, d): M_r h for tail queries (DGL-KE's transposed tail side), M_r t for head queries."""
        if side == "tail":
            return torch.bmm(self.relations[batch[:, 1]], self.entities[batch[:, 0]].unsqueeze(2)).squeeze(2)
        return super().query_vectors(batch, side)

    def query_formula(self, anchor, relation, side, sub):
        """M_r h (tail) or M_r t (head) per row, as :meth:`query_vectors` (exact ranks)."""
        return np.matmul(relation, anchor[:, :, None])[:, :, 0]


class ClampedSimplE(SimplE):
    """DGL-KE's SimplE: scores clamped to [-20, 20] (ties at the clamp). The clamp is outside
    the formulas exact ranks re-score, so these scores are ranked as computed (float32)."""

    exact_keys = False

    def score_chunk(self, queries, side, start, stop, out=None, keys=False):
        """(B, stop - start) SimplE scores clamped to [-20, 20], as DGL-KE's evaluator scores."""
        return super().score_chunk(queries, side, start, stop, out=out).clamp_(-SIMPLE_CLAMP, SIMPLE_CLAMP)


COMPAT_SCORERS = {"RESCAL": RESCALTransposedTails, "SimplE": ClampedSimplE}


class TransRScorer(RowScorer):
    """DGL-KE's TransR: score(h, r, t) = -‖h M_r + r - t M_r‖₁ (γ dropped), M_r (d_e, d_r).

    Candidates are projected per relation, so the evaluation walks the triples grouped by relation
    (:meth:`order`) and projects all entities once per group and side: (E, d_e) @ (d_e, d_r).

    :param entities: (E, d_e); ``relations`` (R, d_r); ``projections`` (R, d_e, d_r), dataset order.
    """

    kind = "embeddings"

    def __init__(self, entities: torch.Tensor, relations: torch.Tensor, projections: torch.Tensor, description: dict):
        super().__init__(entities.shape[0])
        self.entities, self.relations, self.projections = entities, relations, projections
        self._description = description
        self.name = description["name"]
        self._projected: Tuple[int, Optional[torch.Tensor]] = (-1, None)

    def to(self, device: torch.device) -> "TransRScorer":
        """The tables on ``device``."""
        self.device = device
        self.entities, self.relations = self.entities.to(device), self.relations.to(device)
        self.projections = self.projections.to(device)
        self._projected = (-1, None)
        return self

    def description(self) -> dict:
        """DGL-KE's model name and training arguments, and the files' sha256."""
        return dict(self._description)

    def stored_tables(self) -> list:
        """The entity (E, d_e), relation (R, d_r) and projection (R, d_e, d_r) tables (every value
        must be finite: :mod:`openbench.models.finite`)."""
        return [StoredTable("entity embeddings", self.entities, "entity"),
                StoredTable("relation embeddings", self.relations, "relation"),
                StoredTable("TransR projections", self.projections, "relation")]

    def _projected_entities(self, relation: int) -> torch.Tensor:
        cached_relation, projected = self._projected
        if cached_relation != relation or projected is None:
            projected = self.entities @ self.projections[relation]
            self._projected = (relation, projected)
        return projected

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) ``side`` scores of ``batch`` (B, 3), relation by relation."""
        scores = torch.empty((batch.shape[0], self.num_entities), dtype=self.entities.dtype, device=self.device)
        for relation in torch.unique(batch[:, 1]).tolist():
            rows = (batch[:, 1] == relation).nonzero().squeeze(1)
            projected = self._projected_entities(relation)  # (E, d_r)
            offset = self.relations[relation]
            if side == "tail":
                queries = projected[batch[rows, 0]] + offset  # h M_r + r, against t M_r
            else:
                queries = projected[batch[rows, 2]] - offset  # t M_r - r, against h M_r
            scores[rows] = -torch.cdist(queries, projected, p=1.0)
        return scores

    def order(self, triples: torch.Tensor) -> torch.Tensor:
        """(T, 3) the triples grouped by relation: one projection per relation and side."""
        return triples[torch.argsort(triples[:, 1], stable=True)]


def dglke_transr(folder, dataset: Dataset, data_dir=None) -> TransRScorer:
    """The scorer of a DGL-KE TransR checkpoint (``<dataset>_TransRprojection.npy`` beside it)."""
    folder = Path(folder)
    config = read_config(folder)
    arrays, paths, relation_rows = _reordered(folder, config, dataset, data_dir)
    projection_path = folder / f"{config['dataset']}_TransRprojection.npy"
    projection = load_npy(projection_path)
    entity_width, relation_width = _expected_widths(config)
    if projection.ndim != 2 or projection.shape[1] != entity_width * relation_width:
        raise InputError(f"expected (relations, {entity_width} x {relation_width}) projection matrices; found "
                         f"{projection.shape}", projection_path)
    if projection.shape[0] <= int(relation_rows.max()):
        raise InputError(f"the relation map points at row {int(relation_rows.max())} but the projection has "
                         f"{projection.shape[0]} rows", projection_path)
    projections = projection[relation_rows].reshape(-1, entity_width, relation_width)
    dtype = torch.float64 if arrays["entity"].dtype == np.float64 else torch.float32
    description = _description("TransR", config, False, file_sha256(paths["entity"], paths["relation"],
                                                                     projection_path))
    return TransRScorer(torch.as_tensor(arrays["entity"], dtype=dtype), torch.as_tensor(arrays["relation"], dtype=dtype),
                        torch.as_tensor(projections, dtype=dtype), description)


def dglke_model(folder, dataset: Dataset, data_dir=None, compat: bool = False):
    """The scorer of a DGL-KE checkpoint: TransR's (:func:`dglke_transr`), or an embedding scorer
    carrying the checkpoint's training arguments and files' sha256."""
    if read_config(Path(folder))["model_name"] in PROJECTED:
        return dglke_transr(folder, dataset, data_dir)
    scorer, description = load_dglke(folder, dataset, data_dir, compat=compat)
    return scorer.described(description["params"], description["source_sha256"])
