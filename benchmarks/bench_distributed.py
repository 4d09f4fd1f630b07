"""Benchmark: evaluation on one process against torch.distributed ranks (gloo on CPU, NCCL on GPU).

A seeded graph (``--entities`` entities, 400k training triples by default, ``--test`` test triples,
dimension 200, DistMult) is evaluated once by the single-process evaluator (the peer) and then by
``--world`` spawned ranks in each shard mode. Prints per-rank seconds and peak memory, the
communication volume per batch (entities mode: the anchor rows, true scores and counts that are
all-reduced; queries mode: the gathered counts, once), and checks that the metrics are identical.

    python benchmarks/bench_distributed.py [--world 2] [--entities 20000] [--test 5000] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import datetime
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openbench.datasets.loader import load_dataset  # noqa: E402
from openbench.evaluation.evaluate import evaluate  # noqa: E402
from openbench.evaluation.evaluate import evaluate  # noqa: E402
from openbench.models.scorers import build_scorer  # noqa: E402

DIM, RELATIONS, BATCH = 200, 28, 512


def make_dataset(folder: Path, entities: int, train: int, test: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, size in (("train_sample.csv", train), ("val_sample.csv", test), ("test_sample.csv", test)):
        h, r, t = rng.integers(0, entities, size), rng.integers(0, RELATIONS, size), rng.integers(0, entities, size)
        if name == "train_sample.csv":  # every entity and relation appears in training
            h[:entities], r[:RELATIONS] = np.arange(entities), np.arange(RELATIONS)
        lines = [f"NCBIGENE:{a}\tREL_{b}\tNCBIGENE:{c}\t\t1\tBENCH" for a, b, c in zip(h, r, t)]
        (folder / name).write_text("\n".join(lines) + "\n")


def scorer_for(dataset, seed: int):
    rng = np.random.default_rng(seed)
    entities = rng.normal(size=(dataset.num_entities, DIM)).astype(np.float32)
    relations = rng.normal(size=(dataset.num_relations, DIM)).astype(np.float32)
    return build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)


def worker(rank, world, folder, rendezvous, shard, device, seed, out):
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    try:
        dataset = load_dataset(folder)
        target = f"cuda:{rank}" if device == "cuda" else "cpu"
        started = time.perf_counter()
        result = evaluate(dataset, scorer_for(dataset, seed), shard=shard, device=target, batch_size=BATCH).to_dict()
        seconds = time.perf_counter() - started
        report = {"rank": rank, "seconds": seconds, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
        gathered = [None] * world
        dist.all_gather_object(gathered, report)
        if rank == 0:
            Path(out).write_text(json.dumps({"ranks": gathered, "metrics": result["metrics"]}))
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--train", type=int, default=400_000)
    parser.add_argument("--test", type=int, default=5_000)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="openbench-bench-distributed-"))
    make_dataset(work / "data", args.entities, args.train, args.test, args.seed)
    dataset = load_dataset(work / "data")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    started = time.perf_counter()
    peer = evaluate(dataset, scorer_for(dataset, args.seed), device="cuda:0" if args.device == "cuda" else "cpu",
                    batch_size=BATCH).to_dict()
    single = time.perf_counter() - started
    print(f"one process: {single:.2f} s for {2 * args.test:,} queries x {dataset.num_entities:,} entities")
    for shard in ("queries", "entities"):
        out = work / f"{shard}.json"
        mp.spawn(worker, args=(args.world, str(work / "data"), str(work / f"rendezvous-{shard}"), shard, args.device,
                               args.seed, str(out)), nprocs=args.world, join=True)
        report = json.loads(out.read_text())
        slowest = max(r["seconds"] for r in report["ranks"])
        if shard == "entities":  # per batch and side: anchor rows, true scores, the two count vectors
            volume = BATCH * (DIM * 4 + 4 + 2 * 8)
            traffic = f"{volume / 1024:.0f} KiB all-reduced per batch and side ({2 * -(-args.test // BATCH)} of them)"
        else:
            traffic = f"{2 * args.test * 3 * 8 / 1024:.0f} KiB of counts gathered once"
        same = report["metrics"] == peer["metrics"]
        ranks = ", ".join(f"rank {r['rank']} {r['seconds']:.2f} s / {r['peak_gb']:.2f} GB" for r in report["ranks"])
        print(f"{shard:>8} x{args.world}: {ranks}; {single / slowest:.2f}x the one process; {traffic}; "
              f"metrics {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
