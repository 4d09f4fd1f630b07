"""``openbench evaluate``: one model, or several on one loaded dataset (``--model-dir`` repeated, ``--sweep``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from openbench.cli.common import (command_seconds, dataset_inputs, handle_errors, int_list, model_file_options,
                                  quiet_pykeen, split_list, write_json)
from openbench import vocabulary

__all__ = ["evaluate"]


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

    if task != "ranking" or options.get("shard") is not None:
        raise click.UsageError("several models in one run: ranking on one process (no --task classification, "
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


@click.command(short_help="Filtered rank-based evaluation of a model on a split (MRR, hits@k, AMRI).")
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="Folder with train/test(/val)_sample.csv, a train_test_data/ folder, or the integer-id layout; "
                   "or a registry name (HQ_DIR, ...: see openbench datasets list).")
@click.option("--fold", type=click.IntRange(min=0), default=None,
              help="Cross-validation fold (train_test_data/fold_<I>/).")
@model_file_options
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
              help="--task repurposing: a CSV or TSV of drug, disease, label (treat / not-treat), optional date and "
                   "source: scored as an extra test set (a clinical-trials set, say).")
@click.option("--task", type=click.Choice(["ranking", "classification", "repurposing"]), default="ranking",
              show_default=True,
              help="classification: score the validation and test positives and negatives (AUROC, AUPRC, "
                   "per-relation thresholds chosen on validation).")
@click.option("--threshold-metric", type=click.Choice(["accuracy", "f1"]), default="accuracy", show_default=True,
              help="With --task classification: what each relation's threshold maximises on validation.")
@handle_errors
def evaluate(dataset_path, fold, entity_embeddings, relation_embeddings, model_name, complex_layout, entity_map,
             relation_map, filter_text, no_filter, hits_at, lower_is_better, exclude_query_entity, distributed, shard,
             candidates, model_dirs, sweep_path, relations_text, sides, entities_path, trust_pickle, dglke_data,
             dglke_compat, pyg_compat, libkge_data, predictions_path, submission_path, drop_unknown, device, batch_size, protocol,
             ogb_split, entity_offsets, fast, seed, bootstrap, output, fmt, ranks_output, progress, task,
             threshold_metric, treat_relations, negative_relations, drugs_path, diseases_path, recall_at, keep_top,
             ground_truth):
    """Filtered rank-based evaluation (MRR, MR, hits@k, AMRI) of a model on a dataset, or triple
    classification of its positives and negatives (--task classification)."""
    if no_filter and filter_text:
        raise click.UsageError("--filter and --no-filter exclude each other")
    repurposing_options = {"--relation": treat_relations, "--negative-relation": negative_relations,
                           "--drugs": drugs_path, "--diseases": diseases_path, "--recall-at": recall_at,
                           "--keep-top": keep_top, "--ground-truth": ground_truth}
    given = [name for name, value in repurposing_options.items() if value not in (None, ())]
    if task != "repurposing" and given:
        raise click.UsageError(f"{', '.join(given)} belong(s) to --task repurposing")
    if task == "repurposing" and relations_text and not treat_relations:
        treat_relations = tuple(part.strip() for part in relations_text.split(",") if part.strip())
    if task == "classification" and distributed:
        raise click.UsageError("--task classification runs on one process: --distributed is for ranking")
    from openbench._io import check_output_file, is_openbench_json
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate as evaluate_model
    from openbench.evaluation.statistics.report import format_table
    from openbench.models.sources import ModelSpec, select_source

    protocol_options = dict(
        filter_sets=[] if no_filter else (split_list(filter_text) if filter_text else None),
        hits_at=int_list("--hits-at", hits_at), lower_is_better=lower_is_better,
        exclude_query_entity=exclude_query_entity or None, candidates=candidates, device=device,
        batch_size=batch_size, seed=seed, progress=progress, shard=shard if distributed else None,
        sides=["head", "tail"] if sides == "both" else [sides],
        relations=[part.strip() for part in relations_text.split(",") if part.strip()]
        if relations_text is not None else None,
        entities=_entity_list(entities_path) if entities_path else None,
        ranks="fast" if fast else "exact", protocol=protocol, bootstrap=bootstrap)
    dataset_options = {"ogb_split": ogb_split, "entity_offsets": entity_offsets}
    if bootstrap and task == "classification":
        raise click.UsageError("--bootstrap gives intervals of ranking metrics: not with --task classification")
    if ranks_output and (len(model_dirs) > 1 or sweep_path or task == "classification"):
        raise click.UsageError("--ranks-output writes the ranks of one ranking evaluation: not with several models "
                               "or --task classification")
    if len(model_dirs) > 1 or sweep_path:
        if entity_embeddings or relation_embeddings or model_name or predictions_path or submission_path:
            raise click.UsageError("several models: give --model-dir (repeated) or --sweep, with embeddings and "
                                   "prediction files listed in the sweep file")
        if fmt == "json":
            raise click.UsageError("--format json prints one record: several models write theirs to the --output "
                                   "folder")
        _evaluate_several(dataset_path, fold, entity_map, relation_map, drop_unknown, model_dirs, sweep_path,
                          trust_pickle, protocol_options, output, task, dataset_options)
        return
    spec = ModelSpec(entity_embeddings, relation_embeddings, model_name, complex_layout,
                     model_dirs[0] if model_dirs else None, trust_pickle, dglke_data, dglke_compat, libkge_data,
                     predictions_path, submission_path, pyg_compat)
    if pyg_compat and (task != "ranking" or select_source(spec).name != "pyg"):
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
    if task == "repurposing":
        _repurpose(dataset, spec, dict(
            relations=list(treat_relations) or None, negative_relations=list(negative_relations),
            drugs=_entity_list(drugs_path) if drugs_path else None,
            diseases=_entity_list(diseases_path) if diseases_path else None,
            recall_at=int_list("--recall-at", recall_at) if recall_at else None, keep_top=keep_top,
            ground_truth=ground_truth, hits_at=int_list("--hits-at", hits_at), protocol=protocol, device=device,
            seed=seed, lower_is_better=lower_is_better, progress=progress, bootstrap=bootstrap,
            ranks="fast" if fast else "exact", shard="entities" if distributed else None), output, fmt, inputs,
            writes=not distributed or os.environ.get("RANK", "0") == "0")
        return
    if task == "classification":
        from openbench.evaluation.tasks.classification import summary_lines

        result = evaluate_model(dataset, spec, task="classification", threshold_metric=threshold_metric, fold=fold,
                                device=device, batch_size=batch_size, seed=seed,
                                lower_is_better=lower_is_better, progress=progress).to_dict()
        click.echo("\n".join(summary_lines(result)), err=fmt == "json")
        _write_record(result, output, fmt, inputs)
        return
    evaluated = evaluate_model(dataset, spec, **protocol_options)
    if distributed and os.environ.get("RANK", "0") != "0":  # every rank has the record; rank 0 writes it
        return
    record = evaluated.to_dict()
    click.echo(format_table(record), err=fmt == "json")  # stdout holds the record itself under --format json
    if ranks_output and evaluated.ranks is not None:  # every ranking run has them
        from openbench.evaluation.statistics.ranks_table import write_ranks

        write_ranks(ranks_output, evaluated.ranks, record, inputs + ([output] if output else []))
    _write_record(record, output, fmt, inputs)


def _repurpose(dataset, spec, options: dict, output, fmt: str, inputs, writes: bool = True) -> None:
    """--task repurposing: the record, and its table on stdout (stderr under --format json). Under
    --distributed every rank counts its share of the drugs and has the whole record; rank 0 writes it."""
    from openbench.evaluation.evaluate import evaluate as evaluate_model
    from openbench.evaluation.tasks.repurposing import summary_lines

    record = evaluate_model(dataset, spec, task="repurposing", **options).to_dict()
    if not writes:
        return
    click.echo("\n".join(summary_lines(record)), err=fmt == "json")
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

