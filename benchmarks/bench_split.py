"""Benchmark: ``openbench split rand``, ``split entity`` and ``split inductive`` at OpenBioLink HQ scale, and
against ``openbiolink split rand``.

A seeded synthetic graph in OpenBioLink's graph_files layout: 184,667 nodes with HQ_DIR's node-type
counts, about 4.8 million positive edges and 620,000 true negatives spread over the relations in
the proportions below (approximate; the published HQ_DIR statistics give the totals, not every
relation's share). Prints wall time and peak memory (max RSS of the child) of the random split with
negatives and, on the same graph in the same run, of the entity-held-out split TxGNN asks (10% of the
diseases, their drug and gene edges to validation/test, 5% more diseases for validation, with
leakage removal and negatives) and of the inductive split (ILPC's layout: 20% of the entities grown
as connected regions into the inference graph, 10% of its edges each for validation and test); then, on a 1-million-edge subset, times openbench and OpenBioLink 0.1.4 in the same
run (OpenBioLink needs pandas < 2 and numpy < 2: pass its virtual environment's python with
``--openbiolink-python``) and prints the ratio. Targets on the 2-core machine: HQ scale in under
60 s and 4 GB (split rand), 60 s and 6 GB (split entity, split inductive); at least 10x faster than OpenBioLink on 1 million edges.

    python benchmarks/bench_split.py [--workdir DIR] [--openbiolink-python PATH] [--scale 1.0] [--million-only]
                                     [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from graphgen.edge_types import EDGE_TYPES, NODE_TYPES  # noqa: E402

NODE_COUNTS = {"ANATOMY": 16_031, "DIS": 9_509, "DRUG": 77_635, "GENE": 19_598, "GO": 44_945, "PATHWAY": 2_363,
               "PHENOTYPE": 14_586}
# share of the 4.8 M positive edges per relation (approximate mix of HQ_DIR)
POSITIVE_SHARE = {"GENE_EXPRESSED_ANATOMY": 0.30, "GENE_GENE": 0.16, "GENE_BINDING_GENE": 0.06,
                  "GENE_REACTION_GENE": 0.05, "GENE_CATALYSIS_GENE": 0.04, "GENE_ACTIVATION_GENE": 0.02,
                  "GENE_INHIBITION_GENE": 0.01, "GENE_EXPRESSION_GENE": 0.01, "GENE_PTMOD_GENE": 0.01,
                  "GENE_GO": 0.06, "GENE_DRUG": 0.07, "DRUG_BINDING_GENE": 0.03, "DRUG_ACTIVATION_GENE": 0.01,
                  "DRUG_INHIBITION_GENE": 0.01, "DRUG_CATALYSIS_GENE": 0.01, "DRUG_REACTION_GENE": 0.01,
                  "GENE_OVEREXPRESSED_ANATOMY": 0.03, "GENE_UNDEREXPRESSED_ANATOMY": 0.03, "DRUG_PHENOTYPE": 0.03,
                  "DIS_PHENOTYPE": 0.02, "GENE_PHENOTYPE": 0.02, "GENE_PATHWAY": 0.01, "GENE_DIS": 0.005,
                  "DIS_DRUG": 0.005, "IS_A": 0.02, "PART_OF": 0.01}
TN_SHARE = {"GENE_EXPRESSED_ANATOMY": 0.5, "GENE_OVEREXPRESSED_ANATOMY": 0.2, "GENE_UNDEREXPRESSED_ANATOMY": 0.2,
            "DIS_PHENOTYPE": 0.05, "DIS_DRUG": 0.05}
PREFIX = {"ANATOMY": "UBERON", "DIS": "DOID", "DRUG": "PUBCHEM.COMPOUND", "GENE": "NCBIGENE", "GO": "GO",
          "PATHWAY": "KEGG", "PHENOTYPE": "HP"}


def _edges(rng, shares, total, source) -> pl.DataFrame:
    parts = []
    for relation, share in shares.items():
        head, tail = EDGE_TYPES[relation].signatures[0]
        n = int(total * share)
        frame = pl.DataFrame({"h": rng.integers(0, NODE_COUNTS[head], n), "t": rng.integers(0, NODE_COUNTS[tail], n)})
        parts.append(frame.unique().select(
            pl.format(PREFIX[head] + ":{}", "h").alias("id1"), pl.lit(relation).alias("relation"),
            pl.format(PREFIX[tail] + ":{}", "t").alias("id2"), pl.lit("").alias("qscore"), pl.lit(source).alias("source")))
    return pl.concat(parts)


def make_graph(folder: Path, positives: int, negatives: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    edges = _edges(rng, POSITIVE_SHARE, positives, "SYNTHETIC")
    tn = _edges(rng, TN_SHARE, negatives, "SYNTHETIC").join(edges, on=["id1", "relation", "id2"], how="anti")
    nodes = pl.concat([pl.DataFrame({"i": np.arange(count)}).select(pl.format(PREFIX[kind] + ":{}", "i").alias("id"),
                                                                    pl.lit(kind).alias("type"))
                       for kind, count in NODE_COUNTS.items()])
    for name, frame in (("edges.csv", edges), ("TN_edges.csv", tn), ("nodes.csv", nodes)):
        frame.write_csv(folder / name, include_header=False, separator="\t", quote_style="never")
    assert set(NODE_COUNTS) == set(NODE_TYPES)


def timed(command, cwd=None) -> tuple:
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024 ** 2


def openbench_split(folder: Path) -> tuple:
    return timed([sys.executable, "-m", "openbench", "split", "rand", "--edges", folder / "edges.csv",
                  "--tn-edges", folder / "TN_edges.csv", "--nodes", folder / "nodes.csv",
                  "--output", folder / "openbench_split"])


def openbench_entity_split(folder: Path) -> tuple:
    return timed([sys.executable, "-m", "openbench", "split", "entity", "--edges", folder / "edges.csv",
                  "--tn-edges", folder / "TN_edges.csv", "--nodes", folder / "nodes.csv", "--node-type", "DIS",
                  "--fraction", "0.1", "--val-fraction", "0.05", "--relations", "DIS_DRUG,GENE_DIS",
                  "--output", folder / "openbench_entity_split"])


def openbench_inductive_split(folder: Path) -> tuple:
    return timed([sys.executable, "-m", "openbench", "split", "inductive", "--edges", folder / "edges.csv",
                  "--output", folder / "openbench_inductive_split"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--scale", type=float, default=1.0, help="share of HQ scale for the first run")
    parser.add_argument("--openbiolink-python", default=None, help="python of a venv with openbiolink 0.1.4")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--million-only", action="store_true", help="only the 1 M-edge comparison with OpenBioLink")
    parser.add_argument("--repeats", type=int, default=3, help="openbench runs at 1 M edges (the median is compared)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-split-"))
    if not args.million_only:
        hq_scale(workdir, args.scale, args.seed)
    million = workdir / "million"
    make_graph(million, 1_000_000, 130_000, args.seed)
    runs = [openbench_split(million) for _ in range(args.repeats)]
    ours = float(np.median([seconds for seconds, _ in runs]))
    ours_peak = max(peak for _, peak in runs)
    print(f"1 M edges: openbench split rand {ours:.1f} s (median of {', '.join(f'{s:.1f}' for s, _ in runs)}), "
          f"peak {ours_peak:.2f} GB")
    if args.openbiolink_python:
        theirs, theirs_peak = timed([args.openbiolink_python, "-m", "openbiolink", "-p", str(million), "split", "rand",
                                     "--edges", str(million / "edges.csv"), "--tn-edges", str(million / "TN_edges.csv"),
                                     "--nodes", str(million / "nodes.csv")])
        print(f"1 M edges: openbiolink split rand {theirs:.1f} s, peak {theirs_peak:.2f} GB; "
              f"openbench is {theirs / ours:.1f}x faster (target >= 10)")


def hq_scale(workdir: Path, scale: float, seed: int) -> None:
    """The three splits at HQ scale (``scale`` of it), timed."""
    args = argparse.Namespace(scale=scale, seed=seed)
    hq = workdir / f"hq-{args.scale}"
    make_graph(hq, int(4_800_000 * args.scale), int(620_000 * args.scale), args.seed)
    edges = sum(1 for _ in open(hq / "edges.csv", "rb"))
    seconds, peak = openbench_split(hq)
    print(f"HQ scale x{args.scale} ({edges:,} positive edges): openbench split rand {seconds:.1f} s, "
          f"peak memory {peak:.2f} GB (targets: < 60 s, < 4 GB)")
    entity_seconds, entity_peak = openbench_entity_split(hq)
    print(f"HQ scale x{args.scale} ({edges:,} positive edges): openbench split entity (10% of DIS held out under "
          f"DIS_DRUG, GENE_DIS) {entity_seconds:.1f} s, peak memory {entity_peak:.2f} GB "
          f"(targets: < 60 s, < 6 GB); {entity_seconds / seconds:.2f}x split rand's time")
    inductive_seconds, inductive_peak = openbench_inductive_split(hq)
    print(f"HQ scale x{args.scale} ({edges:,} positive edges): openbench split inductive (20% of the entities) "
          f"{inductive_seconds:.1f} s, peak memory {inductive_peak:.2f} GB (targets: < 60 s, < 6 GB); "
          f"{inductive_seconds / seconds:.2f}x split rand's time")


if __name__ == "__main__":
    main()
