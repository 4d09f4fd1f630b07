"""Triple classification at OpenBioLink HQ scale: time and peak memory of `--task classification`.

Writes a synthetic split folder (184,000 entities, 28 relations, 1.4 M training positives; validation
and test with 190,000 positives and as many negatives each, a tenth of them true negatives), random
DistMult embeddings (d = 200, float32), then runs the command in a child process and reports its wall
time and peak memory. The peer, measured in the same run on the same scores: scikit-learn's
roc_auc_score + average_precision_score on the test split (what a user would otherwise call).

    python benchmarks/bench_classification.py [--scale 1.0] [--workdir DIR]
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

ENTITIES, RELATIONS, TRAIN, EVALUATED, DIM = 184_000, 28, 1_400_000, 190_000, 200


def _rows(rng, n: int, value: str, entities: int, relations: int, generated_share: float = 0.0) -> pl.DataFrame:
    source = np.where(rng.random(n) < generated_share, "GENERATED", "SRC") if value == "0" else np.full(n, "SRC")
    return pl.DataFrame({"h": np.char.add("N:", rng.integers(0, entities, n).astype(str)),
                         "r": np.char.add("REL_", rng.integers(0, relations, n).astype(str)),
                         "t": np.char.add("N:", rng.integers(0, entities, n).astype(str)),
                         "q": np.full(n, ""), "v": np.full(n, value), "s": source})


def make_split(folder: Path, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    entities, train, evaluated = int(ENTITIES * scale), int(TRAIN * scale), int(EVALUATED * scale)
    # every entity and relation in training, so the evaluated rows map
    cover = pl.DataFrame({"h": [f"N:{i}" for i in range(entities)],
                          "r": [f"REL_{i % RELATIONS}" for i in range(entities)],
                          "t": [f"N:{(i + 1) % entities}" for i in range(entities)],
                          "q": [""] * entities, "v": ["1"] * entities, "s": ["SRC"] * entities})
    frames = {"train_sample.csv": pl.concat([cover, _rows(rng, train, "1", entities, RELATIONS)])}
    for name in ("val", "test"):
        frames[f"{name}_sample.csv"] = _rows(rng, evaluated, "1", entities, RELATIONS)
        frames[f"negative_{name}_sample.csv"] = _rows(rng, evaluated, "0", entities, RELATIONS, generated_share=0.9)
    for name, frame in frames.items():
        frame.unique(["h", "r", "t"]).write_csv(folder / name, include_header=False, separator="\t")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-classification-"))
    split = work / "split"
    started = time.perf_counter()
    make_split(split, args.scale, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    entities = int(ENTITIES * args.scale)
    np.save(work / "e.npy", rng.normal(size=(entities, DIM)).astype(np.float32))
    np.save(work / "r.npy", rng.normal(size=(RELATIONS, DIM)).astype(np.float32))
    print(f"wrote the split and embeddings under {work} in {time.perf_counter() - started:.1f} s")
    out = work / "classification.json"
    command = [sys.executable, "-m", "openbench", "evaluate", "--dataset", str(split), "--entity-embeddings",
               str(work / "e.npy"), "--relation-embeddings", str(work / "r.npy"), "--model", "DistMult",
               "--task", "classification", "--output", str(out), "--no-progress"]
    environment = dict(os.environ, OPENBENCH_DATASET_CACHE="0")  # a cold run: parsing included
    started = time.perf_counter()
    process = subprocess.Popen(command, env=environment)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("openbench evaluate --task classification failed")
    import json

    record = json.loads(out.read_text())
    inside = record["timing"]["seconds"]
    overall = record["classification"]["test"]["overall"]
    print(f"openbench evaluate --task classification: {seconds:.1f} s command (load + score + metrics), "
          f"{inside:.2f} s classification (scoring {overall['positives'] + overall['negatives']:,} test and as many "
          f"validation triples, thresholds, metrics), peak memory {usage.ru_maxrss / 1024 ** 2:.2f} GB")
    peer(split, work, overall, inside)


def peer(split: Path, work: Path, overall: dict, inside: float) -> None:
    """scikit-learn's AUROC and AP on the test scores openbench computed (same numbers expected)."""
    try:
        from sklearn.metrics import average_precision_score, roc_auc_score
    except ImportError:
        print("scikit-learn is not installed: no peer measured")
        return
    import torch

    from openbench.evaluation.tasks.classification import auroc, average_precision, read_labelled_split
    from openbench.datasets.loader import load_dataset
    from openbench.models.scorers import build_scorer

    dataset = load_dataset(split)
    part = read_labelled_split(dataset, "test")
    scorer = build_scorer("DistMult", np.load(work / "e.npy"), np.load(work / "r.npy"), dataset.num_entities,
                          dataset.num_relations)
    with torch.no_grad():
        scores = scorer.score_pairs(part.triples).double().numpy()
    started = time.perf_counter()
    ours = (auroc(scores, part.labels), average_precision(scores, part.labels))
    ours_seconds = time.perf_counter() - started
    started = time.perf_counter()
    theirs = (roc_auc_score(part.labels, scores), average_precision_score(part.labels, scores))
    theirs_seconds = time.perf_counter() - started
    print(f"test AUROC/AP: openbench {ours[0]:.6f}/{ours[1]:.6f} in {ours_seconds:.3f} s; scikit-learn "
          f"{theirs[0]:.6f}/{theirs[1]:.6f} in {theirs_seconds:.3f} s (ratio {theirs_seconds / ours_seconds:.2f}x); "
          f"record: {overall['auroc']:.6f}/{overall['auprc']:.6f}")


if __name__ == "__main__":
    main()
