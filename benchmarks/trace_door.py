"""Trace: which modules one query enters on its way from ``openbench.evaluate`` to the record.

Issue 50's done-when asks that following one query enters each module once on its way down
(none entered, left and re-entered within a batch). This script evaluates test triples of the
demo's planted graph (one by default) with a small DistMult scorer under ``sys.setprofile`` and
counts, per module of the project, how often a call crossed into it from another module, over the
whole evaluation and within each batch (one call of the chain's ``count_batch``: queries of one
side; their candidates, their scores, their count). ``--tree`` prints each crossing, indented by
the depth of crossings above it. Only the calling thread is traced (the chunk workers' threads
are not).

``--entity-chunk W`` scores the candidates in chunks of W and ``--repeated`` draws the entity
rows from a few distinct ones, so that exact ranks' windows hold candidates to settle: the loop
over the chunks then enters the scorer and the C kernel once per chunk, and the settling enters
the scorer for its float64 formulas, which the one-block default does not show.

    python benchmarks/trace_door.py [--ranks exact|fast] [--queries N] [--entity-chunk W] [--repeated] [--tree]
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

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


def one_query_dataset(folder: Path, queries: int = 1):
    splits = planted_graph(0)
    splits["test"] = splits["test"][:queries]
    write_samples(folder, splits, 0)
    return load_dataset(folder)


BATCH = ("openbench.evaluation.counting.chain", "count_batch")  # one batch: queries of one side


def trace(ranks: str, tree: bool, queries: int = 1, entity_chunk: Optional[int] = None,
          repeated: bool = False) -> Tuple[collections.Counter, List[collections.Counter]]:
    """(crossings into each module over the whole evaluation, the crossings within each batch:
    one Counter per call of the chain's ``count_batch``)."""
    with tempfile.TemporaryDirectory() as scratch:
        dataset = one_query_dataset(Path(scratch), queries)
        generator = torch.Generator().manual_seed(0)
        entities = torch.randn(dataset.num_entities, 8, generator=generator)
        if repeated:  # few distinct rows: many candidates inside each window, settled in float64
            entities = entities[torch.randint(0, 6, (dataset.num_entities,), generator=generator)]
        model = openbench.embedding_model("DistMult", entities, torch.randn(dataset.num_relations, 8,
                                                                            generator=generator))
        options = dict(ranks=ranks, entity_chunk=entity_chunk, progress=False)
        openbench.evaluate(dataset, model, **options)  # imports and caches warmed: only the run is traced
        entries: collections.Counter = collections.Counter()
        sides: List[collections.Counter] = []
        stack: list = []
        side_depth = [-1]  # the stack depth of the open batch (-1: none)

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
                if side_depth[0] < 0 and (module, frame.f_code.co_name) == BATCH:
                    side_depth[0] = len(stack)
                    sides.append(collections.Counter())
                stack.append(module if module is not None else caller)
            elif event == "return" and stack:
                stack.pop()
                if len(stack) == side_depth[0]:
                    side_depth[0] = -1

        sys.setprofile(profile)
        try:
            openbench.evaluate(dataset, model, **options)
        finally:
            sys.setprofile(None)
    return entries, sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="exact", choices=("exact", "fast"))
    parser.add_argument("--queries", type=int, default=1, help="test triples evaluated (default 1)")
    parser.add_argument("--entity-chunk", type=int, default=None, help="candidates per block (default: one block)")
    parser.add_argument("--repeated", action="store_true", help="entity rows drawn from 6 distinct ones")
    parser.add_argument("--tree", action="store_true", help="print every crossing into a module")
    args = parser.parse_args()
    entries, sides = trace(args.ranks, args.tree, args.queries, args.entity_chunk, args.repeated)
    print(f"modules entered while {args.queries} test triple(s) are evaluated ({args.ranks} ranks): {len(entries)}; "
          f"entered more than once: {sum(1 for count in entries.values() if count > 1)}")
    for module, count in entries.most_common():
        print(f"{count:4d}  {module}")
    for index, side in enumerate(sides):
        again = sorted(module for module, count in side.items() if count > 1)
        print(f"batch {index + 1} of {len(sides)}: {len(side)} modules entered, "
              f"{len(again)} of them more than once" + (f": {', '.join(again)}" if again else ""))


if __name__ == "__main__":
    main()
