"""``openbench audit``: the leakage in a graph or a split, before it inflates a result."""
from __future__ import annotations


import click

from openbench._io.outputs import strict_json
from openbench.cli.common import handle_errors

__all__ = ["audit"]


@click.command("audit", short_help="Leakage report of a graph, a split, a published KG or a triples file.")
@click.argument("source")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--threshold", type=click.FloatRange(min=0.0, max=1.0, min_open=True), default=0.8, show_default=True,
              help="Share of a relation's triples a pattern must cover (inverse, duplicate, symmetric, "
                   "Cartesian-product relations).")
@handle_errors
def audit(source, fmt, threshold):
    """Leakage report of SOURCE (a graph_files folder, a split folder, an OGB folder, a registry name
    or a head<TAB>relation<TAB>tail file): duplicates, self-loops, reverse duplicates, inverse,
    duplicate, symmetric and Cartesian-product relations, the evaluation triples training answers
    trivially, and unseen evaluation entities."""
    from splits.audit import audit as run_audit, format_report

    report = run_audit(source, threshold)
    click.echo(strict_json(report, indent=2) if fmt == "json" else format_report(report))
