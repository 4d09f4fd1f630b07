"""A repurposing matrix given as a Parquet table of scores, at PrimeKG's shape: how long openbench
takes to read, map and count it against how long polars takes to read the same columns.

PrimeKG's full matrix is 7,957 drugs × 17,080 diseases = 1.36e8 pairs, ids as PrimeKG labels
(``drug::DrugBank::DB00001``). The script writes such a table (``--scale`` shrinks both ends: 0.25
is a sixteenth of the pairs), a split of planted indications over them, then in one process:

1. the peer: ``polars.read_parquet`` of the three columns (median of ``--rounds``);
2. openbench: ``openbench.evaluate(dataset, from_scores(path), task="repurposing")``, the whole
   evaluation (the table read, its ids mapped by joins, the scorer built, the matrix counted, the
   views and the record), timed the same way;

and prints both, their ratio (issue 73's target: at most 1.5) and the peak resident memory above
the columns polars read (target: at most 2 GB).

    python benchmarks/bench_score_tables.py [--scale 1.0] [--rounds 3] [--work bench_out/score_tables]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import numpy as np

DRUGS, DISEASES = 7957, 17080


def _write(work: Path, scale: float, seed: int = 0):
    import polars as pl

    rng = np.random.default_rng(seed)
    drugs, diseases = max(2, int(DRUGS * scale)), max(2, int(DISEASES * scale))
    drug_labels = [f"drug::DrugBank::DB{i:05d}" for i in range(drugs)]
    disease_labels = [f"disease::MONDO::{i}" for i in range(diseases)]
    table = work / "scores.parquet"
    if not table.exists():
        work.mkdir(parents=True, exist_ok=True)
        drug_column = pl.Series("drug", drug_labels).to_frame().join(
            pl.Series("disease", disease_labels).to_frame(), how="cross")
        scores = rng.random(drugs * diseases).astype(np.float32)
        drug_column.with_columns(pl.Series("treat score", scores)).write_parquet(table, row_group_size=1 << 22)
    split = work / "split"
    if not split.exists():
        split.mkdir()
        pairs = {(int(a), int(b)) for a, b in zip(rng.integers(0, drugs, 12000), rng.integers(0, diseases, 12000))}
        lines = {name: [] for name in ("train", "val", "test")}
        for index, (a, b) in enumerate(sorted(pairs)):
            name = "test" if index % 10 == 0 else "val" if index % 10 == 1 else "train"
            lines[name].append(f"{drug_labels[a]}\tindication\t{disease_labels[b]}\t\t1\tPrimeKG")
        for index, label in enumerate(drug_labels + disease_labels):  # every entity in training
            lines["train"].append(f"{label}\tself\t{label}\t\t1\tPrimeKG")
        for name, rows in lines.items():
            (split / f"{name}_sample.csv").write_text("\n".join(rows) + "\n")
    return table, split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default="bench_out/score_tables")
    args = parser.parse_args()
    import polars as pl

    import openbench

    work = Path(args.work) / f"scale_{args.scale:g}"
    table, split = _write(work, args.scale)
    dataset = openbench.load_dataset(split)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    read, evaluated = [], []
    columns_mb = 0.0
    for _ in range(args.rounds):  # alternated: the peer, then openbench
        started = time.perf_counter()
        frame = pl.read_parquet(table, columns=["drug", "disease", "treat score"])
        read.append(time.perf_counter() - started)
        columns_mb = frame.estimated_size("mb")
        del frame
        started = time.perf_counter()
        record = openbench.evaluate(dataset, openbench.from_scores(table), task="repurposing",
                                    relations=["indication"], recall_at=[10, 100, 1000])
        evaluated.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    read_s, evaluate_s = statistics.median(read), statistics.median(evaluated)
    rows = record.to_dict()["model"]["params"]["rows"]
    print(f"pairs {rows:,} (scale {args.scale:g}); polars read of the three columns {read_s:.2f} s "
          f"({columns_mb:,.0f} MB); openbench evaluate {evaluate_s:.2f} s; ratio {evaluate_s / read_s:.2f} (target 1.5)")
    print(f"peak resident memory {peak:,.0f} MB, {peak - baseline - columns_mb:,.0f} MB above the process before and "
          f"the columns read (target: 2,048); AUROC {record.metric('views.test.full_matrix.auroc'):.4f}")


if __name__ == "__main__":
    main()
