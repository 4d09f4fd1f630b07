"""What every command module shares: one-line errors, option types, list options, the result
writer, the dataset's input paths and PyKEEN's quieting. Light: no torch, polars or pykeen."""
from __future__ import annotations

import errno
import functools
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional

import click

from openbench._io.outputs import strict_json
from openbench.errors import INTERRUPTED, OpenbenchError, command_line_spelling
from openbench.datasets.layouts import SPLITS
from openbench.task_registry import task_names

__all__ = ["TaskChoice", "score_table_options", "one_line", "handle_errors", "model_file_options", "Names", "FiniteFloat", "int_list", "split_list", "names_of", "write_json",
           "dataset_inputs", "quiet_pykeen", "PROGRESS"]

PROGRESS = click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr.")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


_SYSTEM_ERRORS = {errno.EACCES: "check the file's permissions", errno.EPERM: "check the file's permissions",
                  errno.ENOSPC: "free some space", errno.EDQUOT: "free some space",
                  errno.EROFS: "a read-only file system", errno.EIO: "a device error: check the disk",
                  errno.EMFILE: "too many open files: raise ulimit -n", errno.ENAMETOOLONG: "shorten the name",
                  errno.ELOOP: "a loop of symbolic links",
                  errno.ENOTDIR: "a file stands where a folder is expected: check the path",
                  errno.ENOENT: "a folder on the path does not exist or cannot hold files: check the path",
                  errno.EEXIST: "a file stands where a folder is expected: check the path",
                  errno.EISDIR: "a folder stands where a file is expected: check the path"}


def command_seconds() -> Optional[float]:
    """Seconds since the ``openbench`` command started (start-up and imports included), or None when
    the command runs inside another program (a test's runner)."""
    entry = sys.modules.get("openbench.entry")
    started = getattr(entry, "STARTED", None)
    if started is None or entry is None or not getattr(entry, "RUNNING", False):
        return None
    import time

    return time.perf_counter() - started


def error_code_of(error: OSError) -> int:
    from openbench._io.outputs import error_code

    return error_code(error)


def handle_errors(command):
    """Errors end a command with one line on stderr and a status, never a traceback: openbench's
    own errors with theirs (1, or 2 for a refused output), an interrupt with 130, the system's
    refusals (permissions, a full disk, ...) with what to do (1), and anything unexpected as an
    internal error (1; ``-vv`` shows its traceback)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with command_line_spelling():  # messages name --flags, not the Python keywords
                return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except OpenbenchError as error:
            click.echo(f"error: {one_line(str(error))}", err=True)
            sys.exit(getattr(error, "exit_code", 1))
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            sys.exit(130)
        except Exception as error:  # a bug: one line for the user, the traceback with -vv
            code = error_code_of(error) if isinstance(error, OSError) else None
            if code in _SYSTEM_ERRORS:
                filename = getattr(error, "filename", None)
                where = f"{filename}: " if filename else ""
                click.echo(f"error: {where}{os.strerror(code)} ({_SYSTEM_ERRORS[code]})", err=True)
                sys.exit(1)
            if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
                raise
            click.echo(f"error: internal error ({type(error).__name__}: {one_line(str(error))}); this is a bug in "
                       "openbench: rerun with -vv for the traceback and please report it", err=True)
            sys.exit(1)

    return wrapper


class WholeHelpGroup(click.Group):
    """A command group whose ``--help`` lists each command with its whole first sentence (click cuts
    it at 45 characters with "...", which hid what the commands do); groups made from it make
    groups of the same kind."""

    group_class = type

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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


def int_list(option: str, text: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}", param_hint=option) from None
    if not values or any(value < 1 for value in values):
        raise click.BadParameter(f"expected positive integers, got {text!r}", param_hint=option)
    return values


def split_list(text: str) -> List[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in SPLITS]
    if unknown or not names:
        raise click.BadParameter(f"expected a comma-separated subset of {','.join(SPLITS)}, got {text!r}",
                                 param_hint="--filter")
    return names


def names_of(text: Optional[str]) -> Optional[List[str]]:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def write_json(result: dict, output: Optional[str], inputs=()) -> None:
    """A result record to ``output`` (atomically, only over a file openbench wrote), or to stdout."""
    if output:
        from openbench._io import write_json as write_file

        write_file(output, result, inputs)
    else:
        click.echo(strict_json(result, indent=2) + "\n", nl=False)


def dataset_inputs(dataset_path: str, *maps) -> List[str]:
    """The dataset's folder (where it is a path, not a registry name) and map files: outputs never replace them."""
    return [str(path) for path in (dataset_path, *maps) if path and Path(path).exists()]


def quiet_pykeen() -> None:
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


def model_file_options(command):
    """The options that name a model and its files, defined once for every command that reads a
    model (``evaluate``; ``leaderboard submit``, which re-evaluates it): ``--entity-embeddings``,
    ``--relation-embeddings``, ``--model``, ``--complex-layout``, ``--trust-pickle``,
    ``--dglke-data``, ``--libkge-data`` (``--model-dir`` is each command's own: evaluate repeats it)."""
    from openbench import vocabulary

    options = [
        click.option("--entity-embeddings", type=click.Path(dir_okay=False), help="Entity embeddings, .npy (E, d)."),
        click.option("--relation-embeddings", type=click.Path(dir_okay=False), help="Relation embeddings, .npy."),
        click.option("--model", "model_name", type=Names([*vocabulary.SCORERS, vocabulary.POPULARITY, vocabulary.RULES,
                                                         vocabulary.NEIGHBOURS]),
                     help="Score function of the embeddings; popularity (no embeddings): the baseline that scores "
                          "each candidate by its training degree within the query's relation and side; rules: the "
                          "answers the training triples' symmetric, inverse and duplicate relations imply first (what "
                          "leakage alone scores; openbench audit), then popularity; neighbours: the structure "
                          "baseline (how many of the query entity's training neighbours a candidate answers under "
                          "the relation)."),
        click.option("--complex-layout", type=click.Choice(vocabulary.COMPLEX_LAYOUTS), default="halves",
                     show_default=True, help="How a real array holds complex numbers: [real | imaginary] halves "
                                             "(DGL-KE) or pairs (PyKEEN)."),
        click.option("--trust-pickle", is_flag=True,
                     help="Allow loading a PyKEEN trained_model.pkl (a pickle runs code)."),
        click.option("--dglke-data", type=click.Path(file_okay=False, exists=True), default=None,
                     help="DGL-KE's training data folder with entities/relations .dict or .tsv [default: --model-dir]."),
        click.option("--libkge-data", type=click.Path(file_okay=False, exists=True), default=None,
                     help="LibKGE's dataset folder with entity_ids.del and relation_ids.del [default: --model-dir]."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class TaskChoice(click.Choice):
    """``--task``: the task registry's names, read when the command line is parsed (a task a module
    registers at run time is a choice too)."""

    def __init__(self):
        super().__init__(list(task_names()))

    def convert(self, value, param, ctx):
        self.choices = tuple(task_names())
        return super().convert(value, param, ctx)

    def get_metavar(self, *args, **kwargs):
        self.choices = tuple(task_names())
        return super().get_metavar(*args, **kwargs)


def score_table_options(command):
    """The options of a model given as its predictions (:mod:`openbench.models.tables`), defined
    once for ``evaluate`` and ``leaderboard submit``: ``--scores``, ``--score-column``,
    ``--id-columns``, ``--ranked-list``, ``--names``, ``--require-complete``."""
    options = [
        click.option("--scores", "scores_path", type=click.Path(exists=True), default=None,
                     help="Any model's predictions as a table of scores: Parquet (a file, or a Spark folder of "
                          "part-files, Every Cure's matrix_predictions), CSV/TSV (gzip, zstd), a dense .npy "
                          "(--drugs × --diseases), or TxGNN's disease_centric_eval.pkl (--trust-pickle). Columns "
                          "head, relation, tail or drug, disease (source, target) and a score; unlisted candidates "
                          "rank below every scored one, tied."),
        click.option("--score-column", default=None,
                     help="The score column [default: score, 'treat score', transformed_treat_score, ...]; "
                          "TxGNN's pickle: the relation (rev_indication)."),
        click.option("--id-columns", default=None,
                     help="The id columns where they are not head,relation,tail or drug,disease (comma-separated)."),
        click.option("--ranked-list", "ranked_list_path", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="Ranked lists by name: a CSV/TSV of disease (or query), drug (or name), optional rank; "
                          "names mapped through --names."),
        click.option("--names", "names_path", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="A synonym table for --ranked-list: id,name rows (PrimeKG's nodes too) or Babel-style "
                          "JSONL (curie, names); ambiguous and unknown names are listed, never guessed."),
        click.option("--require-complete", is_flag=True,
                     help="Refuse a table that leaves any candidate unscored."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
