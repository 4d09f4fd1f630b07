"""GPU check at OpenBioLink HQ size: the evaluation on CUDA against the GPU's own GEMM of the same
shape, and against the CPU's evaluation of the same embeddings.

One seeded synthetic split of HQ's shape (184,732 entities, 28 relations, 4.2 M train, 183,009
test triples; DistMult, d = 200, ``bench_evaluator.make_dataset``) is evaluated with ``openbench
evaluate`` (exact ranks, both sides) on ``--device`` and on the CPU, each in a child process with
its record and its per-query ranks written out. It prints:

* the evaluation stage's seconds on the device (warm: the dataset cache filled by a first run);
* the FP32 and the TF32 GEMM of the evaluation's shape (2 × test queries × d × entities, in tiles
  of ``GEMM_QUERY_TILE`` queries into one reused output buffer, after a warm-up, synchronised),
  and the evaluation's ratio to each;
* whether the device's metrics equal the CPU's exactly (every metric of the record, compared as
  JSON numbers) and whether its ranks file is the same, query for query.

Exit status 1 when the metrics or the ranks differ. ``--scale small`` runs the same steps on a
small split (a smoke test on a machine without a GPU: ``--device cpu``). Meant for the device
tool's one short run; the whole script stays under eight minutes on one GPU at HQ size.

    python benchmarks/gpu_check_hq.py [--device cuda] [--scale hq|small] [--work DIR] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_evaluator import SCALES, make_dataset, openbench_command, run_child  # noqa: E402

GEMM_QUERY_TILE = 4096
MODEL = "DistMult"


def evaluate(folder: Path, device: str, cache: Path, out: Path, name: str) -> dict:
    """One ``openbench evaluate`` child: its record, ranks file, wall seconds and stages."""
    record, ranks = out / f"{name}.json", out / f"{name}_ranks.parquet"
    command = openbench_command(folder, MODEL, device, record) + ["--ranks-output", str(ranks)]
    wall, peak, _ = run_child(command, dict(os.environ, OPENBENCH_CACHE_DIR=str(cache)))
    loaded = json.loads(record.read_text())
    return {"record": loaded, "ranks": ranks, "wall": wall, "peak_gb": peak,
            "stages": loaded["timing"].get("stages", {}), "queries": loaded["diagnostics"]["queries"]}


def gemm_seconds(folder: Path, queries: int, device: str, tf32: bool) -> float:
    """Seconds of the tiled GEMM of the evaluation's shape on ``device`` (TF32 where asked and CUDA)."""
    import numpy as np
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    table = torch.from_numpy(np.load(folder / "entities.npy")).to(device)
    generator = torch.Generator(device="cpu").manual_seed(0)
    query_rows = (torch.randn(min(queries, GEMM_QUERY_TILE), table.shape[1], generator=generator)
                  / table.shape[1] ** 0.5).to(device)
    out = torch.empty(query_rows.shape[0], table.shape[0], device=device)

    def run() -> None:
        for start in range(0, queries, GEMM_QUERY_TILE):
            rows = min(GEMM_QUERY_TILE, queries - start)
            torch.mm(query_rows[:rows], table.T, out=out[:rows])
        if table.is_cuda:
            torch.cuda.synchronize()

    torch.mm(query_rows, table.T, out=out)  # warm-up: kernels chosen, memory in place
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    torch.backends.cuda.matmul.allow_tf32 = False
    return seconds


def ranks_equal(first: Path, second: Path) -> bool:
    """The two ranks files hold the same rows, query for query (their metadata may differ in timing)."""
    import polars as pl

    return pl.read_parquet(first).equals(pl.read_parquet(second))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", choices=["hq", "small", "default"], default="hq")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openbench-gpu-check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    shape = SCALES[args.scale]
    folder = args.work / f"synthetic-{args.scale}-{args.seed}"
    if not (folder / "entities.npy").is_file():
        started = time.perf_counter()
        make_dataset(folder, args.seed, **shape)
        print(f"split of {args.scale} shape written in {time.perf_counter() - started:.1f} s: {folder}", flush=True)
    out = args.work / "runs"
    out.mkdir(parents=True, exist_ok=True)
    cache = args.work / "cache"
    evaluate(folder, args.device, cache, out, "device-cold")  # fills the dataset cache
    on_device = evaluate(folder, args.device, cache, out, "device")
    on_cpu = evaluate(folder, "cpu", cache, out, "cpu")
    queries = on_device["queries"]
    fp32 = gemm_seconds(folder, queries, args.device, tf32=False)
    tf32 = gemm_seconds(folder, queries, args.device, tf32=True) if args.device.startswith("cuda") else None
    seconds = on_device["stages"]["evaluation"]
    same_metrics = on_device["record"]["metrics"] == on_cpu["record"]["metrics"]
    same_ranks = ranks_equal(on_device["ranks"], on_cpu["ranks"])
    result = {"scale": args.scale, "entities": shape["entities"], "test": shape["test"], "dim": shape["dim"],
              "queries": queries, "device": args.device, "evaluation_s": seconds,
              "evaluation_cpu_s": on_cpu["stages"]["evaluation"], "gemm_fp32_s": fp32, "gemm_tf32_s": tf32,
              "ratio_fp32": seconds / fp32, "ratio_tf32": None if tf32 is None else seconds / tf32,
              "metrics_equal_cpu": same_metrics, "ranks_equal_cpu": same_ranks,
              "mrr": on_device["record"]["metrics"]["both"]["realistic"]["mrr"]}
    print(f"{args.scale}: {shape['entities']:,} entities, {shape['test']:,} test triples ({queries:,} queries), "
          f"d = {shape['dim']}, {MODEL}, exact ranks")
    print(f"  evaluation on {args.device}: {seconds:.2f} s (CPU: {result['evaluation_cpu_s']:.2f} s)")
    print(f"  GEMM of the same shape, FP32: {fp32:.2f} s (evaluation / GEMM = {result['ratio_fp32']:.2f})")
    if tf32 is not None:
        print(f"  GEMM of the same shape, TF32: {tf32:.2f} s (evaluation / GEMM = {result['ratio_tf32']:.2f})")
    else:
        print("  GEMM of the same shape, TF32: not measured (not a CUDA device)")
    print(f"  metrics equal the CPU run's exactly: {'yes' if same_metrics else 'NO'}; "
          f"ranks file equal: {'yes' if same_ranks else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    sys.exit(0 if same_metrics and same_ranks else 1)


if __name__ == "__main__":
    main()
