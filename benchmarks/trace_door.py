"""Trace: which modules one query enters on its way from ``openbench.evaluate`` to the record.

Issue 50's done-when asks that following one query enters each module once on its way down
(none entered, left and re-entered within a batch). This script evaluates one test triple of the
demo's planted graph with a small DistMult scorer under ``sys.setprofile`` and counts, per module
of the project, how often a call crossed into it from another module; ``--tree`` prints each
crossing, indented by the depth of crossings above it.

    python benchmarks/trace_door.py [--ranks exact|fast] [--tree]
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import openbench  # noqa: E402
from openbench.datasets.loader import load_dataset  # noqa: E402
from openbench.demo import planted_graph, write_samples  # noqa: E402


def module_of(code) -> str | None:
    """The project module a code object belongs to (None outside the project)."""
    name = code.co_filename
    if not name.startswith(str(ROOT)) or "/.venv" in name:
        return None
    return name[len(str(ROOT)) + 1:].removesuffix(".py").replace("/", ".")


def one_query_dataset(folder: Path):
    splits = planted_graph(0)
    splits["test"] = splits["test"][:1]
    write_samples(folder, splits, 0)
    return load_dataset(folder)


def trace(ranks: str, tree: bool) -> collections.Counter:
    with tempfile.TemporaryDirectory() as scratch:
        dataset = one_query_dataset(Path(scratch))
        generator = torch.Generator().manual_seed(0)
        model = openbench.embedding_model("DistMult", torch.randn(dataset.num_entities, 8, generator=generator),
                                          torch.randn(dataset.num_relations, 8, generator=generator))
        openbench.evaluate(dataset, model, ranks=ranks)  # imports and caches warmed: only the run is traced
        entries: collections.Counter = collections.Counter()
        stack: list = []

        def profile(frame, event, _arg):
            if event == "call":
                module = module_of(frame.f_code)
                caller = stack[-1] if stack else None
                if module is not None and module != caller:
                    entries[module] += 1
                    if tree:
                        depth = sum(1 for above, below in zip([None] + stack, stack) if above != below)
                        print("  " * depth + f"{module}.{frame.f_code.co_name}")
                stack.append(module if module is not None else caller)
            elif event == "return" and stack:
                stack.pop()

        sys.setprofile(profile)
        try:
            openbench.evaluate(dataset, model, ranks=ranks)
        finally:
            sys.setprofile(None)
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="exact", choices=("exact", "fast"))
    parser.add_argument("--tree", action="store_true", help="print every crossing into a module")
    args = parser.parse_args()
    entries = trace(args.ranks, args.tree)
    print(f"modules entered while one query is evaluated ({args.ranks} ranks): {len(entries)}; "
          f"entered more than once: {sum(1 for count in entries.values() if count > 1)}")
    for module, count in entries.most_common():
        print(f"{count:4d}  {module}")


if __name__ == "__main__":
    main()
