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
@click.option("--ranks", "ranks_paths", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="A ranks file (evaluate --ranks-output), repeatable, in any order: each is given to the record it "
                   "belongs to. NAME.ranks.parquet beside NAME.json is found without it.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples of each relation's test triples.")
@handle_errors
def report(records, output, ranks_paths, seed, resamples):
    """Figures of result records (evaluate --output NAME.json; their ranks, from --ranks-output,
    beside them as NAME.ranks.parquet or given with --ranks, add intervals and the rank
    distribution): MRR per relation with 95 % intervals, the rank distribution per model, MRR by
    the answer's training degree, and for two models their paired comparison, per relation too. The
    page says why each figure it could not draw is missing."""
    from pathlib import Path

    from openbench.evaluation.statistics.figures import build_report

    page = build_report([Path(path) for path in records], Path(output), seed=seed, resamples=resamples,
                        ranks_paths=[Path(path) for path in ranks_paths])
    click.echo(f"report: {page}")
