"""Benchmark: the row-counting implementations on one score block, against a plain copy of the block.

For a (rows, width) block of scores with a target per row, times every implementation of
:func:`openbench.evaluation.counting.kernels.row_counts` available on the device (the torch sign path, the
torch compare path, the C kernel on CPU, the Triton kernel on CUDA) and, as the peer measured in
the same run, a device copy of the block (the memory traffic floor of any one-pass kernel: it
reads and writes each score once, a counting kernel only reads it). Prints seconds, the effective
bandwidth over one read of the block, and whether each implementation's counts equal the
reference.

    python benchmarks/bench_count_kernels.py [--rows 4096] [--width 184732] [--device auto]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openbench.evaluation.counting import kernels  # noqa: E402


def timed(function, device, repeats=5):
    function()
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return best


def row_counts_compare(scores, targets, lower_is_better):
    """The rejected variant: two compare-and-count passes with torch ops (fewer bytes than the sign
    path, yet slower on an H200 and on CPU: bool -> int64 row sums). Kept here to show why."""
    column = targets[:, None]
    greater = (scores < column if lower_is_better else scores > column).sum(dim=1)
    return greater, (scores == column).sum(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--width", type=int, default=184_732)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    generator = torch.Generator(device=device).manual_seed(0)
    # rounded scores: plenty of exact ties, as trained models give
    scores = torch.randn(args.rows, args.width, device=device, generator=generator).mul_(64).round_()
    targets = scores[:, 7].clone()
    work = torch.empty_like(scores)
    reference = ((scores > targets[:, None]).sum(1), (scores == targets[:, None]).sum(1))
    gigabytes = scores.numel() * scores.element_size() / 1e9

    variants = {"copy (peer)": lambda: work.copy_(scores)}
    variants["torch sign path"] = lambda: kernels._row_counts_torch(work.copy_(scores), targets, False, True)
    variants["torch compare path"] = lambda: row_counts_compare(scores, targets, False)
    if device.type == "cpu" and kernels._load_library() is not None:
        variants["C kernel"] = lambda: kernels._row_counts_c(scores, targets, False)
    if device.type == "cuda" and kernels._load_triton() is not None:
        variants["Triton kernel"] = lambda: kernels._row_counts_triton(scores, targets, False)
    copy_seconds = timed(lambda: work.copy_(scores), device)
    print(f"block {args.rows} x {args.width} float32 ({gigabytes:.2f} GB) on {device}")
    for name, function in variants.items():
        seconds = timed(function, device)
        if name.startswith("torch sign"):
            seconds -= copy_seconds  # the sign path overwrites its input: its timing includes a refill
        counts = function()
        same = "" if name.startswith("copy") else (
            "  counts equal" if all(torch.equal(a, b) for a, b in zip(counts, reference)) else "  COUNTS DIFFER")
        print(f"{name:>20}: {seconds * 1e3:8.2f} ms, {gigabytes / seconds:7.0f} GB/s over one read, "
              f"{seconds / copy_seconds:5.2f}x the copy{same}")


if __name__ == "__main__":
    main()
