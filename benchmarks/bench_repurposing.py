"""Benchmark: the repurposing task's matrix pass at PrimeKG's size, against the plain GEMM.

PrimeKG's drug × disease matrix: 7,957 drugs × 17,080 diseases (1.36e8 pairs), dimension 200.
Embeddings are seeded normals (every entity a row); the matrix is counted as ``openbench evaluate
--task repurposing`` counts it (:func:`openbench.evaluation.counting.matrix.count_matrix`): the
test positives as thresholds (``--positives``, placed as a model of AUROC ``--auroc`` ranks them;
0.5: uniformly, the densest case for the windows), the training positives as filtered pairs
(``--known``), the best ``--keep-top`` pairs kept; exact ranks (the default) and, with
``--fast``, keys as computed.

The peer, measured in the same run: a plain ``torch.mm`` of the matrix's shape in float32, one
output buffer, on the same threads, timed at its second call (the first warms the library and the
buffer's pages). The matrix pass is timed alike, at its second call in its process; its first
call (cold: thread pools, fresh pages) is printed beside it. Matrix pass and GEMM alternate for
``--repeats`` rounds; the ratio is the median round's, warm against warm (target ≤ 1.25 × the
GEMM). Peak memory is each child's own (wait4), against the tables + 2 GB (no float64 copy of the
matrix: 1.1 GB).

Prints the CPU model, its vector extensions and the counting kernel's scan.

    python benchmarks/bench_repurposing.py [--models DistMult,TransE-L2] [--positives 500] [--known 9000]
                                           [--repeats 3] [--drugs 7957] [--diseases 17080] [--fast]
                                           [--device cpu|cuda] [--negatives N] [--truth N] [--extra-view N]
                                           [--case primekg]

``--case primekg`` is the workload PrimeKG's users run (issue 74): 1,900 test indications, 16,876
known, 30,675 contraindications as known negatives, 2,568 off-label pairs and a 1,000-row trials
file, every one of the last three a threshold too; each line says which pass ran and why.

With ``--device cuda`` the matrix is computed and counted on the GPU (``count_matrix``'s device
pass) and the peer is the same GPU's FP32 GEMM; the peak memory printed is the host's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cpu import choose_scan, cpu_description  # noqa: E402
from _peak import run_measured  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
TARGET_RATIO, TARGET_EXTRA_GB = 1.25, 2.0
DIM = 200

_MATRIX = """
import json, sys, time
import numpy as np, torch
from openbench.evaluation.counting.matrix import MatrixSpec, count_matrix
from openbench.models.scorers import build_scorer
folder, model, ranks, keep, device = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), torch.device(sys.argv[5])
entities = np.load(folder + "/entities.npy"); relations = np.load(folder + "/relations.npy")
pairs = np.load(folder + "/pairs.npz")
drugs, diseases = int(pairs["drugs"]), int(pairs["diseases"])
scorer = build_scorer(model, entities, relations, entities.shape[0], relations.shape[0])
spec = MatrixSpec(torch.arange(drugs), torch.arange(drugs, drugs + diseases), 0, True)
rows, cols, thresholds = pairs["rows"], pairs["cols"], pairs["thresholds"]
times = []
for _ in range(2):  # the first call cold, the second warm (as the peer's GEMM, timed after one call)
    started = time.perf_counter()
    counted = count_matrix(scorer, spec, rows, cols, thresholds, top_k=keep, top_excluded=~thresholds, ranks=ranks,
                           device=None if device.type == "cpu" else device)
    times.append(time.perf_counter() - started)
print(json.dumps({"cold": times[0], "seconds": times[1], "stats": {k: (v if not isinstance(v, float) else round(v, 9))
                                                                  for k, v in counted.stats.items()}}))
"""

_GEMM = """
import json, sys, time
import numpy as np, torch
folder, device = sys.argv[1], torch.device(sys.argv[2])
entities = torch.from_numpy(np.load(folder + "/entities.npy")).to(device)
pairs = np.load(folder + "/pairs.npz")
drugs, diseases = int(pairs["drugs"]), int(pairs["diseases"])
queries, candidates = entities[:drugs].contiguous(), entities[drugs:drugs + diseases].contiguous()
out = torch.empty((drugs, diseases), dtype=torch.float32, device=device)
torch.mm(queries, candidates.T, out=out)  # warm the library
if device.type == "cuda":
    torch.cuda.synchronize()
started = time.perf_counter()
torch.mm(queries, candidates.T, out=out)
if device.type == "cuda":
    torch.cuda.synchronize()
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def make_inputs(folder: Path, drugs: int, diseases: int, positives: int, known: int, seed: int,
                auroc: float, others: int = 0) -> None:
    """Seeded tables and pairs. ``auroc`` < 1: the test positives are drawn as a model of that AUROC
    ranks them (each positive's share of the matrix above it exponential with mean 1 - auroc,
    read off a seeded pool of pairs ranked by their DistMult score); 0.5: uniformly. ``others``
    more thresholds drawn uniformly among the remaining pairs (known negatives, a ground-truth
    file's rows, an extra view's pairs: every one is a threshold the pass places keys against)."""
    rng = np.random.default_rng(seed)
    entities = (rng.normal(size=(drugs + diseases, DIM)) * 0.25).astype(np.float32)
    relations = rng.normal(size=(1, DIM)).astype(np.float32)
    codes = rng.choice(drugs * diseases, positives + known, replace=False)
    if auroc > 0.5:
        pool = rng.choice(drugs * diseases, 50 * positives, replace=False)
        rows, cols = pool // diseases, pool % diseases
        scores = np.einsum("ij,ij->i", entities[rows] * relations[0], entities[drugs + cols])
        ranked = pool[np.argsort(-scores, kind="stable")]
        quantiles = np.minimum(rng.exponential(1.0 - auroc, positives), 0.999)
        chosen = np.unique(ranked[(quantiles * ranked.size).astype(np.int64)])
        rest = np.setdiff1d(codes, chosen)[:known]
        codes = np.concatenate([chosen, rest])
        positives = chosen.size
    thresholds = np.zeros(codes.size, bool)
    thresholds[:positives] = True
    if others:
        pool = np.setdiff1d(rng.choice(drugs * diseases, 2 * others + codes.size, replace=False), codes)[:others]
        codes = np.concatenate([codes, pool])
        thresholds = np.concatenate([thresholds, np.ones(pool.size, bool)])
    rows, cols = codes // diseases, codes % diseases
    np.save(folder / "entities.npy", entities)
    np.save(folder / "relations.npy", relations)
    np.savez(folder / "pairs.npz", rows=rows, cols=cols, thresholds=thresholds, drugs=drugs, diseases=diseases)


CASES = {  # PrimeKG's drug-repurposing workload (issue 74): a random 10 % test of its 18,776 directed
    # indication edges, the rest known; its 30,675 contraindications as known negatives; 2,568 off-label
    # uses as an extra view; a 1,000-row clinical-trials file
    "primekg": {"positives": 1_900, "known": 16_876, "negatives": 30_675, "truth": 1_000, "extra_view": 2_568}}


def _pass_said(stats: dict) -> str:
    """Which pass counted the matrix and why (from count_matrix's stats)."""
    if stats.get("mode") != "exact":
        return f"{stats.get('pass')}, keys as computed"
    precision = stats.get("pass_precision")
    # the tables here are float32: blocks in float64 mean the probe found the float32 windows crowded
    why = ("the probe found more than 5 % of its keys inside a float32 window (crowded): the whole matrix in "
           "float64" if precision == "float64" else "float32 windows, the float64 step inside the pass"
           if stats.get("float64_in_pass") else "float32 windows")
    return f"{stats.get('pass')} ({why})"


def measure(script: str, *arguments) -> tuple:
    seconds, peak, out, err, status = run_measured([sys.executable, "-c", script, *map(str, arguments)])
    if status != 0:
        raise SystemExit(f"a measured run failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="DistMult,TransE-L2")
    parser.add_argument("--drugs", type=int, default=7_957)
    parser.add_argument("--diseases", type=int, default=17_080)
    parser.add_argument("--positives", type=int, default=500)
    parser.add_argument("--known", type=int, default=9_000)
    parser.add_argument("--keep-top", type=int, default=1000)
    parser.add_argument("--negatives", type=int, default=0, help="known negatives (thresholds too)")
    parser.add_argument("--truth", type=int, default=0, help="a ground-truth file's rows (thresholds)")
    parser.add_argument("--extra-view", type=int, default=0, help="an extra view's pairs (thresholds; off-label)")
    parser.add_argument("--case", choices=sorted(CASES), default=None,
                        help="a named workload: primekg (PrimeKG's indications, contraindications as known "
                             "negatives, off-label uses and a trials file; sets the counts above)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fast", action="store_true", help="measure fast ranks (keys as computed) as well")
    parser.add_argument("--auroc", type=float, default=0.9,
                        help="the test positives as a model of this AUROC ranks them (0.5: uniform, the densest "
                             "case for the windows)")
    parser.add_argument("--json", default=None, help="write the results here too")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: the matrix counted by the device pass, "
                        "the GEMM peer on the same GPU (its FP32 GEMM)")
    parser.add_argument("--scan", choices=["avx512", "avx2", "portable"], default=None,
                        help="the counting scan to use (default: the best this CPU has)")
    options = parser.parse_args()
    for name, value in CASES.get(options.case, {}).items():
        setattr(options, name, value)
    choose_scan(options.scan)
    cpu = cpu_description()
    forced = " (forced: the CPU has better)" if cpu["scan_forced"] else ""
    print(f"CPU: {cpu['model']} ({cpu['cores']} cores); vector extensions: {', '.join(cpu['vector_extensions'])}; "
          f"counting kernel scan: {cpu['scan']}{forced}")
    pairs = options.drugs * options.diseases
    tables_gb = (options.drugs + options.diseases) * DIM * 4 / 1024 ** 3
    print(f"matrix {options.drugs:,} × {options.diseases:,} = {pairs:,} pairs, d = {DIM}; {options.positives} test "
          f"positives (thresholds, placed as a model of AUROC {options.auroc} ranks them), {options.known} known "
          f"positives; tables {tables_gb * 1024:.0f} MB")
    others = options.negatives + options.truth + options.extra_view
    if others:
        print(f"{options.case or 'extra'} thresholds: {options.negatives:,} known negatives, {options.truth:,} "
              f"ground-truth rows, {options.extra_view:,} extra-view pairs ({options.positives + others:,} in all)")
    results = {"cpu": cpu, "device": options.device, "pairs": pairs, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="openbench-repurposing-") as scratch:
        folder = Path(scratch)
        make_inputs(folder, options.drugs, options.diseases, options.positives, options.known, options.seed,
                    options.auroc, others)
        modes = ["exact"] + (["fast"] if options.fast else [])
        for model in options.models.split(","):
            for mode in modes:
                rounds, colds, peaks, stats = [], [], [], None
                for _ in range(options.repeats):
                    counted, peak = measure(_MATRIX, folder, model, mode, options.keep_top, options.device)
                    gemm, gemm_peak = measure(_GEMM, folder, options.device)
                    rounds.append((counted["seconds"], gemm["seconds"]))
                    colds.append(counted["cold"] / gemm["seconds"])
                    peaks.append(peak)
                    stats = counted["stats"]
                ratios = sorted(count / gemm for count, gemm in rounds)
                median, cold = statistics.median(ratios), statistics.median(colds)
                middle = sorted(rounds, key=lambda r: r[0] / r[1])[len(rounds) // 2]
                verdict = "meets" if median <= TARGET_RATIO else "MISSES"
                memory = "meets" if max(peaks) <= tables_gb + TARGET_EXTRA_GB else "MISSES"
                print(f"{model:10s} {mode:5s}: matrix {middle[0]:.2f} s, GEMM {middle[1]:.2f} s, ratio {median:.2f} "
                      f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; target {TARGET_RATIO}: {verdict}); first call "
                      f"(cold) {cold:.2f}; peak {max(peaks):.2f} GB (target tables + {TARGET_EXTRA_GB:.0f} GB = "
                      f"{tables_gb + TARGET_EXTRA_GB:.2f}: {memory}); re-scored {stats.get('rescored')}, decimal "
                      f"{stats.get('decimal')}; pass: {_pass_said(stats)}")
                results["runs"][f"{model}/{mode}"] = {"ratio": median, "rounds": ratios, "cold_ratio": cold,
                                                      "cold_rounds": sorted(colds), "matrix_seconds": middle[0],
                                                      "gemm_seconds": middle[1], "peak_gb": max(peaks), "stats": stats}
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
