"""``openbench demo``: the whole job offline on the embedded sample."""
from __future__ import annotations

from pathlib import Path

import click

from openbench.cli.common import handle_errors, quiet_pykeen
from openbench import vocabulary

__all__ = ["demo"]


@click.command(short_help="Offline end-to-end run on the embedded sample, from graph to leaderboard.")
@click.option("--out", "out_dir", default="demo_out", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the graph, the split, the trained models and the results.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split, the graph and of training.")
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Training epochs [default: 60; 40 with "
                                                                         "--planted].")
@click.option("--planted", is_flag=True, help="Instead: a seeded planted-structure graph and one baseline, where a "
                                              "trained model must land far above chance.")
@click.option("--model", "model_name", default="DistMult", show_default=True,
              type=click.Choice([name for name in vocabulary.SCORERS if name != "RotatE-DGLKE"]),
              help="With --planted: the baseline to train.")
@click.option("--device", default="auto", show_default=True, help="Evaluation device: auto, cpu, cuda or cuda:N.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr.")
@handle_errors
def demo(out_dir, seed, epochs, planted, model_name, device, progress):
    """Offline end-to-end run on the embedded sample: generate, split, train two models (DistMult,
    TransE-L2), evaluate them beside the popularity and rules baselines."""
    from openbench.demo import (DEMO_NEGATIVES, baseline_records, compare_models, entity_heldout, results_table,
                                run_demo, run_pipeline_demo, submit_to_leaderboard, verdicts_against_popularity,
                                write_report)
    from openbench.evaluation.statistics.report import format_table

    quiet_pykeen()
    out = Path(out_dir)
    if not planted:
        results = run_pipeline_demo(out, seed=seed, epochs=epochs or 60, device=device, progress=progress)
        baselines = baseline_records(out, seed, device)
        click.echo(results_table(results, baselines))
        click.echo("\neach trained model against the popularity baseline, query by query (openbench compare on their "
                   "ranks files):\n" + "\n".join(verdicts_against_popularity(out, seed)))
        click.echo("\nthe two trained models compared query by query (openbench compare on their ranks files; "
                   "realistic reciprocal rank, the same test queries):\n" + compare_models(out, seed))
        click.echo("\n" + entity_heldout(out, seed=seed, epochs=epochs or 60, device=device, progress=progress))
        page = submit_to_leaderboard(dict(results, **baselines), out, seed)
        report = write_report(out, seed)
        graph = out / "graph" / "graph_files"
        click.echo(f"\ngraph: {graph}\nsplit: {out / 'split'}\nmodels: {out / 'models'}\n"
                   f"results: {out / 'results'}\nleaderboard: {out / 'leaderboard.sqlite'} (page: {page}; "
                   f"openbench leaderboard show --db {out / 'leaderboard.sqlite'})\n"
                   f"report (figures: per relation, rank distribution, degree strata, DistMult against TransE-L2): "
                   f"{report}\n"
                   f"the same split from the command line (the demo's seed, {seed}; split's own default is 42):\n"
                   f"  openbench split rand --edges {graph / 'edges.csv'} --tn-edges {graph / 'TN_edges.csv'} "
                   f"--nodes {graph / 'ALL_nodes.csv'} --test-frac 0.1 --val 0.1 --eval-negatives {DEMO_NEGATIVES} "
                   f"--seed {seed} --output split_again\n"
                   f"the same evaluation from the command line:\n"
                   f"  openbench evaluate --dataset {out / 'split'} --model DistMult "
                   f"--entity-embeddings {out / 'models' / 'DistMult' / 'entities.npy'} "
                   f"--relation-embeddings {out / 'models' / 'DistMult' / 'relations.npy'}\n"
                   f"  openbench compare {out / 'results' / 'DistMult.ranks.parquet'} "
                   f"{out / 'results' / 'TransE-L2.ranks.parquet'}")
        return
    result = run_demo(out, seed=seed, epochs=epochs or 40, model=model_name, device=device, progress=progress)
    click.echo(format_table(result))
    click.echo(f"\nresult: {out / 'result.json'}\nthe same evaluation from the command line:\n"
               f"  openbench evaluate --dataset {out / 'dataset'} --model {model_name} "
               f"--entity-embeddings {out / 'model' / 'entities.npy'} "
               f"--relation-embeddings {out / 'model' / 'relations.npy'}")
