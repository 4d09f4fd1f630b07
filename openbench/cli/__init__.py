"""The ``openbench`` command: parsing options and printing results, nothing else.

One module per command group (``evaluate``, ``graph``, ``split``, ``train``, ``datasets``,
``leaderboard``, ``text``, ``demo``), each calling one library function per command; the shared
option types and the one-line error handling live in :mod:`openbench.cli.common`. The main group
imports a command's module only when that command runs: ``openbench --help`` lists the commands
from :data:`COMMANDS` (a test checks that its help lines are the commands' own), so it imports no
torch, polars or pykeen. Results go to stdout, logs and progress to stderr.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

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

from openbench import __version__  # noqa: E402

__all__ = ["COMMANDS", "OWN_LOGGERS", "LazyGroup", "main", "metaeval_command", "metaeval_logging"]

# command -> (module of openbench.cli, attribute, the help line --help shows)
COMMANDS: Dict[str, Tuple[str, str, str]] = {
    "audit": ("audit", "audit", "Leakage report of a graph, a split, a published KG or a triples file."),
    "compare": ("compare", "compare", "Paired comparison of two ranks files: difference, interval, p-value."),
    "datasets": ("datasets", "datasets", "Published datasets by name: list, download, verify, convert."),
    "demo": ("demo", "demo", "Offline end-to-end run on the embedded sample, from graph to leaderboard."),
    "evaluate": ("evaluate", "evaluate", "Evaluate a model on a split: ranking (MRR, hits@k), classification or repurposing."),
    "export": ("graph", "export_command", "Convert an existing TSV graph to BEL, RDF or Parquet without rebuilding it."),
    "export-kgid": ("datasets", "export_kgid", "Write a dataset in the integer-id layout (OBL2021's KGID)."),
    "generate": ("graph", "generate", "Build the graph (OpenBioLink's graph_files layout) from the public sources."),
    "leaderboard": ("leaderboard", "leaderboard", "Leaderboards of validated result records: local, exported or served."),
    "report": ("report", "report", "An HTML page of figures for result records: per relation, ranks, strata, a comparison."),
    "split": ("split", "split", "Leakage-free splits: random, time, entity-held-out and inductive."),
    "text": ("text", "text", "Text-mining evaluation side modules (Meta-Eval, BRAT/ChEMU, disease ranking)."),
    "train": ("train", "train", "Train a PyKEEN model on a split (early stopping on validation)."),
}
OWN_LOGGERS = ("openbench", "graphgen", "splits")


class LazyGroup(click.Group):
    """A group whose commands live in modules imported when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.commands or name not in COMMANDS:
            return self.commands.get(name)
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(f"openbench.cli.{module}"), attribute)

    def resolve_command(self, ctx: click.Context, args: List[str]):
        """A mistyped command gets the closest names, as a mistyped option does."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


def __getattr__(name: str) -> Any:
    """``metaeval_command`` and ``metaeval_logging`` (the ``meta-eval`` script's) from their module."""
    if name in ("metaeval_command", "metaeval_logging"):
        return getattr(importlib.import_module("openbench.cli.text"), name)
    raise AttributeError(f"module 'openbench.cli' has no attribute {name!r}")


if __name__ == "__main__":
    main()
