"""Converting a published KG at its real size: the PrimeKG and DRKG readers against a plain polars
read of the same file (the peer: what any loader pays to parse it), with peak memory.

Synthetic files in the real layouts (PrimeKG's 12-column quoted CSV with every edge twice, x/y
swapped; DRKG's headerless 3-column TSV with ``Type::id`` entities) are written once into
``--work``; each step runs in a child process so its peak RSS is its own.

    python benchmarks/bench_native.py [--primekg-rows 8100498] [--drkg-rows 5874261] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PRIMEKG_HEADER = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
TYPES = [("gene/protein", "NCBI"), ("drug", "DrugBank"), ("disease", "MONDO"), ("effect/phenotype", "HPO")]


def write_primekg(path: Path, rows: int, nodes: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, len(TYPES), nodes)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(PRIMEKG_HEADER)
        half = rows // 2
        for start in range(0, half, 500_000):
            size = min(500_000, half - start)
            x, y = rng.integers(0, nodes, size), rng.integers(0, nodes, size)
            lines = []
            for a, b in zip(x.tolist(), y.tolist()):
                ta, sa = TYPES[kinds[a]]
                tb, sb = TYPES[kinds[b]]
                relation = f"{ta.split('/')[0]}_{tb.split('/')[0]}"
                left = f'{a},{a},{ta},"name {a}, x",{sa}'
                right = f'{b},{b},{tb},"name {b}, y",{sb}'
                lines.append(f"{relation},rel,{left},{right}\n{relation},rel,{right},{left}\n")
            handle.write("".join(lines))


def write_drkg(path: Path, rows: int, nodes: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, rows, 1_000_000):
            size = min(1_000_000, rows - start)
            heads, tails = rng.integers(0, nodes, size), rng.integers(0, nodes, size)
            relations = rng.integers(0, 107, size)
            handle.write("".join(f"Compound::DB{h:05d}\tSRC::r{r}::Compound:Gene\tGene::{t}\n"
                                 for h, r, t in zip(heads.tolist(), relations.tolist(), tails.tolist())))


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
started = time.perf_counter()
step, fmt, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
if step == "peer":
    import polars as pl
    if fmt == "primekg":
        frame = pl.read_csv(folder / "kg.csv", infer_schema=False)
    else:
        frame = pl.read_csv(folder / "drkg.tsv", separator="\t", has_header=False, infer_schema=False, quote_char=None)
    rows = frame.height
else:
    from openbench.datasets.published.native import convert
    info = convert(fmt, folder, folder / "out", {"name": fmt}, {})
    rows = info["counts"]["rows"]
print(json.dumps({"seconds": time.perf_counter() - started, "rows": rows,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def measure(step: str, fmt: str, folder: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, step, fmt, str(folder)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--primekg-rows", type=int, default=8_100_498)
    parser.add_argument("--drkg-rows", type=int, default=5_874_261)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="openbench-native-"))
    sizes = {"primekg": (args.primekg_rows, 129_375, write_primekg, "kg.csv"),
             "drkg": (args.drkg_rows, 97_238, write_drkg, "drkg.tsv")}
    print("| format | rows | file MB | peer read s | convert s | ratio | peer peak GB | convert peak GB |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, (rows, nodes, write, name) in sizes.items():
        folder = work / fmt
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / name).is_file():
            write(folder / name, rows, nodes)
        peer, ours = measure("peer", fmt, folder), measure("convert", fmt, folder)
        size = (folder / name).stat().st_size / 1e6
        print(f"| {fmt} | {ours['rows']:,} | {size:.0f} | {peer['seconds']:.1f} | {ours['seconds']:.1f} | "
              f"{ours['seconds'] / peer['seconds']:.2f} | {peer['peak_gb']:.2f} | {ours['peak_gb']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
