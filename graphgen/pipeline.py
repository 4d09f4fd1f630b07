"""``openbench generate``: select recipes, download their sources, parse, build, write.

Stages (``--steps``): ``download`` fetches the needed source files into the cache; ``parse``
reads them into intermediate tables, written to ``<output>/in_files/*.parquet`` (raw edges per
recipe, mapping and alt-id tables) when no build follows in the same run (or with
``--keep-in-files``); ``build`` assembles the graph (from ``in_files`` when ``parse`` is not among
the steps) and writes ``<output>/graph_files``.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Sequence

import polars as pl

from graphgen.build import Graph, Inputs, build_graph
from openbench._io.download import fetch
from graphgen.edge_types import EDGE_TYPES
from graphgen.recipes import RECIPES, SOURCES, Recipe, SourceFiles, needed_sources
from graphgen.export import FORMATS, export, tables_of_graph
from graphgen.writers.tsv import GRAPH_FOLDER, write_tsv
from openbench._io import check_output_folder, replace_folder
from openbench.errors import InputError

__all__ = ["STEPS", "SAMPLE_DIR", "IN_FILES", "OPTIONAL_FILES", "RECIPE_INDEX", "default_cache", "Selection",
           "select", "download_sources", "StoredInputs", "parse", "generate", "list_sources", "list_edge_types", "export_folder"]

logger = logging.getLogger(__name__)

STEPS = ("download", "parse", "build")
SAMPLE_DIR = Path(__file__).resolve().parent / "sample" / "files"
IN_FILES = "in_files"
# files of a source that the recipes do not read (downloaded only on request)
OPTIONAL_FILES = {("UniProt", "dat"), ("SIDER", "indications")}
# a recipe's position in RECIPES names its intermediate table
RECIPE_INDEX = {id(recipe): i for i, recipe in enumerate(RECIPES)}


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openbench" / "sources"


@dataclass
class Selection:
    recipes: List[Recipe]
    sources: List[str]       # every source read, closure included
    added: List[str]         # sources added by the closure (mappings, alt ids)


def _check_names(kind: str, names: Sequence[str], valid: Sequence[str]) -> None:
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise InputError(f"unknown {kind} {', '.join(unknown)}; valid: {', '.join(valid)}")


def select(sources: Optional[Sequence[str]] = None, edge_types: Optional[Sequence[str]] = None) -> Selection:
    """Recipes whose own source is in ``sources`` and whose edge type is in ``edge_types``."""
    recipes = list(RECIPES)
    if sources:
        _check_names("source(s)", sources, list(SOURCES))
        recipes = [r for r in recipes if r.needs[0] in sources]
    if edge_types:
        _check_names("edge type(s)", edge_types, list(EDGE_TYPES))
        recipes = [r for r in recipes if r.edge_type in edge_types]
    if not recipes:
        raise InputError("the selection leaves no edge type to build")
    needed = needed_sources(recipes)
    added = [name for name in needed if sources and name not in sources]
    return Selection(recipes, needed, added)


def download_sources(selection: Selection, cache: Path, progress: bool = True, mirror: Optional[str] = None) -> List[Path]:
    """Fetch every file the selection reads; ``mirror`` replaces each URL by ``<mirror>/<filename>``."""
    paths = []
    for source in selection.sources:
        for key, remote in SOURCES[source].items():
            if (source, key) in OPTIONAL_FILES:
                continue
            if mirror:
                remote = replace(remote, url=f"{mirror.rstrip('/')}/{remote.filename}")
            paths.append(fetch(remote, cache, progress=progress))
    return paths


class StoredInputs(Inputs):
    """Inputs read back from the parquet tables the parse step wrote."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _read(self, name: str) -> pl.DataFrame:
        path = self.folder / name
        if not path.exists():
            raise InputError(f"intermediate table {name} is missing; run the parse step first", self.folder)
        return pl.read_parquet(path)

    def raw(self, recipe: Recipe) -> pl.DataFrame:
        return self._read(_raw_name(RECIPE_INDEX[id(recipe)], recipe))

    def release(self, source: str) -> None:  # nothing is cached
        pass

    def mapping(self, name: str) -> pl.DataFrame:
        return self._read(f"mapping_{name}.parquet")

    def alt_ids(self, ontology: str) -> pl.DataFrame:
        return self._read(f"alt_ids_{ontology}.parquet")


def _raw_name(index: int, recipe: Recipe) -> str:
    return f"edges_{index:02d}_{recipe.edge_type}_{recipe.source}{'_TN' if recipe.negative else ''}.parquet"


def parse(selection: Selection, inputs: Inputs, folder: Path, sources: Sequence = ()) -> None:
    """Write the raw edges, mappings and alt-id tables the selected recipes need into ``folder``
    (replaced as a whole; ``sources``: the source folders it may not be, hold or lie in)."""

    def fill(staging: Path) -> None:
        mappings, ontologies = set(), set()
        for recipe in selection.recipes:
            inputs.raw(recipe).write_parquet(staging / _raw_name(RECIPE_INDEX[id(recipe)], recipe), compression="lz4")
            for side in (recipe.side1, recipe.side2):
                if side.mapping:
                    mappings.add(side.mapping)
                if side.alt_ids:
                    ontologies.add(side.alt_ids)
        for name in sorted(mappings):
            inputs.mapping(name).write_parquet(staging / f"mapping_{name}.parquet", compression="lz4")
        for name in sorted(ontologies):
            inputs.alt_ids(name).write_parquet(staging / f"alt_ids_{name}.parquet", compression="lz4")

    replace_folder(folder, fill, inputs=sources, kind=IN_FILES, within=folder.parent)


def generate(output, *, cache=None, sources_dir=None, quality: str = "hq", directed: bool = True,
             steps: Sequence[str] = STEPS, sources: Optional[Sequence[str]] = None,
             edge_types: Optional[Sequence[str]] = None, sep: str = "\t", multi_file: bool = False,
             no_qscore: bool = False, progress: bool = True, mirror: Optional[str] = None,
             keep_in_files: bool = False, output_format: str = "TSV", sample: bool = False,
             download: bool = True) -> Optional[Graph]:
    """Run the chosen stages; returns the graph when ``build`` ran.

    ``sample``: read the embedded sample sources (offline). ``download=False`` or a
    ``sources_dir`` drops the download stage: the files are read as they are.

    ``output_format``: TSV (OpenBioLink's layout), or one of :data:`graphgen.export.FORMATS`
    written into ``<output>/<format, lower case>/`` (e.g. ``rdf-ttl/``) *beside* the TSV graph in
    ``<output>/graph_files``, which every later step (split, export, audit) reads.

    When parse and build run together the parsed tables stay in memory; ``keep_in_files`` also
    writes them to ``in_files/`` (a later ``--steps build`` reads them from there).
    """
    _check_names("step(s)", steps, STEPS)
    if not steps:
        raise InputError(f"no stage to run; give --steps from {', '.join(STEPS)}")
    if sample:
        sources_dir, download = SAMPLE_DIR, False
    if not download or sources_dir:
        steps = [step for step in steps if step != "download"]
        if not steps:
            raise InputError("only the download stage was asked for, but the sources are read as they are "
                             "(--sample, --sources-dir or --no-download): nothing to run")
    _check_names("output format", [output_format.upper()], ("TSV",) + FORMATS)
    output = Path(output)
    selection = select(sources, edge_types)
    if selection.added:
        logger.warning("also reading %s (needed for id mappings and alt ids)", ", ".join(selection.added))
    folder = Path(sources_dir) if sources_dir else Path(cache or default_cache())
    writes_in_files = "parse" in steps and ("build" not in steps or keep_in_files)
    exported = None if output_format.upper() == "TSV" else output / export_folder(output_format)
    targets = [output / IN_FILES] if writes_in_files else []
    if "build" in steps:
        targets += [output / GRAPH_FOLDER] + ([exported] if exported else [])
    for target in targets:
        check_output_folder(target, [folder])  # before any download or parse: fail fast
    if "download" in steps:
        download_sources(selection, folder, progress, mirror)
    inputs: Inputs = Inputs(SourceFiles(folder))
    if writes_in_files:
        parse(selection, inputs, output / IN_FILES, [folder])
    elif "parse" not in steps and "build" in steps:
        inputs = StoredInputs(output / IN_FILES)
    if "build" not in steps:
        return None
    graph = build_graph(inputs, selection.recipes, quality=quality, directed=directed, progress=progress)
    write_tsv(graph, output, sep=sep, multi_file=multi_file, no_qscore=no_qscore, inputs=[folder])
    if exported is not None:
        export(tables_of_graph(graph), exported, output_format, inputs=[folder], within=output)
    return graph


def export_folder(output_format: str) -> str:
    """Where ``generate --output-format F`` puts the export, under its output: ``f`` lower-cased."""
    return output_format.lower()


def list_sources() -> str:
    lines = []
    for name, remotes in SOURCES.items():
        for key, remote in remotes.items():
            lines.append(f"{name}\t{key}\t{remote.version}\t{remote.url}")
    return "\n".join(lines)


def list_edge_types() -> str:
    lines = []
    for edge in EDGE_TYPES.values():
        signatures = ", ".join(f"{h}->{t}" for h, t in edge.signatures)
        sources = sorted({r.source for r in RECIPES if r.edge_type == edge.name})
        fields = [edge.name, signatures, "directed" if edge.directed else "undirected", f"parent {edge.parent}",
                  ",".join(sources)] + (["true negatives"] if edge.true_negatives else [])
        lines.append("\t".join(fields))
    return "\n".join(lines)
