"""Are the records byte-identical before and after a change that should not change them?

Runs, through the command line only (the interface that stays put while the code beneath it
moves), the evaluations whose records must not change: the demo's (``openbench demo``: its
records and ranks files), ``bench_evaluator.py``'s two models at its ``small`` size (full
ranking, exact and fast ranks), the sampled (OGB) protocol, triple classification, an
AnyBURL/SAFRAN top-k file, an OBL2021 submission, and a distributed run (two gloo processes,
query and entity shards). Every record is written with its ``timing`` key removed (the one
documented key that may differ) and the run's temporary folder replaced by ``<work>``; ranks
files are compared whole.

    python benchmarks/check_records.py --save DIR    # before the change
    python benchmarks/check_records.py --check DIR   # after it: exit 1 naming every file that differs
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_evaluator import SCALES, make_dataset  # noqa: E402


def openbench(*args: str, env: dict = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "openbench", *map(str, args)], capture_output=True, text=True,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"openbench {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done


def without_timing(path: Path, work: Path) -> bytes:
    """The record at ``path`` without its ``timing`` key, the run's temporary folder written as
    ``<work>`` (a dataset's path is recorded, and each run works in a fresh folder)."""
    record = json.loads(path.read_text())
    record.pop("timing", None)
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    return text.replace(str(work), "<work>").encode("utf-8")


def topk_file(folder: Path, out: Path) -> Path:
    """An AnyBURL/SAFRAN prediction file for the test triples: seeded candidates and confidences."""
    rng = np.random.default_rng(3)
    lines = []
    for raw in (folder / "test_sample.csv").read_text().splitlines():
        h, r, t = raw.split("\t")[:3]
        lines.append(f"{h} {r} {t}")
        for side, truth in (("Heads", h), ("Tails", t)):
            picks = [f"NCBIGENE:{i}" for i in rng.choice(2000, 9, replace=False)] + [truth]
            confidences = np.sort(rng.random(10))[::-1]
            lines.append(f"{side}: " + "\t".join(f"{e}\t{c:.4f}" for e, c in zip(picks, confidences)))
    out.write_text("\n".join(lines) + "\n")
    return out


def produce(out: Path) -> None:
    """Every record and ranks file this check compares, under ``out``."""
    work = Path(tempfile.mkdtemp(prefix="openbench-records-"))
    env = dict(os.environ, OPENBENCH_CACHE_DIR=str(work / "cache"))
    try:
        openbench("demo", "--out", work / "demo", env=env)
        for path in sorted((work / "demo").rglob("*.json")):
            if "leaderboard" in path.parts or path.name.startswith(".openbench"):
                continue
            name = "demo__" + "__".join(path.relative_to(work / "demo").parts)
            (out / name).write_bytes(without_timing(path, work))
        for path in sorted((work / "demo").rglob("*.parquet")):
            (out / ("demo__" + "__".join(path.relative_to(work / "demo").parts))).write_bytes(path.read_bytes())

        data = work / "small"
        make_dataset(data, 0, **SCALES["small"])
        embeddings = ["--entity-embeddings", data / "entities.npy", "--relation-embeddings", data / "relations.npy"]
        runs = {f"{model}-{ranks}": ["--dataset", data, "--model", model, *embeddings,
                                    *(["--fast"] if ranks == "fast" else []), "--ranks-output",
                                    out / f"small_{model}-{ranks}.parquet"]
                for model in ("TransE-L2", "DistMult") for ranks in ("exact", "fast")}
        runs["classification"] = ["--dataset", data, "--model", "DistMult", *embeddings, "--task", "classification"]
        runs["topk"] = ["--dataset", data, "--predictions", topk_file(data, work / "preds.txt")]
        kgid = work / "kgid"
        openbench("export-kgid", "--dataset", data, "--output", kgid, env=env)
        submission = work / "submission.npz"
        test_rows = len((kgid / "test.tsv").read_text().splitlines())
        rng = np.random.default_rng(5)
        np.savez(submission, pred_top10=np.stack([rng.choice(2000, 10, replace=False) for _ in range(2 * test_rows)]))
        runs["obl2021"] = ["--dataset", kgid, "--submission", submission]
        for name, arguments in runs.items():
            openbench("evaluate", *arguments, "--no-progress", "--output", work / f"{name}.json", env=env)
            (out / f"small_{name}.json").write_bytes(without_timing(work / f"{name}.json", work))
        for shard in ("queries", "entities"):
            record = work / f"dist-{shard}.json"
            done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                   "--master-port", str(29500 + (shard == "entities")), "-m", "openbench", "evaluate",
                                   "--dataset", str(data), "--model", "DistMult", *map(str, embeddings),
                                   "--distributed", "--shard", shard, "--no-progress", "--output", str(record)],
                                  capture_output=True, text=True, env=dict(env, OMP_NUM_THREADS="1"))
            if done.returncode != 0:
                raise SystemExit(f"the distributed {shard} run failed:\n{done.stderr[-3000:]}")
            (out / f"small_distributed-{shard}.json").write_bytes(without_timing(record, work))
        sample_split = work / "sample_split"
        openbench("generate", "--sample", "--output", work / "graph", "--no-progress", env=env)
        files = work / "graph" / "graph_files"
        openbench("split", "rand", "--edges", files / "edges.csv", "--tn-edges", files / "TN_edges.csv", "--nodes",
                  files / "ALL_nodes.csv", "--eval-negatives", "20", "--output", sample_split, env=env)
        openbench("evaluate", "--dataset", sample_split, "--model", "popularity", "--protocol", "sampled",
                  "--no-progress", "--output", work / "sampled.json", env=env)
        (out / "sample_sampled-popularity.json").write_bytes(without_timing(work / "sampled.json", work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def digest(folder: Path) -> dict:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the records here (before the change)")
    group.add_argument("--check", type=Path, help="compare with the records saved here (after the change)")
    args = parser.parse_args()
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        produce(args.save)
        print(f"saved {len(list(args.save.iterdir()))} files to {args.save}")
        return
    fresh = Path(tempfile.mkdtemp(prefix="openbench-records-now-"))
    try:
        produce(fresh)
        before, now = digest(args.check), digest(fresh)
        differ = sorted(name for name in set(before) | set(now) if before.get(name) != now.get(name))
        for name in differ:
            print(f"DIFFERS: {name} ({'missing now' if name not in now else 'new' if name not in before else 'bytes'})")
        print(f"{len(before) - len([n for n in differ if n in before])} of {len(before)} files byte-identical")
        sys.exit(1 if differ else 0)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


if __name__ == "__main__":
    main()
