"""Are fast (float32) ranks deterministic? Hundreds of runs under load, across thread counts and
batch sizes.

``check_records.py`` saw the fast TransE-L2 ranks of its ``small`` dataset differ in 2 of 26 runs
(rows 2-249 of the first head batch, ranks ±1-2), never on demand afterwards. Fast ranks compare
float32 scores as computed, so they are only as reproducible as the float32 GEMM underneath: Intel
MKL, torch's CPU BLAS on x86, may choose its code path by the operands' memory alignment and by the
threads it has at the moment, unless its conditional numerical reproducibility is pinned
(``MKL_CBWR``) and its dynamic thread count is switched off (``MKL_DYNAMIC``); ``openbench``'s entry
point sets both before torch loads.

This script builds that dataset once, then runs ``openbench evaluate --fast`` (TransE-L2 and
DistMult) ``--rounds`` times for every thread count and batch size of the grid, each run in a fresh
process that first allocates a random amount of memory (so the arrays land at other alignments),
while ``--load`` processes keep the cores busy. Within one configuration every ranks file must be
byte-identical; across configurations the script reports whether they differ (a batch size may
legitimately change a float32 GEMM's blocking, and so its roundings).

    python benchmarks/stress_fast_ranks.py --rounds 25 --load 2          # 25 x 2 models x 12 configs = 600 runs
    python benchmarks/stress_fast_ranks.py --without-pinning ...          # the same with MKL's defaults

Prints one line per configuration and a summary; exit 1 when any configuration gave two different
results.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_evaluator import SCALES, make_dataset  # noqa: E402

# a run: perturb the heap by a random amount, then the command line as a user types it
_CHILD = """
import os, random, sys
padding = [bytearray(random.randrange(1, 1 << 16)) for _ in range(random.randrange(1, 64))]
sys.argv = ["openbench", *sys.argv[1:]]
from openbench.entry import main
main()
"""


def _burn(stop) -> None:
    """A busy core until ``stop`` is set."""
    value = 0
    while not stop.is_set():
        for _ in range(100_000):
            value = (value * 1103515245 + 12345) & 0x7FFFFFFF


def _run(data: Path, model: str, threads: int, batch: int, out: Path, pinned: bool) -> str:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBENCH_CACHE_DIR=str(data / "cache"))
    if not pinned:  # present but empty: the entry point leaves it, MKL reads it as unset
        env["MKL_CBWR"], env["MKL_DYNAMIC"] = "", "TRUE"
    command = [sys.executable, "-c", _CHILD, "evaluate", "--dataset", str(data), "--model", model,
               "--entity-embeddings", str(data / "entities.npy"), "--relation-embeddings", str(data / "relations.npy"),
               "--fast", "--no-progress", "--ranks-output", str(out)]
    if batch:
        command += ["--batch-size", str(batch)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"a run failed:\n{done.stderr[-3000:]}")
    return hashlib.sha256(out.read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=25, help="runs per model and configuration")
    parser.add_argument("--threads", default="1,2,4", help="OMP/MKL thread counts")
    parser.add_argument("--batches", default="0,7,64,250", help="--batch-size values (0: openbench's default)")
    parser.add_argument("--models", default="TransE-L2,DistMult")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("--without-pinning", action="store_true",
                        help="run with MKL's defaults (MKL_CBWR unset, MKL_DYNAMIC=TRUE) to compare")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="openbench-stress-"))
    data = work / "small"
    make_dataset(data, 0, **SCALES["small"])
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True) for _ in range(options.load)]
    for burner in burners:
        burner.start()
    started, runs, unstable, by_model = time.perf_counter(), 0, [], {}
    try:
        grid = list(itertools.product(options.models.split(","), map(int, options.threads.split(",")),
                                      map(int, options.batches.split(","))))
        for model, threads, batch in grid:
            seen = {}
            for round_ in range(options.rounds):
                digest = _run(data, model, threads, batch, work / f"r{round_}.parquet", not options.without_pinning)
                seen[digest] = seen.get(digest, 0) + 1
                runs += 1
            by_model.setdefault(model, set()).update(seen)
            verdict = "identical" if len(seen) == 1 else f"DIFFERENT: {len(seen)} results {sorted(seen.values())}"
            print(f"{model:10s} threads {threads} batch {batch or 'default':>7}: {options.rounds} runs, {verdict}",
                  flush=True)
            if len(seen) > 1:
                unstable.append((model, threads, batch))
    finally:
        stop.set()
        for burner in burners:
            burner.join(timeout=5)
    print(f"\n{runs} runs in {time.perf_counter() - started:.0f} s under {options.load} busy processes "
          f"({'MKL defaults' if options.without_pinning else 'MKL_CBWR and MKL_DYNAMIC pinned by openbench'}); "
          f"configurations with two results: {len(unstable)}")
    for model, digests in by_model.items():
        print(f"{model}: {len(digests)} distinct ranks file(s) across all thread counts and batch sizes")
    return 1 if unstable else 0


if __name__ == "__main__":
    raise SystemExit(main())
