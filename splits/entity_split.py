"""The entity-held-out split: edges of entities the model must predict for without having seen
them under the question's relations (zero-shot: a disease with no known treatment, a drug never
seen indicated, an entity new to the graph).

Held-out **test entities** are chosen, seeded, by node type and fraction (among the entities of
that type with an edge of a held-out relation), from a file, or as a subtree of the graph's own
hierarchy relation (the roots and every entity below them); **validation entities** the same way
(a fraction of what is left of the pool, or a file), disjoint from the test entities.

* An edge of a **held-out relation** (``relations``; every relation when none is named: fully
  cold) touching a test entity goes to test, one touching a validation entity (and no test
  entity) to validation. Nothing of a held-out relation touches a held-out entity in training.
* The held-out entities' **other edges** stay in training (TxGNN's main split: a disease keeps
  its genes and phenotypes), unless ``isolate`` drops them (counted).
* ``neighbourhood`` K also drops the training edges of the held-out relations that touch an
  entity within K hops (in the whole graph) of a held-out entity (TxGNN's padding around a disease
  area, which takes its 2-hop subgraph), counted.
* **Leakage removal**: no training edge restates a held-out pair: its reverse under the same
  relation, its copy under a duplicate relation or its reverse under an inverse relation (the
  audit's relation patterns, found in the whole graph), or the same unordered pair under a parent
  or child relation of OpenBioLink's hierarchy; each kind counted.
* Negatives as ``split rand``'s (per meta-edge: true negatives first, then type-constrained
  corruption), drawn per set with the positives of every set known (a test positive is never a
  training negative); true negatives go to the set their edge would go to, and a drawn training
  (validation) negative of a held-out relation that touches a held-out (test) entity is dropped.

The files are ``split rand``'s (``train_sample.csv``, ``val_sample.csv``, ``test_sample.csv``,
negatives, nodes) plus ``heldout_entities.tsv`` (``id<TAB>role``, role test or valid) whose sha256
``split_info.json`` records with the kind (``"entity"``), the selection, the relations, K and every
removal count. Evaluation entities need not occur in training (fully cold): the loader then maps
every entity of the split, and transductive models (one trained row per entity) are refused.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from graphgen.graph_files import SPLIT_COLUMNS
from openbench._io import check_output_folder, replace_folder
from openbench.errors import InputError
from splits.leakage import PARENT, categorical_ids, relation_patterns
from splits.negatives import sample_negatives
from splits.random_split import distinct_edges, per_relation_counts, remove_inconsistent, write_sets

__all__ = ["HELDOUT_FILE", "KIND", "HIERARCHY_DIRECTIONS", "Selection", "hierarchy_subtree", "choose_entities",
           "entity_split"]

logger = logging.getLogger(__name__)

KIND = "entity"
HELDOUT_FILE = "heldout_entities.tsv"
# how a hierarchy relation's edges point: (child, IS_A, parent) as OpenBioLink's, or (parent, r,
# child) as PrimeKG's disease_disease edges as openbench converts them (the build's parent-child)
HIERARCHY_DIRECTIONS = ("child-parent", "parent-child")


class Selection:
    """How held-out entities are chosen: exactly one of ``node_type`` (with ``fraction``),
    ``entities`` (labels) or ``roots`` (with the ``hierarchy_relation`` and its direction)."""

    def __init__(self, node_type: Optional[str] = None, fraction: Optional[float] = None,
                 entities: Optional[Sequence[str]] = None, roots: Optional[Sequence[str]] = None,
                 hierarchy_relation: Optional[str] = None, hierarchy_direction: str = "child-parent"):
        given = [name for name, value in (("--node-type", node_type), ("--entities", entities), ("--subtree", roots))
                 if value]
        if len(given) != 1:
            raise InputError("choose the held-out entities one way: --node-type T --fraction F, --entities FILE or "
                             f"--subtree ROOT (given: {', '.join(given) or 'none'})")
        if node_type and (fraction is None or not 0 < fraction < 1):
            raise InputError(f"--node-type needs --fraction in (0, 1), got {fraction}")
        if roots and not hierarchy_relation:
            raise InputError("--subtree needs --hierarchy-relation (the relation that links a child to its parent)")
        if hierarchy_direction not in HIERARCHY_DIRECTIONS:
            raise InputError(f"--hierarchy-direction {hierarchy_direction!r}: expected one of "
                             f"{', '.join(HIERARCHY_DIRECTIONS)}")
        self.node_type, self.fraction = node_type, fraction
        self.entities = list(entities) if entities else None
        self.roots = list(roots) if roots else None
        self.hierarchy_relation, self.hierarchy_direction = hierarchy_relation, hierarchy_direction

    def describe(self) -> dict:
        if self.node_type:
            return {"by": "node_type", "node_type": self.node_type, "fraction": self.fraction}
        if self.entities:
            return {"by": "entities", "given": len(self.entities)}
        return {"by": "subtree", "roots": list(self.roots or []), "hierarchy_relation": self.hierarchy_relation,
                "hierarchy_direction": self.hierarchy_direction}


def hierarchy_subtree(positives: pl.DataFrame, roots: Sequence[str], relation: str, direction: str) -> List[str]:
    """The roots and every entity below them through ``relation``'s edges (``direction``: whether
    an edge is (child, r, parent) or (parent, r, child)), sorted; breadth-first by joins."""
    edges = positives.filter(pl.col("relation") == relation).select(pl.col("id1").cast(pl.String),
                                                                     pl.col("id2").cast(pl.String))
    if edges.height == 0:
        raise InputError(f"the graph has no {relation!r} edges: no hierarchy to take a subtree of")
    parent, child = ("id2", "id1") if direction == "child-parent" else ("id1", "id2")
    links = edges.select(pl.col(parent).alias("parent"), pl.col(child).alias("child")).unique()
    found = set(roots)
    frontier = pl.DataFrame({"parent": sorted(found)}, schema={"parent": pl.String})
    while frontier.height:
        children = links.join(frontier, on="parent", how="semi").get_column("child").unique().to_list()
        new = sorted(set(children) - found)
        found.update(new)
        frontier = pl.DataFrame({"parent": new}, schema={"parent": pl.String})
    return sorted(found)


def _pool(positives: pl.DataFrame, nodes: pl.DataFrame, node_types: Sequence[str],
          relations: Optional[Sequence[str]]) -> List[str]:
    """The entities of ``node_types`` with at least one edge of a held-out relation, sorted."""
    edges = positives if relations is None else positives.filter(pl.col("relation").is_in(list(relations)))
    touched = pl.concat([edges.get_column("id1").cast(pl.String), edges.get_column("id2").cast(pl.String)]).unique()
    typed = nodes.filter(pl.col("node_type").is_in(list(node_types))).get_column("id").cast(pl.String)
    return sorted(set(typed.to_list()) & set(touched.to_list()))


def _draw(pool: Sequence[str], fraction: float, rng: np.random.Generator, what: str) -> List[str]:
    if not pool:
        raise InputError(f"no {what} to choose from")
    count = max(1, int(round(fraction * len(pool))))
    if count >= len(pool):
        raise InputError(f"a fraction of {fraction} takes all {len(pool)} {what}: nothing would be left to train on")
    return sorted(np.asarray(pool)[np.sort(rng.permutation(len(pool))[:count])].tolist())


def _known(labels: Sequence[str], nodes: pl.DataFrame, what: str) -> List[str]:
    known = set(nodes.get_column("id").cast(pl.String).to_list())
    unknown = [label for label in labels if label not in known]
    if unknown:
        raise InputError(f"{len(unknown)} {what} not in the graph's nodes (first: {unknown[0]!r})")
    return sorted(set(labels))


def choose_entities(selection: Selection, positives: pl.DataFrame, nodes: pl.DataFrame,
                    relations: Optional[Sequence[str]], val_fraction: float, val_entities: Optional[Sequence[str]],
                    rng: np.random.Generator) -> Tuple[List[str], List[str]]:
    """(test entities, validation entities), sorted and disjoint (see the module docstring)."""
    types = dict(nodes.select(pl.col("id").cast(pl.String), "node_type").iter_rows())
    if selection.node_type:
        pool = _pool(positives, nodes, [selection.node_type], relations)
        test = _draw(pool, selection.fraction or 0.0, rng, f"{selection.node_type} entities with an edge of the "
                                                          "held-out relations")
    elif selection.entities:
        test = _known(selection.entities, nodes, "held-out entities")
    else:
        roots = _known(selection.roots or [], nodes, "subtree roots")
        test = hierarchy_subtree(positives, roots, selection.hierarchy_relation or "", selection.hierarchy_direction)
    if val_entities:
        valid = _known(val_entities, nodes, "validation entities")
    elif val_fraction > 0:
        pool_types = sorted({types[entity] for entity in test if entity in types})
        rest = sorted(set(_pool(positives, nodes, pool_types, relations)) - set(test))
        valid = _draw(rest, val_fraction, rng, "entities left for validation") if rest else []
    else:
        valid = []
    shared = sorted(set(test) & set(valid))
    if shared:
        raise InputError(f"{len(shared)} entities are both test and validation entities (first: {shared[0]!r})")
    return test, valid


def _touches(entities: Sequence[str]) -> pl.Expr:
    chosen = pl.Series(list(entities), dtype=pl.String).implode()
    return pl.col("id1").cast(pl.String).is_in(chosen) | pl.col("id2").cast(pl.String).is_in(chosen)


def _within(edges: pl.DataFrame, start: Sequence[str], hops: int) -> List[str]:
    """Entities within ``hops`` hops of ``start`` over ``edges`` (either direction), start excluded."""
    pairs = edges.select(pl.col("id1").cast(pl.String).alias("a"), pl.col("id2").cast(pl.String).alias("b"))
    links = pl.concat([pairs, pairs.select(pl.col("b").alias("a"), pl.col("a").alias("b"))]).unique()
    seen, frontier = set(start), sorted(set(start))
    for _ in range(hops):
        reached = links.join(pl.DataFrame({"a": frontier}, schema={"a": pl.String}), on="a", how="semi")
        frontier = sorted(set(reached.get_column("b").to_list()) - seen)
        seen.update(frontier)
        if not frontier:
            break
    return sorted(seen - set(start))


def _unordered(frame: pl.DataFrame) -> pl.DataFrame:
    ids = [pl.col("id1").cast(pl.String), pl.col("id2").cast(pl.String)]
    return frame.with_columns(pl.min_horizontal(ids).alias("_lo"), pl.max_horizontal(ids).alias("_hi"))


def _copies(held_out: pl.DataFrame, patterns: dict) -> pl.DataFrame:
    """(id1, relation, id2, kind) of every training edge that would restate a held-out edge: its
    reverse (``reverse``), its copy under a duplicate relation (``duplicate_relation``), its reverse
    under an inverse relation (``inverse_relation``), and (as unordered pairs, both orientations)
    the same pair under a parent or child relation (``super_property``)."""
    edges = held_out.select(pl.col("id1").cast(pl.String), "relation", pl.col("id2").cast(pl.String))

    def partner_table(items, partner):
        rows = [(item["relation"], item[partner]) for item in items]
        rows += [(b, a) for a, b in rows]
        return pl.DataFrame(rows, schema={"relation": pl.String, "partner": pl.String}, orient="row")

    parts = [edges.select(pl.col("id2").alias("id1"), "relation", pl.col("id1").alias("id2"),
                          pl.lit("reverse").alias("kind")),
             edges.join(partner_table(patterns["duplicate_relations"], "duplicate"), on="relation")
             .select("id1", pl.col("partner").alias("relation"), "id2", pl.lit("duplicate_relation").alias("kind")),
             edges.join(partner_table(patterns["inverse_pairs"], "inverse"), on="relation")
             .select(pl.col("id2").alias("id1"), pl.col("partner").alias("relation"), pl.col("id1").alias("id2"),
                     pl.lit("inverse_relation").alias("kind"))]
    family = [(name, parent) for name, parent in PARENT.items() if parent] + \
        [(parent, name) for name, parent in PARENT.items() if parent]
    related = pl.DataFrame(family, schema={"relation": pl.String, "partner": pl.String}, orient="row")
    for forward in (True, False):
        ends = ("id1", "id2") if forward else ("id2", "id1")
        parts.append(edges.join(related, on="relation").select(pl.col(ends[0]).alias("id1"),
                                                               pl.col("partner").alias("relation"),
                                                               pl.col(ends[1]).alias("id2"),
                                                               pl.lit("super_property").alias("kind")))
    return pl.concat(parts).unique(["id1", "relation", "id2"], keep="first", maintain_order=True)


def _merged(first: dict, second: dict) -> dict:
    """Two relation-pattern reports as one: every pair or relation either names, once."""
    merged = {}
    for key in ("inverse_pairs", "duplicate_relations", "symmetric_relations"):
        seen, items = set(), []
        for item in first.get(key, []) + second.get(key, []):
            name = (item.get("relation"), item.get("inverse"), item.get("duplicate"))
            if name not in seen:
                seen.add(name)
                items.append(item)
        merged[key] = items
    return merged


def _thinned(positives: pl.DataFrame, training: pl.DataFrame) -> List[str]:
    """The relations with fewer edges in ``training`` than in ``positives``, sorted."""
    before = dict(positives.group_by("relation").len().iter_rows())
    after = dict(training.group_by("relation").len().iter_rows())
    return sorted(relation for relation, count in before.items() if after.get(relation, 0) != count)


def _remove_copies(training: pl.DataFrame, held_out: pl.DataFrame, patterns: dict) -> Tuple[pl.DataFrame, Dict[str, int]]:
    """(training without any copy of a held-out edge, {kind: removed}) (see :func:`_copies`)."""
    copies = _copies(held_out, patterns)
    keyed = training.with_columns(pl.col("id1").cast(pl.String).alias("_a"), pl.col("id2").cast(pl.String).alias("_b"))
    found = keyed.join(copies.rename({"id1": "_a", "id2": "_b"}), on=["_a", "relation", "_b"], how="left",
                       maintain_order="left")
    removed = found.filter(pl.col("kind").is_not_null())
    counts = {kind: removed.filter(pl.col("kind") == kind).height
              for kind in ("reverse", "duplicate_relation", "inverse_relation", "super_property")}
    kept = found.filter(pl.col("kind").is_null()).select(training.columns)
    return kept, counts


def _negatives(positives: Dict[str, pl.DataFrame], true_negatives: Dict[str, pl.DataFrame], nodes: pl.DataFrame,
               every_positive: pl.DataFrame, ratio: float, seed: int, wanted: Dict[str, bool]) -> Dict[str, pl.DataFrame]:
    """Negatives per set (seed, seed + 1, seed + 2), every positive of every set known."""
    out = {}
    for offset, name in enumerate(("train", "val", "test")):
        if name not in positives:
            continue
        if not wanted[name] or positives[name].height == 0:
            out[name] = categorical_ids(pl.DataFrame(schema={c: pl.String for c in SPLIT_COLUMNS}))
            continue
        out[name] = sample_negatives(positives[name], true_negatives[name], nodes, ratio, seed + offset,
                                     known=every_positive)
    return out


def entity_split(positives: pl.DataFrame, true_negatives: pl.DataFrame, nodes: pl.DataFrame, output, *,
                 selection: Selection, relations: Optional[Sequence[str]] = None, val_fraction: float = 0.0,
                 val_entities: Optional[Sequence[str]] = None, isolate: bool = False, neighbourhood: int = 0,
                 seed: int = 42, neg_train_val: bool = True, neg_test: bool = True, neg_ratio: float = 1.0,
                 inputs: Sequence = (), provenance: Optional[dict] = None) -> dict:
    """Split and write the files into ``output`` (replaced atomically); returns the split info
    (see the module docstring)."""
    check_output_folder(output, inputs)
    if not 0 <= val_fraction < 1:
        raise InputError(f"--val-fraction must lie in [0, 1), got {val_fraction}")
    if neighbourhood < 0:
        raise InputError(f"--neighbourhood must be 0 or more hops, got {neighbourhood}")
    rng = np.random.default_rng(seed)
    positives, repeated = distinct_edges(categorical_ids(positives), "positive edge(s)")
    true_negatives, _ = distinct_edges(categorical_ids(true_negatives), "true-negative edge(s)")
    if positives.height == 0:
        raise InputError("the graph has no positive edges: nothing to split", inputs[0] if inputs else None)
    known_relations = set(positives.get_column("relation").unique().to_list())
    if relations is not None:
        unknown = sorted(set(relations) - known_relations)
        if unknown:
            raise InputError(f"unknown relation(s) {', '.join(unknown)}; the graph has {', '.join(sorted(known_relations))}")
    test_entities, valid_entities = choose_entities(selection, positives, nodes, relations, val_fraction,
                                                    val_entities, rng)
    held = pl.lit(True) if relations is None else pl.col("relation").is_in(list(relations))

    def assign(frame: pl.DataFrame) -> Dict[str, pl.DataFrame]:
        in_test = held & _touches(test_entities)
        in_valid = held & _touches(valid_entities) & ~_touches(test_entities)
        return {"test": frame.filter(in_test), "val": frame.filter(in_valid),
                "train": frame.filter(~in_test & ~in_valid)}

    sets = assign(positives)
    tn_sets = assign(true_negatives)
    removed: Dict[str, int] = {}
    training = sets["train"]
    heldout = test_entities + valid_entities
    if isolate:
        isolated = _touches(heldout)
        removed["isolated_edges"] = training.filter(isolated).height
        training = training.filter(~isolated)
        tn_sets["train"] = tn_sets["train"].filter(~_touches(heldout))
    if neighbourhood:
        near = _within(positives, heldout, neighbourhood)  # in the whole graph, as TxGNN's k-hop subgraph
        padded = held & _touches(near)
        removed["neighbourhood_edges"] = training.filter(padded).height
        training = training.filter(~padded)
    # the relations' patterns in the whole graph and in training (what the audit finds there): a
    # pattern that held-out edges dilute below the threshold in one still counts in the other. In
    # training only the pairs of a relation that lost edges can differ from the graph's
    patterns = _merged(relation_patterns(positives), relation_patterns(training, involving=_thinned(positives, training)))
    held_out_edges = pl.concat([sets["test"], sets["val"]])
    training, copies = _remove_copies(training, held_out_edges, patterns)
    removed.update({f"{kind}_copies": count for kind, count in copies.items()})
    sets["train"] = training
    every_positive = pl.concat([frame.select(SPLIT_COLUMNS) for frame in sets.values()])
    negatives = _negatives(sets, tn_sets, nodes, every_positive, neg_ratio, seed,
                           {"train": neg_train_val, "val": neg_train_val, "test": neg_test})
    # a corrupted training (validation) negative may draw a held-out (test) entity: it would tell the
    # model something of that entity under a held-out relation; such negatives are dropped, counted
    for name, hidden in (("train", heldout), ("val", test_entities)):
        leaking = held & _touches(hidden)
        removed[f"{name}_negatives_touching_heldout"] = negatives[name].filter(leaking).height
        negatives[name] = negatives[name].filter(~leaking)
    groups = {name: remove_inconsistent(pl.concat([sets[name].select(SPLIT_COLUMNS), negatives[name].select(SPLIT_COLUMNS)]))
              for name in ("train", "val", "test") if name == "train" or sets[name].height}
    if "test" not in groups:
        raise InputError("no edge of the held-out relations touches a test entity: nothing to evaluate")
    roles = pl.DataFrame({"id": test_entities + valid_entities,
                          "role": ["test"] * len(test_entities) + ["valid"] * len(valid_entities)}).sort("id")
    listing = "".join(f"{entity}\t{role}\n" for entity, role in roles.iter_rows()).encode("utf-8")
    info: dict = {
        "kind": KIND,
        "parameters": {"seed": seed, "val_fraction": val_fraction, "isolate": isolate, "neighbourhood": neighbourhood,
                       "neg_train_val": neg_train_val, "neg_test": neg_test, "neg_ratio": neg_ratio,
                       "selection": selection.describe()},
        "heldout": {"file": HELDOUT_FILE, "sha256": hashlib.sha256(listing).hexdigest(), "test": len(test_entities),
                    "valid": len(valid_entities), "relations": None if relations is None else sorted(relations)},
        "input": {"positives": positives.height, "true_negatives": true_negatives.height,
                  "repeated_positives": repeated},
        "removed": removed, "relation_patterns": patterns, **(provenance or {})}

    def fill(staging: Path) -> None:
        counts = write_sets(staging, groups, nodes, neg_train_val, neg_test, "val" in groups)
        counts["per_relation"] = per_relation_counts(groups)
        info["split"] = counts
        (staging / HELDOUT_FILE).write_bytes(listing)
        (staging / "split_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    replace_folder(output, fill, inputs=inputs, kind="split")
    logger.info("entity split: %d test and %d validation entities held out", len(test_entities), len(valid_entities))
    return info
