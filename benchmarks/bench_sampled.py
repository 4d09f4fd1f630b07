"""Benchmark: the sampled (OGB) protocol at ogbl-wikikg2's size, against OGB's own pipeline.

Synthetic, seeded: 2.5 M entities, 535 relations, 100,000 test triples with 500 negative heads
and 500 negative tails each, DistMult embeddings of dimension 100 (a 1 GB entity table). Each
side runs in a child process, so that its peak memory is its own:

* openbench: ``openbench.evaluate(..., protocol="sampled", negatives=...)`` (each query vector once, only its
  501 candidates gathered, in blocks of at most 2**24 values: nothing of size batch × entities);
* the peer, OGB's KGE-example way: per batch, gather the (B, 1 + K, d) candidate rows, score them
  by broadcasting, and hand the positive and negative scores to ``ogb.linkproppred.Evaluator``
  (``--skip-peer`` leaves it out, e.g. where ``ogb`` is not installed).

It prints both times, their ratio, both peak memories and whether MRR and hits@k agree.

    python benchmarks/bench_sampled.py [--scale wikikg2|small] [--skip-peer]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SCALES = {"small": dict(entities=50_000, relations=50, test=5_000, negatives=100, dim=32),
          "wikikg2": dict(entities=2_500_000, relations=535, test=100_000, negatives=500, dim=100)}
PEER_BATCH = 128


def make_data(folder: Path, seed: int, entities: int, relations: int, test: int, negatives: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    scale = np.float32(1 / np.sqrt(dim))
    table = np.lib.format.open_memmap(folder / "entities.npy", mode="w+", dtype=np.float32, shape=(entities, dim))
    for start in range(0, entities, 500_000):  # in slices: no second copy of the table in memory
        stop = min(start + 500_000, entities)
        table[start:stop] = rng.standard_normal((stop - start, dim), dtype=np.float32) * scale
    table.flush()
    del table
    np.save(folder / "relations.npy", rng.standard_normal((relations, dim), dtype=np.float32) * scale)
    np.save(folder / "test.npy", np.stack([rng.integers(0, entities, test), rng.integers(0, relations, test),
                                           rng.integers(0, entities, test)], axis=1))
    np.save(folder / "head_neg.npy", rng.integers(0, entities, (test, negatives)))
    np.save(folder / "tail_neg.npy", rng.integers(0, entities, (test, negatives)))


def _peak_gb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def openbench_child(folder: Path) -> dict:
    import torch

    from openbench.datasets.loader import Dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.datasets.ogb import IdLabels
    from openbench.evaluation.producers.sampled import SampledNegatives
    from openbench.models.scorers import build_scorer

    entities = np.load(folder / "entities.npy", mmap_mode="r")
    relations = np.load(folder / "relations.npy")
    test = torch.from_numpy(np.load(folder / "test.npy"))
    empty = torch.zeros((0, 3), dtype=torch.long)
    dataset = Dataset(path=str(folder), layout="ogb", entity_labels=IdLabels([("entity:", 0, entities.shape[0])]),
                      relation_labels=[f"relation:{i}" for i in range(relations.shape[0])],
                      triples={"train": test[:1], "valid": empty, "test": test}, fingerprint="synthetic",
                      id_map_sha256="synthetic")
    negatives = SampledNegatives(torch.from_numpy(np.load(folder / "head_neg.npy")),
                                 torch.from_numpy(np.load(folder / "tail_neg.npy")))
    scorer = build_scorer("DistMult", np.asarray(entities), relations, dataset.num_entities, dataset.num_relations)
    loaded = _peak_gb()
    started = time.perf_counter()
    record = evaluate(dataset, scorer, protocol="sampled", negatives=negatives, device="cpu").to_dict()
    seconds = time.perf_counter() - started
    block = record["metrics"]["both"]["realistic"]
    return {"seconds": seconds, "peak_gb": _peak_gb(), "loaded_gb": loaded, "mrr": block["mrr"],
            "hits": [block[f"hits@{k}"] for k in (1, 3, 10)]}


def peer_child(folder: Path) -> dict:
    import torch
    from ogb.linkproppred import Evaluator

    entities = torch.from_numpy(np.load(folder / "entities.npy"))
    relations = torch.from_numpy(np.load(folder / "relations.npy"))
    test = torch.from_numpy(np.load(folder / "test.npy"))
    negatives = {"head": torch.from_numpy(np.load(folder / "head_neg.npy")),
                 "tail": torch.from_numpy(np.load(folder / "tail_neg.npy"))}
    loaded = _peak_gb()
    evaluator = Evaluator("ogbl-wikikg2")
    started = time.perf_counter()
    lists = {"mrr_list": [], "hits@1_list": [], "hits@3_list": [], "hits@10_list": []}
    with torch.no_grad():
        for side in ("head", "tail"):
            for start in range(0, test.shape[0], PEER_BATCH):
                h, r, t = test[start:start + PEER_BATCH].unbind(1)
                truth = h if side == "head" else t
                candidates = entities[torch.cat([truth[:, None], negatives[side][start:start + PEER_BATCH]], 1)]
                other = relations[r] * (entities[t] if side == "head" else entities[h])
                scores = (candidates * other[:, None, :]).sum(dim=2)
                result = evaluator.eval({"y_pred_pos": scores[:, 0], "y_pred_neg": scores[:, 1:]})
                for name in lists:
                    lists[name].append(result[name])
    seconds = time.perf_counter() - started
    means = {name: float(torch.cat(values).mean()) for name, values in lists.items()}
    return {"seconds": seconds, "peak_gb": _peak_gb(), "loaded_gb": loaded, "mrr": means["mrr_list"],
            "hits": [means[f"hits@{k}_list"] for k in (1, 3, 10)]}


def run_child(role: str, folder: Path) -> dict:
    completed = subprocess.run([sys.executable, __file__, "--child", role, str(folder)], capture_output=True,
                               text=True, check=False)
    if completed.returncode:
        raise RuntimeError(f"the {role} child failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=list(SCALES), default="wikikg2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("ROLE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        role, folder = args.child
        print(json.dumps(openbench_child(Path(folder)) if role == "openbench" else peer_child(Path(folder))))
        return
    sizes = SCALES[args.scale]
    folder = (args.workdir or Path(tempfile.mkdtemp(prefix="openbench-sampled-"))) / f"{args.scale}-{args.seed}"
    if not (folder / "tail_neg.npy").exists():
        started = time.perf_counter()
        make_data(folder, args.seed, **sizes)
        print(f"generated {sizes} in {time.perf_counter() - started:.1f} s under {folder}")
    table_gb = sizes["entities"] * sizes["dim"] * 4 / 1024 ** 3
    ours = run_child("openbench", folder)
    print(f"openbench sampled protocol: {ours['seconds']:.1f} s, peak memory {ours['peak_gb']:.2f} GB "
          f"({ours['loaded_gb']:.2f} GB after loading; entity table {table_gb:.2f} GB), realistic MRR "
          f"{ours['mrr']:.6f}, hits@1/3/10 {', '.join(f'{h:.6f}' for h in ours['hits'])}")
    if args.skip_peer:
        return
    peer = run_child("peer", folder)
    agree = abs(peer["mrr"] - ours["mrr"]) <= 1e-6 and all(abs(a - b) <= 1e-6 for a, b in zip(peer["hits"], ours["hits"]))
    print(f"OGB's pipeline (batched scoring + ogb Evaluator): {peer['seconds']:.1f} s, peak memory "
          f"{peer['peak_gb']:.2f} GB ({peer['loaded_gb']:.2f} GB after loading), MRR {peer['mrr']:.6f}")
    print(f"ratio openbench / OGB: time {ours['seconds'] / peer['seconds']:.2f}, peak memory "
          f"{ours['peak_gb'] / peer['peak_gb']:.2f}; metrics {'agree' if agree else 'DIFFER'} within 1e-6")


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OUTDATED_IGNORE", "1")
    main()
