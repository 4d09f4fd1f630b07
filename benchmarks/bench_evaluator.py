"""Benchmark: ``openbench evaluate`` against PyKEEN's RankBasedEvaluator, measured in the same run.

Synthetic graph (seeded): 20,000 entities, 28 relations, 400,000 train, 5,000 valid and 5,000
test triples, dimension 200, TransE-L2 and DistMult. For each model it prints

* the wall time of the whole ``openbench evaluate`` command (start-up and file loading included)
  and its peak memory, in a child process;
* the wall time of PyKEEN's ``evaluate`` call alone and its peak memory, in a child process;
* the ratio of the two, and whether the realistic MRR (both sides) agrees within 1e-6;
* in-process: the evaluation time against the time of computing the same score rows alone
  (same batches and chunks, float32), i.e. the cost of filtering and ranking;
* in-process: exact ranks (the default) against ``--fast`` float32 ranks on the same evaluator
  settings, with the fraction of (query, candidate) pairs the fast pass left undecided and
  re-scored (target: at most 10% slower);
* the worst case of exact ranks, every score equal (all entity rows one continuous vector, so
  every candidate is undecided), at the ``small`` size: its time against fast ranks.

``--scale hq`` uses OpenBioLink HQ sizes (184,732 entities, 4.2 M train, 183,009 test triples),
meant for a GPU; ``--skip-peer`` leaves PyKEEN out.

    python benchmarks/bench_evaluator.py [--scale default|small|hq] [--device auto] [--skip-peer]
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
from _cpu import choose_scan, cpu_line  # noqa: E402
from _peak import run_measured  # noqa: E402

# the peer runs with the environment it was given; openbench, in process, as the openbench
# command does (openbench/cli.py): OMP_WAIT_POLICY=PASSIVE unless set, before torch is imported
PEER_ENVIRONMENT = dict(os.environ)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SCALES = {
    "small": dict(entities=2_000, relations=28, train=40_000, valid=500, test=500, dim=64),
    "default": dict(entities=20_000, relations=28, train=400_000, valid=5_000, test=5_000, dim=200),
    "hq": dict(entities=184_732, relations=28, train=4_192_002, valid=188_394, test=183_009, dim=200),
}
MODELS = ("TransE-L2", "DistMult")
TARGET_SPEEDUP, TARGET_MEMORY_GB, TARGET_OVERHEAD, TARGET_EXACT_OVERHEAD = 20.0, 1.5, 1.3, 1.10


def make_dataset(folder: Path, seed: int, entities: int, relations: int, train: int, valid: int, test: int,
                 dim: int) -> None:
    """Seeded OpenBioLink-layout sample files plus embeddings in the sorted-label order."""
    import polars as pl

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    total = train + valid + test
    heads = rng.integers(0, entities, total)
    tails = rng.integers(0, entities, total)
    rels = rng.integers(0, relations, total)
    heads[:entities] = np.arange(entities)  # every entity occurs in train
    frame = pl.DataFrame({"h": heads, "r": rels, "t": tails}).select(
        pl.format("NCBIGENE:{}", "h").alias("h"), pl.format("REL_{}", "r").alias("r"),
        pl.format("NCBIGENE:{}", "t").alias("t"), pl.lit("900").alias("q"), pl.lit("1").alias("v"),
        pl.lit("STRING").alias("s"))
    bounds = {"train_sample.csv": (0, train), "val_sample.csv": (train, train + valid),
              "test_sample.csv": (train + valid, total)}
    for name, (start, stop) in bounds.items():
        frame.slice(start, stop - start).write_csv(folder / name, separator="\t", include_header=False,
                                                   quote_style="never")
    np.save(folder / "entities.npy", (rng.standard_normal((entities, dim)) / np.sqrt(dim)).astype(np.float32))
    np.save(folder / "relations.npy", (rng.standard_normal((relations, dim)) / np.sqrt(dim)).astype(np.float32))


def run_child(command: list, env: dict = None) -> tuple:
    """Run ``command``; return (wall seconds, its own peak RSS in GB, stdout). Raises with stderr on failure."""
    seconds, peak_gb, stdout, stderr, status = run_measured(command, env)
    if status != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({status}):\n{stderr[-3000:]}")
    return seconds, peak_gb, stdout


def openbench_command(folder: Path, model: str, device: str, output: Path) -> list:
    return [sys.executable, "-m", "openbench", "evaluate", "--dataset", str(folder), "--model", model,
            "--entity-embeddings", str(folder / "entities.npy"), "--relation-embeddings", str(folder / "relations.npy"),
            "--device", device, "--no-progress", "--output", str(output)]


def pykeen_child(folder: Path, model_name: str) -> None:
    """Child process: PyKEEN's RankBasedEvaluator on the same embeddings; prints JSON."""
    import torch
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.models import DistMult, TransE
    from pykeen.triples import TriplesFactory

    from openbench.datasets.loader import load_dataset

    dataset = load_dataset(folder)
    factory = TriplesFactory(mapped_triples=dataset.triples["train"],
                             entity_to_id={label: i for i, label in enumerate(dataset.entity_labels)},
                             relation_to_id={label: i for i, label in enumerate(dataset.relation_labels)})
    dim = np.load(folder / "entities.npy", mmap_mode="r").shape[1]
    model = (TransE(triples_factory=factory, embedding_dim=dim, scoring_fct_norm=2) if model_name == "TransE-L2"
             else DistMult(triples_factory=factory, embedding_dim=dim))
    with torch.no_grad():
        model.entity_representations[0]._embeddings.weight.copy_(torch.from_numpy(np.load(folder / "entities.npy")))
        model.relation_representations[0]._embeddings.weight.copy_(torch.from_numpy(np.load(folder / "relations.npy")))
    started = time.perf_counter()
    results = RankBasedEvaluator(filtered=True).evaluate(
        model, dataset.triples["test"], additional_filter_triples=[dataset.triples["train"], dataset.triples["valid"]],
        use_tqdm=False)
    seconds = time.perf_counter() - started
    flat = results.to_flat_dict()
    print(json.dumps({"seconds": seconds, "mrr": flat["both.realistic.inverse_harmonic_mean_rank"]}))


def _timed(function, repeats=3):
    """Best of ``repeats`` warm runs, in seconds."""
    function()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def _once(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def exact_cost(folder: Path, model: str, device: str, entity_rows=None, repeats=3) -> dict:
    """Exact against fast ranks, in process, warm: seconds of each and the undecided pairs."""
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.scorers import build_scorer

    dataset = load_dataset(folder)
    entities = np.load(folder / "entities.npy") if entity_rows is None else entity_rows(dataset.num_entities)
    scorer = build_scorer(model, entities, np.load(folder / "relations.npy"), dataset.num_entities,
                          dataset.num_relations)
    records = {}

    def run(ranks):
        records[ranks] = evaluate(dataset, scorer, device=device, ranks=ranks)

    run("fast"), run("exact")  # warm (the filter index is cached with the dataset)
    fast_seconds = exact_seconds = float("inf")
    totals: dict = {}
    for _ in range(repeats):  # interleaved, so that drift of the machine's speed hits both alike
        fast_seconds = min(fast_seconds, _once(lambda: run("fast")))
        exact_seconds = min(exact_seconds, _once(lambda: run("exact")))
        for key, value in records["exact"].timing["exact_ranks"].items():
            totals[key] = totals.get(key, 0) + value
    runs = repeats
    pairs = runs * 2 * dataset.triples["test"].shape[0] * dataset.num_entities
    agree = records["exact"].metrics == records["fast"].metrics
    return {"exact": exact_seconds, "fast": fast_seconds, "rescored_fraction": totals["rescored"] / pairs,
            "stats": {k: v // runs for k, v in totals.items()}, "same_metrics": agree}


def overhead(folder: Path, model: str, device: str) -> tuple:
    """(evaluation seconds, score-rows-only seconds) in process, same batches and chunks, warm."""
    import torch

    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.candidates import RankingSetup
    from openbench.evaluation.evaluate import evaluate
    from openbench.evaluation.producers.full import FullRanking
    from openbench.models.scorers import build_scorer

    dataset = load_dataset(folder)
    scorer = build_scorer(model, np.load(folder / "entities.npy"), np.load(folder / "relations.npy"),
                          dataset.num_entities, dataset.num_relations)
    setup = RankingSetup(dataset, device=device, progress=False)
    producer = FullRanking(scorer)
    producer.bind(setup)  # the full ranking, bound as the door binds it: its scorer on the device, its block budget
    size = producer.default_batch_size(setup)
    test = dataset.triples["test"].to(setup.device)
    width = producer.chunk_width(size)

    def scores_only():
        for start in range(0, test.shape[0], size):
            batch = test[start:start + size]
            for side in ("head", "tail"):
                queries = producer.scorer.query_vectors(batch, side)
                for first in range(0, dataset.num_entities, width):
                    last = min(first + width, dataset.num_entities)
                    producer.scorer.score_chunk(queries, side, first, last,
                                                out=producer.source.scratch_block(len(batch), last - first))
        if setup.device.type == "cuda":
            torch.cuda.synchronize()

    return _timed(lambda: evaluate(dataset, scorer, device=device, batch_size=size)), _timed(scores_only)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=list(SCALES), default="default")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-peer", action="store_true", help="do not run PyKEEN")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated data here")
    parser.add_argument("--pykeen-child", nargs=2, metavar=("FOLDER", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--scan", choices=["avx512", "avx2", "portable"], default=None,
                        help="the counting scan to use (default: the best this CPU has)")
    args = parser.parse_args()
    choose_scan(args.scan)
    if args.pykeen_child:
        pykeen_child(Path(args.pykeen_child[0]), args.pykeen_child[1])
        return

    print(cpu_line(), flush=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-"))
    folder = workdir / f"synthetic-{args.scale}-{args.seed}"
    sizes = SCALES[args.scale]
    if not (folder / "relations.npy").exists():
        started = time.perf_counter()
        make_dataset(folder, args.seed, **sizes)
        print(f"generated {sizes} in {time.perf_counter() - started:.1f} s under {folder}")
    failures = []
    for model in MODELS:
        output = folder.parent / f"result-{model}.json"  # beside the dataset, not inside it
        ours_seconds, ours_gb, _ = run_child(openbench_command(folder, model, args.device, output))
        result = json.loads(output.read_text())
        ours_mrr = result["metrics"]["both"]["realistic"]["mrr"]
        evaluation, scores = overhead(folder, model, args.device)
        print(f"\n{model}: openbench evaluate command {ours_seconds:.2f} s (evaluation {result.get('timing', result).get('seconds'):.2f} s on "
              f"{result['device']}), peak memory {ours_gb:.2f} GB, realistic MRR {ours_mrr:.8f}")
        print(f"{model}: in process, warm: evaluation {evaluation:.3f} s vs score rows alone {scores:.3f} s: "
              f"ratio {evaluation / scores:.2f} (target <= {TARGET_OVERHEAD})")
        cost = exact_cost(folder, model, args.device, repeats=7)
        ratio = cost["exact"] / cost["fast"]
        print(f"{model}: exact ranks {cost['exact']:.3f} s vs --fast {cost['fast']:.3f} s: ratio {ratio:.3f} "
              f"(target <= {TARGET_EXACT_OVERHEAD}); re-scored fraction of (query, candidate) pairs "
              f"{cost['rescored_fraction']:.2e}, per evaluation {cost['stats']}; metrics "
              f"{'equal' if cost['same_metrics'] else 'differ'} between exact and fast")
        if ratio > TARGET_EXACT_OVERHEAD:
            failures.append(f"{model}: exact/fast ratio {ratio:.3f} > {TARGET_EXACT_OVERHEAD}")
        if ours_gb >= TARGET_MEMORY_GB:
            failures.append(f"{model}: peak memory {ours_gb:.2f} GB >= {TARGET_MEMORY_GB}")
        if evaluation / scores > TARGET_OVERHEAD:
            failures.append(f"{model}: evaluation/score-rows ratio {evaluation / scores:.2f} > {TARGET_OVERHEAD}")
        if args.skip_peer:
            continue
        peer_seconds_total, peer_gb, stdout = run_child(
            [sys.executable, __file__, "--pykeen-child", str(folder), model], env=PEER_ENVIRONMENT)
        peer = json.loads(stdout.strip().splitlines()[-1])
        speedup = peer["seconds"] / ours_seconds
        agree = abs(peer["mrr"] - ours_mrr) <= 1e-6
        print(f"{model}: PyKEEN evaluate {peer['seconds']:.2f} s (child total {peer_seconds_total:.1f} s), "
              f"peak memory {peer_gb:.2f} GB, realistic MRR {peer['mrr']:.8f}")
        print(f"{model}: speed-up of the whole openbench command over PyKEEN's evaluate call: {speedup:.1f}x "
              f"(target >= {TARGET_SPEEDUP}); MRR difference {abs(peer['mrr'] - ours_mrr):.2e} "
              f"({'agrees' if agree else 'DISAGREES'} within 1e-6)")
        if speedup < TARGET_SPEEDUP:
            failures.append(f"{model}: speed-up {speedup:.1f}x < {TARGET_SPEEDUP}")
        if not agree:
            failures.append(f"{model}: MRR differs from PyKEEN by {abs(peer['mrr'] - ours_mrr):.2e}")
    worst_case(workdir, args.seed, args.device)
    print("\n" + ("all targets met" if not failures else "targets missed:\n  " + "\n  ".join(failures)))


def worst_case(workdir: Path, seed: int, device: str) -> None:
    """Exact ranks when every score is equal: all entity rows one continuous vector (small size)."""
    folder = workdir / f"synthetic-small-{seed}"
    if not (folder / "relations.npy").exists():
        make_dataset(folder, seed, **SCALES["small"])
    dim = SCALES["small"]["dim"]
    row = np.random.default_rng(seed).standard_normal(dim).astype(np.float32) / np.sqrt(dim)
    for model in MODELS:
        cost = exact_cost(folder, model, device, entity_rows=lambda rows: np.tile(row, (rows, 1)), repeats=1)
        print(f"\nworst case, {model} at the small size, every score equal: exact {cost['exact']:.3f} s vs --fast "
              f"{cost['fast']:.3f} s: ratio {cost['exact'] / cost['fast']:.1f}; re-scored fraction "
              f"{cost['rescored_fraction']:.3f}, per evaluation {cost['stats']}")


if __name__ == "__main__":
    main()
