"""The leakage audit: what in a graph or a split lets a model score without learning.

:func:`audit` reads a ``graph_files`` folder, any split layout ``evaluate --dataset`` accepts
(OpenBioLink samples, KGID ids, OGB folders, registry names) or a plain
``head<TAB>relation<TAB>tail`` file, and reports with counts, fractions and a few examples:

* ``duplicates``: rows repeating a triple of the same file (split); ``self_loops`` (h == t);
* ``reverse_duplicates``: triples (h, r, t) whose reverse (t, r, h) is stored too (h != t), per
  relation with the share of its triples affected (PrimeKG stores every edge so);
* relation patterns (Akrami et al., SIGMOD 2020), on the training triples of a split and on the
  whole graph otherwise, each pair with both coverage shares (the shared pairs over either
  relation's triples), reported when either share reaches the threshold θ:
  ``inverse_pairs`` (h, r, t) ⇔ (t, r', h); ``duplicate_relations`` (h, r, t) ⇔ (h, r', t);
  ``symmetric_relations`` (h, r, t) ⇔ (t, r, h) for ≥ θ of r's triples; ``cartesian_relations``:
  r links ≥ θ of its head set × tail set (at least two heads and two tails);
* for a split, ``trivially_inferable``: the validation and test triples training answers through
  those patterns (the triple itself, its reverse, an inverse or duplicate partner, or the same
  node pair under a parent or child relation of OpenBioLink's hierarchy), per relation and in
  total; and ``unseen``: evaluation entities, relations and triples no training triple has;
* ``split``: for a split that states its kind (``split_info.json``), what breaks that kind's
  question: an entity-held-out split's held-out entities in training triples of the held-out
  relations (``heldout_in_training``) and its held-out pairs restated in training
  (``heldout_pairs_in_training``, by rule: reverse, inverse or duplicate relation, super-property);
  an inductive split's (ILPC's layout) entities shared by its training and inference graphs
  (``shared_entities``), validation and test triples with an entity the inference graph lacks
  (``evaluation_outside_inference``) and relations of the inference graph, validation or test
  that training lacks (``relations_unseen_in_training``); each 0 on openbench's own splits. None
  for any other input. For an inductive split ``trivially_inferable`` and ``unseen`` are taken
  against the inference graph: the graph a model reads at test time.

Everything is joins of integer-coded triples (polars), no loop over triples: OpenBioLink HQ's
4.6 M triples take seconds (``benchmarks/bench_audit.py``). The report's schema is fixed
(:data:`SCHEMA_VERSION`, :data:`REPORT_KEYS`); the README documents it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import polars as pl

from openbench.errors import InputError

__all__ = ["SCHEMA_VERSION", "REPORT_KEYS", "DEFAULT_THRESHOLD", "MIN_CARTESIAN_SIDE", "EXAMPLES", "AuditInput",
           "read_audit_input", "audit", "audit_frames", "relation_patterns_of", "relation_patterns_of_codes",
           "implied_triples", "format_report"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: the split section
REPORT_KEYS = ("duplicates", "self_loops", "reverse_duplicates", "inverse_pairs", "duplicate_relations",
               "symmetric_relations", "cartesian_relations", "trivially_inferable", "unseen", "split")
DEFAULT_THRESHOLD = 0.8
MIN_CARTESIAN_SIDE = 2  # heads and tails a relation needs before its density says anything
EXAMPLES = 5
EVALUATION_SPLITS = ("valid", "test")
INFERENCE_RULES = ("in_training", "reverse_duplicate", "inverse_relation", "duplicate_relation", "super_property")


@dataclass
class AuditInput:
    """Labelled triples to audit: ``splits`` {name: frame of string columns h, r, t}, every row as
    stored (repeats included); ``kind`` ``"split"`` (train plus evaluation splits), ``"graph"``
    or ``"triples"`` (one set, name ``"graph"``)."""

    path: str
    kind: str
    splits: Dict[str, pl.DataFrame]
    # a split that states its kind: split_info.json, and its held-out entities (labels by role)
    split_info: Optional[dict] = None
    heldout: Optional[Dict[str, List[str]]] = None
    # a time split: the strata of its two snapshots, or its cut-off and dates (split_info.json)
    time: Optional[dict] = None


# ------------------------------------------------------------------------------------------
# reading


def _plain_triples(path: Path) -> pl.DataFrame:
    from openbench._io.triples import read_triples

    return read_triples(path)


def _graph_edges(folder: Path) -> Optional[Path]:
    for candidate in (folder / "edges.csv", folder / "graph_files" / "edges.csv"):
        if candidate.is_file():
            return candidate
    return None


def read_audit_input(path) -> AuditInput:
    """The triples of ``path`` (see the module docstring); a registry name stands for its verified copy
    (a published KG's: its converted graph)."""
    from graphgen.graph_files import GRAPH_INFO
    from openbench.datasets.published.names import graph_folder, resolve
    from openbench.datasets.published.registries import registered

    entry = registered(path)
    source = graph_folder(path) if entry is not None and entry.native else Path(resolve(path))
    if source.is_dir() and (source / "graph" / GRAPH_INFO).is_file():  # a published KG's copy: its graph
        source = source / "graph"
    if source.is_file():
        triples = _plain_triples(source)
        if not triples.height:
            raise InputError("the file holds no triples; expected head<TAB>relation<TAB>tail lines", source)
        return AuditInput(str(source), "triples", {"graph": triples})
    if not source.is_dir():
        raise InputError("expected a graph_files folder, a split folder or a head, relation, tail file (TSV or CSV)",
                         source)
    edges = _graph_edges(source)
    if edges is not None:
        from graphgen.graph_files import read_edges, read_graph_info

        info = read_graph_info(edges.parent)  # a converted published KG names its own relations
        frame = read_edges(edges, "1", relations=None if info is None else list(info["relations"])).select(pl.col("id1").cast(pl.String).alias("h"), pl.col("relation").alias("r"),
                                              pl.col("id2").cast(pl.String).alias("t"))
        return AuditInput(str(source), "graph", {"graph": frame})
    frames = _split_frames(source)
    if "inference" in frames:  # ILPC's layout: inductive, whether or not openbench wrote it
        from openbench.datasets.published.names import split_info_of

        return AuditInput(str(source), "split", frames, split_info_of(source) or {"kind": "inductive"}, None)
    return AuditInput(str(source), "split", frames, *_split_kind(source), time=_time_of(source))


def _time_of(folder: Path) -> Optional[dict]:
    """A time split's strata (two snapshots) and cut-off (a dated graph), where its split_info.json has them."""
    from openbench.datasets.published.names import split_info_of

    info = split_info_of(folder) or {}
    found = {key: info[key] for key in ("strata", "dated") if isinstance(info.get(key), dict)}
    return found or None


def _split_kind(folder: Path) -> tuple:
    """(split_info.json, {role: held-out labels}) of a split that states its kind, else (None, None)."""
    from openbench.datasets.published.names import split_info_of

    info = split_info_of(folder)
    if info is None or info.get("kind") is None:
        return None, None
    heldout = info.get("heldout") or {}
    path = (folder if (folder / "split_info.json").is_file() else folder.parent) / str(heldout.get("file", ""))
    roles: Dict[str, List[str]] = {"test": [], "valid": []}
    if path.is_file():
        from openbench._io.inputs import iter_lines

        for _, line in iter_lines(path):
            entity, _, role = line.partition("\t")
            roles.setdefault(role.strip() or "test", []).append(entity)
    return info, roles


def _split_frames(folder: Path) -> Dict[str, pl.DataFrame]:
    from openbench.datasets.files import read_id_array, read_id_map, read_sample_triples
    from openbench.datasets.layouts import ID_FILES, SAMPLE_FILES, is_ogb_folder, resolve_layout

    if is_ogb_folder(folder):
        from openbench.datasets.loader import load_dataset

        dataset = load_dataset(folder)
        return {split: _labelled(triples, dataset.entity_labels, dataset.relation_labels)
                for split, triples in dataset.triples.items()}
    layout, files = resolve_layout(folder)
    if layout == "inductive":
        from openbench.datasets.layouts import INDUCTIVE_FILES

        return {split: read_sample_triples(files / name) for split, name in INDUCTIVE_FILES.items()}
    if layout == "samples":
        return {split: read_sample_triples(files / name) for split, name in SAMPLE_FILES.items()
                if (files / name).is_file()}
    entities = read_id_map(files / "entities.tsv", "entity")
    relations = read_id_map(files / "relations.tsv", "relation")
    return {split: _labelled(read_id_array(files / name, len(entities), len(relations)), entities, relations)
            for split, name in ID_FILES.items()}


def _labelled(triples, entities: Sequence[str], relations: Sequence[str]) -> pl.DataFrame:
    """Labelled (h, r, t) string columns of id triples (N, 3): a numpy array or a tensor."""
    values = triples if isinstance(triples, np.ndarray) else triples.cpu().numpy()
    ids = pl.DataFrame(values, schema=["h", "r", "t"], orient="row")
    entity_labels, relation_labels = pl.Series(entities, dtype=pl.String), pl.Series(relations, dtype=pl.String)
    return ids.select(pl.col("h").map_batches(lambda s: entity_labels.gather(s)),
                      pl.col("r").map_batches(lambda s: relation_labels.gather(s)),
                      pl.col("t").map_batches(lambda s: entity_labels.gather(s)))


# ------------------------------------------------------------------------------------------
# integer codes


class _Codes:
    """Entities and relations of every split as integer codes (sorted labels), and back."""

    def __init__(self, splits: Dict[str, pl.DataFrame]):
        frames = [frame for frame in splits.values() if frame.height]
        empty = pl.Series([], dtype=pl.String)
        nodes = pl.concat([f.get_column(c) for f in frames for c in ("h", "t")]) if frames else empty
        relations = pl.concat([f.get_column("r") for f in frames]) if frames else empty
        self.entities = nodes.unique().sort()
        self.relations = relations.unique().sort()
        self.entity_enum, self.relation_enum = pl.Enum(self.entities), pl.Enum(self.relations)
        self.width = max(1, len(self.entities))

    @classmethod
    def of_relations(cls, labels: Sequence[str]) -> "_Codes":
        """Codes whose relation codes are a dataset's relation ids (entities unused)."""
        codes = cls({})
        codes.relations = pl.Series(list(labels), dtype=pl.String)
        return codes

    @property
    def index(self) -> Dict[str, int]:
        """{relation label: code}."""
        return {label: i for i, label in enumerate(self.relations.to_list())}

    def encode(self, frame: pl.DataFrame) -> pl.DataFrame:
        """(h, r, t) int64 codes of a labelled frame."""
        return frame.select(pl.col("h").cast(self.entity_enum).to_physical().cast(pl.Int64),
                            pl.col("r").cast(self.relation_enum).to_physical().cast(pl.Int64),
                            pl.col("t").cast(self.entity_enum).to_physical().cast(pl.Int64))

    def relation(self, code: int) -> str:
        return self.relations[int(code)]

    def triples(self, frame: pl.DataFrame, limit: int = EXAMPLES) -> List[List[str]]:
        """The first ``limit`` coded triples of ``frame`` (sorted) as label triples."""
        rows = frame.select("h", "r", "t").unique().sort("h", "r", "t").head(limit).rows()
        return [[self.entities[h], self.relations[r], self.entities[t]] for h, r, t in rows]


def _fraction(count: int, total: int) -> float:
    return count / total if total else 0.0


# ------------------------------------------------------------------------------------------
# the sections


def _duplicates(coded: Dict[str, pl.DataFrame], codes: _Codes) -> dict:
    by_split, examples, repeats = {}, [], 0
    for split, frame in coded.items():
        extra = frame.height - frame.unique().height
        by_split[split] = extra
        repeats += extra
        if extra and len(examples) < EXAMPLES:
            repeated = frame.filter(frame.is_duplicated())
            examples.extend(codes.triples(repeated, EXAMPLES - len(examples)))
    rows = sum(frame.height for frame in coded.values())
    return {"count": repeats, "fraction": _fraction(repeats, rows), "by_split": by_split, "examples": examples}


def _by_relation(counts: pl.DataFrame, sizes: pl.DataFrame, codes: _Codes) -> Dict[str, dict]:
    """{relation: {"count", "fraction"}} of (r, count) against (r, size), relations with a count only."""
    joined = counts.join(sizes, on="r").sort("r")
    return {codes.relation(r): {"count": int(n), "fraction": _fraction(int(n), int(size))}
            for r, n, size in joined.select("r", "count", "size").rows()}


def _self_loops(distinct: pl.DataFrame, sizes: pl.DataFrame, codes: _Codes) -> dict:
    loops = distinct.filter(pl.col("h") == pl.col("t"))
    counts = loops.group_by("r").len("count")
    return {"count": loops.height, "fraction": _fraction(loops.height, distinct.height),
            "by_relation": _by_relation(counts, sizes, codes), "examples": codes.triples(loops)}


def _reversed(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(pl.col("t").alias("h"), "r", pl.col("h").alias("t"))


def _reverse_duplicates(distinct: pl.DataFrame, sizes: pl.DataFrame, codes: _Codes) -> dict:
    proper = distinct.filter(pl.col("h") != pl.col("t"))
    affected = proper.join(_reversed(proper), on=["h", "r", "t"], how="semi")
    counts = affected.group_by("r").len("count")
    return {"count": affected.height, "pairs": affected.height // 2,
            "fraction": _fraction(affected.height, distinct.height),
            "by_relation": _by_relation(counts, sizes, codes),
            "examples": codes.triples(affected.filter(pl.col("h") < pl.col("t")))}


def _shared_pairs(patterns: pl.DataFrame, inverse: bool, involving: Optional[List[int]] = None) -> pl.DataFrame:
    """(r, r2, shared) over r < r2: node pairs (h, t) of r whose (t, h) (``inverse``) or (h, t)
    relation r2 also holds. Symmetric in r and r2 as a set, so each pair once. ``involving``
    (relation codes): only the pairs (r, r2) with r or r2 among them, joining only their triples."""
    pairs = patterns.select("h", "r", "t")
    other = (_reversed(pairs) if inverse else pairs).rename({"r": "r2"})
    if involving is None:
        joined = pairs.join(other, on=["h", "t"], how="inner").filter(pl.col("r") < pl.col("r2"))
        return joined.group_by("r", "r2").len("shared")
    # each pair of relations once: from its smaller side when both are involved, else from the involved one
    joined = (pairs.filter(pl.col("r").is_in(involving)).join(other, on=["h", "t"], how="inner")
              .filter((pl.col("r") < pl.col("r2")) | ((pl.col("r") > pl.col("r2")) & ~pl.col("r2").is_in(involving))))
    return (joined.select(pl.min_horizontal("r", "r2").alias("r"), pl.max_horizontal("r", "r2").alias("r2"))
            .group_by("r", "r2").len("shared"))


def _pair_patterns(shared: pl.DataFrame, sizes: pl.DataFrame, threshold: float, codes: _Codes,
                   partner: str) -> List[dict]:
    size_of = dict(sizes.select("r", "size").rows())
    found = []
    for r, r2, count in shared.sort("shared", "r", "r2", descending=[True, False, False]).rows():
        coverage, converse = _fraction(count, size_of[r]), _fraction(count, size_of[r2])
        if max(coverage, converse) >= threshold:
            found.append({"relation": codes.relation(r), partner: codes.relation(r2), "shared": int(count),
                          "coverage": coverage, "converse_coverage": converse})
    return found


def _symmetric(patterns: pl.DataFrame, sizes: pl.DataFrame, threshold: float, codes: _Codes,
               involving: Optional[List[int]] = None) -> List[dict]:
    proper = patterns.filter(pl.col("h") != pl.col("t"))
    if involving is not None:
        proper = proper.filter(pl.col("r").is_in(involving))
    counts = proper.join(_reversed(proper), on=["h", "r", "t"], how="semi").group_by("r").len("count")
    found = []
    for r, count, size in counts.join(sizes, on="r").sort("r").select("r", "count", "size").rows():
        if _fraction(count, size) >= threshold:
            found.append({"relation": codes.relation(r), "coverage": _fraction(count, size), "triples": int(size)})
    return found


def _cartesian(patterns: pl.DataFrame, threshold: float, codes: _Codes) -> List[dict]:
    shape = patterns.group_by("r").agg(pl.len().alias("triples"), pl.col("h").n_unique().alias("heads"),
                                       pl.col("t").n_unique().alias("tails")).sort("r")
    found = []
    for r, triples, heads, tails in shape.select("r", "triples", "heads", "tails").rows():
        density = triples / (heads * tails)
        if heads >= MIN_CARTESIAN_SIDE and tails >= MIN_CARTESIAN_SIDE and density >= threshold:
            found.append({"relation": codes.relation(r), "density": density, "heads": int(heads),
                          "tails": int(tails), "triples": int(triples)})
    return found


def _partner_table(pairs: List[dict], partner: str, codes: _Codes) -> pl.DataFrame:
    """(r, r2) both ways of the reported pairs, as codes."""
    index = codes.index
    rows = [(index[p["relation"]], index[p[partner]]) for p in pairs]
    rows += [(b, a) for a, b in rows]
    return pl.DataFrame(rows, schema={"r": pl.Int64, "r2": pl.Int64}, orient="row")


def _hierarchy_table(codes: _Codes) -> pl.DataFrame:
    """(r, r2): r2 is r's parent or a child of r in OpenBioLink's edge-type hierarchy (the pairs
    the split's hierarchy cleaning, :func:`splits.leakage.drop_hierarchy_leakage`, looks at;
    read from the edge-type registry both use, since splits.leakage imports this module)."""
    from graphgen.edge_types import EDGE_TYPES

    index = codes.index
    rows = []
    for name, parent in ((name, edge.parent) for name, edge in EDGE_TYPES.items()):
        if parent != name and name in index and parent in index:
            rows += [(index[name], index[parent]), (index[parent], index[name])]
    return pl.DataFrame(rows, schema={"r": pl.Int64, "r2": pl.Int64}, orient="row")


def _inferable_rows(evaluation: pl.DataFrame, train: pl.DataFrame, inverse: pl.DataFrame,
                    duplicate: pl.DataFrame, hierarchy: pl.DataFrame) -> Dict[str, pl.Series]:
    """{rule: row ids of ``evaluation`` (distinct, with ``row``) training answers by that rule}."""
    keys = ["h", "r", "t"]
    rows = {"in_training": evaluation.join(train, on=keys, how="semi"),
            "reverse_duplicate": evaluation.filter(pl.col("h") != pl.col("t"))
            .join(_reversed(train), on=keys, how="semi")}
    through_inverse = evaluation.join(inverse, on="r").select("row", pl.col("t").alias("h"), pl.col("r2").alias("r"),
                                                              pl.col("h").alias("t"))
    rows["inverse_relation"] = through_inverse.join(train, on=keys, how="semi")
    through_duplicate = evaluation.join(duplicate, on="r").select("row", "h", pl.col("r2").alias("r"), "t")
    rows["duplicate_relation"] = through_duplicate.join(train, on=keys, how="semi")
    unordered = [pl.min_horizontal("h", "t").alias("lo"), pl.max_horizontal("h", "t").alias("hi")]
    related = evaluation.join(hierarchy, on="r").select("row", pl.col("r2").alias("r"), *unordered)
    rows["super_property"] = related.join(train.select("r", *unordered).unique(), on=["lo", "hi", "r"], how="semi")
    return {rule: frame.get_column("row").unique() for rule, frame in rows.items()}


def _test_time_graph(coded: Dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The triples a model reads when it answers evaluation queries: training's, or an inductive
    split's inference graph."""
    return coded["inference"] if "inference" in coded else coded["train"]


def _trivially_inferable(coded: Dict[str, pl.DataFrame], patterns: dict, codes: _Codes) -> dict:
    train = _test_time_graph(coded).unique()
    inverse = _partner_table(patterns["inverse_pairs"], "inverse", codes)
    duplicate = _partner_table(patterns["duplicate_relations"], "duplicate", codes)
    hierarchy = _hierarchy_table(codes)
    report = {}
    for split in EVALUATION_SPLITS:
        if split not in coded or not coded[split].height:
            continue
        evaluation = coded[split].unique(maintain_order=True).with_row_index("row").with_columns(
            pl.col("row").cast(pl.Int64))
        found = _inferable_rows(evaluation, train, inverse, duplicate, hierarchy)
        flags = evaluation.select("row", "h", "r", "t").with_columns(
            [pl.col("row").is_in(found[rule].implode()).alias(rule) for rule in INFERENCE_RULES])
        flags = flags.with_columns(pl.any_horizontal(*INFERENCE_RULES).alias("any"))
        per_relation = flags.group_by("r").agg(pl.len().alias("triples"), *[pl.col(c).sum() for c in
                                                                             ("any", *INFERENCE_RULES)]).sort("r")
        total = evaluation.height
        report[split] = {
            "triples": total, "count": int(flags["any"].sum()), "fraction": _fraction(int(flags["any"].sum()), total),
            "by_rule": {rule: int(flags[rule].sum()) for rule in INFERENCE_RULES},
            "by_relation": {codes.relation(row["r"]): {"triples": int(row["triples"]), "count": int(row["any"]),
                                                       "fraction": _fraction(int(row["any"]), int(row["triples"])),
                                                       "by_rule": {rule: int(row[rule]) for rule in INFERENCE_RULES}}
                            for row in per_relation.iter_rows(named=True) if row["any"]},
            "examples": codes.triples(flags.filter(pl.col("any")))}
    return report


def _unseen(coded: Dict[str, pl.DataFrame], codes: _Codes) -> dict:
    train = _test_time_graph(coded)
    seen_nodes = pl.concat([train.get_column("h"), train.get_column("t")]).unique().implode()
    seen_relations = train.get_column("r").unique().implode()
    report = {}
    for split in EVALUATION_SPLITS:
        if split not in coded or not coded[split].height:
            continue
        frame = coded[split]
        nodes = pl.concat([frame.get_column("h"), frame.get_column("t")]).unique()
        unseen_nodes = nodes.filter(~nodes.is_in(seen_nodes))
        relations = frame.get_column("r").unique()
        unseen_relations = relations.filter(~relations.is_in(seen_relations))
        touched = frame.filter(~pl.col("h").is_in(seen_nodes) | ~pl.col("t").is_in(seen_nodes)
                               | ~pl.col("r").is_in(seen_relations))
        report[split] = {"entities": len(unseen_nodes), "relations": len(unseen_relations),
                         "triples": touched.height, "fraction": _fraction(touched.height, frame.height),
                         "examples": codes.triples(touched)}
    return report


# ------------------------------------------------------------------------------------------
# the report


def audit_frames(source: AuditInput, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """The report (see the module docstring) of ``source``'s triples at ``threshold``."""
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"threshold {threshold}: expected a share in (0, 1]")
    if source.kind == "split" and "train" not in source.splits:
        raise InputError("a split without training triples", source.path)
    codes = _Codes(source.splits)
    coded = {split: codes.encode(frame) for split, frame in source.splits.items()}
    distinct = pl.concat(list(coded.values())).unique()
    sizes = distinct.group_by("r").len("size")
    split = source.kind == "split"
    patterns_on = coded["train"].unique() if split else distinct
    patterns = _patterns(patterns_on, threshold, codes)
    report = {"schema_version": SCHEMA_VERSION, "written_by": "openbench", "kind": "audit",
              "input": {"path": source.path, "layout": source.kind,
                        "triples": {name: frame.height for name, frame in source.splits.items()},
                        "entities": len(codes.entities), "relations": len(codes.relations)},
              "threshold": threshold, "patterns_from": "train" if split else "graph",
              "duplicates": _duplicates(coded, codes),
              "self_loops": _self_loops(distinct, sizes, codes),
              "reverse_duplicates": _reverse_duplicates(distinct, sizes, codes),
              **patterns,
              "cartesian_relations": _cartesian(patterns_on, threshold, codes),
              "trivially_inferable": _trivially_inferable(coded, patterns, codes) if split else None,
              "unseen": _unseen(coded, codes) if split else None}
    report["split"] = _kind_section(source, report["trivially_inferable"]) if split else None
    report["time"] = source.time
    return report


def _kind_section(source: AuditInput, inferable: Optional[dict]) -> Optional[dict]:
    """What breaks the split kind's question (see the module docstring); None for a split of no kind."""
    info, heldout = source.split_info, source.heldout or {}
    if info is None:
        return None
    if "inference" in source.splits:
        return _inductive_section(source.splits)
    relations = (info.get("heldout") or {}).get("relations")
    entities = sorted({entity for members in heldout.values() for entity in members})
    train = source.splits["train"]
    held = train if relations is None else train.filter(pl.col("r").is_in(list(relations)))
    chosen = pl.Series(entities, dtype=pl.String).implode()
    in_training = held.filter(pl.col("h").is_in(chosen) | pl.col("t").is_in(chosen)).height
    rules = ("reverse_duplicate", "inverse_relation", "duplicate_relation", "super_property")
    restated = {rule: sum(part["by_rule"][rule] for part in (inferable or {}).values()) for rule in rules}
    return {"kind": info.get("kind"), "heldout_entities": {role: len(members) for role, members in heldout.items()},
            "relations": relations, "heldout_in_training": in_training, "heldout_pairs_in_training": restated,
            "count": in_training + sum(restated.values())}


def _inductive_section(splits: Dict[str, pl.DataFrame]) -> dict:
    """What breaks an inductive split: training and inference graphs sharing entities, evaluation
    triples outside the inference graph's entities, relations training lacks."""
    def entities(*names):
        return pl.concat([splits[name].get_column(c) for name in names for c in ("h", "t")]).unique()

    trained, inferred = entities("train"), entities("inference")
    shared = int(trained.is_in(entities("inference", "valid", "test").implode()).sum())
    known = inferred.implode()
    outside = {name: splits[name].filter(~pl.col("h").is_in(known) | ~pl.col("t").is_in(known)).height
               for name in ("valid", "test")}
    relations = pl.concat([splits[name].get_column("r") for name in ("inference", "valid", "test")]).unique()
    unseen_relations = sorted(relations.filter(~relations.is_in(splits["train"].get_column("r").unique().implode()))
                              .to_list())
    return {"kind": "inductive", "entities": {"train": trained.len(), "inference": inferred.len()},
            "shared_entities": shared, "evaluation_outside_inference": outside,
            "relations_unseen_in_training": unseen_relations,
            "count": shared + sum(outside.values()) + len(unseen_relations)}


def relation_patterns_of(triples: pl.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """Only the pair and symmetric patterns (``inverse_pairs``, ``duplicate_relations``,
    ``symmetric_relations``, as :func:`audit_frames` reports them) of labelled triples (h, r, t):
    what a split's cleaning needs, without the rest of the report."""
    codes = _Codes({"graph": triples})
    return _patterns(codes.encode(triples).unique(), threshold, codes)


def relation_patterns_of_codes(triples: pl.DataFrame, relation_labels: Sequence[str],
                               threshold: float = DEFAULT_THRESHOLD, involving: Optional[Sequence[str]] = None) -> dict:
    """:func:`relation_patterns_of` of integer-coded triples (h, r, t): entity codes need only be
    equal where the entities are, relation code i is ``relation_labels[i]`` (sorted, as the audit
    codes them). ``involving`` (relation labels): only the inverse and duplicate pairs with one of
    them and only their symmetry (a report of a superset of the triples still holds for the rest)."""
    codes = _Codes.of_relations(relation_labels)
    chosen = None if involving is None else sorted(codes.index[r] for r in involving if r in codes.index)
    return _patterns(triples.select("h", "r", "t").unique(), threshold, codes, chosen)


def _patterns(distinct: pl.DataFrame, threshold: float, codes: _Codes, involving: Optional[List[int]] = None) -> dict:
    """The pair and symmetric patterns of distinct coded triples (``involving``: only those with
    these relation codes)."""
    sizes = distinct.group_by("r").len("size")
    return {"inverse_pairs": _pair_patterns(_shared_pairs(distinct, True, involving), sizes, threshold, codes,
                                            "inverse"),
            "duplicate_relations": _pair_patterns(_shared_pairs(distinct, False, involving), sizes, threshold, codes,
                                                  "duplicate"),
            "symmetric_relations": _symmetric(distinct, sizes, threshold, codes, involving)}


def audit(path, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """The leakage report of the graph, split or triples file at ``path`` (see the module docstring)."""
    return audit_frames(read_audit_input(path), threshold)


def implied_triples(train, relation_labels: Sequence[str], threshold: float = DEFAULT_THRESHOLD):
    """(N, 3) int64 distinct triples that the training triples ``train`` (T, 3) imply through the
    patterns the audit finds in them at ``threshold``: the reverse of each triple of a symmetric
    relation, for an inverse pair (r, r') the reverse of each r' triple under r, for a duplicate
    pair each r' triple under r (both ways). The rules baseline's answers."""
    import torch

    frame = pl.DataFrame(train.cpu().numpy(), schema=["h", "r", "t"], orient="row").cast(pl.Int64).unique()
    codes = _Codes.of_relations(relation_labels)
    patterns = _patterns(frame, threshold, codes)

    def through(pairs: List[dict], partner: str) -> pl.DataFrame:
        """Each training triple of a pair's partner under the pair's other relation."""
        table = _partner_table(pairs, partner, codes).rename({"r": "target", "r2": "r"})
        return frame.join(table, on="r").select("h", pl.col("target").alias("r"), "t")

    symmetric = [codes.index[item["relation"]] for item in patterns["symmetric_relations"]]
    parts = [_reversed(frame.filter(pl.col("r").is_in(symmetric))),
             _reversed(through(patterns["inverse_pairs"], "inverse")),
             through(patterns["duplicate_relations"], "duplicate")]
    implied = pl.concat([part.cast(pl.Int64) for part in parts]).unique().sort("h", "r", "t")
    return torch.from_numpy(implied.to_numpy().reshape(-1, 3).copy())


# ------------------------------------------------------------------------------------------
# the table


def format_report(report: dict) -> str:
    """The report as text, one section per finding."""
    lines = [f"leakage audit of {report['input']['path']} ({report['input']['layout']}; "
             + ", ".join(f"{name} {count:,}" for name, count in report["input"]["triples"].items())
             + f" triples; threshold {report['threshold']})"]
    for key in ("duplicates", "self_loops", "reverse_duplicates"):
        section = report[key]
        lines.append(f"{key.replace('_', ' ')}: {section['count']:,} ({section['fraction']:.2%})")
        for relation, counts in list(section.get("by_relation", {}).items())[:10]:
            lines.append(f"  {relation}: {counts['count']:,} ({counts['fraction']:.2%} of its triples)")
    lines.append(f"relation patterns (from the {report['patterns_from']} triples):")
    for key, partner in (("inverse_pairs", "inverse"), ("duplicate_relations", "duplicate")):
        lines.append(f"  {key.replace('_', ' ')}: {len(report[key])}")
        for pair in report[key][:10]:
            lines.append(f"    {pair['relation']} ~ {pair[partner]}: {pair['shared']:,} pairs "
                         f"({pair['coverage']:.2%} / {pair['converse_coverage']:.2%})")
    lines.append(f"  symmetric relations: {len(report['symmetric_relations'])}")
    lines += [f"    {item['relation']}: {item['coverage']:.2%}" for item in report["symmetric_relations"][:10]]
    lines.append(f"  cartesian-product relations: {len(report['cartesian_relations'])}")
    lines += [f"    {item['relation']}: density {item['density']:.2%} over {item['heads']} × {item['tails']}"
              for item in report["cartesian_relations"][:10]]
    for split, section in (report["trivially_inferable"] or {}).items():
        rules = ", ".join(f"{rule} {count:,}" for rule, count in section["by_rule"].items() if count)
        lines.append(f"trivially inferable {split} triples: {section['count']:,} of {section['triples']:,} "
                     f"({section['fraction']:.2%}){': ' + rules if rules else ''}")
    reference = "the inference graph" if (report.get("split") or {}).get("kind") == "inductive" else "training"
    for split, section in (report["unseen"] or {}).items():
        lines.append(f"unseen in {reference} ({split}): {section['entities']:,} entities, {section['relations']:,} "
                     f"relations, {section['triples']:,} triples")
    lines += _time_lines(report.get("time"))
    kind = report.get("split")
    if kind is not None and kind["kind"] == "inductive":
        outside = ", ".join(f"{name} {count:,}" for name, count in kind["evaluation_outside_inference"].items())
        lines.append(f"inductive split (training graph {kind['entities']['train']:,}, inference graph "
                     f"{kind['entities']['inference']:,} entities): entities shared by the two graphs "
                     f"{kind['shared_entities']:,}; evaluation triples with an entity outside the inference graph: "
                     f"{outside}; relations training lacks: {len(kind['relations_unseen_in_training']):,}")
    elif kind is not None:
        held = ", ".join(f"{role} {count:,}" for role, count in kind["heldout_entities"].items())
        relations = ", ".join(kind["relations"]) if kind["relations"] else "every relation (fully cold)"
        restated = ", ".join(f"{rule} {count:,}" for rule, count in kind["heldout_pairs_in_training"].items())
        lines.append(f"{kind['kind']} split ({held} entities held out under {relations}): held-out entities in "
                     f"training under those relations {kind['heldout_in_training']:,}; held-out pairs restated in "
                     f"training: {restated}")
    return "\n".join(lines)


def _time_lines(time: Optional[dict]) -> List[str]:
    """A time split's section: its snapshots' strata per relation, or its cut-off and dates."""
    if not time:
        return []
    lines = []
    strata = time.get("strata")
    if strata:
        edges, entities = strata["edges"], strata["entities"]
        lines.append(f"time split, two snapshots: {edges['added']:,} edges added, {edges['persistent']:,} persistent, "
                     f"{edges['removed']:,} removed; {entities['appeared']:,} entities appeared, "
                     f"{entities['vanished']:,} vanished")
        lines += [f"  {relation}: added {counts['added']:,}, persistent {counts['persistent']:,}, removed "
                  f"{counts['removed']:,}" for relation, counts in list(strata["per_relation"].items())[:20]]
    dated = time.get("dated")
    if dated:
        valid = f", validation after {dated['valid_cutoff']}" if dated.get("valid_cutoff") else ""
        years = ", ".join(f"{year} {count:,}" for year, count in dated.get("test_edges_by_year", {}).items())
        lines.append(f"time split, dated edges (column {dated['date_column']}, {dated['earliest']} to "
                     f"{dated['latest']}): cut-off {dated['cutoff']}{valid}; {dated['undated_edges_in_training']:,} "
                     f"undated edge(s) in training; {dated['entities_first_seen_after_training']:,} entities first "
                     f"seen after training; test edges by year: {years}")
    return lines
