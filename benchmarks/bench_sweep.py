"""A sweep of several models on one dataset: one `openbench evaluate --sweep` command against the
same models evaluated by separate commands (the peer), in the same run.

The dataset is bench_evaluator.py's (default scale: 20,000 entities, 400,000 training and 5,000
test triples, d = 200); the models are ``--models`` seeded embedding pairs (DistMult and TransE-L2
alternating). Prints both wall times, the time saved and the ratio, and checks that every record
of the sweep equals its separate run apart from timing.

    python benchmarks/bench_sweep.py [--models 10] [--scale default] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_evaluator import SCALES, make_dataset, openbench_command, run_child  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--scale", choices=list(SCALES), default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-sweep-"))
    scale = SCALES[args.scale]
    folder = work / "data"
    make_dataset(folder, args.seed, **scale)
    rng = np.random.default_rng(args.seed + 1)
    sweep = []
    for i in range(args.models):
        model = ("DistMult", "TransE-L2")[i % 2]
        entities, relations = work / f"m{i}_entities.npy", work / f"m{i}_relations.npy"
        np.save(entities, (rng.standard_normal((scale["entities"], scale["dim"])) / np.sqrt(scale["dim"]))
                .astype(np.float32))
        np.save(relations, (rng.standard_normal((scale["relations"], scale["dim"])) / np.sqrt(scale["dim"]))
                .astype(np.float32))
        sweep.append({"name": f"m{i}", "entity_embeddings": str(entities), "relation_embeddings": str(relations),
                      "model": model})
    (work / "sweep.json").write_text(json.dumps(sweep))
    # separate commands, each with a cold dataset cache (a fresh clone's first run would have one warm
    # after the first command; both settings are printed)
    separate_seconds = {"cold": 0.0, "warm": 0.0}
    for setting in ("cold", "warm"):
        env = dict(os.environ, OPENBENCH_CACHE_DIR=str(work / f"cache-{setting}"))
        if setting == "cold":
            env["OPENBENCH_DATASET_CACHE"] = "0"
        for entry in sweep:
            command = openbench_command(folder, entry["model"], "cpu", work / f"separate-{setting}-{entry['name']}.json")
            command[command.index("--entity-embeddings") + 1] = entry["entity_embeddings"]
            command[command.index("--relation-embeddings") + 1] = entry["relation_embeddings"]
            seconds, _, _ = run_child(command, env)
            separate_seconds[setting] += seconds
    env = dict(os.environ, OPENBENCH_CACHE_DIR=str(work / "cache-sweep"), OPENBENCH_DATASET_CACHE="0")
    seconds, peak, _ = run_child([sys.executable, "-m", "openbench", "evaluate", "--dataset", str(folder), "--sweep",
                                  str(work / "sweep.json"), "--output", str(work / "sweep-out"), "--device", "cpu",
                                  "--no-progress"], env)
    for entry in sweep:
        together = json.loads((work / "sweep-out" / f"{entry['name']}.json").read_text())
        alone = json.loads((work / f"separate-cold-{entry['name']}.json").read_text())
        together.pop("timing"), alone.pop("timing")
        if together != alone:
            raise SystemExit(f"{entry['name']}: the sweep's record differs from its separate run")
    print(f"{args.models} models, scale {args.scale}: one --sweep command {seconds:.1f} s (peak {peak:.2f} GB); "
          f"separate commands {separate_seconds['cold']:.1f} s with a cold dataset cache each, "
          f"{separate_seconds['warm']:.1f} s with the cache warm after the first")
    print(f"saved {separate_seconds['cold'] - seconds:.1f} s ({separate_seconds['cold'] / seconds:.2f}x) against cold "
          f"separate runs, {separate_seconds['warm'] - seconds:.1f} s ({separate_seconds['warm'] / seconds:.2f}x) "
          "against warm ones; every record equal to its separate run apart from timing")


if __name__ == "__main__":
    main()
