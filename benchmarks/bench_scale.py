"""Benchmark: the cost curve of ``openbench evaluate`` from 20 k to Wikidata5M's 4.6 M entities,
against the machine's limit measured in the same run.

For each size a seeded synthetic split in a realistic shape is written once (power-law entity
degrees, relation sizes falling off as a power law over Wikidata5M's 822 relations; every entity
in a training triple; 5,000 valid and 5,000 test triples never in training; DistMult embeddings,
d = 200, as ``.npy`` files in the loader's id order) and evaluated as a user runs it, in child
processes (peak RSS from ``wait4``):

* **cold**: ``openbench evaluate`` with an empty dataset cache (parse, map labels, build and store
  the filter index), then **warm**: the same command again (the cache read back);
* the **machine's limit**: a plain blocked ``torch.mm`` of the evaluation's shape (2 × test queries
  × d × entities, tiles of 1,024 queries × 50,000 entities, one reused output buffer), on the same
  threads; warm evaluation and GEMM alternate for ``--repeats`` rounds (3 by default) and the
  ratio warm evaluation / GEMM is the median round's, printed with its spread (target ≤ 1.15;
  cold load ≤ 20 s and warm load < 1 s at 4.6 M entities).

It prints per size: load (cold, warm), filter index (cold, warm), evaluation, GEMM, ratio, peak RSS
against the embedding table + 3 GB, and, with ``--sampled``, the sampled protocol at
ogbl-wikikg2's shape (2.5 M entities, 500 + 500 negatives per test triple) against 250 k entities
and against half the negatives: its cost must follow the negatives, not the entities.

    python benchmarks/bench_scale.py [--max-entities N] [--sizes 20k,200k,1M,4.6M] [--work DIR]
                                     [--plot FILE.png] [--json FILE] [--sampled] [--device cpu]

The generated splits are kept under ``--work`` (default: a folder in the temporary directory) and
reused by later runs with the same size and seed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cpu import choose_scan, cpu_description, cpu_line  # noqa: E402
from _peak import run_measured  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the openbench command sets it

# (entities, training triples); Wikidata5M: 4,594,485 entities, 20,614,279 training triples
SIZES = {"20k": (20_000, 400_000), "200k": (200_000, 2_000_000), "1M": (1_000_000, 5_000_000),
         "4.6M": (4_594_485, 20_614_279)}
RELATIONS, VALID, TEST, DIM = 822, 5_000, 5_000, 200
ENTITY_EXPONENT, RELATION_EXPONENT = 0.75, 1.1  # Zipf exponents of entity popularity and relation size
TARGET_RATIO, TARGET_EXTRA_GB, TARGET_WARM_LOAD, TARGET_COLD_LOAD = 1.15, 3.0, 1.0, 20.0
GEMM_QUERY_TILE, GEMM_ENTITY_TILE = 1024, 50_000
FORMAT_VERSION = 1  # bump when the generated split changes


def _popular(rng: np.random.Generator, count: int, weights_cumulative: np.ndarray) -> np.ndarray:
    """``count`` draws from the distribution of ``weights_cumulative`` (normalised, increasing)."""
    return np.searchsorted(weights_cumulative, rng.random(count), side="right").astype(np.int64)


def _zipf_cumulative(size: int, exponent: float, rng: np.random.Generator) -> tuple:
    """(cumulative probabilities over ranks, a permutation from rank to id): a shuffled Zipf law."""
    weights = (np.arange(1, size + 1, dtype=np.float64)) ** -exponent
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    return cumulative, rng.permutation(size)


def _triples(rng, count, entity_cdf, entity_ids, relation_cdf, relation_ids) -> np.ndarray:
    """(count, 3) int64 triples: heads and tails by popularity, relations by relation size."""
    heads = entity_ids[_popular(rng, count, entity_cdf)]
    tails = entity_ids[_popular(rng, count, entity_cdf)]
    relations = relation_ids[_popular(rng, count, relation_cdf)]
    return np.stack([heads, relations, tails], axis=1)


def _keys(triples: np.ndarray, entities: int) -> np.ndarray:
    return (triples[:, 0] * RELATIONS + triples[:, 1]) * entities + triples[:, 2]


def make_split(folder: Path, entities: int, train: int, seed: int, dim: int) -> None:
    """The seeded split of one size in the sample layout (``head<TAB>relation<TAB>tail`` labels, as
    Wikidata5M's files are), with ``entities.npy`` and ``relations.npy`` in the loader's id order."""
    import polars as pl

    rng = np.random.default_rng(seed)
    entity_cdf, entity_ids = _zipf_cumulative(entities, ENTITY_EXPONENT, rng)
    relation_cdf, relation_ids = _zipf_cumulative(RELATIONS, RELATION_EXPONENT, rng)
    training = _triples(rng, train, entity_cdf, entity_ids, relation_cdf, relation_ids)
    training[:entities, 0] = rng.permutation(entities)  # every entity in a training triple
    training = training[np.unique(_keys(training, entities), return_index=True)[1]]
    known = np.sort(_keys(training, entities))
    drawn = _triples(rng, 4 * (VALID + TEST), entity_cdf, entity_ids, relation_cdf, relation_ids)
    keys = _keys(drawn, entities)
    position = np.minimum(np.searchsorted(known, keys), known.size - 1)
    fresh = known[position] != keys
    _, first = np.unique(keys, return_index=True)
    once = np.zeros(keys.size, dtype=bool)
    once[first] = True
    evaluation = drawn[fresh & once][: VALID + TEST]
    folder.mkdir(parents=True, exist_ok=True)
    splits = {"train_sample.csv": training, "val_sample.csv": evaluation[:VALID], "test_sample.csv": evaluation[VALID:]}
    for name, triples in splits.items():
        frame = pl.DataFrame({"h": triples[:, 0], "r": triples[:, 1], "t": triples[:, 2]})
        frame.select(pl.format("Q{}", "h"), pl.format("P{}", "r"), pl.format("Q{}", "t")).write_csv(
            folder / name, separator="\t", include_header=False, quote_style="never")
    # the loader's ids: sorted labels; the embeddings are random, written in chunks (no second copy)
    table = np.lib.format.open_memmap(folder / "entities.npy", mode="w+", dtype=np.float32, shape=(entities, dim))
    for start in range(0, entities, 1 << 18):
        stop = min(start + (1 << 18), entities)
        table[start:stop] = (rng.standard_normal((stop - start, dim), dtype=np.float32) / np.sqrt(dim))
    table.flush()
    del table
    np.save(folder / "relations.npy", (1.0 + 0.1 * rng.standard_normal((RELATIONS, dim))).astype(np.float32))
    (folder / "made.json").write_text(json.dumps({"format": FORMAT_VERSION, "entities": entities, "train": train,
                                                  "seed": seed, "dim": dim, "kept_train": int(training.shape[0])}))


def ensure_split(work: Path, name: str, seed: int, dim: int) -> Path:
    entities, train = SIZES[name]
    folder = work / f"scale-{name}-seed{seed}-d{dim}"
    made = folder / "made.json"
    expected = {"format": FORMAT_VERSION, "entities": entities, "train": train, "seed": seed, "dim": dim}
    if made.is_file() and all(json.loads(made.read_text()).get(k) == v for k, v in expected.items()):
        return folder
    started = time.perf_counter()
    make_split(folder, entities, train, seed, dim)
    print(f"  [{name}] split written in {time.perf_counter() - started:.1f} s: {folder}", flush=True)
    return folder


def run_child(command: list, env: dict) -> tuple:
    """(wall seconds, the command's own peak RSS GB, stdout) of ``command``; raises with its stderr on failure."""
    seconds, peak_gb, stdout, stderr, status = run_measured(command, env)
    if status != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{stderr[-3000:]}")
    return seconds, peak_gb, stdout


def evaluate_child(folder: Path, cache: Path, output: Path, device: str, extra=()) -> dict:
    """One ``openbench evaluate`` as a user runs it: wall time, peak RSS and the record's stages."""
    env = dict(os.environ, OPENBENCH_CACHE_DIR=str(cache))
    command = [sys.executable, "-m", "openbench", "evaluate", "--dataset", str(folder), "--model", "DistMult",
               "--entity-embeddings", str(folder / "entities.npy"),
               "--relation-embeddings", str(folder / "relations.npy"), "--device", device, "--no-progress",
               "--output", str(output), *extra]
    wall, peak, _ = run_child(command, env)
    record = json.loads(output.read_text())
    stages = record["timing"].get("stages", {})
    return {"wall": wall, "peak_gb": peak, "stages": stages, "mrr": record["metrics"]["both"]["realistic"]["mrr"],
            "queries": record["diagnostics"]["queries"]}


def gemm_child(folder: Path, queries: int, device: str) -> float:
    """Seconds of the plain blocked GEMM of the evaluation's shape, in a child on the same threads."""
    code = f"""
import sys, time, numpy as np, torch
table = torch.from_numpy(np.load({str(folder / 'entities.npy')!r}, mmap_mode='c')).to({device!r})
queries = torch.randn({queries}, table.shape[1], device=table.device) / table.shape[1] ** 0.5
out = torch.empty({GEMM_QUERY_TILE}, {GEMM_ENTITY_TILE}, device=table.device)
def sweep():
    for first in range(0, queries.shape[0], {GEMM_QUERY_TILE}):
        block = queries[first:first + {GEMM_QUERY_TILE}]
        for start in range(0, table.shape[0], {GEMM_ENTITY_TILE}):
            stop = min(start + {GEMM_ENTITY_TILE}, table.shape[0])
            torch.mm(block, table[start:stop].T, out=out[:block.shape[0], :stop - start])
    if table.device.type == 'cuda':
        torch.cuda.synchronize()
sweep() if table.shape[0] <= 200_000 else None  # warm (the table paged in); the large ones once
started = time.perf_counter()
sweep()
print(time.perf_counter() - started)
"""
    _, _, stdout = run_child([sys.executable, "-c", code], dict(os.environ))
    return float(stdout.strip().splitlines()[-1])


def measure_size(work: Path, name: str, seed: int, dim: int, device: str, repeats: int) -> dict:
    """One size: a cold run, then ``repeats`` rounds of (warm evaluation, GEMM) alternating, so
    that a loaded moment of the machine falls on one round, not on one side of the ratio. The
    ratio is the median of the rounds' ratios, reported with their minimum and maximum."""
    folder = ensure_split(work, name, seed, dim)
    entities, train = SIZES[name]
    warm_runs, gemms = [], []
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        cache, output = Path(scratch) / "cache", Path(scratch) / "record.json"
        cold = evaluate_child(folder, cache, output, device)
        for _ in range(repeats):
            warm_runs.append(evaluate_child(folder, cache, output, device))
            gemms.append(gemm_child(folder, warm_runs[-1]["queries"], device))
    ratios = [run["stages"]["evaluation"] / gemm for run, gemm in zip(warm_runs, gemms)]
    middle = sorted(range(repeats), key=lambda i: ratios[i])[repeats // 2]  # the median round (odd repeats)
    warm = warm_runs[middle]
    table_gb = entities * dim * 4 / 1024 ** 3
    row = {"size": name, "entities": entities, "train": train, "dim": dim, "queries": warm["queries"],
           "load_cold": cold["stages"].get("load_dataset"), "load_warm": warm["stages"].get("load_dataset"),
           "filter_cold": cold["stages"].get("filter_index"), "filter_warm": warm["stages"].get("filter_index"),
           "evaluation": warm["stages"].get("evaluation"), "evaluation_cold": cold["stages"].get("evaluation"),
           "wall_cold": cold["wall"], "wall_warm": warm["wall"], "gemm": gemms[middle],
           "peak_gb": max([cold["peak_gb"]] + [run["peak_gb"] for run in warm_runs]), "table_gb": table_gb,
           "mrr": warm["mrr"], "ratio": float(np.median(ratios)), "ratio_min": min(ratios), "ratio_max": max(ratios),
           "ratios": ratios, "evaluations": [run["stages"]["evaluation"] for run in warm_runs], "gemms": gemms}
    if len({run["mrr"] for run in [cold] + warm_runs}) != 1:
        raise RuntimeError(f"{name}: the runs' MRRs differ: {[run['mrr'] for run in [cold] + warm_runs]}")
    return row


def sampled_child(entities: int, negatives: int, seed: int, dim: int) -> float:
    """Seconds of the sampled protocol (``negatives`` per side and test triple) at ``entities``,
    in a child process, through ``openbench.evaluate`` on an in-memory dataset."""
    code = f"""
import time, numpy as np, torch, openbench
from openbench.datasets.loader import Dataset
from openbench.datasets.negatives import SampledNegatives
rng = np.random.default_rng({seed})
E, T, K, d = {entities}, {TEST}, {negatives}, {dim}
train = torch.from_numpy(np.stack([np.arange(E), rng.integers(0, 8, E), rng.integers(0, E, E)], 1))
test = torch.from_numpy(np.stack([rng.integers(0, E, T), rng.integers(0, 8, T), rng.integers(0, E, T)], 1))
labels = [f"Q{{i}}" for i in range(E)]
data = Dataset(path="memory", layout="ids", entity_labels=labels, relation_labels=[f"P{{r}}" for r in range(8)],
               triples={{"train": train, "valid": test[:0], "test": test}}, fingerprint="bench", id_map_sha256="bench")
negatives = SampledNegatives(head=torch.from_numpy(rng.integers(0, E, (T, K))),
                             tail=torch.from_numpy(rng.integers(0, E, (T, K))))
model = openbench.embedding_model("DistMult", rng.standard_normal((E, d), dtype=np.float32),
                                  rng.standard_normal((8, d), dtype=np.float32))
openbench.evaluate(data, model, protocol="sampled", negatives=negatives, progress=False)
started = time.perf_counter()
openbench.evaluate(data, model, protocol="sampled", negatives=negatives, progress=False)
print(time.perf_counter() - started)
"""
    _, _, stdout = run_child([sys.executable, "-c", code], dict(os.environ))
    return float(stdout.strip().splitlines()[-1])


def sampled_rows(seed: int, dim: int) -> list:
    shapes = [(250_000, 500), (2_500_000, 500), (2_500_000, 250)]
    return [{"entities": e, "negatives": k, "seconds": sampled_child(e, k, seed, dim)} for e, k in shapes]


def _fmt(value, digits=1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table_lines(rows: list) -> list:
    lines = ["| entities | train triples | queries | load cold / warm (s) | filter index cold / warm (s) | "
             "evaluation (s) | GEMM (s) | evaluation / GEMM | peak RSS (GB) | table + 3 GB |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # evaluation and GEMM: the median round
    for row in rows:
        lines.append(f"| {row['entities']:,} | {row['train']:,} | {row['queries']:,} | "
                     f"{_fmt(row['load_cold'])} / {_fmt(row['load_warm'], 2)} | "
                     f"{_fmt(row['filter_cold'], 2)} / {_fmt(row['filter_warm'], 2)} | {_fmt(row['evaluation'])} | "
                     f"{_fmt(row['gemm'])} | {_fmt(row['ratio'], 2)} "
                     f"({_fmt(row['ratio_min'], 2)}–{_fmt(row['ratio_max'], 2)}) | "
                     f"{_fmt(row['peak_gb'], 2)} | "
                     f"{_fmt(row['table_gb'] + TARGET_EXTRA_GB, 2)} |")
    return lines


def verdicts(rows: list) -> list:
    out = []
    for row in rows:
        checks = {"median evaluation/GEMM <= 1.15": row["ratio"] is not None and row["ratio"] <= TARGET_RATIO,
                  "peak RSS <= table + 3 GB": row["peak_gb"] <= row["table_gb"] + TARGET_EXTRA_GB,
                  f"cold load <= {TARGET_COLD_LOAD:.0f} s": (row["load_cold"] or 0) <= TARGET_COLD_LOAD}
        if row["size"] == "4.6M":
            checks[f"warm load < {TARGET_WARM_LOAD:.0f} s"] = (row["load_warm"] or 0) < TARGET_WARM_LOAD
        out.append(f"{row['size']}: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in checks.items()))
    return out


def plot(rows: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entities = [row["entities"] for row in rows]
    figure, axis = plt.subplots(figsize=(6, 4))
    for key, label in (("evaluation", "openbench evaluation (exact ranks)"), ("gemm", "plain GEMM (machine's limit)"),
                       ("load_cold", "load, cold"), ("load_warm", "load, warm")):
        axis.plot(entities, [row[key] for row in rows], marker="o", label=label)
    axis.set_xscale("log"), axis.set_yscale("log")
    axis.set_xlabel("entities"), axis.set_ylabel("seconds (2 × 5,000 test queries, d = 200)")
    axis.grid(True, which="both", alpha=0.3), axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated, of " + ", ".join(SIZES))
    parser.add_argument("--max-entities", type=int, default=None, help="leave out sizes above this")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openbench-bench-scale")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sampled", action="store_true", help="also the sampled protocol at ogbl-wikikg2's shape")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of (evaluation, GEMM) per size (odd, >= 3)")
    parser.add_argument("--scan", choices=["avx512", "avx2", "portable"], default=None,
                        help="the counting scan to use (default: the best this CPU has)")
    args = parser.parse_args()
    choose_scan(args.scan)
    names = [name.strip() for name in args.sizes.split(",") if name.strip()]
    unknown = [name for name in names if name not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; expected {', '.join(SIZES)}")
    if args.repeats < 3 or args.repeats % 2 == 0:
        parser.error("--repeats: an odd number of at least 3 rounds (a median of one round is one loaded moment)")
    if args.max_entities is not None:
        names = [name for name in names if SIZES[name][0] <= args.max_entities]
    args.work.mkdir(parents=True, exist_ok=True)
    import torch

    print(f"bench_scale: {torch.get_num_threads()} threads, device {args.device}, DistMult d = {args.dim}", flush=True)
    print(cpu_line(), flush=True)
    rows = []
    for name in names:
        row = measure_size(args.work, name, args.seed, args.dim, args.device, args.repeats)
        rows.append(row)
        print(f"  [{name}] evaluation {_fmt(row['evaluation'])} s, GEMM {_fmt(row['gemm'])} s, "
              f"ratio {_fmt(row['ratio'], 2)} (rounds: {', '.join(_fmt(r, 2) for r in row['ratios'])}), "
              f"load {_fmt(row['load_cold'])}/{_fmt(row['load_warm'], 2)} s, "
              f"peak {_fmt(row['peak_gb'], 2)} GB", flush=True)
    print("\n".join(table_lines(rows)))
    print("\n".join(verdicts(rows)))
    result = {"cpu": cpu_description(), "rows": rows}
    if args.sampled:
        sampled = sampled_rows(args.seed, args.dim)
        result["sampled"] = sampled
        base, large, half = (row["seconds"] for row in sampled)
        print(f"sampled protocol (5,000 test triples): 250k entities × 500 negatives {base:.2f} s, "
              f"2.5M × 500 {large:.2f} s (ratio {large / base:.2f}; target ≈ 1), "
              f"2.5M × 250 {half:.2f} s (against 500: {half / large:.2f}; target ≈ 0.5)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
