"""Trace: which modules one query enters on its way from ``openbench.evaluate`` to the record.

Issue 50's done-when asks that following one query enters each module once on its way down
(none entered, left and re-entered within a batch). This script evaluates one test triple of the
demo's planted graph with a small DistMult scorer under ``sys.setprofile`` and counts, per module
of the project, how often a call crossed into it from another module, over the whole evaluation
and within each side pass of a batch (one call of the chain's ``count_side``: the side's
candidates, its scores, their count); ``--tree`` prints each crossing, indented by the depth of
crossings above it. Only the calling thread is traced (the chunk workers' threads are not).

    python benchmarks/trace_door.py [--ranks exact|fast] [--tree]
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import List, Tuple

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


SIDE_PASS = ("openbench.evaluation.counting.chain", "count_side")  # one side of one batch


def trace(ranks: str, tree: bool) -> Tuple[collections.Counter, List[collections.Counter]]:
    """(crossings into each module over the whole evaluation, the crossings within each side
    pass of a batch: one Counter per call of the chain's ``count_side``)."""
    with tempfile.TemporaryDirectory() as scratch:
        dataset = one_query_dataset(Path(scratch))
        generator = torch.Generator().manual_seed(0)
        model = openbench.embedding_model("DistMult", torch.randn(dataset.num_entities, 8, generator=generator),
                                          torch.randn(dataset.num_relations, 8, generator=generator))
        openbench.evaluate(dataset, model, ranks=ranks)  # imports and caches warmed: only the run is traced
        entries: collections.Counter = collections.Counter()
        sides: List[collections.Counter] = []
        stack: list = []
        side_depth = [-1]  # the stack depth of the open side pass (-1: none)

        def profile(frame, event, _arg):
            if event == "call":
                module = module_of(frame.f_code)
                caller = stack[-1] if stack else None
                if module is not None and module != caller:
                    entries[module] += 1
                    if side_depth[0] >= 0:
                        sides[-1][module] += 1
                    if tree:
                        depth = sum(1 for above, below in zip([None] + stack, stack) if above != below)
                        print("  " * depth + f"{module}.{frame.f_code.co_name}")
                if side_depth[0] < 0 and (module, frame.f_code.co_name) == SIDE_PASS:
                    side_depth[0] = len(stack)
                    sides.append(collections.Counter())
                stack.append(module if module is not None else caller)
            elif event == "return" and stack:
                stack.pop()
                if len(stack) == side_depth[0]:
                    side_depth[0] = -1

        sys.setprofile(profile)
        try:
            openbench.evaluate(dataset, model, ranks=ranks)
        finally:
            sys.setprofile(None)
    return entries, sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="exact", choices=("exact", "fast"))
    parser.add_argument("--tree", action="store_true", help="print every crossing into a module")
    args = parser.parse_args()
    entries, sides = trace(args.ranks, args.tree)
    print(f"modules entered while one query is evaluated ({args.ranks} ranks): {len(entries)}; "
          f"entered more than once: {sum(1 for count in entries.values() if count > 1)}")
    for module, count in entries.most_common():
        print(f"{count:4d}  {module}")
    for index, side in enumerate(sides):
        again = sorted(module for module, count in side.items() if count > 1)
        print(f"side pass {index + 1} of {len(sides)}: {len(side)} modules entered, "
              f"{len(again)} of them more than once" + (f": {', '.join(again)}" if again else ""))


if __name__ == "__main__":
    main()
