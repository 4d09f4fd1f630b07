"""``openbench compare``: two models' per-query ranks of the same queries, compared in pairs."""
from __future__ import annotations


import click

from openbench._io.outputs import strict_json
from openbench.cli.common import handle_errors

__all__ = ["compare"]


@click.command("compare", short_help="Paired comparison of two ranks files: difference, interval, p-value.")
@click.argument("ranks_a", type=click.Path(dir_okay=False))
@click.argument("ranks_b", type=click.Path(dir_okay=False))
@click.option("--metric", default="mrr", show_default=True, help="mrr or hits@K: each query's reciprocal "
                                                                   "realistic rank, or whether it is at most K.")
@click.option("--side", type=click.Choice(["both", "head", "tail"]), default="both", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the bootstrap and the permutations.")
@click.option("--resamples", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Paired bootstrap resamples for the interval of the difference.")
@click.option("--permutations", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Random sign flips for the p-value (exact enumeration for at most 16 non-zero differences).")
@handle_errors
def compare(ranks_a, ranks_b, metric, side, fmt, seed, resamples, permutations):
    """Paired comparison of two ranks files (evaluate --ranks-output) of the same queries: A - B, its
    95 % paired-bootstrap interval, a sign-flip permutation p-value and Wilcoxon's."""
    from openbench.evaluation.statistics.compare import compare_ranks, format_comparison

    result = compare_ranks(ranks_a, ranks_b, metric=metric, side=side, seed=seed, resamples=resamples,
                           permutations=permutations, names=(ranks_a, ranks_b))
    click.echo(strict_json(result, indent=2) if fmt == "json" else format_comparison(result, ranks_a, ranks_b))
