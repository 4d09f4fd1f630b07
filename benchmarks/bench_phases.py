"""Where the seconds of one ``openbench evaluate`` go: imports, loading, scorer, filter index, evaluation.

Runs the command's steps in process on a dataset folder holding ``entities.npy``/``relations.npy``
(as ``bench_evaluator.py --workdir`` leaves them) and prints the wall time of each phase.

    python benchmarks/bench_phases.py FOLDER [--model DistMult] [--device auto]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--model", default="DistMult")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    phases = []
    started = time.perf_counter()

    def mark(name):
        nonlocal started
        now = time.perf_counter()
        phases.append((name, now - started))
        started = now

    import numpy as np
    import torch

    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.scorers import build_scorer
    mark("imports (torch, polars, openbench)")
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.zeros(1, device=device)
        mark("CUDA context")
    dataset = load_dataset(args.folder)
    mark(f"load_dataset ({sum(t.shape[0] for t in dataset.triples.values()):,} triples)")
    scorer = build_scorer(args.model, np.load(args.folder / "entities.npy"), np.load(args.folder / "relations.npy"),
                          dataset.num_entities, dataset.num_relations)
    mark("scorer (embeddings read)")
    result = evaluate(dataset, scorer, device=str(device)).to_dict()
    mark("evaluate (to device, filter index, ranking)")
    for name, seconds in phases:
        print(f"{name:>40}: {seconds:6.2f} s")
    print(f"{'total':>40}: {sum(s for _, s in phases):6.2f} s; MRR {result['metrics']['both']['realistic']['mrr']:.8f}")


if __name__ == "__main__":
    main()
