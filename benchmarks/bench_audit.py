"""Benchmark: ``openbench audit`` of a graph of OpenBioLink HQ's size, against reading the file.

A seeded synthetic graph (184,732 entities, 28 relations, 4.6 M triples, power-law degrees; three
relations stored in both directions, one inverse pair, one duplicate pair planted) is written as
a ``head<TAB>relation<TAB>tail`` file; the audit runs in a child process (wall time, peak RSS
from ``wait4``), and, in the same run, a plain polars read of the same file (the floor any audit
pays) gives the ratio. Targets: under 60 s and 4 GB on two cores.

    python benchmarks/bench_audit.py [--triples 4600000] [--split] [--work DIR]

``--split`` also audits a random 90/5/5 split of the same triples (the trivially-inferable
section and the unseen entities on top).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak import run_measured  # noqa: E402

ENTITIES, RELATIONS = 184_732, 28
TARGET_SECONDS, TARGET_GB = 60.0, 4.0


def make_graph(path: Path, triples: int, seed: int) -> None:
    import polars as pl

    rng = np.random.default_rng(seed)
    weights = np.arange(1, ENTITIES + 1, dtype=np.float64) ** -0.8
    cumulative = np.cumsum(weights) / weights.sum()
    draw = lambda n: rng.permutation(ENTITIES)[np.searchsorted(cumulative, rng.random(n))]  # noqa: E731
    base = triples // 2
    heads, tails, relations = draw(base), draw(base), rng.integers(0, RELATIONS, base)
    frame = pl.DataFrame({"h": heads, "r": relations, "t": tails})
    both_ways = frame.filter(pl.col("r") < 3).select(pl.col("t").alias("h"), "r", pl.col("h").alias("t"))
    inverse = frame.filter(pl.col("r") == 3).select(pl.col("t").alias("h"), pl.lit(4).alias("r"), pl.col("h").alias("t"))
    duplicate = frame.filter(pl.col("r") == 5).select("h", pl.lit(6).alias("r"), "t")
    rest = triples - base - both_ways.height - inverse.height - duplicate.height
    extra = pl.DataFrame({"h": draw(rest), "r": rng.integers(7, RELATIONS, rest), "t": draw(rest)})
    graph = pl.concat([frame.filter(pl.col("r") != 4), both_ways, inverse, duplicate, extra], how="vertical_relaxed")
    graph = graph.sample(fraction=1.0, shuffle=True, seed=seed)
    graph.select(pl.format("NCBIGENE:{}", "h"), pl.format("REL_{}", "r"), pl.format("NCBIGENE:{}", "t")).write_csv(
        path, separator="\t", include_header=False, quote_style="never")


def make_split(graph: Path, folder: Path, seed: int) -> None:
    import polars as pl

    rows = pl.read_csv(graph, separator="\t", has_header=False, new_columns=["h", "r", "t"], infer_schema=False)
    order = np.random.default_rng(seed).permutation(rows.height)
    cut = rows.height // 20
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("test_sample.csv", order[:cut]), ("val_sample.csv", order[cut:2 * cut]),
                       ("train_sample.csv", order[2 * cut:])):
        rows[np.sort(part)].write_csv(folder / name, separator="\t", include_header=False, quote_style="never")


def child(code: str) -> tuple:
    """(wall seconds, the child's own peak RSS GB, stdout) of ``python -c code``."""
    seconds, peak_gb, stdout, stderr, status = run_measured([sys.executable, "-c", code])
    if status:
        raise RuntimeError(stderr[-3000:])
    return seconds, peak_gb, stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triples", type=int, default=4_600_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openbench-bench-audit")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    graph = args.work / f"graph-{args.triples}-{args.seed}.tsv"
    if not graph.is_file():
        make_graph(graph, args.triples, args.seed)
    read_seconds, read_gb, _ = child(f"import polars as pl; pl.read_csv({str(graph)!r}, separator='\\t', "
                                     "has_header=False, infer_schema=False)")
    code = (f"import json; from splits.audit import audit; r = audit({str(graph)!r}); "
            "print(json.dumps({k: len(r[k]) for k in ('inverse_pairs', 'duplicate_relations', 'symmetric_relations')}"
            " | {'reverse_duplicates': r['reverse_duplicates']['count']}))")
    seconds, peak, found = child(code)
    print(f"graph: {args.triples:,} triples, {ENTITIES:,} entities, {RELATIONS} relations")
    print(f"audit: {seconds:.1f} s, peak {peak:.2f} GB (targets < {TARGET_SECONDS:.0f} s, < {TARGET_GB:.0f} GB); "
          f"reading the file alone (polars): {read_seconds:.1f} s, {read_gb:.2f} GB; ratio {seconds / read_seconds:.1f}")
    print(f"found: {found.strip()} (planted: 1 inverse pair, 1 duplicate pair, 3 symmetric relations)")
    if args.split:
        folder = args.work / f"split-{args.triples}-{args.seed}"
        if not (folder / "train_sample.csv").is_file():
            make_split(graph, folder, args.seed)
        code = (f"from splits.audit import audit; r = audit({str(folder)!r}); "
                "print(r['trivially_inferable']['test']['count'], r['trivially_inferable']['test']['triples'])")
        seconds, peak, found = child(code)
        inferable, total = found.split()
        print(f"audit of a random 90/5/5 split: {seconds:.1f} s, peak {peak:.2f} GB; "
              f"{int(inferable):,} of {int(total):,} test triples trivially inferable")


if __name__ == "__main__":
    main()
