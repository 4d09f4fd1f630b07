"""``openbench generate`` and ``openbench export``: the graph from its sources, and its other formats."""
from __future__ import annotations

from pathlib import Path

import click

from graphgen.formats import EXPORT_FORMATS, OUTPUT_FORMATS
from openbench.cli.common import Names, handle_errors, names_of

__all__ = ["generate", "export_command"]


@click.command(short_help="Build the graph (OpenBioLink's graph_files layout) from the public sources.")
@click.option("--output", "output_dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Folder for graph_files/ (and in_files/ of the parse step).")
@click.option("--cache", type=click.Path(file_okay=False), default=None,
              help="Download cache [default: $XDG_CACHE_HOME/openbench/sources].")
@click.option("--qual", "quality", default="hq", show_default=True, help="Quality cutoff level: hq, mq, lq or nq.")
@click.option("--undirected", is_flag=True, help="Write undirected edge types once instead of in both directions.")
@click.option("--no-download", is_flag=True, help="Use the files already in the cache or --sources-dir.")
@click.option("--sources-dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Read the source files from this folder (implies nothing is downloaded).")
@click.option("--sources", "source_names", default=None, help="Comma-separated sources to build from "
                                                               "(see --list-sources).")
@click.option("--edge-types", "edge_type_names", default=None, help="Comma-separated edge types to build.")
@click.option("--steps", default="download,parse,build", show_default=True,
              help="Stages to run: download, parse, build (comma-separated).")
@click.option("--output-format", type=Names(OUTPUT_FORMATS), default="TSV",
              show_default=True, help="TSV is OpenBioLink's layout; BEL, RDF and Parquet are exports of the same graph.")
@click.option("--output-sep", default="\t", show_default="TAB", help="Separator of the graph files.")
@click.option("--output-multi-file", is_flag=True, help="One file per edge type and per node type.")
@click.option("--no-qscore", is_flag=True, help="Leave the quality-score column empty.")
@click.option("--sample", is_flag=True, help="Build from the embedded sample sources (offline, seconds).")
@click.option("--mirror", default=None, help="Download every source file from <MIRROR>/<file name> instead.")
@click.option("--keep-in-files", is_flag=True, help="Also write the parsed tables to in_files/ when building.")
@click.option("--list-sources", is_flag=True, help="Print the sources and their URLs, then exit.")
@click.option("--list-edge-types", is_flag=True, help="Print the edge-type registry, then exit.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr.")
@handle_errors
def generate(output_dir, cache, quality, undirected, no_download, sources_dir, source_names, edge_type_names,
             steps, output_format, output_sep, output_multi_file, no_qscore, sample, mirror, keep_in_files,
             list_sources, list_edge_types, progress):
    """Build the graph (OpenBioLink's graph_files layout) from the public sources."""
    from graphgen import pipeline

    if list_sources or list_edge_types:
        click.echo(pipeline.list_sources() if list_sources else pipeline.list_edge_types())
        return
    if len(output_sep.encode("utf-8")) != 1 or output_sep in "\r\n":
        raise click.BadParameter("expected a single-byte separator other than a line break", param_hint="--output-sep")
    graph = pipeline.generate(output_dir, cache=cache, sources_dir=sources_dir, quality=quality,
                              directed=not undirected, steps=names_of(steps) or [], sources=names_of(source_names),
                              edge_types=names_of(edge_type_names), sep=output_sep, multi_file=output_multi_file,
                              no_qscore=no_qscore, progress=progress, mirror=mirror, keep_in_files=keep_in_files,
                              output_format=output_format, sample=sample, download=not no_download)
    if graph is not None:
        written = [Path(output_dir) / "graph_files"]
        if keep_in_files:
            written.insert(0, Path(output_dir) / pipeline.IN_FILES)
        if output_format.upper() != "TSV":
            written.append(Path(output_dir) / pipeline.export_folder(output_format))
        click.echo(f"{graph.edge_table.height} edges and {graph.nodes.height} nodes, {graph.tn_edge_table.height} "
                   f"true-negative edges; written to {' and '.join(str(folder) for folder in written)}")


@click.command("export")
@click.option("--graph", "graph_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="A TSV graph: graph_files/ (or the folder holding it).")
@click.option("--format", "fmt", required=True, type=Names(EXPORT_FORMATS))
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write (replaced if openbench wrote it).")
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the TSV graph files.")
@handle_errors
def export_command(graph_dir, fmt, output_dir, sep):
    """Convert an existing TSV graph to BEL, RDF or Parquet without rebuilding it."""
    from graphgen.export import export_graph_folder

    counts = export_graph_folder(graph_dir, output_dir, fmt, sep=sep)
    listed = ", ".join(f"{k} {v}" for k, v in counts.items())
    click.echo(f"{fmt.upper()} export written to {output_dir}" + (f": {listed}" if listed else ""))

