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
from typing import List, NamedTuple, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import openbench  # noqa: E402
from openbench.datasets.loader import load_dataset  # noqa: E402
from openbench.demo import planted_graph, write_samples  # noqa: E402


PACKAGES = ("openbench", "graphgen", "splits")  # the project's own code: anything else is a library
# the project's pure arithmetic (γ_n, unit roundoff, outward rounding): called as numpy is, holding no
# stage of the query's way down, so traced as a library
ARITHMETIC = ("openbench.evaluation.counting.rounding",)
# rooms of one stage: exact ranks' keys, bounds and table facts are the exact stage's own helpers,
# traced as that stage (a call among them is no crossing)
ROOMS = {f"openbench.evaluation.counting.{room}": "openbench.evaluation.counting.exact"
         for room in ("exact_keys", "key_bounds", "table_facts")}


def module_of(code) -> str | None:
    """The project module a code object belongs to (None outside the project's packages: a
    virtual environment inside the checkout, beside it under a name sharing its prefix, or
    anywhere else holds libraries, never the project; and None for :data:`ARITHMETIC`); a room of
    a stage (:data:`ROOMS`) as its stage."""
    path = Path(code.co_filename)
    for package in PACKAGES:
        folder = ROOT / package
        if path.is_relative_to(folder):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            return None if name in ARITHMETIC else ROOMS.get(name, name)
    return None


def planted_dataset(folder: Path, queries: int = 1):
    """The demo's planted graph, its first ``queries`` test triples kept."""
    splits = planted_graph(0)
    splits["test"] = splits["test"][:queries]
    write_samples(folder, splits, 0)
    return load_dataset(folder)


BATCH = ("openbench.evaluation.counting.chain", "count_batch")  # one batch: queries of one side


class Trace(NamedTuple):
    """Per project module: ``crossings``, calls into it from another module (a call back into a
    module still on the stack included); ``visits``, entries while it was not on the stack (it was
    left, or never entered: "entered, left and re-entered" counts a visit each time); and both per
    batch (one Counter per call of the chain's ``count_batch``)."""

    crossings: collections.Counter
    visits: collections.Counter
    batch_crossings: List[collections.Counter]
    batch_visits: List[collections.Counter]


def trace(ranks: str, tree: bool, queries: int = 1, entity_chunk: Optional[int] = None,
          repeated: bool = False, model_name: str = "DistMult") -> Trace:
    """The crossings and visits of one evaluation (see :class:`Trace`)."""
    with tempfile.TemporaryDirectory() as scratch:
        dataset = planted_dataset(Path(scratch), queries)
        generator = torch.Generator().manual_seed(0)
        entities = torch.randn(dataset.num_entities, 8, generator=generator)
        if repeated:  # few distinct rows: many candidates inside each window, settled in float64
            entities = entities[torch.randint(0, 6, (dataset.num_entities,), generator=generator)]
        relations = torch.randn(dataset.num_relations, 64 if model_name == "RESCAL" else 8, generator=generator)
        if model_name.startswith("RotatE"):  # rotations: unit moduli, as [cos | sin] halves
            relations = torch.cat([relations[:, :4].cos(), relations[:, :4].sin()], dim=1)
        model = openbench.embedding_model(model_name, entities, relations)
        options = dict(ranks=ranks, entity_chunk=entity_chunk, progress=False)
        openbench.evaluate(dataset, model, **options)  # imports and caches warmed: only the run is traced
        found = Trace(collections.Counter(), collections.Counter(), [], [])
        stack: list = []
        on_stack: collections.Counter = collections.Counter()
        batch_depth = [-1]  # the stack depth of the open batch (-1: none)

        def profile(frame, event, _arg):
            if event == "call":
                module = module_of(frame.f_code)
                caller = stack[-1] if stack else None
                if module is not None and module != caller:
                    found.crossings[module] += 1
                    visit = on_stack[module] == 0
                    found.visits[module] += visit
                    if batch_depth[0] >= 0:
                        found.batch_crossings[-1][module] += 1
                        found.batch_visits[-1][module] += visit
                    if tree:
                        depth = sum(1 for above, below in zip([None] + stack, stack) if above != below)
                        print("  " * depth + f"{module}.{frame.f_code.co_name}" + ("" if visit else "  (still inside)"))
                if batch_depth[0] < 0 and (module, frame.f_code.co_name) == BATCH:
                    batch_depth[0] = len(stack)
                    found.batch_crossings.append(collections.Counter())
                    found.batch_visits.append(collections.Counter())
                entered = module if module is not None else caller
                stack.append(entered)
                on_stack[entered] += 1
            elif event == "return" and stack:
                on_stack[stack.pop()] -= 1
                if len(stack) == batch_depth[0]:
                    batch_depth[0] = -1

        sys.setprofile(profile)
        try:
            openbench.evaluate(dataset, model, **options)
        finally:
            sys.setprofile(None)
    return found


def _again(counts: collections.Counter) -> List[str]:
    return sorted(module for module, count in counts.items() if count > 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="exact", choices=("exact", "fast"))
    parser.add_argument("--queries", type=int, default=1, help="test triples evaluated (default 1)")
    parser.add_argument("--entity-chunk", type=int, default=None, help="candidates per block (default: one block)")
    parser.add_argument("--repeated", action="store_true", help="entity rows drawn from 6 distinct ones")
    parser.add_argument("--model", default="DistMult", help="an embedding model's name (default DistMult; RESCAL's "
                        "relations are 8 x 8 matrices, RotatE's rotations)")
    parser.add_argument("--tree", action="store_true", help="print every crossing into a module")
    args = parser.parse_args()
    found = trace(args.ranks, args.tree, args.queries, args.entity_chunk, args.repeated, args.model)
    print(f"modules entered while {args.queries} test triple(s) are evaluated ({args.ranks} ranks): "
          f"{len(found.crossings)}; crossed into more than once: {len(_again(found.crossings))}; "
          f"visited (entered, left and re-entered) more than once: {len(_again(found.visits))}")
    print("crossings  visits  module")
    for module, count in found.crossings.most_common():
        print(f"{count:9d}  {found.visits[module]:6d}  {module}")
    for index, (crossed, visited) in enumerate(zip(found.batch_crossings, found.batch_visits)):
        print(f"batch {index + 1} of {len(found.batch_crossings)}: {len(crossed)} modules entered; crossed into "
              f"more than once: {', '.join(_again(crossed)) or 'none'}; visited more than once: "
              f"{', '.join(_again(visited)) or 'none'}")


if __name__ == "__main__":
    main()
