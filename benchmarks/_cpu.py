"""What a benchmark ran on: the CPU model, its vector extensions and the counting kernel's scan
(issue 67: a ratio measured on an AVX-512 machine says nothing of an AVX2-only one).

``--scan avx2`` (or ``portable``) in the benchmarks that take it sets ``OPENBENCH_SCAN`` for the
benchmark and its children: the scan a CPU without the better ones would use (the GEMM peer still
uses what the CPU has: a run forced to AVX2 on an AVX-512 machine is not an AVX2-only machine's
run, and the benchmark says which it was)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

__all__ = ["cpu_description", "cpu_line", "choose_scan"]

EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl")


def choose_scan(scan: Optional[str]) -> None:
    """Ask the kernels for ``scan`` (through ``OPENBENCH_SCAN``, which children inherit)."""
    if scan:
        os.environ["OPENBENCH_SCAN"] = scan


def cpu_description() -> dict:
    """{"model", "vector_extensions", "scan", "scan_forced", "cores"}."""
    model, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    scan = "unknown"
    try:
        from openbench.evaluation.counting.kernels import chunk_scan

        scan = chunk_scan() or "not built"
    except Exception:  # noqa: BLE001 - a report, never a failure
        pass
    return {"model": model, "vector_extensions": [name for name in EXTENSIONS if name in flags], "scan": scan,
            "scan_forced": bool(os.environ.get("OPENBENCH_SCAN")), "cores": os.cpu_count()}


def cpu_line() -> str:
    """The description in one line."""
    cpu = cpu_description()
    forced = " (forced by OPENBENCH_SCAN: the CPU has better)" if cpu["scan_forced"] else ""
    return (f"CPU: {cpu['model']}, {cpu['cores']} cores; vector extensions {', '.join(cpu['vector_extensions']) or 'none'}; "
            f"counting scan {cpu['scan']}{forced}")
