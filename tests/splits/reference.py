"""A plain-loop reference of the evaluation-set cleaning, and a recorder of what a split drew.

The reference restates the rules of ``splits.leakage`` row by row, in the order the split applies
them (hierarchy leakage, reverse edges when directed, relation patterns, unseen nodes, unseen
relations), so a test can
compare both sides: every row the reference keeps is kept, every row it removes is removed, and
``split_info.json``'s per-step counts equal the reference's.
"""
from collections import defaultdict
from typing import Optional

import polars as pl

from graphgen.edge_types import EDGE_TYPES

PARENT = {name: edge.parent for name, edge in EDGE_TYPES.items()}
Row = tuple  # (id1, relation, id2, value), all strings


def rows_of(frame: pl.DataFrame) -> list:
    """The (id1, relation, id2, value) rows of a split frame, ids as text."""
    return frame.select("id1", "relation", "id2", "value").cast(pl.String).rows()


def loop_patterns(training: list, threshold: float = 0.8):
    """({r: duplicate partners}, {r: inverse partners}, symmetric relations) of the training
    positives, by the audit's definitions restated with sets: a pair of relations whose shared
    node pairs (same orientation; reversed) cover at least ``threshold`` of either one's pairs; a
    relation whose pairs (self-loops aside) have their reverse for ``threshold`` of its pairs."""
    pairs = defaultdict(set)
    for a, r, b, v in training:
        if v == "1":
            pairs[r].add((a, b))
    duplicates, inverses = defaultdict(set), defaultdict(set)
    relations = sorted(pairs)
    for i, r in enumerate(relations):
        for other in relations[i + 1:]:
            same = len(pairs[r] & pairs[other])
            flipped = len({(a, b) for a, b in pairs[r] if (b, a) in pairs[other]})
            for shared, partners in ((same, duplicates), (flipped, inverses)):
                if shared and max(shared / len(pairs[r]), shared / len(pairs[other])) >= threshold:
                    partners[r].add(other)
                    partners[other].add(r)
    symmetric = {r for r in relations
                 if len({(a, b) for a, b in pairs[r] if a != b and (b, a) in pairs[r]}) / len(pairs[r]) >= threshold}
    return duplicates, inverses, symmetric


def loop_clean(evaluation: list, training: list, directed: bool, seen_rule: str = "positives",
               pattern_rows: Optional[list] = None):
    """(kept rows in their order, removed count per step) for ``evaluation`` against ``training``,
    under the relation patterns of ``pattern_rows`` (default: ``training``)."""
    relations_of_pair = defaultdict(set)  # unordered pair -> {(relation, value)}
    for a, r, b, v in training:
        relations_of_pair[frozenset((a, b))].add((r, v))
    training_set = set(training)
    counted = [row for row in training if seen_rule == "any" or row[3] == "1"]
    seen_nodes = {n for a, _, b, _ in counted for n in (a, b)}
    seen_relations = {r for _, r, _, _ in counted}

    def hierarchy_leak(a, r, b, v):
        return any(tv == v and tr != r and (tr == PARENT[r] or PARENT[tr] == r)
                   for tr, tv in relations_of_pair.get(frozenset((a, b)), ()))

    duplicates, inverses, symmetric = loop_patterns(training if pattern_rows is None else pattern_rows)

    def pattern_leak(a, r, b, v):
        return (any((a, other, b, v) in training_set for other in duplicates[r])
                or any((b, other, a, v) in training_set for other in inverses[r])
                or (not directed and r in symmetric and (b, r, a, v) in training_set))

    removed = {}
    rows = list(evaluation)
    steps = [("hierarchy_leakage", hierarchy_leak)]
    if directed:
        steps.append(("reverse_edges", lambda a, r, b, v: (b, r, a, v) in training_set))
    steps.append(("relation_patterns", pattern_leak))
    steps += [("unseen_nodes", lambda a, r, b, v: a not in seen_nodes or b not in seen_nodes),
              ("unseen_relations", lambda a, r, b, v: r not in seen_relations)]
    for step, drops in steps:
        kept = [row for row in rows if not drops(*row)]
        removed[step] = len(rows) - len(kept)
        rows = kept
    return rows, removed


def add_counts(first: dict, second: dict) -> dict:
    return {step: first.get(step, 0) + second.get(step, 0) for step in set(first) | set(second)}


class SplitRecorder:
    """Wraps a split module's ``write_fold`` (and ``_carve``) to record what they were given."""

    def __init__(self, monkeypatch, module):
        self.folds, self.carves = [], []
        real_write_fold, real_carve = module.write_fold, module._carve

        def write_fold(folder, train, validation, test, directed, *rest):
            self.folds.append({"folder": folder, "train": rows_of(train),
                               "validation": rows_of(validation) if validation is not None else None,
                               "test": rows_of(test.rows), "test_removed": dict(test.removed),
                               "directed": directed})
            return real_write_fold(folder, train, validation, test, directed, *rest)

        def carve(rows, fraction, rng):
            rest, carved = real_carve(rows, fraction, rng)
            self.carves.append((rows_of(rest), rows_of(carved)))
            return rest, carved

        monkeypatch.setattr(module, "write_fold", write_fold)
        monkeypatch.setattr(module, "_carve", carve)


def file_rows(folder, name: str) -> list:
    """(id1, relation, id2, value) rows of a written split file (positives and negatives)."""
    rows = []
    for file in (f"{name}_sample.csv", f"negative_{name}_sample.csv"):
        path = folder / file
        if path.exists():
            rows += [tuple(line.split("\t"))[:3] + (tuple(line.split("\t"))[4],)
                     for line in path.read_text().splitlines() if line]
    return rows


def check_fold_against_reference(fold: dict, info_split: dict, seen_rule: str = "positives",
                                 patterns_from: str = "train") -> None:
    """The written validation and test files of one fold hold exactly what the reference keeps of
    the sets the fold was given, and the fold's cleaning counts equal the reference's.

    :param patterns_from: whose relation patterns clean the fold: ``"train"`` (the time split),
        ``"train_and_validation"`` (the random split: every non-test row, as its split_info records)."""
    folder, directed = fold["folder"], fold["directed"]
    pattern_rows = fold["train"] + (fold["validation"] or []) if patterns_from == "train_and_validation" else None
    if fold["validation"] is not None:
        kept, removed = loop_clean(fold["validation"], fold["train"], directed, seen_rule, pattern_rows)
        assert sorted(file_rows(folder, "val")) == sorted(kept)
        assert info_split["val_cleaning"] == removed
    kept, removed = loop_clean(fold["test"], fold["train"], directed, seen_rule, pattern_rows)
    assert sorted(file_rows(folder, "test")) == sorted(kept)
    assert info_split["test_cleaning"] == add_counts(fold["test_removed"], removed)
    assert sorted(file_rows(folder, "train")) == sorted(fold["train"])


# -- entity-held-out splits (issue 51)

def _rows(folder, name):
    path = folder / name
    return [tuple(line.split("\t")[:3]) for line in path.read_text().splitlines()] if path.is_file() else []


def heldout_roles(folder):
    roles = defaultdict(set)
    for line in (folder / "heldout_entities.tsv").read_text().splitlines():
        entity, role = line.split("\t")
        roles[role].add(entity)
    return roles


def check_entity_invariants(folder, graph_positives, relations):
    """An entity-held-out split's properties from their definitions, with sets, from its files and
    the graph's positives (id1, relation, id2): no held-out entity in a training edge (positive or
    negative) of a held-out relation; test and validation exactly the held-out relations' edges of
    their entities; no held-out pair restated in training (reverse, duplicate or inverse relation
    of the whole graph's or training's patterns, parent or child relation). Returns (roles, train,
    validation, test)."""
    roles = heldout_roles(folder)
    test_entities, valid_entities = roles["test"], roles["valid"]
    held = set(relations) if relations is not None else None
    train, val, test = (_rows(folder, f"{name}_sample.csv") for name in ("train", "val", "test"))

    def held_relation(r):
        return held is None or r in held

    for a, r, b in train:  # no held-out entity in a training edge of a held-out relation
        assert not (held_relation(r) and ({a, b} & (test_entities | valid_entities))), (a, r, b)
    negatives = folder / "negative_train_sample.csv"
    for a, r, b, *_ in (tuple(line.split("\t")) for line in
                        (negatives.read_text().splitlines() if negatives.is_file() else [])):
        assert not (held_relation(r) and ({a, b} & (test_entities | valid_entities))), ("negative", a, r, b)
    expected_test = {(a, r, b) for a, r, b in graph_positives if held_relation(r) and {a, b} & test_entities}
    expected_val = {(a, r, b) for a, r, b in graph_positives if held_relation(r) and {a, b} & valid_entities
                    and not {a, b} & test_entities}
    assert set(test) == expected_test and set(val) == expected_val
    train_set = set(train)
    train_pairs = defaultdict(set)
    for a, r, b in train:
        train_pairs[frozenset((a, b))].add(r)
    duplicates, inverses = defaultdict(set), defaultdict(set)
    for source in (graph_positives, train):  # the patterns of the whole graph and of training
        found_dup, found_inv, _ = loop_patterns([(a, r, b, "1") for a, r, b in source])
        for r, partners in found_dup.items():
            duplicates[r] |= partners
        for r, partners in found_inv.items():
            inverses[r] |= partners
    restated = 0
    for a, r, b in test + val:
        restated += (b, r, a) in train_set
        restated += sum((a, other, b) in train_set for other in duplicates[r])
        restated += sum((b, other, a) in train_set for other in inverses[r])
        restated += sum(1 for other in train_pairs[frozenset((a, b))]
                        if other != r and (other == PARENT.get(r) or PARENT.get(other) == r))
    assert restated == 0
    return roles, train, val, test
