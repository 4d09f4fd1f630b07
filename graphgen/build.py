"""Graph assembly: raw edges -> id mapping (one-to-many) -> alt ids -> quality cutoff -> dedup.

All steps are polars joins and filters over whole tables. Per recipe (see
:mod:`graphgen.recipes`): each side is mapped through its mapping table (rows whose id has no
mapping are reported in ``ids_no_mapping.tsv`` and dropped; several targets give several edges),
prefixed to a CURIE, and replaced by its primary id when it is an ontology alt_id. The quality
cutoff of the edge type at the chosen level keeps numeric scores strictly above the threshold
or drops excluded evidence codes. The first occurrence of (id1, id2) wins. Undirected edge types
are reduced to one direction and, in a directed graph, materialised in both.
"""
from __future__ import annotations

import logging
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import polars as pl
from openbench.progress import progress as progress_bar

from graphgen.edge_types import EDGE_TYPES, NODE_TYPES, PREFIX_TO_NODE_TYPE, ExcludedScores, MinScore, normalise_quality
from graphgen.order import EdgeOrder, sort_edges
from graphgen.recipes import ALT_ID_SOURCES, MAPPINGS, RECIPES, SOURCES, Recipe, Side, SourceFiles

__all__ = ["EDGE_COLUMNS", "STATS_COLUMNS", "RAW_NAMESPACE_FIXES", "EDGE_TYPE_ENUM", "NODE_TYPE_ENUM",
           "NODE_TYPE_NAMES", "READ_AHEAD", "SOURCE_ENUM", "SOURCE_BITS", "EDGE_SCHEMA", "Inputs", "Part",
           "EdgeTable", "dictionary_codes", "Graph", "MappedSide", "MAPPING_STATS_COLUMNS", "NODE_TYPE_CODE", "raw_edges", "run_recipe",
           "build_graph", "build_from_folder"]

logger = logging.getLogger(__name__)

EDGE_COLUMNS = ["id1", "edge_type", "id2", "qscore", "source"]
STATS_COLUMNS = ["Edge Type", "Node1 Type", "Node2 Type", "Nr edges", "Nr edges no mapping", "Nr edges below cutoff",
                 "Edges coverage", "Duplicated edges", "Nr edges return direction", "Nr edges after mapping",
                 "Nr nodes1 no mapping", "Nr nodes2 no mapping", "Nr nodes1", "Nr nodes2", "nodes1 coverage",
                 "nodes2 coverage"]
# mapping_stats.tsv: per recipe, mapped side and identifier namespace of the raw ids, how many
# rows (of those the side was given: side 2 sees the rows side 1 kept) and distinct ids mapped
MAPPING_STATS_COLUMNS = ["Edge Type", "Source", "Set", "Side", "Mapping", "Namespace", "Rows", "Rows mapped", "Ids",
                         "Ids mapped"]
# raw namespaces as OpenBioLink writes unmapped ids
RAW_NAMESPACE_FIXES = {"OMIM": "MIM", "PMID": "PUBMED"}
EDGE_TYPE_ENUM = pl.Enum(sorted(EDGE_TYPES))  # sorted: the enum order is the output order
NODE_TYPE_ENUM = pl.Enum(sorted(NODE_TYPES))
NODE_TYPE_NAMES = pl.Series(sorted(NODE_TYPES), dtype=NODE_TYPE_ENUM)  # indexed by node-type code
READ_AHEAD = 3  # recipes whose raw edges are read ahead of the one being built
SOURCE_ENUM = pl.Enum(sorted(SOURCES))
SOURCE_BITS = (len(SOURCES) - 1).bit_length()
EDGE_SCHEMA = {"id1": pl.Categorical, "edge_type": EDGE_TYPE_ENUM, "id2": pl.Categorical, "qscore": pl.Categorical,
               "source": SOURCE_ENUM, "type1": NODE_TYPE_ENUM, "type2": NODE_TYPE_ENUM}


class Inputs:
    """Parsed inputs of the build: raw edges per recipe, mapping tables, alt-id tables."""

    def __init__(self, files: SourceFiles):
        self.files = files
        self._mappings: Dict[str, pl.DataFrame] = {}
        self._alt: Dict[str, pl.DataFrame] = {}

    def raw(self, recipe: Recipe) -> pl.DataFrame:
        return recipe.load(self.files)

    def release(self, source: str) -> None:
        """Forget the parsed tables of ``source`` (no later recipe reads them)."""
        self.files.release(source)

    def mapping(self, name: str) -> pl.DataFrame:
        if name not in self._mappings:
            table = MAPPINGS[name].load(self.files).select("source", "target")
            self._mappings[name] = table.filter(pl.col("source").is_not_null() & pl.col("target").is_not_null()) \
                .unique(maintain_order=True)
        return self._mappings[name]

    def alt_ids(self, ontology: str) -> pl.DataFrame:
        if ontology not in self._alt:
            alt = self.files.ontology(ALT_ID_SOURCES[ontology]).alt_ids
            self._alt[ontology] = alt.unique("alt_id", keep="first", maintain_order=True)
        return self._alt[ontology]


@dataclass
class Part:
    """The result of one recipe."""

    recipe: Recipe
    edges: pl.DataFrame
    unmapped: pl.DataFrame
    stats: dict
    mapping_stats: List[dict] = field(default_factory=list)


class EdgeTable:
    """Edges and their output order, without moving the rows into it.

    ``frame``: (n rows) id1, edge_type, id2, qscore, source, type1, type2 in build order (ids and
    score categorical, edge_type, source and the types enums). ``node_ids``: the distinct node
    ids sorted by (type, id). ``key``: the :class:`graphgen.order.EdgeOrder` of the rows:
    ``key.order`` (n,) uint32 frame rows in output order, sorted by (node1 type, id1, edge type,
    node2 type, id2), and per output position the rank of id1 and id2 in ``node_ids``, the
    edge-type code and, as the passenger, score code << :data:`SOURCE_BITS` | source code.
    ``score_names``: the distinct scores (None for a missing one), indexed by score code. The
    writer assembles lines in output order straight from these; :attr:`frame_in_order` moves the
    rows only when someone asks for the sorted frame.
    """

    def __init__(self, frame: pl.DataFrame, node_ids: List[str], key: EdgeOrder, score_names: List[Optional[str]]):
        self.frame, self.node_ids, self.key, self.score_names = frame, node_ids, key, score_names
        self._in_order: Optional[pl.DataFrame] = None

    @classmethod
    def empty(cls) -> "EdgeTable":
        none = np.zeros(0, dtype=np.uint32)
        return cls(pl.DataFrame(schema=EDGE_SCHEMA), [], EdgeOrder(none, none, none.astype(np.uint8), none, none), [])

    @property
    def height(self) -> int:
        return self.frame.height

    @property
    def order(self) -> np.ndarray:
        """(n,) uint32 frame rows in output order."""
        return self.key.order

    def score_codes(self) -> np.ndarray:
        """(n,) uint32 index into :attr:`score_names` of each output position."""
        return self.key.passenger >> np.uint32(SOURCE_BITS)

    def source_codes(self) -> np.ndarray:
        """(n,) uint32 index into ``SOURCE_ENUM.categories`` of each output position."""
        return self.key.passenger & np.uint32((1 << SOURCE_BITS) - 1)

    @property
    def frame_in_order(self) -> pl.DataFrame:
        """The edges (columns :data:`EDGE_COLUMNS`) sorted in output order."""
        if self._in_order is None:
            self._in_order = self.frame.select(EDGE_COLUMNS)[pl.Series(self.order)]
        return self._in_order


def dictionary_codes(series: pl.Series) -> Tuple[np.ndarray, List[Optional[str]]]:
    """A categorical column as ((n,) uint32 codes, the distinct values they index, None for null)."""
    physical = series.to_physical()
    top = -1 if physical.null_count() == len(physical) else int(physical.max())
    codes = (physical.fill_null(top + 1) if physical.null_count() else physical).to_numpy()  # top + 1: null
    first = pl.Series(codes).arg_unique().to_numpy()  # a row of each distinct code
    lookup = np.zeros(top + 2, dtype=np.uint32)
    lookup[codes[first]] = np.arange(len(first), dtype=np.uint32)
    return lookup[codes], series.gather(first).cast(pl.String).to_list()


@dataclass
class Graph:
    """Positive and true-negative edges (:class:`EdgeTable`), nodes (id, node_type), unmapped ids
    (id, edge_type) and one statistics row per recipe."""

    edge_table: EdgeTable
    tn_edge_table: EdgeTable
    nodes: pl.DataFrame
    tn_nodes: pl.DataFrame
    unmapped: pl.DataFrame
    tn_unmapped: pl.DataFrame
    stats: List[dict] = field(default_factory=list)
    tn_stats: List[dict] = field(default_factory=list)
    mapping_stats: List[dict] = field(default_factory=list)  # positive and true-negative recipes
    directed: bool = True
    quality: str = "hq"

    @property
    def edges(self) -> pl.DataFrame:
        """Positive edges in output order: id1, edge_type, id2, qscore, source (ids, score and
        source categorical, edge_type an enum)."""
        return self.edge_table.frame_in_order

    @property
    def tn_edges(self) -> pl.DataFrame:
        return self.tn_edge_table.frame_in_order


def _with_prefix(column: str, prefix: str) -> pl.Expr:
    value = pl.col(column)
    return pl.when(value.str.starts_with(prefix + ":")).then(value).otherwise(pl.lit(prefix + ":") + value)


def _unmapped_ids(ids: pl.Series, side: Side) -> pl.Series:
    frame = pl.DataFrame({"id": ids})
    value = pl.col("id")
    if side.strip:
        value = value.str.replace(side.strip, "")
    if side.unmapped_prefix:
        value = pl.lit(side.unmapped_prefix + ":") + value
    else:
        prefix = value.str.extract(r"^([^:]+):", 1)
        rest = value.str.replace(r"^[^:]+:", "")
        value = pl.when(prefix.is_in(list(RAW_NAMESPACE_FIXES))).then(
            prefix.replace_strict(RAW_NAMESPACE_FIXES, default=None) + ":" + rest).otherwise(value)
    return frame.select(value.alias("id")).to_series()


class MappedSide(NamedTuple):
    frame: pl.DataFrame     # the edges with this side mapped
    unmapped: pl.Series     # raw ids without a mapping, as ids_no_mapping.tsv writes them
    fanned_out: bool        # whether some raw id gave several rows
    raw_ids: int            # distinct raw ids of the side in the frame it was given
    ids: pl.Series          # the side's ids after mapping (categorical; a superset of the frame's)
    by_namespace: List[dict]  # with a mapping: per namespace of the raw ids, rows/ids given and mapped


def _map_side(frame: pl.DataFrame, column: str, side: Side, inputs: Inputs) -> MappedSide:
    """Map one side of the edges; ``frame[column]`` is categorical.

    Mapping, prefixing and alt-id resolution run on the distinct ids only; the rows then follow
    through one join on the 4-byte codes (a raw id with several targets gives several rows, in the
    mapping's order).
    """
    unmapped = pl.Series("id", [], dtype=pl.String)
    distinct = frame.get_column(column).unique()
    if not (side.mapping or side.prefix or side.alt_ids):
        return MappedSide(frame, unmapped, False, distinct.len(), distinct, [])
    by_namespace: List[dict] = []
    table = pl.DataFrame({"_code": distinct.to_physical(), "value": distinct.cast(pl.String)})
    if side.mapping:
        joined = table.join(inputs.mapping(side.mapping), left_on="value", right_on="source", how="left",
                            maintain_order="left")
        unmapped = _unmapped_ids(joined.filter(pl.col("target").is_null()).get_column("value"), side)
        by_namespace = _namespace_counts(frame.get_column(column), joined)
        table = joined.filter(pl.col("target").is_not_null()).select("_code", pl.col("target").alias("value"))
    if side.prefix:
        table = table.with_columns(_with_prefix("value", side.prefix).alias("value"))
    if side.alt_ids:
        alt = inputs.alt_ids(side.alt_ids)
        table = (table.join(alt, left_on="value", right_on="alt_id", how="left", maintain_order="left")
                 .select("_code", pl.coalesce("id", "value").alias("value")))
    table = table.with_columns(pl.col("value").cast(pl.Categorical))
    fanned_out = table.height > table.get_column("_code").n_unique()
    frame = (frame.with_columns(pl.col(column).to_physical().alias("_code"))
             .join(table, on="_code", how="inner", maintain_order="left")
             .with_columns(pl.col("value").alias(column)).drop("_code", "value"))
    return MappedSide(frame, unmapped, fanned_out, distinct.len(), table.get_column("value"), by_namespace)


def _namespace_counts(ids: pl.Series, joined: pl.DataFrame) -> List[dict]:
    """Per namespace (the raw id's text before ':'; "" without one): rows and distinct ids, and
    how many of each the mapping knew. ``ids``: the side's categorical column (n rows);
    ``joined``: _code, value, target (null when unmapped) per distinct id and target."""
    per_id = (joined.group_by("_code", maintain_order=True)
              .agg(pl.col("value").first(), pl.col("target").is_not_null().any().alias("mapped")))
    if per_id.height == 0:
        return []
    codes = per_id.get_column("_code").to_numpy()
    rows = np.bincount(ids.to_physical().to_numpy(), minlength=int(codes.max()) + 1)[codes]
    counted = per_id.with_columns(pl.Series("rows", rows, dtype=pl.Int64),
                                  pl.col("value").str.extract(r"^([^:]+):", 1).fill_null("").alias("namespace"))
    summary = (counted.group_by("namespace")
               .agg(pl.col("rows").sum(), pl.col("rows").filter(pl.col("mapped")).sum().alias("rows_mapped"),
                    pl.len().alias("ids"), pl.col("mapped").sum().alias("ids_mapped"))
               .sort("namespace"))
    return summary.to_dicts()


def _quality_filter(edge_type: str, quality: str, scores: pl.Series) -> Optional[pl.Expr]:
    """Whether a row passes the cutoff of ``quality``, decided once per distinct score of the
    categorical ``scores`` (None: the level keeps every row)."""
    cutoff = EDGE_TYPES[edge_type].cutoff(quality)
    if not isinstance(cutoff, (MinScore, ExcludedScores)):
        return None
    distinct = pl.DataFrame({"qscore": scores.unique().cast(pl.String)})
    if isinstance(cutoff, MinScore):
        passes = pl.col("qscore").cast(pl.Float64, strict=False).fill_null(float("-inf")) > cutoff.threshold
    else:
        passes = ~pl.col("qscore").fill_null("").is_in(sorted(cutoff.excluded))
    kept = distinct.filter(passes).get_column("qscore").cast(pl.Categorical)
    return pl.col("qscore").is_in(kept.implode(), nulls_equal=True)  # a missing score can pass (evidence cutoffs)


NODE_TYPE_CODE = {name: code for code, name in enumerate(sorted(NODE_TYPES))}
_NO_TYPE = 255


def _per_id_tables(ids: pl.Series):
    """Lookup arrays indexed by the categorical codes of ``ids``: node-type code (255: unknown
    prefix) and lexical rank among them."""
    distinct = ids.unique()
    table = pl.DataFrame({"id": distinct.cast(pl.String), "code": distinct.to_physical()}).with_columns(
        _node_type("id").replace_strict(NODE_TYPE_CODE, default=_NO_TYPE, return_dtype=pl.UInt8).alias("type")
    ).sort("id")
    size = int(table.get_column("code").max()) + 1 if table.height else 1
    type_of = np.full(size, _NO_TYPE, dtype=np.uint8)
    rank_of = np.zeros(size, dtype=np.uint32)
    code = table.get_column("code").to_numpy()
    type_of[code] = table.get_column("type").to_numpy()
    rank_of[code] = np.arange(table.height, dtype=np.uint32)
    return type_of, rank_of


def _node_type(column: str) -> pl.Expr:
    prefix = pl.col(column).str.extract(r"^([^:]+):", 1)
    return prefix.replace_strict(PREFIX_TO_NODE_TYPE, default=None)


def raw_edges(recipe: Recipe, inputs: Inputs) -> pl.DataFrame:
    """The raw edges of ``recipe``: row (its number), id1, id2, qscore (categorical)."""
    return inputs.raw(recipe).with_row_index("row").with_columns(pl.col(c).cast(pl.Categorical)
                                                                 for c in ("id1", "id2", "qscore"))


def run_recipe(recipe: Recipe, inputs: Inputs, quality: str, directed: bool,
               raw: Optional[pl.DataFrame] = None) -> Part:
    """Map, cut and de-duplicate the raw edges of one recipe (``raw``: its :func:`raw_edges`,
    read here when not given)."""
    edge = EDGE_TYPES[recipe.edge_type]
    raw = raw_edges(recipe, inputs) if raw is None else raw
    side1 = _map_side(raw, "id1", recipe.side1, inputs)
    side2 = _map_side(side1.frame, "id2", recipe.side2, inputs)
    frame, fanned1, fanned2 = side2.frame, side1.fanned_out, side2.fanned_out

    def raw_rows(edges: pl.DataFrame) -> int:  # how many raw rows the edges come from
        return edges.get_column("row").n_unique() if (fanned1 or fanned2) and edges.height else edges.height

    rows_mapped = raw_rows(frame)
    keep = _quality_filter(recipe.edge_type, quality, frame.get_column("qscore"))
    if keep is not None:
        frame = frame.filter(keep)
    below_cutoff = rows_mapped - raw_rows(frame)
    if keep is not None and below_cutoff == 0 and frame.height:
        logger.info("%s from %s: the %s cutoff removed nothing", recipe.edge_type, recipe.source, quality)
    # ids are categorical from the start: typing, checks and de-duplication work on 4-byte codes,
    # and per-id work (mapping, the prefix regex, lexical order) runs on the distinct ids only
    codes = {side: frame.get_column(side).to_physical().to_numpy() for side in ("id1", "id2")}
    type_of, rank_of = _per_id_tables(pl.concat([side1.ids, side2.ids]))
    frame = frame.with_columns(pl.Series("type1", type_of[codes["id1"]]), pl.Series("type2", type_of[codes["id2"]]))
    allowed = [NODE_TYPE_CODE[a] * 8 + NODE_TYPE_CODE[b] for a, b in edge.signatures]
    fits = (pl.col("type1").cast(pl.Int32) * 8 + pl.col("type2").cast(pl.Int32)).is_in(allowed)
    mistyped = frame.filter(~fits)
    if mistyped.height:
        logger.warning("%s from %s: %d edge(s) whose node types do not fit the edge type were dropped (first: %s)",
                       recipe.edge_type, recipe.source, mistyped.height, mistyped.select("id1", "id2").row(0))
        frame = frame.filter(fits)
    with_duplicates = frame.height
    if not edge.directed:  # one orientation per pair: the lexically smaller id first
        rank1 = rank_of[frame.get_column("id1").to_physical().to_numpy()]
        rank2 = rank_of[frame.get_column("id2").to_physical().to_numpy()]
        frame = frame.filter(_first_of_pair(np.minimum(rank1, rank2), np.maximum(rank1, rank2)))
    else:
        frame = frame.filter(_first_of_pair(frame.get_column("id1").to_physical().to_numpy(),
                                            frame.get_column("id2").to_physical().to_numpy()))
    duplicates = with_duplicates - frame.height
    returned = 0
    if not edge.directed and directed:
        # (lo, hi) pairs are unique, so reversing the non-loops cannot create duplicates
        reverse = (frame.filter(pl.col("id1") != pl.col("id2"))
                   .rename({"id1": "id2", "id2": "id1", "type1": "type2", "type2": "type1"}).select(frame.columns))
        returned = reverse.height
        frame = pl.concat([frame, reverse])
    edges = frame.select("id1", pl.lit(recipe.edge_type, dtype=EDGE_TYPE_ENUM).alias("edge_type"), "id2", "qscore",
                         pl.lit(recipe.source, dtype=SOURCE_ENUM).alias("source"),
                         *(NODE_TYPE_NAMES.gather(frame.get_column(c).cast(pl.UInt32)).alias(c)
                           for c in ("type1", "type2")))
    unmapped = pl.concat([side1.unmapped, side2.unmapped]).unique(maintain_order=True)
    # side 2 is mapped on the rows side 1 kept; the statistics count its ids among all raw rows
    raw_ids = (side1.raw_ids, raw.get_column("id2").n_unique() if raw.height else 0)
    stats = _stats(recipe, edge, raw.height, raw_ids, rows_mapped, below_cutoff, duplicates, returned, edges,
                   side1.unmapped, side2.unmapped)
    unmapped_frame = pl.DataFrame({"id": unmapped.cast(pl.String)}).with_columns(
        pl.lit(recipe.edge_type, dtype=pl.String).alias("edge_type"))
    mapping_stats = [dict(zip(MAPPING_STATS_COLUMNS, [
        recipe.edge_type, recipe.source, "true negative" if recipe.negative else "positive", number, side.mapping,
        counts["namespace"], counts["rows"], counts["rows_mapped"], counts["ids"], counts["ids_mapped"]]))
        for number, (side, mapped) in enumerate(((recipe.side1, side1), (recipe.side2, side2)), start=1)
        for counts in mapped.by_namespace]
    for row in mapping_stats:
        if row["Rows mapped"] < row["Rows"]:
            logger.info("%s%s from %s: %d of %d %s row(s) mapped by %s", recipe.edge_type,
                        " (TN)" if recipe.negative else "", recipe.source, row["Rows mapped"], row["Rows"],
                        row["Namespace"] or "un-prefixed", row["Mapping"])
    return Part(recipe, edges, unmapped_frame, stats, mapping_stats)


def _first_of_pair(first: np.ndarray, second: np.ndarray) -> pl.Series:
    """Mask of the rows whose (first, second) pair of uint32 codes did not occur in an earlier row."""
    key = first.astype(np.uint64)
    key <<= np.uint64(32)
    key |= second
    mask = np.zeros(len(key), dtype=bool)
    mask[pl.Series(key).arg_unique().to_numpy()] = True  # first occurrences; 2-3x faster than is_first_distinct
    return pl.Series(mask)


def _stats(recipe, edge, total, raw_ids, rows_mapped, below_cutoff, duplicates, returned, edges, unmapped1,
           unmapped2) -> dict:
    head, tail = edge.signatures[0] if len(edge.signatures) == 1 else ("MULTI", "MULTI")
    nodes1, nodes2 = raw_ids if total else (0, 0)

    def ratio(part, whole):
        return "" if whole == 0 else f"{part / whole:.4f}"

    return dict(zip(STATS_COLUMNS, [
        recipe.edge_type, head, tail, total, total - rows_mapped, below_cutoff, ratio(rows_mapped, total), duplicates,
        returned, edges.height, unmapped1.len(), unmapped2.len(), nodes1, nodes2,
        ratio(nodes1 - unmapped1.len(), nodes1), ratio(nodes2 - unmapped2.len(), nodes2)]))


def build_graph(inputs: Inputs, recipes: Optional[List[Recipe]] = None, quality: str = "hq", directed: bool = True,
                progress: bool = True) -> Graph:
    """Run every recipe; union the parts per edge type (first occurrence wins across recipes)."""
    quality = normalise_quality(quality)
    recipes = RECIPES if recipes is None else recipes
    parts: Dict[bool, List[Part]] = {False: [], True: []}
    last_use = {source: i for i, recipe in enumerate(recipes) for source in recipe.needs}
    # the sources of the next recipes are parsed on a second thread while this one is built
    # (polars and the decompression release the GIL); released sources are never needed ahead
    with ThreadPoolExecutor(1, thread_name_prefix="graphgen-read") as reader:
        ahead = deque(reader.submit(raw_edges, recipe, inputs) for recipe in recipes[:READ_AHEAD])
        for i, recipe in enumerate(progress_bar(recipes, desc="building", unit="recipe", enabled=progress)):
            raw = ahead.popleft().result()
            if i + READ_AHEAD < len(recipes):
                ahead.append(reader.submit(raw_edges, recipes[i + READ_AHEAD], inputs))
            part = run_recipe(recipe, inputs, quality, directed, raw)
            del raw
            for source in recipe.needs:
                if last_use[source] == i and not any(m.needs == (source,) for m in _mappings_of(recipes[i + 1:])):
                    inputs.release(source)  # keeps peak memory to the sources still ahead
            if part.edges.height == 0:
                logger.warning("%s%s from %s: no edges", recipe.edge_type, " (TN)" if recipe.negative else "",
                               recipe.source)
            parts[recipe.negative].append(part)
    (edges, nodes), (tn_edges, tn_nodes) = (_union(parts[negative]) for negative in (False, True))
    unmapped = {negative: _unmapped(parts[negative]) for negative in (False, True)}
    return Graph(edge_table=edges, tn_edge_table=tn_edges, nodes=nodes, tn_nodes=tn_nodes, unmapped=unmapped[False],
                 tn_unmapped=unmapped[True], stats=[p.stats for p in parts[False]],
                 tn_stats=[p.stats for p in parts[True]],
                 mapping_stats=[row for negative in (False, True) for p in parts[negative] for row in p.mapping_stats],
                 directed=directed, quality=quality)




def _mappings_of(recipes: List[Recipe]):
    return [MAPPINGS[side.mapping] for recipe in recipes for side in (recipe.side1, recipe.side2) if side.mapping]


def _union(parts: List[Part]) -> Tuple[EdgeTable, pl.DataFrame]:
    """(the edges with their output order, nodes sorted by (type, id)).

    Only edge types that several recipes feed (IS_A, PART_OF) need de-duplication across recipes.
    Categorical codes are shared by both id columns: the node table and the ranks are built on
    the distinct ids only, and the sort runs on one integer key per row (:mod:`graphgen.order`).
    """
    if not parts or all(p.edges.height == 0 for p in parts):  # nothing selected, or every recipe came up empty
        return EdgeTable.empty(), pl.DataFrame(schema={"id": pl.String, "node_type": NODE_TYPE_ENUM})
    frame = pl.concat([p.edges.cast(EDGE_SCHEMA) for p in parts], rechunk=True)
    for part in parts:  # the union holds the rows now; let the per-recipe copies go
        part.edges = part.edges.clear()
    shared = [name for name, count in Counter(p.recipe.edge_type for p in parts).items() if count > 1]
    if shared:
        mask = pl.col("edge_type").is_in(shared)
        frame = pl.concat([frame.filter(~mask),
                           frame.filter(mask).unique(["id1", "edge_type", "id2"], keep="first", maintain_order=True)],
                          rechunk=True)
    distinct = pl.concat([frame["id1"], frame["id2"]]).unique()
    nodes = (pl.DataFrame({"id": distinct.cast(pl.String), "code": distinct.to_physical()})
             .with_columns(_node_type("id").cast(NODE_TYPE_ENUM).alias("node_type")).sort(["node_type", "id"]))
    rank_of = np.zeros(int(nodes["code"].max()) + 1, dtype=np.uint32)
    rank_of[nodes["code"].to_numpy()] = np.arange(nodes.height, dtype=np.uint32)
    score_codes, score_names = dictionary_codes(frame["qscore"])
    passenger = score_codes << np.uint32(SOURCE_BITS)
    passenger |= frame["source"].to_physical().to_numpy()
    key = sort_edges(frame["id1"].to_physical().to_numpy(), frame["id2"].to_physical().to_numpy(), rank_of,
                     frame["edge_type"].to_physical().to_numpy(), passenger=passenger)
    return EdgeTable(frame, nodes["id"].to_list(), key, score_names), nodes.select("id", "node_type")


def _unmapped(parts: List[Part]) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame(schema={"id": pl.String, "edge_type": pl.String})
    return pl.concat([p.unmapped for p in parts]).unique().sort(["edge_type", "id"])


def build_from_folder(folder, **kwargs) -> Graph:
    """Build from a folder of source files named as the sources' Remotes name them."""
    return build_graph(Inputs(SourceFiles(Path(folder))), **kwargs)
