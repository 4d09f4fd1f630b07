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
@click.option("--stability", is_flag=True,
              help="A and B are repurposing records (evaluate --task repurposing) of one matrix: compare their best "
                   "pairs (Commonality@k, Spearman@k with its p-value, the hypergeometric test at k).")
@click.option("--at", "stability_at", default="10,100,1000", show_default=True,
              help="With --stability: the k of the top-k lists compared (comma-separated).")
@handle_errors
def compare(ranks_a, ranks_b, metric, side, fmt, seed, resamples, permutations, stability, stability_at):
    """Paired comparison of two ranks files (evaluate --ranks-output) of the same queries: A - B, its
    95 % paired-bootstrap interval, a sign-flip permutation p-value and Wilcoxon's. With
    --stability, two repurposing records' best pairs instead."""
    if stability:
        _stability(ranks_a, ranks_b, stability_at, fmt)
        return
    from openbench.evaluation.statistics.compare import compare_ranks, format_comparison

    result = compare_ranks(ranks_a, ranks_b, metric=metric, side=side, seed=seed, resamples=resamples,
                           permutations=permutations, names=(ranks_a, ranks_b))
    click.echo(strict_json(result, indent=2) if fmt == "json" else format_comparison(result, ranks_a, ranks_b))


def _stability(path_a: str, path_b: str, at_text: str, fmt: str) -> None:
    from openbench._io import read_json
    from openbench._io.outputs import visible
    from openbench.cli.common import int_list
    from openbench.evaluation.statistics.stability import stability

    records = [read_json(path, "repurposing record") for path in (path_a, path_b)]
    result = stability(records[0], records[1], int_list("--at", at_text), names=(path_a, path_b))
    if fmt == "json":
        click.echo(strict_json(result, indent=2))
        return

    def show(value) -> str:
        return "-" if value is None else f"{value:.4g}"

    click.echo(f"stability of the best pairs: A {visible(path_a)} ({result['kept'][0]} kept), B {visible(path_b)} "
               f"({result['kept'][1]} kept); {result['population']:,} candidate pairs")
    for k, block in result["at"].items():
        if block is None:
            click.echo(f"  k = {k}: not computed (a record keeps fewer pairs: evaluate with --keep-top {k})")
            continue
        click.echo(f"  Commonality@{k} {block['commonality']:.4f} ({block['common']} common)   Spearman@{k} "
                   f"{show(block['spearman'])} (p {show(block['spearman_p'])})   hypergeometric p "
                   f"{show(block['hypergeometric_p'])}")
