"""Benchmark: the main job as one flow, each stage as the command a user runs, default options.

synthetic sources in the real formats at the providers' proportions (``bench_generate``'s, times
``--fraction``) → ``openbench generate`` → ``openbench split rand`` → ``openbench evaluate`` with
seeded random DistMult embeddings (d = 200) → ``openbench leaderboard submit`` into a fresh store.
Prints wall time and peak RSS per stage and in all, the split's seam (validation and test nodes
outside the training positives: must be 0) and the time ``load_dataset`` takes in a fresh
process without and with the dataset cache (target for the warm load: < 1 s at HQ scale on two
cores). ``--hq-load`` instead times only those loads on a split of OpenBioLink HQ's sizes
(``bench_evaluator --scale hq``'s synthetic graph: 184,732 entities, 4.2 M train triples).

Full ranking costs (test queries x entities x d): on two CPU cores it takes about 14 minutes at
``--fraction 0.2`` and hours at 1; ``--no-evaluate`` leaves it (and the submission) out.

    python benchmarks/bench_pipeline.py [--fraction 0.2] [--no-evaluate] [--hq-load] [--workdir DIR] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# runs one openbench command in a child process and writes its wall time and peak RSS as JSON
STAGE = """
import json, resource, sys, time
started = time.perf_counter()
from openbench.cli import main
try:
    main(sys.argv[2:], standalone_mode=False)
finally:
    with open(sys.argv[1], "w") as handle:
        json.dump({"seconds": time.perf_counter() - started,
                   "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}, handle)
"""


def stage(name: str, workdir: Path, *arguments: str) -> dict:
    report = workdir / f".stage-{name.replace(' ', '_')}.json"
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", STAGE, str(report), *arguments], capture_output=True, text=True,
                          env=environment)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    measured = json.loads(report.read_text())
    print(f"{name:<24} {measured['seconds']:8.2f} s  {measured['peak_gb']:6.2f} GB peak", flush=True)
    return measured


def train_labels(split: Path):
    """Entity and relation counts of the split's training positives, read without the dataset
    cache (so that the first evaluate finds it cold)."""
    import polars as pl

    frame = pl.read_csv(split / "train_sample.csv", separator="\t", has_header=False, infer_schema=False,
                        quote_char=None, new_columns=["h", "r", "t", "q", "v", "s"]).filter(pl.col("v") == "1")
    entities = pl.concat([frame["h"], frame["t"]]).n_unique()
    return entities, frame["r"].n_unique()


def unseen_evaluation_nodes(split: Path) -> int:
    import polars as pl

    def nodes(name: str):
        path = split / name
        if not path.exists() or not path.stat().st_size:
            return set()
        frame = pl.read_csv(path, separator="\t", has_header=False, infer_schema=False, quote_char=None,
                            new_columns=["h", "r", "t", "q", "v", "s"])
        return set(frame["h"].to_list()) | set(frame["t"].to_list())

    train = nodes("train_sample.csv")
    return len((nodes("test_sample.csv") | nodes("val_sample.csv")) - train)


def load_seconds(split: Path) -> float:
    """Wall time of ``load_dataset`` in a fresh process (the cache's warm path when an entry exists,
    else a parse that also writes the entry)."""
    code = ("import time, sys; from openbench.datasets.loader import load_dataset; t = time.perf_counter(); "
            "load_dataset(sys.argv[1]); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code, str(split)], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraction", type=float, default=0.2)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-evaluate", action="store_true", help="leave out the full ranking and the submission")
    parser.add_argument("--hq-load", action="store_true", help="only time the dataset loads at HQ scale")
    args = parser.parse_args()
    from bench_generate import make_inputs

    if args.hq_load:
        hq_load(args)
        return

    with tempfile.TemporaryDirectory(prefix="openbench-pipeline-") as temporary:
        work = args.workdir or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        os.environ["OPENBENCH_CACHE_DIR"] = str(work / "cache")  # a cold cache for this run
        sources = work / "sources"
        started = time.perf_counter()
        rows = make_inputs(sources, args.fraction, args.seed)
        print(f"synthetic sources: {rows:,} rows at fraction {args.fraction} in {time.perf_counter() - started:.1f} s")
        stages = {}
        stages["generate"] = stage("generate", work, "generate", "--sources-dir", str(sources), "--no-download",
                                   "--output", str(work / "graph"), "--no-progress")
        graph = work / "graph" / "graph_files"
        stages["split rand"] = stage("split rand", work, "split", "rand", "--edges", str(graph / "edges.csv"),
                                     "--tn-edges", str(graph / "TN_edges.csv"), "--nodes",
                                     str(graph / "ALL_nodes.csv"), "--output", str(work / "split"))
        split = work / "split"
        unseen = unseen_evaluation_nodes(split)
        cold = load_seconds(split)
        warm = load_seconds(split)
        if not args.no_evaluate:
            entities, relations = train_labels(split)
            rng = np.random.default_rng(args.seed)
            np.save(work / "entities.npy", rng.normal(0, 0.1, (entities, 200)).astype(np.float32))
            np.save(work / "relations.npy", rng.normal(0, 0.1, (relations, 200)).astype(np.float32))
            stages["evaluate"] = stage("evaluate", work, "evaluate", "--dataset", str(split), "--model", "DistMult",
                                       "--entity-embeddings", str(work / "entities.npy"), "--relation-embeddings",
                                       str(work / "relations.npy"), "--no-progress", "--output",
                                       str(work / "result.json"))
            stages["leaderboard submit"] = stage("leaderboard submit", work, "leaderboard", "submit",
                                                 str(work / "result.json"), "--name", "random DistMult", "--db",
                                                 str(work / "board.sqlite"))
        total = sum(s["seconds"] for s in stages.values())
        peak = max(s["peak_gb"] for s in stages.values())
        print(f"{'all stages':<24} {total:8.2f} s  {peak:6.2f} GB peak (the largest stage)")
        info = json.loads((split / "split_info.json").read_text())
        counts = info["split"]
        print(f"split: {counts['train']['positives']:,} train, {counts['val']['positives']:,} validation, "
              f"{counts['test']['positives']:,} test positives; removed from test: {counts['test_cleaning']}")
        print(f"validation/test nodes outside the training positives: {unseen} (must be 0)")
        print(f"load_dataset in a fresh process: {cold:.2f} s parsing (and writing the cache), {warm:.2f} s from "
              f"the cache (target < 1 s at HQ scale)")
        warnings = []
        if not args.no_evaluate:
            record = json.loads((work / "result.json").read_text())
            warnings = record["warnings"]
            print(f"evaluation warnings: {warnings or 'none'}")
        if unseen or warnings:
            raise SystemExit("the split/evaluate seam is not clean")


def hq_load(args) -> None:
    """Cold and warm ``load_dataset`` on a split of OpenBioLink HQ's sizes."""
    from bench_evaluator import SCALES, make_dataset

    with tempfile.TemporaryDirectory(prefix="openbench-hq-load-") as temporary:
        work = args.workdir or Path(temporary)
        os.environ["OPENBENCH_CACHE_DIR"] = str(work / "cache")
        folder = work / "hq"
        if not (folder / "train_sample.csv").exists():
            make_dataset(folder, args.seed, **SCALES["hq"])
        sizes = sum(p.stat().st_size for p in folder.glob("*_sample.csv")) / 2**20
        cold, warm, again = load_seconds(folder), load_seconds(folder), load_seconds(folder)
        print(f"HQ-scale split ({sizes:.0f} MB of sample files): load_dataset {cold:.2f} s parsing and writing the "
              f"cache, then {warm:.2f} s and {again:.2f} s from the cache (target < 1 s)")


if __name__ == "__main__":
    main()
