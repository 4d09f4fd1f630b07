"""``openbench report``: figures and readings of result records as one HTML page."""
from __future__ import annotations

import click

from openbench.cli.common import handle_errors

__all__ = ["report"]


@click.command(short_help="An HTML page of figures for result records: per relation, ranks, strata, a comparison.")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="Folder to write: index.html (self-contained), one PNG per figure and figures.json (the plotted "
                   "numbers).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples of each relation's test triples.")
@handle_errors
def report(records, output, seed, resamples):
    """Figures of result records (evaluate --output NAME.json; the ranks file NAME.ranks.parquet
    beside it, from --ranks-output, adds intervals and the rank distribution): MRR per relation with
    95 % intervals, the rank distribution per model, MRR by the answer's training degree, and for two
    models their paired comparison, per relation too."""
    from pathlib import Path

    from openbench.evaluation.statistics.figures import build_report

    page = build_report([Path(path) for path in records], Path(output), seed=seed, resamples=resamples)
    click.echo(f"report: {page}")
