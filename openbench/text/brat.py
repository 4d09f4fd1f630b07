"""BRAT/ChEMU scoring: named entities, event extraction (as trigger→argument relations) and
anaphora resolution, with exact and relaxed matching (spec text_evaluators.md part B).

Definitions (BRATEval's, except where noted):

* spans: ``exact`` (the fragment sets are equal; BRATEval only asks the gold fragments to appear
  among the system's), ``overlap`` (some fragment pair overlaps, half-open; touching spans do
  not), ``approx:T`` (overlap and a Levenshtein similarity of the two ``.ann`` texts of at least T);
* types: ``exact``, ``inexact`` (any), ``hierarchical`` (a common ancestor below the root of the
  ``[entities]`` tree of the ``annotation.conf`` given with ``taxonomy``; without one, exact, as
  BRATEval does when it finds none);
* true positives per document: a maximum bipartite matching (``optimal``; for inexact types,
  same-type pairs preferred among the maximum matchings) or BRATEval's first match in file order
  (``greedy``: each gold item, in file order, takes the first unmatched system item that matches).
  TP is counted under the gold type, FP (unmatched system) under the system type, FN under the
  gold type; precision, recall and F1 per type and micro over all;
* relations: key ``type|arg1 type|arg2 type``; a system relation matches a gold one with the same
  key whose both arguments match under the span and type modes; ``fnm``/``fpm`` count unmatched
  relations with an argument that has no matching entity in the other document;
* anaphora (``ar``): COREFERENCE links are closed transitively (after mapping each system mention
  to its matched gold mention) in gold and system before scoring; bridging relations are not;
  the surface (unexpanded) score is reported too.

Numbers print with four decimals rounded half-up on the exact binary value (Java's ``%1.4f``).
"""
from __future__ import annotations

import csv
import io
import logging
import os
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from openbench._io.outputs import strict_json
from openbench._io import read_text
from openbench.errors import InputError

__all__ = ["TASKS", "SPAN_MODES", "TYPE_MODES", "MATCHINGS", "COREFERENCE", "Entity", "Relation", "Document",
           "read_ann", "read_folder", "Taxonomy", "Rules", "parse_span", "match_pairs", "entity_edges", "Counts",
           "pair_documents", "score_entities", "score_relations", "score_coreference_closure", "half_up", "total",
           "entity_table", "relation_table", "rows", "to_csv", "to_json", "score_folders"]

logger = logging.getLogger(__name__)

TASKS = ("ner", "ee", "ar")
SPAN_MODES = ("exact", "overlap", "approx")
TYPE_MODES = ("exact", "inexact", "hierarchical")
MATCHINGS = ("optimal", "greedy")
COREFERENCE = "COREFERENCE"


# ------------------------------------------------------------------------------------------
# documents


class Entity(NamedTuple):  # NamedTuple: millions are made when large corpora are read
    id: str
    type: str
    spans: Tuple[Tuple[int, int], ...]
    text: str
    line: int


class Relation(NamedTuple):
    id: str
    type: str
    arg1: str
    arg2: str
    line: int


@dataclass
class Document:
    path: Path
    entities: Dict[str, Entity] = field(default_factory=dict)
    relations: List[Relation] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


def read_ann(path, text: Optional[str] = None) -> Document:
    """Parse a brat standoff ``.ann`` file (UTF-8; offsets in code points, end exclusive).

    Events become one relation per argument (typed by the role as written, ``Theme2`` included:
    a suffix cannot be told from a role named ``ARG1``; trigger → argument; an event argument
    stands for its trigger). A, M, N, ``*`` and ``#`` lines are read and ignored
    by scoring. ``text``: the paired ``.txt``: spans past its end are an error, covered texts that
    differ from the annotation's are warnings.
    """
    path = Path(path)
    document = Document(path)
    events: List[Tuple[str, str, List[Tuple[str, str]], int]] = []
    raw_relations: List[Tuple[str, str, str, str, int]] = []
    content = read_text(path)  # strict UTF-8 (a BOM accepted): errors name the line
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        head, _, rest = line.partition("\t")
        kind = head[:1]
        if kind == "T":
            document.entities[head] = _entity(head, rest, path, number)
        elif kind == "R":
            fields = rest.strip().split()
            if len(fields) != 3 or not fields[1].startswith("Arg1:") or not fields[2].startswith("Arg2:"):
                raise InputError(f"expected 'R<n><TAB><Type> Arg1:<id> Arg2:<id>', found {line!r}", path, number)
            raw_relations.append((head, fields[0], fields[1][5:], fields[2][5:], number))
        elif kind == "E":
            fields = rest.strip().split()
            if not fields or ":" not in fields[0]:
                raise InputError(f"expected 'E<n><TAB><Type>:<trigger> <Role>:<id> ...', found {line!r}", path, number)
            trigger = fields[0].split(":", 1)[1]
            arguments = []
            for item in fields[1:]:
                role, colon, target = item.partition(":")
                if not colon or not target:
                    raise InputError(f"event argument {item!r}: expected <Role>:<id>", path, number)
                arguments.append((role, target))
            events.append((head, trigger, arguments, number))
        elif kind in ("A", "M", "N", "*", "#"):
            continue
        else:
            raise InputError(f"unknown annotation line {line!r} (expected T, R, E, A, M, N, * or #)", path, number)
    triggers = {event_id: trigger for event_id, trigger, _, _ in events}
    for event_id, trigger, arguments, number in events:
        for index, (role, target) in enumerate(arguments):
            raw_relations.append((f"{event_id}.{index}", role, trigger, triggers.get(target, target), number))
    for relation_id, kind, arg1, arg2, number in raw_relations:
        for argument in (arg1, arg2):
            if argument not in document.entities:
                raise InputError(f"relation {relation_id} points to {argument}, which is no text-bound annotation "
                                 "of this file", path, number)
        document.relations.append(Relation(relation_id, kind, arg1, arg2, number))
    if text is not None:
        _check_offsets(document, text)
    return document


def _is_offset(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes superscripts such as '²', which int() refuses."""
    return text.isascii() and text.isdigit()


def _entity(identifier: str, rest: str, path: Path, number: int) -> Entity:
    annotation, tab, covered = rest.partition("\t")
    parts = annotation.split(" ")
    if tab and len(parts) == 3 and _is_offset(parts[1]) and _is_offset(parts[2]) and int(parts[1]) <= int(parts[2]):
        return Entity(identifier, parts[0], ((int(parts[1]), int(parts[2])),), covered.rstrip("\t"), number)
    parts = annotation.split(" ", 1)
    if not tab or len(parts) != 2:
        raise InputError(f"expected 'T<n><TAB><Type> <start> <end>[;<start> <end>...]<TAB><text>', found "
                         f"{identifier}\t{rest!r}", path, number)
    spans = []
    for fragment in parts[1].split(";"):
        bounds = fragment.split()
        if len(bounds) != 2 or not (_is_offset(bounds[0]) and _is_offset(bounds[1])) or int(bounds[0]) > int(bounds[1]):
            raise InputError(f"span {fragment!r}: expected '<start> <end>' with start <= end", path, number)
        spans.append((int(bounds[0]), int(bounds[1])))
    return Entity(identifier, parts[0], tuple(spans), covered.rstrip("\t"), number)


def _check_offsets(document: Document, text: str) -> None:
    """Spans must lie within the ``.txt`` (an error naming the line); a covered text that differs
    from the annotation's is a warning (brat files are often normalised, as BRATEval allows)."""
    for entity in document.entities.values():
        beyond = [(start, end) for start, end in entity.spans if end > len(text)]
        if beyond:
            raise InputError(f"{entity.id} span {beyond[0][0]} {beyond[0][1]} ends past the end of the .txt beside it "
                             f"({len(text)} characters); expected offsets within the text", document.path, entity.line)
        covered = " ".join(text[start:end] for start, end in entity.spans)
        if covered != entity.text:
            message = (f"{document.path}:{entity.line}: {entity.id} spans {entity.spans} cover {covered!r} in the "
                       f".txt, the annotation says {entity.text!r}")
            document.warnings.append(message)
            logger.warning(message)


def read_folder(folder) -> Dict[str, Document]:
    """Every ``.ann`` below ``folder`` by its path relative to it (``.txt`` beside it checked when present)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder of .ann files", folder)
    found = []
    for directory, _, names in os.walk(folder):  # os.walk and plain strings: pathlib costs per file add up
        names = set(names)
        relative = os.path.relpath(directory, folder)
        for name in names:
            if name.endswith(".ann"):
                stem = name[:-4]
                key = name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"
                found.append((key, os.path.join(directory, name),
                              os.path.join(directory, stem + ".txt") if stem + ".txt" in names else None))
    documents = {}
    for key, path, text_path in sorted(found):
        text = None
        if text_path is not None:
            text = read_text(text_path, keep_bom=True)  # offsets count code points as brat reads them
        documents[key] = read_ann(path, text)
    return documents


# ------------------------------------------------------------------------------------------
# matching rules


class Taxonomy:
    """The ``[entities]`` tree of a brat ``annotation.conf`` (indentation by tabs gives depth)."""

    def __init__(self, parents: Dict[str, Optional[str]]):
        self.parents = parents

    @classmethod
    def read(cls, path) -> "Taxonomy":
        path = Path(path)
        parents: Dict[str, Optional[str]] = {}
        stack: List[str] = []
        section = None
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if raw.strip().startswith("[") and raw.strip().endswith("]"):
                section = raw.strip()[1:-1]
                continue
            if section != "entities" or not raw.strip() or raw.lstrip().startswith("#"):
                continue
            depth = len(raw) - len(raw.lstrip("\t"))
            if depth > len(stack):
                raise InputError(f"indentation jumps to depth {depth} under depth {len(stack) - 1}", path, number)
            name = raw.strip().split()[0].lstrip("!")
            del stack[depth:]
            parents[name] = stack[-1] if stack else None
            stack.append(name)
        return cls(parents)

    def top(self, name: str) -> Optional[str]:
        if name not in self.parents:
            return None
        while self.parents[name] is not None:
            name = self.parents[name]
        return name

    def related(self, first: str, second: str) -> bool:
        if first == second:
            return True
        top = self.top(first)
        return top is not None and top == self.top(second)


def _levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _overlaps(a: Tuple[int, int], b: Tuple[int, int]) -> bool:
    return b[0] <= a[0] < b[1] or b[0] < a[1] <= b[1] or a[0] <= b[0] < a[1] or a[0] < b[1] <= a[1]


@dataclass(frozen=True)
class Rules:
    """How two entities match: span mode (with the approx threshold), type mode, taxonomy."""

    span: str = "exact"
    threshold: float = 0.8
    type: str = "exact"
    taxonomy: Optional[Taxonomy] = None

    def spans_match(self, gold: Entity, system: Entity) -> bool:
        if self.span == "exact":
            return set(gold.spans) == set(system.spans)
        overlap = any(_overlaps(a, b) for a in gold.spans for b in system.spans)
        if self.span == "overlap" or not overlap:
            return overlap
        longest = max(len(gold.text), len(system.text))
        return longest > 0 and 1 - _levenshtein(gold.text, system.text) / longest >= self.threshold

    def types_match(self, gold: str, system: str) -> bool:
        if self.type == "inexact":
            return True
        if self.type == "hierarchical" and self.taxonomy is not None:
            return self.taxonomy.related(gold, system)
        return gold == system

    def entities_match(self, gold: Entity, system: Entity) -> bool:
        return self.types_match(gold.type, system.type) and self.spans_match(gold, system)


def parse_span(text: str) -> Tuple[str, float]:
    """``exact``, ``overlap`` or ``approx:T`` (T in (0, 1]) -> (mode, threshold)."""
    mode, _, value = text.partition(":")
    if mode not in SPAN_MODES or (mode == "approx") != bool(value):
        raise InputError(f"span mode {text!r}: expected exact, overlap or approx:T")
    threshold = 0.8
    if value:
        try:
            threshold = float(value)
        except ValueError:
            raise InputError(f"span mode {text!r}: T must be a number in (0, 1]") from None
        if not 0 < threshold <= 1:
            raise InputError(f"span mode {text!r}: T must be in (0, 1]")
    return mode, threshold


def match_pairs(gold: Sequence, system: Sequence, matches: Callable[[object, object], bool], matching: str,
                prefer: Optional[Callable[[object, object], bool]] = None,
                edges: Optional[List[Tuple[int, int]]] = None) -> List[Tuple[int, int]]:
    """(gold index, system index) pairs of a one-to-one matching.

    ``greedy``: gold in order, each taking the first unmatched system item that matches.
    ``optimal``: a maximum matching; among those, the most pairs for which ``prefer`` holds.
    ``edges``: the matching (i, j) pairs when the caller has them, sorted (else all pairs are tried).
    """
    if not gold or not system:
        return []
    if edges is None:
        edges = [(i, j) for i, g in enumerate(gold) for j, s in enumerate(system) if matches(g, s)]
    if not edges:
        return []
    if matching == "greedy":
        taken, done, pairs = set(), set(), []
        for i, j in edges:  # sorted by gold, then system position: file order
            if i not in done and j not in taken:
                done.add(i)
                taken.add(j)
                pairs.append((i, j))
        return pairs
    gold_degree, system_degree = {}, {}
    for i, j in edges:
        gold_degree[i] = gold_degree.get(i, 0) + 1
        system_degree[j] = system_degree.get(j, 0) + 1
    if max(gold_degree.values()) == 1 and max(system_degree.values()) == 1:
        return list(edges)  # no item has two candidates: the edges are the matching
    rows = sorted(gold_degree)
    cols = sorted(system_degree)
    row_of, col_of = {i: k for k, i in enumerate(rows)}, {j: k for k, j in enumerate(cols)}
    weights = np.zeros((len(rows), len(cols)))
    big = len(rows) + len(cols) + 1  # cardinality first, preferred pairs second
    for i, j in edges:
        weights[row_of[i], col_of[j]] = big + (1 if prefer is not None and prefer(gold[i], system[j]) else 0)
    from scipy.optimize import linear_sum_assignment

    assigned_rows, assigned_cols = linear_sum_assignment(weights, maximize=True)
    return sorted((rows[a], cols[b]) for a, b in zip(assigned_rows, assigned_cols) if weights[a, b] > 0)


def entity_edges(gold: Sequence[Entity], system: Sequence[Entity], rules: Rules) -> List[Tuple[int, int]]:
    """Sorted (i, j) of matching entities; only pairs whose bounding boxes touch are compared."""
    if not gold or not system:
        return []
    if rules.span == "exact":
        by_spans: Dict[frozenset, List[int]] = {}
        for j, entity in enumerate(system):
            by_spans.setdefault(frozenset(entity.spans), []).append(j)
        return [(i, j) for i, g in enumerate(gold) for j in by_spans.get(frozenset(g.spans), ())
                if rules.types_match(g.type, system[j].type)]
    gold_box = np.array([(e.spans[0][0], e.spans[-1][1]) if len(e.spans) == 1 else
                         (min(a for a, _ in e.spans), max(b for _, b in e.spans)) for e in gold])
    system_box = np.array([(e.spans[0][0], e.spans[-1][1]) if len(e.spans) == 1 else
                           (min(a for a, _ in e.spans), max(b for _, b in e.spans)) for e in system])
    touching = ((gold_box[:, None, 0] <= system_box[None, :, 1]) & (system_box[None, :, 0] <= gold_box[:, None, 1]))
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(touching)) if rules.entities_match(gold[i], system[j])]


# ------------------------------------------------------------------------------------------
# counting


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    fpm: int = 0
    fnm: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def add(self, other: "Counts") -> None:
        for name in ("tp", "fp", "fn", "fpm", "fnm"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def pair_documents(gold: Dict[str, Document], system: Dict[str, Document], missing_as_empty: bool = False,
                   system_root: Optional[Path] = None) -> List[Tuple[Document, Document]]:
    """(gold, system) per gold document; a gold file without a system one is an error unless
    ``missing_as_empty``; system-only files are ignored (with a warning), as BRATEval does."""
    pairs = []
    for name, document in gold.items():
        if name in system:
            pairs.append((document, system[name]))
        elif missing_as_empty:
            pairs.append((document, Document(Path(name))))
        else:
            raise InputError(f"no prediction for gold file {name} (pass --missing-as-empty to score it as empty)",
                             (system_root / name) if system_root else name)
    extra = sorted(set(system) - set(gold))
    if extra:
        logger.warning("%d prediction file(s) without a gold counterpart are ignored (first: %s)", len(extra), extra[0])
    return pairs


def score_entities(pairs: Iterable[Tuple[Document, Document]], rules: Rules, matching: str = "optimal"
                   ) -> Dict[str, Counts]:
    """Per entity type: TP under the gold type, FP under the system type, FN under the gold type."""
    table: Dict[str, Counts] = {}
    prefer = (lambda g, s: g.type == s.type) if rules.type != "exact" else None
    for gold_doc, system_doc in pairs:
        gold, system = list(gold_doc.entities.values()), list(system_doc.entities.values())
        pairs_found = match_pairs(gold, system, rules.entities_match, matching, prefer,
                                  entity_edges(gold, system, rules))
        matched_gold = {i for i, _ in pairs_found}
        matched_system = {j for _, j in pairs_found}
        for i, j in pairs_found:
            table.setdefault(gold[i].type, Counts()).tp += 1
            table.setdefault(system[j].type, Counts())
        for i, entity in enumerate(gold):
            if i not in matched_gold:
                table.setdefault(entity.type, Counts()).fn += 1
        for j, entity in enumerate(system):
            if j not in matched_system:
                table.setdefault(entity.type, Counts()).fp += 1
    return table


def _key(relation: Relation, entities: Dict[str, Entity]) -> str:
    return f"{relation.type}|{entities[relation.arg1].type}|{entities[relation.arg2].type}"


def score_relations(pairs: Iterable[Tuple[Document, Document]], rules: Rules, matching: str = "optimal",
                    types: Optional[Sequence[str]] = None) -> Dict[str, Counts]:
    """Per relation key ``type|arg1 type|arg2 type``: tp, fp, fn, fpm, fnm (``types``: only these relation types)."""
    table: Dict[str, Counts] = {}
    for gold_doc, system_doc in pairs:
        gold = [r for r in gold_doc.relations if types is None or r.type in types]
        system = [r for r in system_doc.relations if types is None or r.type in types]
        if gold or system:
            _score_relation_lists(gold, system, gold_doc.entities, system_doc.entities, rules, matching, table)
    return table


def _score_relation_lists(gold: List[Relation], system: List[Relation], gold_entities: Dict[str, Entity],
                          system_entities: Dict[str, Entity], rules: Rules, matching: str,
                          table: Dict[str, Counts]) -> None:
    gold_list, system_list = list(gold_entities.values()), list(system_entities.values())
    entity_matches = {(gold_list[i].id, system_list[j].id) for i, j in entity_edges(gold_list, system_list, rules)}
    gold_with_match = {g for g, _ in entity_matches}
    system_with_match = {s for _, s in entity_matches}
    gold_keys = [_key(r, gold_entities) for r in gold]
    system_keys = [_key(r, system_entities) for r in system]
    by_key: Dict[str, List[int]] = {}
    for j, key in enumerate(system_keys):
        by_key.setdefault(key, []).append(j)
    edges = [(i, j) for i, g in enumerate(gold) for j in by_key.get(gold_keys[i], ())
             if (g.arg1, system[j].arg1) in entity_matches and (g.arg2, system[j].arg2) in entity_matches]
    pairs = match_pairs(gold, system, None, matching, edges=edges)
    matched_gold, matched_system = {i for i, _ in pairs}, {j for _, j in pairs}
    for i, _ in pairs:
        table.setdefault(gold_keys[i], Counts()).tp += 1
    for i, relation in enumerate(gold):
        if i not in matched_gold:
            counts = table.setdefault(gold_keys[i], Counts())
            counts.fn += 1
            counts.fnm += relation.arg1 not in gold_with_match or relation.arg2 not in gold_with_match
    for j, relation in enumerate(system):
        if j not in matched_system:
            counts = table.setdefault(system_keys[j], Counts())
            counts.fp += 1
            counts.fpm += relation.arg1 not in system_with_match or relation.arg2 not in system_with_match


def _closure(links: Iterable[Tuple[str, str]]) -> set:
    """Transitive closure of directed links (a→b, b→c gives a→c), self links dropped."""
    successors: Dict[str, set] = {}
    for a, b in links:
        if a != b:
            successors.setdefault(a, set()).add(b)
    closed = set()
    for start in successors:
        seen, stack = set(), list(successors[start])
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(successors.get(node, ()))
        closed.update((start, node) for node in seen if node != start)
    return closed


def score_coreference_closure(pairs: Iterable[Tuple[Document, Document]], rules: Rules, matching: str = "optimal",
                              relation_type: str = COREFERENCE) -> Dict[str, Counts]:
    """COREFERENCE links closed transitively, system mentions mapped to their matched gold mentions first."""
    table: Dict[str, Counts] = {}
    for gold_doc, system_doc in pairs:
        gold_entities, system_entities = gold_doc.entities, system_doc.entities
        gold_list, system_list = list(gold_entities.values()), list(system_entities.values())
        prefer = (lambda g, s: g.type == s.type) if rules.type != "exact" else None
        mapping = {system_list[j].id: gold_list[i].id
                   for i, j in match_pairs(gold_list, system_list, rules.entities_match, matching, prefer,
                                           entity_edges(gold_list, system_list, rules))}
        types = {entity.id: entity.type for entity in gold_list}
        for entity in system_list:
            types.setdefault(f"system:{entity.id}", entity.type)

        def gold_links(document: Document) -> set:
            return {(r.arg1, r.arg2) for r in document.relations if r.type.upper() == relation_type}

        gold_closed = _closure(gold_links(gold_doc))
        system_closed = _closure({(mapping.get(a, f"system:{a}"), mapping.get(b, f"system:{b}"))
                                  for a, b in gold_links(system_doc)})
        for link_set, attribute in ((gold_closed & system_closed, "tp"), (system_closed - gold_closed, "fp"),
                                    (gold_closed - system_closed, "fn")):
            for a, b in link_set:
                counts = table.setdefault(f"{relation_type}|{types[a]}|{types[b]}", Counts())
                setattr(counts, attribute, getattr(counts, attribute) + 1)
    return table


# ------------------------------------------------------------------------------------------
# output


def half_up(value: float) -> str:
    """Four decimals, half-up on the exact binary value (Java's %1.4f): 0.03125 -> 0.0313."""
    return str(Decimal(value).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def total(table: Dict[str, Counts]) -> Counts:
    overall = Counts()
    for counts in table.values():
        overall.add(counts)
    return overall


def entity_table(table: Dict[str, Counts]) -> str:
    """BRATEval's entity table, from its ``Summary:`` line on."""
    lines = ["Summary:", "|tp|fp|fn|precision|recall|f1"]
    for name in sorted(table) + ["all"]:
        c = table[name] if name != "all" else total(table)
        lines.append(f"{name}|{c.tp}|{c.fp}|{c.fn}|{half_up(c.precision)}|{half_up(c.recall)}|{half_up(c.f1)}")
    return "\n".join(lines) + "\n"


def relation_table(table: Dict[str, Counts]) -> str:
    """BRATEval's relation table, from its ``Summary:`` line on."""
    lines = ["Summary:"]
    for name in sorted(table) + ["all"]:
        c = table[name] if name != "all" else total(table)
        lines.append(f"{name}|tp:{c.tp}|fp:{c.fp}|fn:{c.fn}|precision:{half_up(c.precision)}|"
                     f"recall:{half_up(c.recall)}|f1:{half_up(c.f1)}|fpm:{c.fpm}|fnm:{c.fnm}")
    return "\n".join(lines) + "\n"


def rows(table: Dict[str, Counts]) -> List[dict]:
    out = []
    for name in sorted(table) + ["all"]:
        c = table[name] if name != "all" else total(table)
        out.append({"key": name, "tp": c.tp, "fp": c.fp, "fn": c.fn, "fpm": c.fpm, "fnm": c.fnm,
                    "precision": c.precision, "recall": c.recall, "f1": c.f1})
    return out


def to_csv(table: Dict[str, Counts]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["key", "tp", "fp", "fn", "fpm", "fnm", "precision", "recall", "f1"])
    for row in rows(table):
        writer.writerow([row["key"], row["tp"], row["fp"], row["fn"], row["fpm"], row["fnm"],
                         half_up(row["precision"]), half_up(row["recall"]), half_up(row["f1"])])
    return buffer.getvalue()


def to_json(report: dict) -> str:
    return strict_json(report, indent=2) + "\n"


def score_folders(gold_dir, pred_dir, *, task: str = "ner", span: str = "exact", type_mode: str = "exact",
                  taxonomy=None, matching: str = "optimal", missing_as_empty: bool = False,
                  fmt: str = "table") -> str:
    """Score the predictions in ``pred_dir`` against ``gold_dir`` for ``task`` (``ner``, ``ee`` or
    ``ar``) and render the tables (``table``, ``csv`` or ``json``): ``openbench text brat``."""
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    mode, threshold = parse_span(span)
    rules = Rules(mode, threshold, type_mode, Taxonomy.read(taxonomy) if taxonomy else None)
    pairs = pair_documents(read_folder(gold_dir), read_folder(pred_dir), missing_as_empty, Path(pred_dir))
    if task == "ner":
        tables = {"entities": score_entities(pairs, rules, matching)}
    elif task == "ee":
        tables = {"relations": score_relations(pairs, rules, matching)}
    else:
        tables = {"surface": score_relations(pairs, rules, matching),
                  "coreference_closure": score_coreference_closure(pairs, rules, matching)}
    if fmt == "json":
        settings = {"task": task, "span": span, "type": type_mode, "matching": matching,
                    "taxonomy": None if taxonomy is None else str(taxonomy)}
        return to_json({"settings": settings, **{name: rows(table) for name, table in tables.items()}})
    parts = []
    for name, table in tables.items():
        if len(tables) > 1:
            parts.append(f"# {name.replace('_', ' ')}\n")
        if fmt == "csv":
            parts.append(to_csv(table))
        else:
            parts.append((entity_table if task == "ner" else relation_table)(table))
    return "".join(parts)
