"""The inductive split: entities new to the graph, met at test time with the graph around them.

ILPC 2022's layout (pykeen/ilpc2022; PyKEEN's ``DisjointInductivePathDataset`` reads the folder as
it is): a **training graph** (``train.txt``) and a disjoint **inference graph** (``inference.txt``)
of other entities; validation and test triples (``inference_validation.txt``,
``inference_test.txt``) are drawn from the inference graph, so a model trained on the training
graph meets their entities for the first time at test time, reading the inference graph.

* **Inference entities** are chosen seeded as connected regions: from a random entity, breadth
  first through the graph (either direction, any relation), a random part of the last level taken
  to stop at ``inference_fraction`` of the entities; then from another random entity while the
  region's component is exhausted. Both graphs keep their regions' structure; an edge between the
  two entity sets belongs to neither and is dropped (``removed.crossing_edges``).
* The inference graph keeps only **relations the training graph has** (a model has learnt no
  other; ``removed.relations_unseen_in_training``).
* **Validation and test** triples are seeded shares (``val_fraction``, ``test_fraction``) of the
  inference graph's edges, taken out of it, then cleaned against what stays in it as the random
  split cleans against training: reverse edges (directed graphs), the same pair under a parent or
  child relation, copies under a duplicate or inverse relation (the audit's patterns, found in the
  training and inference graphs), and triples with an entity or relation the inference graph
  lacks (PyKEEN drops those silently: here they are removed and counted).

Every file is ``head<TAB>relation<TAB>tail`` without a header, in the text order of (relation,
head, tail); ``split_info.json`` records the kind (``"inductive"``), the parameters with the seed,
the entity and triple counts, every removal and the sha256 of each file.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np
import polars as pl

from openbench._io import check_output_folder, replace_folder
from openbench.errors import InputError
from splits.leakage import categorical_ids, relation_patterns
from splits.random_split import clean_evaluation, distinct_edges, in_file_order

__all__ = ["KIND", "FILES", "grow_regions", "inductive_split"]

logger = logging.getLogger(__name__)

KIND = "inductive"
# ILPC 2022's file names, as PyKEEN's inductive dataset classes read them
FILES = {"train": "train.txt", "inference": "inference.txt", "valid": "inference_validation.txt",
         "test": "inference_test.txt"}


def grow_regions(heads: np.ndarray, tails: np.ndarray, num_entities: int, target: int,
                 rng: np.random.Generator) -> np.ndarray:
    """(E,) bool: ``target`` entities grown as connected regions over the edges (``heads``,
    ``tails``: (N,) entity codes, read in either direction). Breadth first from a random entity;
    the level that would pass ``target`` contributes a random part of itself."""
    from scipy import sparse

    ones = np.ones(2 * heads.shape[0], dtype=np.int8)
    adjacency = sparse.csr_matrix((ones, (np.concatenate([heads, tails]), np.concatenate([tails, heads]))),
                                  shape=(num_entities, num_entities))
    chosen = np.zeros(num_entities, dtype=bool)
    count = 0
    for seed_entity in rng.permutation(num_entities):
        if count >= target:
            break
        if chosen[seed_entity]:
            continue
        chosen[seed_entity] = True
        count += 1
        frontier = np.array([seed_entity])
        while frontier.size and count < target:
            reached = np.unique(adjacency[frontier].indices)
            fresh = reached[~chosen[reached]]
            if fresh.size > target - count:
                fresh = np.sort(rng.choice(fresh, target - count, replace=False))
            chosen[fresh] = True
            count += fresh.size
            frontier = fresh
    return chosen


def _coded(positives: pl.DataFrame):
    """(entity labels sorted, (N,) head codes, (N,) tail codes) of the positives."""
    labels = pl.concat([positives.get_column("id1"), positives.get_column("id2")]).cast(pl.String).unique().sort()
    enum = pl.Enum(labels)
    codes = positives.select(pl.col("id1").cast(pl.String).cast(enum).to_physical().alias("h"),
                             pl.col("id2").cast(pl.String).cast(enum).to_physical().alias("t"))
    return labels, codes.get_column("h").to_numpy().astype(np.int64), codes.get_column("t").to_numpy().astype(np.int64)


def _carve(rows: pl.DataFrame, fractions: Sequence[float], rng: np.random.Generator):
    """(rest, *carved): seeded shares of the rows, each part in the rows' order."""
    order = rng.permutation(rows.height)
    parts, start = [], 0
    for fraction in fractions:
        stop = start + int(round(rows.height * fraction))
        parts.append(rows[np.sort(order[start:stop])])
        start = stop
    return (rows[np.sort(order[start:])], *parts)


def _write_triples(path: Path, frame: pl.DataFrame) -> str:
    """Write ``frame``'s (id1, relation, id2) as ILPC's headerless TSV; returns the file's sha256."""
    in_file_order(frame).select(pl.col("id1").cast(pl.String), "relation", pl.col("id2").cast(pl.String)).write_csv(
        path, include_header=False, separator="\t", quote_style="never")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entities(*frames: pl.DataFrame) -> pl.Series:
    """The distinct entity ids of the frames' id1 and id2 columns, as text."""
    columns = [frame.get_column(c).cast(pl.String) for frame in frames for c in ("id1", "id2")]
    return pl.concat(columns).unique() if columns else pl.Series([], dtype=pl.String)


def inductive_split(positives: pl.DataFrame, output, *, inference_fraction: float = 0.2, val_fraction: float = 0.1,
                    test_fraction: float = 0.1, seed: int = 42, directed: bool = True, inputs: Sequence = (),
                    provenance: Optional[dict] = None) -> dict:
    """Split the positive edges (the split layout's columns, value "1") into ILPC's four files in
    ``output`` (replaced atomically); returns the split info (see the module docstring)."""
    check_output_folder(output, inputs)
    if not 0 < inference_fraction < 1:
        raise InputError(f"--inference-fraction must lie in (0, 1), got {inference_fraction}")
    if not (0 <= val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise InputError(f"--val-fraction {val_fraction} and --test-fraction {test_fraction}: each in [0, 1) "
                         "(test above 0), together below 1")
    rng = np.random.default_rng(seed)
    positives, repeated = distinct_edges(categorical_ids(positives), "positive edge(s)")
    if positives.height == 0:
        raise InputError("the graph has no positive edges: nothing to split", inputs[0] if inputs else None)
    labels, heads, tails = _coded(positives)
    target = int(round(inference_fraction * len(labels)))
    if not 0 < target < len(labels):
        raise InputError(f"--inference-fraction {inference_fraction} of {len(labels)} entities leaves one graph empty")
    inference_mask = grow_regions(heads, tails, len(labels), target, rng)
    head_side, tail_side = inference_mask[heads], inference_mask[tails]
    training = positives.filter(pl.Series(~head_side & ~tail_side))
    inference = positives.filter(pl.Series(head_side & tail_side))
    removed: Dict[str, object] = {"crossing_edges": positives.height - training.height - inference.height}
    trained_relations = training.get_column("relation").unique().implode()
    known = inference.filter(pl.col("relation").is_in(trained_relations))
    removed["relations_unseen_in_training"] = inference.height - known.height
    inference, valid, test = _carve(known, (val_fraction, test_fraction), rng)
    patterns = relation_patterns(pl.concat([training, inference]))
    cleaned_test = clean_evaluation(test, inference, directed, "positives", patterns)
    cleaned_valid = clean_evaluation(valid, inference, directed, "positives", patterns)
    removed["test_cleaning"], removed["val_cleaning"] = cleaned_test.removed, cleaned_valid.removed
    sets = {"train": training, "inference": inference, "valid": cleaned_valid.rows, "test": cleaned_test.rows}
    if sets["test"].height == 0:
        raise InputError("no test triple is left in the inference graph: raise --test-fraction or "
                         "--inference-fraction")
    trained, inferred = _entities(training), _entities(*(sets[name] for name in ("inference", "valid", "test")))
    info: dict = {
        "kind": KIND,
        "parameters": {"seed": seed, "inference_fraction": inference_fraction, "val_fraction": val_fraction,
                       "test_fraction": test_fraction, "directed": directed},
        "input": {"positives": positives.height, "repeated_positives": repeated, "entities": len(labels)},
        "entities": {"train": trained.len(), "inference": inferred.len(),
                     "shared": int(trained.is_in(inferred.implode()).sum())},
        "triples": {name: frame.height for name, frame in sets.items()},
        "removed": removed, "relation_patterns": patterns, **(provenance or {})}

    def fill(staging: Path) -> None:
        info["files"] = {name: {"file": FILES[name], "sha256": _write_triples(staging / FILES[name], frame)}
                         for name, frame in sets.items()}
        (staging / "split_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    replace_folder(output, fill, inputs=inputs, kind="split")
    logger.info("inductive split: %d training and %d inference entities", info["entities"]["train"],
                info["entities"]["inference"])
    return info

