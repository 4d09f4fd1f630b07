"""``openbench evaluate``: one model, or several on one loaded dataset (``--model-dir`` repeated, ``--sweep``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from openbench.cli.common import (TaskChoice, command_seconds, dataset_inputs, handle_errors, int_list,
                                  model_file_options, quiet_pykeen, score_table_options, split_list, write_json)
from openbench import vocabulary
from openbench.evaluation.tasks.repurposing.options import DEFAULT_NEGATIVE_OUTCOMES, DEFAULT_POSITIVE_OUTCOMES, OUTCOMES
from openbench.task_registry import DEFAULT_TASK, get_task, task_names

__all__ = ["evaluate", "TaskOptionsCommand"]


def _owners() -> dict:
    """{flag: the tasks whose own options it sets} from the registry (:attr:`Task.flags`)."""
    found: dict = {}
    for name in task_names():
        for flag in get_task(name).flags:
            found.setdefault(flag, []).append(name)
    return found


class TaskOptionsCommand(click.Command):
    """A command whose ``--help`` groups its options by the tasks that take them: those of every
    task first, then each task's own (the registry's :attr:`Task.flags`)."""

    def format_options(self, ctx, formatter) -> None:
        owners, groups = _owners(), {}  # type: ignore[var-annotated]
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            tasks = tuple(sorted({task for flag in param.opts for task in owners.get(flag, [])},
                                 key=list(task_names()).index))
            groups.setdefault(tasks, []).append(record)
        with formatter.section("Tasks (--task)"):
            formatter.write_dl([(name, get_task(name).summary) for name in task_names()])
        for tasks in sorted(groups, key=lambda key: (len(key) != 0, len(key) > 1, [list(task_names()).index(t)
                                                                                     for t in key])):
            title = "Options of every task" if not tasks else "Options of --task " + " and ".join(tasks)
            with formatter.section(title):
                formatter.write_dl(groups[tasks])


def _given_flags(ctx) -> list:
    """The long flags of the options given on the command line (not left at their defaults)."""
    from click.core import ParameterSource

    return [next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
            for param in ctx.command.params if isinstance(param, click.Option)
            and ctx.get_parameter_source(param.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]


def _check_flags(ctx, task) -> None:
    """An option of another task is a usage error naming the task(s) that take it."""
    owners = _owners()
    for flag in _given_flags(ctx):
        takers = owners.get(flag)
        if takers and task.name not in takers and flag not in task.flag_aliases:
            raise click.UsageError(f"{flag} belongs to --task {' and '.join(takers)}, not to --task {task.name}")


def _names(text: str) -> list:
    """The names of a comma-separated option (``--positive-outcomes``)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _entity_list(path) -> list:
    """The entity labels of an ``--entities`` file: one per line (blank lines and a BOM ignored)."""
    from openbench._io import read_text
    from openbench.errors import InputError

    labels = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not labels:
        raise InputError("the entity list is empty; expected one entity label per line", path)
    return labels


def _evaluate_several(dataset_path, fold, entity_map, relation_map, drop_unknown, model_dirs, sweep_path,
                      trust_pickle, options, output, task, dataset_options=None) -> None:
    """Several models on one loaded dataset: one record per model in the --output folder, a summary
    table on stdout; a failing model is reported, the others still run, and the status is 1."""
    from openbench._io import check_output_folder
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.sweep import evaluate_sweep, sweep_models, sweep_table, write_records

    if not get_task(task).sweeps or options.get("shard") is not None:
        raise click.UsageError(f"several models in one run: --task {DEFAULT_TASK} on one process (not --task {task}, "
                               "no --distributed)")
    models = sweep_models(model_dirs, sweep_path, trust_pickle)
    if not output:
        raise click.UsageError("several models: --output names the folder for their result records")
    inputs = [path for _, spec in models for path in spec.files()] + dataset_inputs(dataset_path, entity_map,
                                                                                       relation_map)
    check_output_folder(output, inputs)
    if any(spec.model_dir and (Path(spec.model_dir) / "trained_model.pkl").exists() for _, spec in models):
        quiet_pykeen()
    dataset = load_dataset(dataset_path, fold=fold, entity_map=entity_map, relation_map=relation_map,
                           drop_unknown=drop_unknown, **(dataset_options or {}))
    results, failures = evaluate_sweep(dataset, models, options)
    if results:
        write_records(output, results, inputs)
    click.echo(sweep_table([name for name, _ in models], results, failures))
    if failures:
        click.echo(f"error: {len(failures)} of {len(models)} model(s) failed", err=True)
        sys.exit(1)


@click.command(cls=TaskOptionsCommand, short_help="Evaluate a model on a split: ranking (MRR, hits@k), classification or repurposing.")
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="Folder with train/test(/val)_sample.csv, a train_test_data/ folder, or the integer-id layout; "
                   "or a registry name (HQ_DIR, ...: see openbench datasets list).")
@click.option("--fold", type=click.IntRange(min=0), default=None,
              help="Cross-validation fold (train_test_data/fold_<I>/).")
@model_file_options
@score_table_options
@click.option("--entity-map", type=click.Path(dir_okay=False), help="id<TAB>label entity map (default: sorted "
                                                                    "training labels).")
@click.option("--relation-map", type=click.Path(dir_okay=False), help="id<TAB>label relation map.")
@click.option("--filter", "filter_text", default=None, help="Known-answer sets to filter, comma-separated "
                                                            "[default: train,valid,test].")
@click.option("--no-filter", is_flag=True, help="Raw ranking: no known answers are removed.")
@click.option("--hits-at", default="1,3,10", show_default=True, help="Comma-separated k of hits@k.")
@click.option("--lower-is-better", is_flag=True, help="Scores are distances: smaller ranks first.")
@click.option("--exclude-query-entity", is_flag=True, help="Remove the query's own entity from its candidates "
                                                           "(always on for --predictions, as SAFRAN does).")
@click.option("--distributed", is_flag=True, help="Run on the torch.distributed process group torchrun set up "
                                                  "(gloo on CPU, NCCL on GPUs); rank 0 writes the result.")
@click.option("--shard", type=click.Choice(vocabulary.SHARDS), default="queries", show_default=True,
              help="With --distributed: split the test queries, or the candidate entities, over the ranks "
                   "(--task repurposing always splits the matrix's drugs).")
@click.option("--candidates", type=click.Choice(vocabulary.CANDIDATE_MODES), default="all", show_default=True,
              help="typed: rank each query only against entities of a node type its relation admits there.")
@click.option("--model-dir", "model_dirs", type=click.Path(file_okay=False, exists=True), multiple=True,
              help="A model folder: " + "; ".join(vocabulary.MODEL_SOURCES[name] for name in ("arrays", "pyg", "pykeen", "dglke", "libkge"))
                   + ". Repeat it to evaluate several models in one run (--output then names a folder).")
@click.option("--sweep", "sweep_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A JSON list of models to evaluate in one run, each {\"name\": ..., \"model_dir\": ...} or "
                   "{\"name\": ..., \"entity_embeddings\": ..., \"relation_embeddings\": ..., \"model\": ...}.")
@click.option("--relations", "relations_text", default=None,
              help="Evaluate only the test triples of these relations (comma-separated names).")
@click.option("--sides", type=click.Choice(["both", "head", "tail"]), default="both", show_default=True,
              help="Which queries to evaluate: (?, r, t) heads, (h, r, ?) tails, or both.")
@click.option("--entities", "entities_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Rank only against these entities (one label per line); a triple whose answer is not among "
                   "them is dropped and counted.")
@click.option("--dglke-compat", is_flag=True,
              help="Reproduce DGL-KE's own evaluator: RESCAL tails with the transposed matrix, SimplE clamped to "
                   "±20 (compare its pessimistic ranks).")
@click.option("--pyg-compat", is_flag=True,
              help="A PyG model folder: add PyG's own KGEModel.test() numbers to the record (tail side, unfiltered, "
                   "ties in argsort's order, 0-based mean rank), beside openbench's.")
@click.option("--predictions", "predictions_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help=vocabulary.MODEL_SOURCES["anyburl"].capitalize() + " instead of embeddings.")
@click.option("--submission", "submission_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help=vocabulary.MODEL_SOURCES["obl2021"].capitalize() + ", against the integer-id layout's test triples.")
@click.option("--drop-unknown", is_flag=True, help="Drop evaluation triples with labels missing from the maps "
                                                   "(recorded as a warning) instead of failing.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Queries per batch [default: by memory].")
@click.option("--protocol", type=click.Choice(["sampled", "full", "txgnn"]), default=None,
              help="sampled: rank each test query against its own negatives, unfiltered (OGB's protocol; the "
                   "default for OGB folders; needs an OGB folder or a split written with --eval-negatives); full: "
                   "against every entity, filtered [default elsewhere].")
@click.option("--ogb-split", default=None, help="OGB folders: the split type under split/ (random, time, …) "
                                                "[default: the only one].")
@click.option("--entity-offsets", type=click.Path(dir_okay=False, exists=True), default=None,
              help="ogbl-biokg: JSON {\"node type\": first global id} instead of OGB's KGE-example order.")
@click.option("--fast", is_flag=True, help="Embeddings: compare the scores as computed in the embeddings' precision "
                                           "(\"ranks\": \"float32\") instead of exact ranks (a near-tie may then "
                                           "depend on batch size, device or sharding).")
@click.option("--seed", type=int, default=0, show_default=True, help="Recorded in the result (evaluation is "
                                                                     "deterministic).")
@click.option("--output", type=click.Path(), default=None,
              help="Result JSON file; with several models (--model-dir repeated, --sweep) the folder for their "
                   "records.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="What stdout holds: the table a person reads, or the result record as JSON (the table then "
                   "goes to stderr).")
@click.option("--bootstrap", type=click.IntRange(min=1), default=None,
              help="Add 95 % bootstrap intervals of MRR and hits@k (both, head, tail, macro) to the record: this "
                   "many resamples of the test triples, seeded by --seed (1000 is common).")
@click.option("--by-period", type=click.Choice(["year", "month"]), default=None,
              help="On a split by dates (openbench split time --cutoff): MRR and hits@k per year (or month) of the "
                   "test edges' dates, with 95 % bootstrap intervals (--bootstrap resamples, 1000 unless given); "
                   "openbench report draws them against the time since the cut-off.")
@click.option("--ranks-output", type=click.Path(dir_okay=False), default=None,
              help="Also write the per-query ranks to this Parquet file: one row per query (split, side, relation, "
                   "head, tail, n_greater, n_equal with the answer, n_candidates, realistic rank), for "
                   "openbench compare and your own statistics.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@click.option("--relation", "treat_relations", multiple=True,
              help="--task repurposing: a treats relation (repeatable; PrimeKG's indication, OpenBioLink's DIS_DRUG; "
                   "either orientation); the first is the one scored.")
@click.option("--negative-relation", "negative_relations", multiple=True,
              help="--task repurposing: known negatives (repeatable; contraindication, true-negative edges).")
@click.option("--drugs", "drugs_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="--task repurposing: the matrix's drugs, one label per line [default: the node type at the drug "
                   "end of the treats relation].")
@click.option("--diseases", "diseases_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="--task repurposing: the matrix's diseases, one label per line.")
@click.option("--recall-at", default=None,
              help="--task repurposing: the n of Recall@n, comma-separated [default: 10,100,1000,10000 and 1 % of the "
                   "matrix].")
@click.option("--keep-top", type=click.IntRange(min=0), default=None,
              help="--task repurposing: the best pairs the record keeps, for compare --stability [default: 1000].")
@click.option("--ground-truth", type=click.Path(dir_okay=False, exists=True), default=None,
              help="--task repurposing: a CSV or TSV of drug, disease, label (treat / not-treat) or a trial outcome "
                   "(an outcome column, or Every Cure's four 0/1 outcome columns), optional date and source: scored "
                   "as an extra test set (a clinical-trials set, say); rows dated on or before the graph's cut-off "
                   "are scored apart.")
@click.option("--cutoff", default=None,
              help="--task repurposing: the graph's cut-off (YYYY-MM-DD): --ground-truth rows dated on or before it "
                   "are scored as their own view [default: the cut-off of a split by dates].")
@click.option("--positive-outcomes", default=",".join(DEFAULT_POSITIVE_OUTCOMES), show_default=True,
              help="--task repurposing: the trial outcomes of --ground-truth that are positives (comma-separated; "
                   "of " + ", ".join(OUTCOMES) + ").")
@click.option("--negative-outcomes", default=",".join(DEFAULT_NEGATIVE_OUTCOMES), show_default=True,
              help="--task repurposing: the trial outcomes that are negatives; the others are left out, counted.")
@click.option("--task", type=TaskChoice(), default=DEFAULT_TASK, show_default=True,
              help="What to measure (the tasks, and the options each takes, are listed below).")
@click.option("--threshold-metric", type=click.Choice(["accuracy", "f1"]), default="accuracy", show_default=True,
              help="With --task classification: what each relation's threshold maximises on validation.")
@click.pass_context
@handle_errors
def evaluate(ctx, dataset_path, fold, entity_embeddings, relation_embeddings, model_name, complex_layout, entity_map,
             relation_map, filter_text, no_filter, hits_at, lower_is_better, exclude_query_entity, distributed, shard,
             candidates, model_dirs, sweep_path, relations_text, sides, entities_path, trust_pickle, dglke_data,
             dglke_compat, pyg_compat, libkge_data, predictions_path, submission_path, drop_unknown, device, batch_size, protocol,
             ogb_split, entity_offsets, fast, seed, bootstrap, by_period, output, fmt, ranks_output, progress, task,
             threshold_metric, treat_relations, negative_relations, drugs_path, diseases_path, recall_at, keep_top,
             ground_truth, cutoff, positive_outcomes, negative_outcomes, scores_path, score_column, id_columns, ranked_list_path, names_path, require_complete):
    """Evaluate a model on a dataset under one task: filtered ranking (MRR, MR, hits@k, AMRI; the
    default), triple classification of its positives and negatives, or drug repurposing over the
    drug × disease matrix. Each task's own options are listed under its name."""
    chosen = get_task(task)
    _check_flags(ctx, chosen)
    if no_filter and filter_text:
        raise click.UsageError("--filter and --no-filter exclude each other")
    from openbench._io import check_output_file, is_openbench_json
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate as evaluate_model
    from openbench.models.sources import ModelSpec, select_source

    if distributed and shard not in chosen.shards:  # a task that shards one way only shards that way
        modes = [mode for mode in chosen.shards if mode is not None]
        shard = modes[0] if len(modes) == 1 else shard
    settings = dict(device=device, batch_size=batch_size, seed=seed, progress=progress,
                    lower_is_better=lower_is_better, shard=shard if distributed else None)
    relations = [part.strip() for part in relations_text.split(",") if part.strip()] if relations_text else None
    # every task's options by field name: the task takes its own (Task.options_type), nothing else
    values = dict(
        filter_sets=[] if no_filter else (split_list(filter_text) if filter_text else None),
        hits_at=int_list("--hits-at", hits_at), exclude_query_entity=exclude_query_entity or None,
        candidates=candidates, sides=["head", "tail"] if sides == "both" else [sides], relations=relations,
        entities=_entity_list(entities_path) if entities_path else None, ranks="fast" if fast else "exact",
        protocol=protocol, bootstrap=bootstrap, by_period=by_period, threshold_metric=threshold_metric, fold=fold,
        relation=list(treat_relations) or relations, negative_relations=list(negative_relations),
        drugs=_entity_list(drugs_path) if drugs_path else None,
        diseases=_entity_list(diseases_path) if diseases_path else None,
        recall_at=int_list("--recall-at", recall_at) if recall_at else None, keep_top=keep_top,
        ground_truth=ground_truth, cutoff=cutoff, positive_outcomes=_names(positive_outcomes),
        negative_outcomes=_names(negative_outcomes))
    fields = chosen.options_type.field_names()
    # None is "not given": a task's own default stands (a toy task's cutoff is not the repurposing task's)
    options = {name: value for name, value in values.items() if name in fields and value is not None}
    dataset_options = {"ogb_split": ogb_split, "entity_offsets": entity_offsets}
    if ranks_output and (len(model_dirs) > 1 or sweep_path or not chosen.keeps_ranks):
        raise click.UsageError(f"--ranks-output writes the ranks of one --task {DEFAULT_TASK} evaluation: not with "
                               f"several models or --task {task}")
    if len(model_dirs) > 1 or sweep_path:
        if entity_embeddings or relation_embeddings or model_name or predictions_path or submission_path:
            raise click.UsageError("several models: give --model-dir (repeated) or --sweep, with embeddings and "
                                   "prediction files listed in the sweep file")
        if fmt == "json":
            raise click.UsageError("--format json prints one record: several models write theirs to the --output "
                                   "folder")
        _evaluate_several(dataset_path, fold, entity_map, relation_map, drop_unknown, model_dirs, sweep_path,
                          trust_pickle, {**options, **settings}, output, task, dataset_options)
        return
    spec = ModelSpec(entity_embeddings, relation_embeddings, model_name, complex_layout,
                     model_dirs[0] if model_dirs else None, trust_pickle, dglke_data, dglke_compat, libkge_data,
                     predictions_path, submission_path, pyg_compat, scores_path, score_column,
                     split_list(id_columns) if id_columns else None, ranked_list_path, names_path, require_complete,
                     drop_unknown, values["drugs"], values["diseases"])
    if pyg_compat and select_source(spec).name != "pyg":
        raise click.UsageError("--pyg-compat adds PyG's test() numbers to a ranking evaluation of a PyG model folder "
                               "(--model-dir written by openbench.save_pyg)")
    inputs = spec.files() + dataset_inputs(dataset_path, entity_map, relation_map)
    if output:
        check_output_file(output, inputs, recognise=is_openbench_json)  # before any work
    if ranks_output:
        from openbench.evaluation.statistics.ranks_table import is_openbench_ranks

        if output and Path(ranks_output).resolve() == Path(output).resolve():
            raise click.UsageError("--ranks-output and --output name the same file")
        check_output_file(ranks_output, inputs + ([output] if output else []), recognise=is_openbench_ranks)
    if select_source(spec).name == "pykeen":
        quiet_pykeen()
    dataset = load_dataset(dataset_path, fold=fold, entity_map=entity_map, relation_map=relation_map,
                           drop_unknown=drop_unknown, **dataset_options)
    evaluated = evaluate_model(dataset, spec, task, **settings, **options)
    if distributed and os.environ.get("RANK", "0") != "0":  # every rank has the record; rank 0 writes it
        return
    record = evaluated.to_dict()
    click.echo("\n".join(chosen.summary_lines(record)), err=fmt == "json")  # stdout: the record under --format json
    if ranks_output and evaluated.ranks is not None:  # every ranking run has them
        from openbench.evaluation.statistics.ranks_table import write_ranks

        write_ranks(ranks_output, evaluated.ranks, record, inputs + ([output] if output else []))
    _write_record(record, output, fmt, inputs)


def _write_record(record: dict, output, fmt: str, inputs) -> None:
    """The record to ``--output`` (when given) and to stdout under ``--format json``; then the whole
    command's time beside the evaluation's (which the table gives)."""
    if output:
        write_json(record, output, inputs)
    if fmt == "json":
        write_json(record, None)
    seconds = command_seconds()
    if seconds is not None:
        stages = (record.get("timing") or {}).get("stages") or {}
        parts = [f"{name.replace('_', ' ')} {value:.2f} s" for name, value in stages.items()
                 if isinstance(value, (int, float))]
        click.echo(f"the whole command: {seconds:.2f} s (start-up and imports included"
                   + (f"; {', '.join(parts)}" if parts else "") + ")", err=fmt == "json")

